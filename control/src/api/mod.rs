//! The HTTP API: `/api/admin/*` (bearer token) and the user routes, described by one OpenAPI
//! document generated from the handlers (`GET /api/openapi.json`).
//!
//! Every handler takes [`AppState`] and returns `Result<_, ApiError>`; request bodies go
//! through [`ApiJson`], so that malformed JSON, wrong types, unknown fields, a wrong content
//! type and oversize bodies all answer with the one error shape.

mod audio;
mod error;
mod extract;
mod groups;
mod panel;
mod positions;
mod server_users;
mod system;
mod users;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, Uri, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use tower_http::timeout::RequestBodyTimeoutLayer;
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{ApiError, ErrorBody};
pub use extract::{ApiJson, ApiPath, ApiQuery};

use crate::bridge::BridgeManager;
use crate::calls::Calls;
use crate::config::ConfigManager;
use crate::janus::Janus;
use crate::logring::LogRing;
use crate::pin::PinLimiter;
use crate::secrets::AdminToken;
use crate::users::Users;

/// Largest request body accepted, in bytes. A larger one answers 413 `payload_too_large` before
/// it is read; the connection then closes lingering (`crate::linger`), so that a client still
/// sending the body (up to a few MB) reads that answer rather than a reset connection.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Longest wait for a request body to arrive.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub config: Arc<ConfigManager>,
    pub logs: LogRing,
    pub admin_token: Arc<AdminToken>,
    pub janus: Arc<Janus>,
    pub bridge: Arc<BridgeManager>,
    /// Who holds a token and who is connected (the Janus link keeps it in step with Janus).
    pub users: Arc<Users>,
    /// The call signal's fan-out to the panels.
    pub calls: Arc<Calls>,
    /// Wrong PINs per client address.
    pub pins: Arc<PinLimiter>,
    /// Whether the public listener speaks TLS (for the URLs handed to browsers).
    pub tls: bool,
    pub started: Instant,
}

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
        (name = "users", description = "Crew members: tokens, connections, disconnects"),
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
    let admin = OpenApiRouter::new()
        .routes(routes!(groups::list, groups::create))
        .routes(routes!(groups::update, groups::delete))
        .routes(routes!(system::config))
        .routes(routes!(system::logs))
        .routes(routes!(system::stats))
        .routes(routes!(audio::set_audio))
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
        .routes(routes!(users::remove_line));
    let api = OpenApiRouter::new()
        .nest("/admin", admin)
        .routes(routes!(panel::token))
        .routes(routes!(panel::call))
        .routes(routes!(panel::session_events))
        .routes(routes!(users::groups))
        .routes(routes!(positions::public))
        .routes(routes!(system::health))
        .routes(routes!(system::openapi_json));
    OpenApiRouter::with_openapi(ApiDoc::openapi()).nest("/api", api).split_for_parts()
}

impl AppState {
    /// For changes bridged must act on: refused while it is not on the bus to act on them.
    pub fn require_bridge(&self) -> Result<(), ApiError> {
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

/// The OpenAPI document, as served at `/api/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut document = api_routes().1;
    document.merge(events_routes().1);
    document
}

fn events_routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let events = OpenApiRouter::new().routes(routes!(users::janus_events));
    OpenApiRouter::new().nest("/api", events).split_for_parts()
}

/// The whole application: the API under `/api`, JSON 404/405 for everything else.
pub fn app(state: AppState) -> Router {
    let (api, _) = api_routes();
    Router::new()
        .merge(api)
        .merge(crate::web::routes())
        .merge(crate::janus_proxy::routes())
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        // A client announcing a body it never sends must not hold a connection forever.
        .layer(RequestBodyTimeoutLayer::new(BODY_TIMEOUT))
        .layer(middleware::from_fn_with_state(state.clone(), require_admin))
        .layer(middleware::from_fn(log_refusals))
        .with_state(state)
}

/// The loopback-only events listener: Janus's event handler posts, nothing else.
pub fn events_app(state: AppState) -> Router {
    let (router, _) = events_routes();
    router.fallback(route_not_found).layer(DefaultBodyLimit::max(EVENTS_BODY_LIMIT)).with_state(state)
}

/// Janus groups events; a burst (many joins at once) can exceed the API's limit.
const EVENTS_BODY_LIMIT: usize = 1024 * 1024;

/// Is this path under the admin API (mounted or not)?
fn is_admin_path(path: &str) -> bool {
    path == ADMIN_PREFIX || path.strip_prefix(ADMIN_PREFIX).is_some_and(|rest| rest.starts_with('/'))
}

const ADMIN_PREFIX: &str = "/api/admin";

/// Admits requests under `/api/admin` only with the admin token. It wraps the whole router,
/// so that no admin route can be mounted without it.
async fn require_admin(State(state): State<AppState>, request: Request, next: Next) -> Result<Response, ApiError> {
    if !is_admin_path(request.uri().path()) {
        return Ok(next.run(request).await);
    }
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match token {
        Some(token) if !token.is_empty() && state.admin_token.matches(token) => Ok(next.run(request).await),
        _ => Err(ApiError::Unauthorized),
    }
}

async fn route_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::RouteNotFound { method: method.to_string(), path: uri.path().to_owned() }
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed { method: method.to_string(), path: uri.path().to_owned() }
}

/// Logs every refused write (a 4xx to anything but GET/HEAD): it changed nothing, and the
/// admin should be able to see why.
async fn log_refusals(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    let response = next.run(request).await;
    let status = response.status();
    if status.is_client_error() && method != Method::GET && method != Method::HEAD {
        let (code, error) = response.extensions().get::<ErrorBody>().map_or(("", ""), |b| (b.code, b.error.as_str()));
        tracing::warn!(%method, path, status = status.as_u16(), code, "refused request: {error}");
    }
    response
}
