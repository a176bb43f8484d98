//! A panel's media on partyline's own rooms (`media.engine: bridged`): its offer
//! (`POST /api/session/media`) and its talk keys (`POST /api/session/talk`), by its token.
//! control decides the lines and their rights from the token and hands both to bridged's rooms
//! (`rooms_link`); what the panel asks beyond its token is refused here and, by construction,
//! in the rooms.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use partyline_shared::config::MediaEngine;
use partyline_shared::rooms_bus::RoomsError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ApiJson, AppState, ErrorBody};
use crate::limits::Take;
use crate::rooms_link::RoomsLinkError;
use crate::users::User;

/// Offers one session posts a minute (a panel reconnecting its media posts one each time).
const OFFERS_PER_MINUTE: u32 = 20;
/// Talk key changes one session sends a minute: ten a second, more than a hand presses.
const TALKS_PER_MINUTE: u32 = 600;
/// The longest offer taken (a browser's is about 1 kB per line, a panel has at most 8 and a
/// few direct lines).
const MAX_OFFER_BYTES: usize = 32 * 1024;

/// A panel's SDP offer for its media.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MediaOffer {
    /// The session's token (from `POST /token`).
    pub token: String,
    /// One bundled peer connection: one audio m-line per line, in the order of `lines`.
    pub offer: String,
    /// The line each audio m-line carries, in the offer's order: a group id of the session's
    /// lines (a direct line's included), or null for a stopped one. Absent: the session's lines
    /// in the token's order.
    #[serde(default)]
    #[schema(example = json!(["stage", null, "direct-3f2a"]))]
    pub lines: Option<Vec<Option<String>>>,
    /// A new offer on the peer connection already joined (a line added or stopped): the rooms
    /// renegotiate it instead of replacing the session.
    #[serde(default)]
    pub renegotiation: bool,
}

/// The rooms' answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MediaAnswer {
    pub answer: String,
}

/// Join the session's lines in partyline's own rooms (`media.engine: bridged`): the panel's
/// offer, one bundled peer connection with one audio m-line per line (as `lines` names them, or
/// the token's lines in order), is answered with each line's direction as the session's rights
/// allow it (a listen-only line receives, whatever the offer asks). A second offer replaces the
/// session's media, or, as a `renegotiation`, updates it (a direct line added or stopped). At
/// most 20 offers a minute per session.
#[utoipa::path(post, path = "/api/session/media", tag = "users", request_body = MediaOffer,
    responses((status = 200, body = MediaAnswer),
        (status = 400, description = "An offer the rooms do not take (`bad_offer`: not SDP, no Opus, not bundled, not one audio m-line per line, a line named twice)", body = ErrorBody),
        (status = 403, description = "Unknown or ended session, or an m-line named for a line it does not hold", body = ErrorBody),
        (status = 409, description = "The panels' media goes through Janus (`wrong_engine`), or a renegotiation of media never joined (`no_media`)", body = ErrorBody),
        (status = 429, description = "Too many offers from this session (`too_many_offers`)", body = ErrorBody),
        (status = 503, description = "bridged's rooms are unreachable, stopped or full", body = ErrorBody)))]
pub async fn session_media(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<MediaOffer>,
) -> Result<Json<MediaAnswer>, ApiError> {
    let user = session_on_rooms(&state, &body.token)?;
    if body.offer.len() > MAX_OFFER_BYTES {
        return Err(bad_offer(&format!("longer than {MAX_OFFER_BYTES} bytes")));
    }
    limit(&state, &user, "offer", OFFERS_PER_MINUTE, "too_many_offers")?;
    let lines = match &body.lines {
        Some(named) => named_lines(&user, named)?,
        None => user.lines.iter().map(|line| Some(line.group_id.clone())).collect(),
    };
    let answer = if body.renegotiation {
        state.rooms.renegotiate(&user, &body.offer, &lines).await
    } else {
        state.rooms.join(&user, &body.offer, &lines).await
    };
    let answer = answer.map_err(|e| refused(&user, e))?;
    Ok(Json(MediaAnswer { answer }))
}

/// A talk key of the panel, on partyline's own rooms.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TalkRequest {
    /// The session's token (from `POST /token`).
    pub token: String,
    /// The line.
    #[schema(example = "stage-left")]
    pub group_id: String,
    /// The key went on (true) or off.
    pub talking: bool,
}

/// Press or release a talk key on partyline's own rooms (`media.engine: bridged`): the rooms
/// mix the session's voice on that line only while its key is on. A key the session may not
/// press is refused (a listen-only line, a line the admin holds). At most 600 a minute.
#[utoipa::path(post, path = "/api/session/talk", tag = "users", request_body = TalkRequest,
    responses((status = 204), (status = 400, body = ErrorBody),
        (status = 403, description = "Unknown or ended session, or no such line", body = ErrorBody),
        (status = 409, description = "Refused: `cannot_talk` (a listen-only line), `muted_by_admin`, `no_media` (no offer posted yet), `wrong_engine`", body = ErrorBody),
        (status = 429, description = "Too many key changes (`too_many_talks`)", body = ErrorBody),
        (status = 503, description = "bridged's rooms are unreachable", body = ErrorBody)))]
pub async fn session_talk(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<TalkRequest>,
) -> Result<StatusCode, ApiError> {
    let user = session_on_rooms(&state, &body.token)?;
    let line = user.line(&body.group_id).ok_or(ApiError::Forbidden)?;
    if body.talking && !line.talk {
        let message = format!("{:?} is listen-only for this session", body.group_id);
        return Err(ApiError::Refused { code: "cannot_talk", message });
    }
    if body.talking && line.muted_by_admin {
        let message = format!("muted by the admin on {:?}: talk refused until the admin releases it", body.group_id);
        return Err(ApiError::Refused { code: "muted_by_admin", message });
    }
    limit(&state, &user, "talk", TALKS_PER_MINUTE, "too_many_talks")?;
    state.rooms.set_talking(&user, &body.group_id, body.talking).await.map_err(|e| refused(&user, e))?;
    Ok(StatusCode::NO_CONTENT)
}

/// The lines the panel names for its m-lines: each one of the session's, at most once.
fn named_lines(user: &User, named: &[Option<String>]) -> Result<Vec<Option<String>>, ApiError> {
    let mut seen = std::collections::HashSet::new();
    for group in named.iter().flatten() {
        if user.line(group).is_none() {
            return Err(ApiError::Forbidden);
        }
        if !seen.insert(group) {
            return Err(bad_offer(&format!("{group:?} named for two m-lines")));
        }
    }
    Ok(named.to_vec())
}

/// The token's user, when the panels' media goes through partyline's rooms.
fn session_on_rooms(state: &AppState, token: &str) -> Result<User, ApiError> {
    let user = state.users.by_token(token).ok_or(ApiError::Forbidden)?;
    if state.config.current().media.engine != MediaEngine::Bridged {
        let message = "the panels' media goes through Janus here (media.engine: janus): join with /janus".to_owned();
        return Err(ApiError::Refused { code: "wrong_engine", message });
    }
    if !user.on_rooms {
        let message = "this token was issued for Janus, before the media engine changed: join again".to_owned();
        return Err(ApiError::Refused { code: "wrong_engine", message });
    }
    Ok(user)
}

fn limit(state: &AppState, user: &User, what: &str, per_minute: u32, code: &'static str) -> Result<(), ApiError> {
    let key = format!("{what}:{}", user.identity);
    if let Take::Refused { first } = state.media_rate.take_for(key, per_minute) {
        if first {
            tracing::warn!(
                identity = user.identity,
                per_minute,
                what,
                "a session's media requests over its limit: refused"
            );
        }
        return Err(ApiError::Limited {
            code,
            message: format!("at most {per_minute} a minute per session: wait a moment"),
        });
    }
    Ok(())
}

fn bad_offer(message: &str) -> ApiError {
    ApiError::BadInput { code: "bad_offer", message: format!("the offer is not one the rooms take: {message}") }
}

/// The rooms' refusal as the panel reads it, logged with whose it was.
fn refused(user: &User, error: RoomsLinkError) -> ApiError {
    tracing::warn!(identity = user.identity, username = user.username, error = %error, "the rooms refused a session's request");
    match error {
        RoomsLinkError::Rooms(RoomsError::BadOffer(message)) => bad_offer(&message),
        RoomsLinkError::Rooms(RoomsError::NotAllowed(message)) | RoomsLinkError::NotAllowed(message) => {
            ApiError::Refused { code: "cannot_talk", message }
        }
        RoomsLinkError::NoSession | RoomsLinkError::Rooms(RoomsError::UnknownSession(_)) => {
            ApiError::Refused { code: "no_media", message: RoomsLinkError::NoSession.to_string() }
        }
        RoomsLinkError::Rooms(RoomsError::Full(message)) => {
            ApiError::Unavailable(format!("partyline's rooms are full: {message}"))
        }
        other => ApiError::Unavailable(format!("partyline's rooms are unavailable: {other}")),
    }
}
