//! The HTTP API: `/api/admin/*` and `/metrics` (bearer token) and the user routes, described by one OpenAPI
//! document generated from the handlers (`GET /api/openapi.json`).
//!
//! Every handler takes [`AppState`] and returns `Result<_, ApiError>`; request bodies go
//! through [`ApiJson`], so that malformed JSON, wrong types, unknown fields, a wrong content
//! type and oversize bodies all answer with the one error shape.

mod aes67;
mod audio;
mod direct;
mod error;
mod events;
mod extract;
mod groups;
pub(crate) mod janus_events;
mod line_members;
mod media;
mod metrics;
mod moderation;
mod panel;
mod positions;
mod report;
mod server_users;
mod session;
mod session_link;
mod sse;
mod stream_tokens;
mod streams;
mod system;
mod token;
mod users;

use std::net::SocketAddr;
use std::time::Instant;

use axum::Router;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, Uri, header};
use axum::middleware::Next;
use axum::response::Response;
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::limits::Take;

pub use error::{ApiError, ErrorBody};
pub use extract::{ApiJson, ApiPath, ApiQuery};
pub(crate) use streams::cors as stream_cors;

pub use crate::state::AppState;

/// Largest request body accepted, in bytes. A larger one answers 413 `payload_too_large` before
/// it is read; the connection then closes lingering (`crate::linger`), so that a client still
/// sending the body (up to a few MB) reads that answer rather than a reset connection.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Longest wait for a request body to arrive.
pub(crate) const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(OpenApi)]
#[openapi(
    info(
        title = "partyline",
        description = "Intercom server: admin API (bearer token) and user API. Every error answers `{\"error\", \"code\"}`."
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "groups", description = "Party lines"),
        (name = "positions", description = "Prepared panels: a name and its lines"),
        (name = "audio", description = "Sound card and encoding"),
        (name = "users", description = "Crew members: tokens, connections, disconnects, the admin's mutes"),
        (name = "panel", description = "Remote control of a panel by its panel key (control surfaces)"),
        (name = "system", description = "Logs, stats, config, this document"),
        (name = "internal", description = "Served on the loopback events listener only"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("admin_token", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// The API's routes and their OpenAPI document.
fn api_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    // One flat router, every path written whole where its handler is: a nested router costs each
    // request a prefix strip and a clone of the inner service, a tenth of a cached read's CPU.
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(groups::list, groups::create))
        .routes(routes!(groups::update, groups::delete))
        .routes(routes!(system::config))
        .routes(routes!(system::logs))
        .routes(routes!(system::stats))
        .routes(routes!(report::report))
        .routes(routes!(events::stream))
        .routes(routes!(audio::set_audio))
        .routes(routes!(aes67::get_aes67))
        .routes(routes!(aes67::set_aes67))
        .routes(routes!(audio::get_device, audio::set_device))
        .routes(routes!(audio::get_channel_names, audio::set_channel_names))
        .routes(routes!(audio::devices))
        .routes(routes!(audio::devices_list))
        .routes(routes!(positions::list, positions::create))
        .routes(routes!(positions::update, positions::delete))
        .routes(routes!(server_users::list, server_users::create))
        .routes(routes!(server_users::update, server_users::delete))
        .routes(routes!(users::list))
        .routes(routes!(users::disconnect))
        .routes(routes!(users::bans))
        .routes(routes!(users::lift_ban))
        .routes(routes!(users::remove_line))
        .routes(routes!(direct::close_direct))
        .routes(routes!(stream_tokens::list, stream_tokens::create))
        .routes(routes!(stream_tokens::revoke))
        .routes(routes!(moderation::mute_user))
        .routes(routes!(moderation::unmute_user))
        .routes(routes!(moderation::talk_off))
        .routes(routes!(moderation::mute_line))
        .routes(routes!(moderation::unmute_line))
        .routes(routes!(moderation::call_line))
        .routes(routes!(token::token))
        .routes(routes!(session::call))
        .routes(routes!(session::session_events))
        .routes(routes!(session::session_state))
        .routes(routes!(session_link::session_link))
        .routes(routes!(media::session_media))
        .routes(routes!(media::session_talk))
        .routes(routes!(direct::open_direct))
        .routes(routes!(direct::hang_up))
        .routes(routes!(streams::whip, streams::whip_options))
        .routes(routes!(streams::whip_end, streams::whip_trickle, streams::whip_resource_options))
        .routes(routes!(streams::whep, streams::whep_options))
        .routes(routes!(streams::whep_end, streams::whep_trickle, streams::whep_resource_options))
        .routes(routes!(panel::panel))
        .routes(routes!(panel::events))
        .routes(routes!(panel::talk::talk))
        .routes(routes!(panel::talk::announce))
        .routes(routes!(panel::direct::person))
        .routes(routes!(panel::direct::reply))
        .routes(routes!(panel::listen))
        .routes(routes!(panel::volume))
        .routes(routes!(panel::call))
        .routes(routes!(users::groups))
        .routes(routes!(positions::public))
        .routes(routes!(system::health))
        .routes(routes!(system::openapi_json))
        .routes(routes!(metrics::metrics))
        .split_for_parts()
}

/// The OpenAPI document, as served at `/api/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut document = api_routes().1;
    document.merge(events_routes().1);
    document
}

fn events_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    OpenApiRouter::new().routes(routes!(janus_events::janus_events)).split_for_parts()
}

impl AppState {
    /// For changes bridged must act on: refused while it is not on the bus to act on them.
    pub(crate) fn require_bridge(&self) -> Result<(), ApiError> {
        if self.bridge.is_present() {
            return Ok(());
        }
        let view = self.bridge.view();
        Err(ApiError::Unavailable(format!(
            "partyline-bridged is not available ({}: {}); nothing was changed",
            view.state, view.message
        )))
    }
}

/// The API's routes (under `/api`), for the application (`crate::app`).
pub(crate) fn routes() -> Router<AppState> {
    api_routes().0
}

/// The events listener's routes (Janus's posts), for `crate::app`.
pub(crate) fn event_routes() -> Router<AppState> {
    events_routes().0
}

/// Janus groups events; a burst (many joins at once) can exceed the API's limit.
pub(crate) const EVENTS_BODY_LIMIT: usize = 1024 * 1024;

/// Is this path under the admin API (mounted or not)?
fn is_admin_path(path: &str) -> bool {
    path == METRICS_PATH
        || path == ADMIN_PREFIX
        || path.strip_prefix(ADMIN_PREFIX).is_some_and(|rest| rest.starts_with('/'))
}

const ADMIN_PREFIX: &str = "/api/admin";
/// Where Prometheus looks by default; admin-only like everything under [`ADMIN_PREFIX`].
const METRICS_PATH: &str = "/metrics";

/// Is this path the admin UI's page or one of its files?
fn is_admin_page(path: &str) -> bool {
    path.strip_prefix("/admin").is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Admits requests under `/api/admin` (and `/metrics`) only with the admin token, and those and
/// the admin UI (`/admin`) only from `server.adminAllowFrom`'s addresses: from anywhere else,
/// even the right token gets 403, so the admin can be reached from the venue's LAN only while
/// the crew joins from anywhere. It wraps the whole router, so that no admin route can be
/// mounted without it.
pub(crate) async fn require_admin(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let path = request.uri().path();
    let api = is_admin_path(path);
    if !api && !is_admin_page(path) {
        return Ok(next.run(request).await);
    }
    // The listener always sets it; a router driven without one (unit tests) has no client.
    let client = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(a)| a.ip());
    if let Some(client) = client
        && !state.config.current().server.admin_allow_from.iter().any(|range| range.contains(client))
    {
        if matches!(state.admin_refusals.take(client, 1), Take::Granted) {
            tracing::warn!(%client, path = loggable_path(path),
                "admin request from outside server.adminAllowFrom: refused (logged once a minute per address)");
        }
        return Err(ApiError::Denied {
            code: "admin_not_allowed_here",
            message: "the admin UI and API answer only from the addresses of server.adminAllowFrom".into(),
        });
    }
    if !api {
        return Ok(next.run(request).await);
    }
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match token {
        Some(token) if !token.is_empty() && state.admin_token.matches(token) => {
            if let Some(client) = client {
                state.metrics.admin_token_used_from(client);
            }
            Ok(next.run(request).await)
        }
        _ => Err(ApiError::Unauthorized),
    }
}

pub(crate) async fn route_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::RouteNotFound { method: method.to_string(), path: loggable_path(uri.path()) }
}

pub(crate) async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed { method: method.to_string(), path: loggable_path(uri.path()) }
}

const PANEL_PREFIX: &str = "/api/panel/";

/// `path` as it may be logged or echoed: a panel key (`/api/panel/{key}/…`) is a secret, and
/// shows as `{key}`.
fn loggable_path(path: &str) -> String {
    match path.strip_prefix(PANEL_PREFIX) {
        Some(rest) => {
            let tail = rest.find('/').map_or("", |slash| &rest[slash..]);
            format!("{PANEL_PREFIX}{{key}}{tail}")
        }
        None => path.to_owned(),
    }
}

/// Observes every request's outcome: counted for `/metrics` (its route's template, method,
/// status and time to its head), and logged when refused or failed: every refused write (a 4xx
/// to anything but GET/HEAD: it changed nothing, and the admin should be able to see why) as a
/// warning, every failure of the server (a 5xx) as an error, each with its method and path. One
/// middleware for both: each layer costs every request a clone of the service below it.
pub(crate) async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request.extensions().get::<MatchedPath>().map_or(UNMATCHED, MatchedPath::as_str).to_owned();
    let method = request.method().clone();
    // Uri's clone shares its bytes: no copy for the requests that are not logged.
    let uri = request.uri().clone();
    let response = next.run(request).await;
    let status = response.status();
    state.metrics.http.observe(&route, &method, status.as_u16(), started.elapsed().as_secs_f64());
    if status.is_server_error() || (status.is_client_error() && method != Method::GET && method != Method::HEAD) {
        log_refusal(&method, uri.path(), &response);
    }
    response
}

/// What a request that matched no route is labelled: the paths themselves are the client's
/// choice, and would make a series each.
const UNMATCHED: &str = "unmatched";

fn log_refusal(method: &Method, path: &str, response: &Response) {
    let path = loggable_path(path);
    let status = response.status();
    let (code, error) = response.extensions().get::<ErrorBody>().map_or(("", ""), |b| (b.code, b.error.as_str()));
    if status.is_server_error() {
        tracing::error!(%method, path, status = status.as_u16(), code, "request failed: {error}");
    } else {
        tracing::warn!(%method, path, status = status.as_u16(), code, "refused request: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::loggable_path;

    #[test]
    fn panel_keys_are_left_out_of_logged_paths() {
        for (path, logged) in [
            ("/api/panel/0123abcd", "/api/panel/{key}"),
            ("/api/panel/0123abcd/lines/foh/talk", "/api/panel/{key}/lines/foh/talk"),
            ("/api/panel/", "/api/panel/{key}"),
            ("/api/admin/groups/foh", "/api/admin/groups/foh"),
            ("/api/panelx/secret", "/api/panelx/secret"),
        ] {
            assert_eq!(loggable_path(path), logged, "{path}");
        }
    }
}
