//! `POST /api/token`: a token for a panel of lines, the crew's way in. Open on the LAN: what
//! admits a crew member is its name, the limits of its address, and for protected groups and
//! positions a PIN; what it gets is one Janus token for its lines and a panel key.

use std::net::{IpAddr, SocketAddr};
use std::time::SystemTime;

use axum::Json;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, header};
use partyline_shared::Config;
use partyline_shared::config::{
    LineSpec, MAX_NAME_CHARS, MediaEngine, PinHash, check_lines, check_name_chars, lines_of,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::unavailable;
use super::positions::LineView;
use super::{ApiError, ApiJson, AppState, ErrorBody};
use crate::janus::IssueError;
use crate::limits::{Take, address_key};
use crate::pin::TooManyTries;
use crate::turn::{IceServer, ice_servers};
use crate::users::{Line, Seat, User};

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
    /// Where the panel's media goes: `janus` (join each line's room through `url`) or
    /// `bridged` (one peer connection, its offer posted to `/api/session/media`).
    pub engine: MediaEngine,
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
    /// How far the panel dims its program lines while someone talks on its other lines or its
    /// user talks (`crew.programDimDb`; 0: not at all).
    #[schema(example = -14)]
    pub program_dim_db: i32,
    /// The panel has an announce key: one press talks on every talk line (the position's
    /// `announce`).
    pub announce: bool,
    /// The ICE servers for the panel's peer connections (`RTCConfiguration.iceServers`): the
    /// venue's STUN servers and its TURN relay with a credential for this session that expires
    /// after `network.turn.credentialSeconds`. Empty on a LAN-only install.
    pub ice_servers: Vec<IceServer>,
}

/// Get a token for a panel of lines.
#[utoipa::path(post, path = "/api/token", tag = "users", request_body = TokenRequest,
    responses((status = 200, body = TokenResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 401, description = "A PIN is needed (`pin_required`) or wrong (`wrong_pin`)", body = ErrorBody),
        (status = 403, description = "The name or the address is banned by the admin for now (`banned`)", body = ErrorBody),
        (status = 409, description = "The position takes one crew member at a time and someone holds it (`position_taken`; never the holder's own rejoin)", body = ErrorBody),
        (status = 429, description = "Too many wrong PINs from this address (`too_many_tries`), too many tokens asked from it (`too_many_tokens`) or unused ones held by it (`too_many_pending_here`), or too many unused tokens overall (`too_many_pending`: never for a panel that resumes)", body = ErrorBody),
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
    check_limits(&state, &config, client, body.resume.is_some())?;
    if let Some(ban) = state.bans.find(&username, Some(client)) {
        tracing::info!(%client, username, ban = ban.id, "a banned name or address asked for a token: refused");
        return Err(ApiError::Denied { code: "banned", message: format!("refused by the admin until {}", ban.until) });
    }
    let (lines, pins) = requested_lines(&config, &body)?;
    let site = requested_site(&config, &body);
    let position = body.position.as_deref().and_then(|id| config.position(id)).map(|(_, p)| (p.id(), p));
    check_pins(&state, client, pins, body.pin).await?;
    let resume = body.resume.as_ref().map(|r| (r.token.as_str(), r.panel_key.as_str()));
    let seat = position.as_ref().map(|(id, p)| Seat {
        position: id,
        announce: p.announce,
        occupants: p.occupants,
        resuming: None,
    });
    let user =
        state.janus.issue_token(&username, lines, resume, client, site.as_deref(), seat).await.map_err(
            |e| match e {
                IssueError::Janus(e) => unavailable(&e),
                IssueError::Taken(taken) => ApiError::Refused { code: "position_taken", message: taken.to_string() },
            },
        )?;
    Ok(Json(token_response(&state, &config, &user, &headers)))
}

/// The open route's limits: tokens per client address a minute, unused tokens per address and
/// overall (`crew.tokensPerMinute`, `crew.maxPendingPerAddress`, `crew.maxPendingTokens`). A
/// flood from one address is refused before it costs a registration, a write of `crew.json`
/// or a request to Janus. A panel rejoining after a network drop (`resuming`) is never refused
/// for the overall cap, which others may have filled.
fn check_limits(state: &AppState, config: &Config, client: IpAddr, resuming: bool) -> Result<(), ApiError> {
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
    let pending = state.users.pending_crew_by_address();
    let here = config.crew.max_pending_per_address.get() as usize;
    if pending.get(&address_key(client)).is_some_and(|&held| held >= here) {
        tracing::warn!(%client, pending = here, "unused tokens of one address at crew.maxPendingPerAddress: refused");
        return Err(ApiError::Limited {
            code: "too_many_pending_here",
            message: format!(
                "this address holds {here} tokens not used yet (crew.maxPendingPerAddress): join with them first"
            ),
        });
    }
    let most = config.crew.max_pending_tokens.get() as usize;
    if !resuming && pending.values().sum::<usize>() >= most {
        let (holder, held) = pending.iter().max_by_key(|(_, held)| **held).map_or((client, 0), |(a, h)| (*a, *h));
        tracing::warn!(%client, pending = most, %holder, held,
            "unused tokens at crew.maxPendingTokens: a token refused (the address holding the most named)");
        return Err(ApiError::Limited {
            code: "too_many_pending",
            message: format!("{most} tokens are waiting to be used (crew.maxPendingTokens): try again in a moment"),
        });
    }
    Ok(())
}

/// The site a session is placed at: its position's (`positions[].site`), never one a client
/// names (a client could pile sessions onto one node).
fn requested_site(config: &Config, body: &TokenRequest) -> Option<String> {
    body.position.as_deref().and_then(|id| config.position(id)).and_then(|(_, p)| p.site.clone())
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
            // A program line's link gives what the crew may do there: listen.
            let line = if found.program { Line::new(group.clone(), true, false) } else { Line::both(group.clone()) };
            Ok((vec![line], pins.into_iter().collect()))
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
                .and_then(|()| config.check_program_talk(&talk))
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
/// wrong ones and among its PIN's before it is verified ([`crate::pin::PinLimiter`]).
async fn check_pins(
    state: &AppState,
    client: IpAddr,
    pins: Vec<PinGuard>,
    given: Option<String>,
) -> Result<(), ApiError> {
    let Some(first) = pins.first() else { return Ok(()) };
    let Some(given) = given else { return Err(ApiError::PinRequired(first.what.clone())) };
    let attempt = state.pins.begin(client, &first.what).await.map_err(|refused| match refused {
        TooManyTries::FromAddress(_) => ApiError::TooManyRequests,
        TooManyTries::OfPin(_) => ApiError::Limited { code: "pin_locked", message: refused.to_string() },
    })?;
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
        url: janus_websocket_url(headers, state.tls()),
        engine: config.media.engine,
        participant_identity: user.identity.clone(),
        // Handed out to the crew member who asked for it (and only here).
        token: user.token.expose().to_owned(),
        panel_url: format!("{}/api/panel/{panel_key}", origin(headers, state.tls())),
        panel_key,
        lines,
        certificate_sha256: state.certificate_sha256.get(),
        program_dim_db: config.crew.program_dim_db,
        announce: user.announce,
        ice_servers: ice_servers(&config.network, &user.identity, SystemTime::now()),
    }
}

/// This origin's `/janus`, as the browser reached it.
fn janus_websocket_url(headers: &HeaderMap, tls: bool) -> String {
    let scheme = if tls { "wss" } else { "ws" };
    format!("{scheme}://{}/janus", host(headers))
}

/// This origin, as the browser reached it.
pub(super) fn origin(headers: &HeaderMap, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{}", host(headers))
}

fn host(headers: &HeaderMap) -> &str {
    headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost")
}
