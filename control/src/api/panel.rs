//! The crew's routes: a token for a panel of lines (`POST /api/token`), the call signal
//! (`POST /api/call`) and the panel's event stream (`GET /api/session/events`). Open on the LAN:
//! what admits a crew member is the token, and for protected groups and positions a PIN.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};

use axum::Json;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use partyline_shared::Config;
use partyline_shared::config::{LineSpec, MAX_NAME_CHARS, PinHash, check_lines, check_name_chars, lines_of};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use utoipa::ToSchema;

use super::positions::LineView;
use super::{ApiError, ApiJson, ApiQuery, AppState, ErrorBody};
use crate::calls::Call;
use crate::events::LiveEvent;
use crate::janus::JanusError;
use crate::limits::Take;
use crate::panels::{AdminState, LineReport, Push};
use crate::users::{Line, User};

/// A crew member asking for a panel: one group (`groupId`), a prepared `position`, or its own
/// `listen`/`talk` lists. A protected group or position needs its `pin`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequest {
    /// 1 to 64 printable characters.
    #[schema(example = "Alice")]
    pub username: String,
    /// One line, listen and talk.
    #[schema(example = "stage-left")]
    #[serde(default)]
    pub group_id: Option<String>,
    /// A position's id: its lines.
    #[serde(default)]
    pub position: Option<String>,
    /// Group ids heard (with `talk`, an ad-hoc panel).
    #[serde(default)]
    pub listen: Option<Vec<String>>,
    /// Group ids talked to.
    #[serde(default)]
    pub talk: Option<Vec<String>>,
    /// The PIN of the group or position (of every protected group of an ad-hoc panel).
    #[serde(default)]
    pub pin: Option<String>,
    /// A panel rejoining (after a network loss): its previous session's token and panel key. It
    /// keeps its panel key (and the admin's mutes of its lines) when that session ended by
    /// leaving its rooms less than 2 minutes ago, or has not ended yet; otherwise it gets a new one.
    #[serde(default)]
    pub resume: Option<ResumeRequest>,
}

/// A rejoining panel's previous secrets.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeRequest {
    pub token: String,
    pub panel_key: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenLine {
    #[serde(flatten)]
    pub line: LineView,
    /// The AudioBridge room to join for it (the group id).
    pub room_name: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenResponse {
    /// The Janus token: one session, every line; each line's room admits it (the join carries
    /// it as `token`), no other room does. Revoked when the session ends or after 10 minutes
    /// unused.
    pub token: String,
    /// Janus's WebSocket API on this origin (`wss://HOST/janus`).
    pub url: String,
    /// The participant id to join every line with.
    pub participant_identity: String,
    pub lines: Vec<TokenLine>,
    /// The room, when the panel has one line (what single-group clients read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room_name: Option<String>,
    /// The panel key: a control surface holding it works this panel (`/api/panel/{key}`).
    /// Revoked when the session ends.
    pub panel_key: String,
    /// This origin's `/api/panel/{key}`, the link a control surface is given.
    pub panel_url: String,
    /// The SHA-256 of this origin's TLS certificate (`AB:CD:…`), which a control surface pins
    /// (a self-signed certificate cannot be checked otherwise); null without TLS.
    pub certificate_sha256: Option<String>,
}

/// Get a token for a panel of lines.
#[utoipa::path(post, path = "/token", tag = "users", request_body = TokenRequest,
    responses((status = 200, body = TokenResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 401, description = "A PIN is needed (`pin_required`) or wrong (`wrong_pin`)", body = ErrorBody),
        (status = 403, description = "The name or the address is banned by the admin for now (`banned`)", body = ErrorBody),
        (status = 429, description = "Too many wrong PINs from this address (`too_many_tries`), too many tokens asked from it (`too_many_tokens`), or too many unused tokens overall (`too_many_pending`)", body = ErrorBody),
        (status = 503, description = "Janus is unreachable; nothing was registered", body = ErrorBody)))]
pub async fn token(
    State(state): State<AppState>,
    headers: HeaderMap,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<Json<TokenResponse>, ApiError> {
    let username = body.username.trim().to_owned();
    if username.is_empty() {
        return Err(ApiError::BadRequest("username: must not be empty".into()));
    }
    check_name_chars(&username)
        .map_err(|m| ApiError::BadRequest(format!("username: {m} (1 to {MAX_NAME_CHARS} printable characters)")))?;
    let config = state.config.current();
    let client = client.map_or(IpAddr::from([0, 0, 0, 0]), |Extension(ConnectInfo(address))| address.ip());
    check_limits(&state, &config, client)?;
    if let Some(ban) = state.bans.find(&username, client) {
        tracing::info!(%client, username, ban = ban.id, "a banned name or address asked for a token: refused");
        return Err(ApiError::Denied { code: "banned", message: format!("refused by the admin until {}", ban.until) });
    }
    let (lines, pins) = requested_lines(&config, &body)?;
    check_pins(&state, client, pins, body.pin).await?;
    let resume = body.resume.as_ref().map(|r| (r.token.as_str(), r.panel_key.as_str()));
    let user = state.janus.issue_token(&username, lines, resume, client).await.map_err(|e| unavailable(&e))?;
    Ok(Json(token_response(&state, &config, &user, &headers)))
}

/// The open route's limits: tokens per client address a minute, and unused tokens overall
/// (`crew.tokensPerMinute`, `crew.maxPendingTokens`). A flood from one address is refused
/// before it costs a registration, a write of `crew.json` or a request to Janus.
fn check_limits(state: &AppState, config: &Config, client: IpAddr) -> Result<(), ApiError> {
    let per_minute = config.crew.tokens_per_minute.get();
    if let Take::Refused { first } = state.token_rate.take(client, per_minute) {
        if first {
            tracing::warn!(%client, per_minute, "token requests over crew.tokensPerMinute from one address: refused");
        }
        return Err(ApiError::Limited {
            code: "too_many_tokens",
            message: format!("too many tokens asked from this address (at most {per_minute} a minute): wait a moment"),
        });
    }
    let most = config.crew.max_pending_tokens.get() as usize;
    if state.users.pending_crew() >= most {
        tracing::warn!(%client, pending = most, "unused tokens at crew.maxPendingTokens: a token refused");
        return Err(ApiError::Limited {
            code: "too_many_pending",
            message: format!("{most} tokens are waiting to be used (crew.maxPendingTokens): try again in a moment"),
        });
    }
    Ok(())
}

/// A PIN guarding a group or position a request asks for.
#[derive(Debug)]
struct PinGuard {
    /// What it guards, for the error message (`group "foh"`).
    what: String,
    pin: PinHash,
}

/// The lines a request asks for, and the PINs guarding them.
fn requested_lines(config: &Config, body: &TokenRequest) -> Result<(Vec<Line>, Vec<PinGuard>), ApiError> {
    let ad_hoc = body.listen.is_some() || body.talk.is_some();
    match (&body.group_id, &body.position, ad_hoc) {
        (Some(group), None, false) => {
            let (_, found) =
                config.group(group).ok_or_else(|| ApiError::NotFound(format!("no group has id {group:?}")))?;
            let pins = found.pin.clone().map(|pin| PinGuard { what: format!("group {group:?}"), pin });
            Ok((vec![Line::both(group.clone())], pins.into_iter().collect()))
        }
        (None, Some(id), false) => {
            let (_, position) =
                config.position(id).ok_or_else(|| ApiError::NotFound(format!("no position has id {id:?}")))?;
            // A position's own PIN stands for its groups'; without one, each protected group's
            // PIN is asked, as for a panel of those groups.
            let lines = position.lines();
            let pins = match &position.pin {
                Some(pin) => vec![PinGuard { what: format!("position {id:?}"), pin: pin.clone() }],
                None => group_pins(config, &lines),
            };
            Ok((lines.into_iter().map(|l| Line::new(l.group, l.listen, l.talk)).collect(), pins))
        }
        (None, None, true) => {
            let (listen, talk) = (body.listen.clone().unwrap_or_default(), body.talk.clone().unwrap_or_default());
            check_lines(&listen, &talk, |g| config.group(g).is_some())
                .map_err(|(field, message)| ApiError::BadRequest(format!("{field}: {message}")))?;
            let lines = lines_of(&listen, &talk);
            let pins = group_pins(config, &lines);
            Ok((lines.into_iter().map(|l| Line::new(l.group, l.listen, l.talk)).collect(), pins))
        }
        _ => Err(ApiError::BadRequest(
            "give exactly one of `groupId`, `position`, or `listen`/`talk` (group id lists)".into(),
        )),
    }
}

/// The PINs of the protected groups among `lines`.
fn group_pins(config: &Config, lines: &[LineSpec]) -> Vec<PinGuard> {
    lines
        .iter()
        .filter_map(|l| {
            let pin = config.group(&l.group).and_then(|(_, g)| g.pin.clone())?;
            Some(PinGuard { what: format!("group {:?}", l.group), pin })
        })
        .collect()
}

/// Every guarding PIN must match `given`. Each try takes a place among the client address's
/// wrong ones before it is verified ([`crate::pin::PinLimiter`]).
async fn check_pins(
    state: &AppState,
    client: IpAddr,
    pins: Vec<PinGuard>,
    given: Option<String>,
) -> Result<(), ApiError> {
    let Some(first) = pins.first() else { return Ok(()) };
    let Some(given) = given else { return Err(ApiError::PinRequired(first.what.clone())) };
    let attempt = state.pins.begin(client).await.map_err(|_| ApiError::TooManyRequests)?;
    let wrong = tokio::task::spawn_blocking(move || {
        pins.into_iter().find(|guard| !crate::pin::verify(&guard.pin, &given)).map(|guard| guard.what)
    })
    .await
    .map_err(|e| ApiError::Internal(format!("cannot check the PIN: {e}")))?;
    match wrong {
        Some(what) => {
            attempt.wrong();
            tracing::warn!(%client, what, "wrong PIN");
            Err(ApiError::WrongPin(what))
        }
        None => {
            attempt.right();
            Ok(())
        }
    }
}

fn token_response(state: &AppState, config: &Config, user: &User, headers: &HeaderMap) -> TokenResponse {
    let lines: Vec<TokenLine> = user
        .lines
        .iter()
        .map(|l| TokenLine { line: LineView::of(config, &l.group_id, l.listen, l.talk), room_name: l.group_id.clone() })
        .collect();
    // Handed out, like the token, to the crew member it was issued for (and only here).
    let panel_key = user.panel_key.as_ref().map(|k| k.expose().to_owned()).unwrap_or_default();
    TokenResponse {
        room_name: (lines.len() == 1).then(|| lines[0].room_name.clone()),
        url: janus_websocket_url(headers, state.tls),
        participant_identity: user.identity.clone(),
        // Handed out to the crew member who asked for it (and only here).
        token: user.token.expose().to_owned(),
        panel_url: format!("{}/api/panel/{panel_key}", origin(headers, state.tls)),
        panel_key,
        lines,
        certificate_sha256: state.certificate_sha256.clone(),
    }
}

/// This origin's `/janus`, as the browser reached it.
fn janus_websocket_url(headers: &HeaderMap, tls: bool) -> String {
    let scheme = if tls { "wss" } else { "ws" };
    format!("{scheme}://{}/janus", host(headers))
}

/// This origin, as the browser reached it.
fn origin(headers: &HeaderMap, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{}", host(headers))
}

fn host(headers: &HeaderMap) -> &str {
    headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost")
}

pub(super) fn unavailable(error: &JanusError) -> ApiError {
    ApiError::Unavailable(format!("the media server is unavailable: {error}"))
}

/// A call on one line of the caller's panel.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallRequest {
    /// The caller's token (from `POST /token`).
    pub token: String,
    /// The line called.
    #[schema(example = "stage-left")]
    pub group_id: String,
}

/// Call a line: every panel on it (and the admin's user view) flashes it for 5 s.
#[utoipa::path(post, path = "/call", tag = "users", request_body = CallRequest,
    responses((status = 204), (status = 400, body = ErrorBody),
        (status = 403, description = "The token does not hold this line (or no longer exists)", body = ErrorBody)))]
pub async fn call(State(state): State<AppState>, ApiJson(body): ApiJson<CallRequest>) -> Result<StatusCode, ApiError> {
    let user = state.users.by_token(&body.token).filter(|u| u.has_line(&body.group_id)).ok_or(ApiError::Forbidden)?;
    send_call(&state, &user, body.group_id);
    Ok(StatusCode::NO_CONTENT)
}

/// `user` calls its line `group_id` (from its panel or its panel's remote control).
pub(super) fn send_call(state: &AppState, user: &User, group_id: String) {
    let at = time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    tracing::info!(identity = user.identity, username = user.username, group = group_id, "call");
    state.events.publish(&LiveEvent::Call {
        group_id: group_id.clone(),
        from: user.username.clone(),
        identity: user.identity.clone(),
    });
    state.calls.send(Call { group_id, from: user.username.clone(), identity: user.identity.clone(), at });
}

/// Whose events `GET /session/events` streams.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    /// The session's token (`EventSource` cannot send headers).
    pub token: String,
}

/// The panel's events (Server-Sent Events): `event: call` with a [`Call`] for calls on the
/// session's lines; `event: admin` with an [`AdminState`] per line at once and whenever the
/// admin mutes or releases it; `event: command` with a [`Command`] of its remote control (or
/// of control: a talk forced off, a remote talk released), which the panel applies and then
/// reports with `POST /session/state`. Ends when the session does.
#[utoipa::path(get, path = "/session/events", tag = "users", params(SessionQuery),
    responses((status = 200, description = "The stream of `call`, `admin` and `command` events", body = Call, content_type = "text/event-stream"),
        (status = 403, description = "Unknown or ended session", body = ErrorBody)))]
pub async fn session_events(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<SessionQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let user = state.users.by_token(&query.token).ok_or(ApiError::Forbidden)?;
    state.panels.prune(|identity| state.users.get(identity).is_none());
    let backlog = user.lines.iter().map(|line| Push::Admin(admin_state(&state, line))).collect();
    let session = Session {
        calls: state.calls.subscribe(),
        pushes: state.panels.subscribe_pushes(),
        backlog,
        identity: user.identity,
        token: query.token,
        state,
        opened: false,
    };
    let stream = futures_util::stream::unfold(session, |mut session| async move {
        let event = session.next().await;
        if event.is_none() {
            session.state.panels.prune(|identity| identity == session.identity);
        }
        Some((Ok(event?), session))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// The admin's hold on `line`, as its panel is told it.
pub(super) fn admin_state(state: &AppState, line: &Line) -> AdminState {
    AdminState {
        group_id: line.group_id.clone(),
        muted_by_admin: line.muted_by_admin,
        line_muted: state.janus.line_muted(&line.group_id),
    }
}

/// One panel's session stream: what it waits on.
struct Session {
    calls: broadcast::Receiver<Call>,
    pushes: broadcast::Receiver<(String, Push)>,
    /// Sent first: the admin's state of every line.
    backlog: std::collections::VecDeque<Push>,
    identity: String,
    token: String,
    state: AppState,
    /// Counted as open (for the remote control) from its first event on.
    opened: bool,
}

impl Session {
    /// The next event; `None` once the session is gone.
    async fn next(&mut self) -> Option<Event> {
        if !self.opened {
            self.opened = true;
            // The guard lives in the panels' count until the stream is dropped.
            self.state.panels.open_stream(&self.identity);
        }
        loop {
            if let Some(push) = self.backlog.pop_front() {
                return Some(push_event(&push));
            }
            tokio::select! {
                call = self.calls.recv() => match call {
                    Ok(call) => {
                        // The session's lines as they are now; a session that ended ends its stream.
                        let user = self.state.users.by_token(&self.token)?;
                        if user.has_line(&call.group_id) {
                            self.state.panels.changed(&self.identity);
                            return Some(Event::default().event("call").json_data(&call).unwrap_or_default());
                        }
                    }
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return None,
                },
                push = self.pushes.recv() => match push {
                    Ok((identity, push)) if identity == self.identity => {
                        self.state.users.by_token(&self.token)?;
                        return Some(push_event(&push));
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return None,
                },
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.opened {
            self.state.panels.close_stream(&self.identity);
        }
    }
}

fn push_event(push: &Push) -> Event {
    match push {
        Push::Command(command) => Event::default().event("command").json_data(command),
        Push::Admin(admin) => Event::default().event("admin").json_data(admin),
    }
    .unwrap_or_default()
}

/// A panel's report of its state (after each change, and after applying a command).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StateReport {
    /// The session's token.
    pub token: String,
    /// The id of the command just applied, if any.
    #[serde(default)]
    pub ack: Option<u64>,
    /// Every line of the panel (lines the admin took away left out).
    pub lines: Vec<LineReport>,
}

/// The panel reports its state: what `GET /panel/{key}` shows a control surface.
#[utoipa::path(post, path = "/session/state", tag = "users", request_body = StateReport,
    responses((status = 204), (status = 400, body = ErrorBody),
        (status = 403, description = "Unknown or ended session", body = ErrorBody)))]
pub async fn session_state(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<StateReport>,
) -> Result<StatusCode, ApiError> {
    let user = state.users.by_token(&body.token).ok_or(ApiError::Forbidden)?;
    if let Some(line) = body.lines.iter().find(|l| !user.has_line(&l.group_id)) {
        return Err(ApiError::BadRequest(format!("lines: the session has no line {:?}", line.group_id)));
    }
    if let Some(line) = body.lines.iter().find(|l| l.volume > 100) {
        return Err(ApiError::BadRequest(format!("lines: volume {} is out of range: expected 0 to 100", line.volume)));
    }
    state.panels.report(&user.identity, body.lines, body.ack);
    Ok(StatusCode::NO_CONTENT)
}
