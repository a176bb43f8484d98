//! Direct lines from the API: a panel (or its remote control) opens one with a person key
//! (`POST /api/session/direct`), its session stream tells it its people (`event: people`), and
//! the admin closes one (`DELETE /api/admin/direct/{groupId}`).
//!
//! Who may call whom is `crew.directCalls`: `positions` lets a panel reach the positions its
//! own lists in `talkTo`; `all` also anyone online by identity (the People list); `off` nobody.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use partyline_shared::config::{DirectCalls, MAX_LINES, is_direct_room};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::unavailable;
use super::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::janus::OpenDirectError;
use crate::users::{DirectError, User, UserKind, UserState};

/// Direct lines a panel already holding [`MAX_LINES`] group lines still takes.
const DIRECT_LINES_BEYOND_A_FULL_PANEL: usize = 4;

/// Whom a person key reaches: a position (whoever is at it now) or a crew member online.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PersonRef {
    /// A position's id: one of the caller's position's `talkTo`.
    #[serde(default)]
    #[schema(example = "camera-1")]
    pub position: Option<String>,
    /// A crew member's participant identity (with `crew.directCalls: all`).
    #[serde(default)]
    pub identity: Option<String>,
}

/// A panel opens a direct line.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirectRequest {
    /// The caller's token (from `POST /token`).
    pub token: String,
    #[serde(flatten)]
    pub to: PersonRef,
}

/// A direct line, as its end sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectLine {
    /// Its room: the line's id on the panel.
    #[schema(example = "direct-0a1b2c3d4e5f")]
    pub group_id: String,
    /// The other end's name.
    pub name: String,
    /// The other end's participant identity.
    pub with: String,
    /// This end opened it.
    pub caller: bool,
}

/// A person key or an entry of the People list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    /// The position the key reaches (a `talkTo` key); null for an entry of the People list.
    pub position: Option<String>,
    /// The position's name, or the crew member's.
    pub name: String,
    /// The crew member online for it (the latest to join a position), if any…
    pub identity: Option<String>,
    /// …and their name.
    pub who: Option<String>,
    /// The direct line open to it, if any.
    pub group_id: Option<String>,
}

/// A panel's people: what its person keys and its reply key reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct People {
    /// `crew.directCalls`.
    pub direct_calls: DirectCalls,
    /// Person keys: its position's `talkTo`, in order.
    pub keys: Vec<Person>,
    /// With `directCalls: all`, everyone else online, by name.
    pub online: Vec<Person>,
    /// Its open direct lines.
    pub direct: Vec<DirectLine>,
    /// The direct line its reply key talks on: whoever last opened one to it or spoke to it on
    /// one.
    pub reply: Option<DirectLine>,
}

/// `user`'s people, as its session stream and its remote control show them.
pub fn people_of(state: &AppState, user: &User) -> People {
    let config = state.config.current();
    let crew: Vec<User> =
        state.users.list().into_iter().filter(|u| is_person(u) && u.identity != user.identity).collect();
    let direct: Vec<DirectLine> = user
        .lines
        .iter()
        .filter_map(|l| {
            let peer = l.direct.as_ref()?;
            let (name, with, caller) = (peer.username.clone(), peer.identity.clone(), peer.caller);
            Some(DirectLine { group_id: l.group_id.clone(), name, with, caller })
        })
        .collect();
    let line_to = |identity: &Option<String>| {
        identity.as_ref().and_then(|id| direct.iter().find(|d| d.with == *id)).map(|d| d.group_id.clone())
    };
    let position = user.position.as_deref().and_then(|id| config.position(id)).map(|(_, p)| p);
    let keys: Vec<Person> = match config.crew.direct_calls {
        DirectCalls::Off => Vec::new(),
        _ => position.map(|p| p.talk_to.clone()).unwrap_or_default(),
    }
    .into_iter()
    .filter_map(|id| {
        let (_, to) = config.position(&id)?;
        let at = at_position(&crew, &id);
        let (identity, who) = (at.map(|u| u.identity.clone()), at.map(|u| u.username.clone()));
        Some(Person { name: to.name.clone(), group_id: line_to(&identity), identity, who, position: Some(id) })
    })
    .collect();
    let online: Vec<Person> = match config.crew.direct_calls {
        DirectCalls::All => crew
            .iter()
            .map(|u| {
                let (identity, who) = (Some(u.identity.clone()), Some(u.username.clone()));
                Person { position: None, name: u.username.clone(), group_id: line_to(&identity), identity, who }
            })
            .collect(),
        _ => Vec::new(),
    };
    let reply = user.reply_to.as_ref().and_then(|(room, _)| direct.iter().find(|d| d.group_id == *room)).cloned();
    People { direct_calls: config.crew.direct_calls, keys, online, direct, reply }
}

/// The crew member online at position `id`: the latest to connect there.
fn at_position<'a>(crew: &'a [User], id: &str) -> Option<&'a User> {
    crew.iter().filter(|u| u.position.as_deref() == Some(id)).max_by_key(|u| u.connected_at)
}

/// Opens (or finds) the direct line from `caller` to the person `to` names, as
/// `crew.directCalls` allows. Its line, as the caller sees it.
pub(super) async fn open(state: &AppState, caller: &User, to: &PersonRef) -> Result<DirectLine, ApiError> {
    let config = state.config.current();
    let calls = config.crew.direct_calls;
    let refused = |message: String| ApiError::Denied { code: "direct_call_refused", message };
    let callee = match (to, calls) {
        (_, DirectCalls::Off) => return Err(refused("direct lines are off (crew.directCalls: off)".into())),
        (PersonRef { position: Some(id), identity: None }, _) => {
            let own = caller.position.as_deref().and_then(|p| config.position(p)).map(|(_, p)| p);
            if calls == DirectCalls::Positions && !own.is_some_and(|p| p.talk_to.contains(id)) {
                return Err(refused(format!("this panel has no person key to position {id:?}")));
            }
            config.position(id).ok_or_else(|| ApiError::NotFound(format!("no position has id {id:?}")))?;
            let crew = online_crew(state);
            at_position(&crew, id)
                .cloned()
                .ok_or_else(|| ApiError::NotFound(format!("nobody is at position {id:?}")))?
        }
        (PersonRef { position: None, identity: Some(id) }, DirectCalls::All) => online_crew(state)
            .into_iter()
            .find(|u| u.identity == *id)
            .ok_or_else(|| ApiError::NotFound(format!("no crew member {id:?} is online")))?,
        (PersonRef { position: None, identity: Some(_) }, _) => {
            return Err(refused("direct lines reach positions only (crew.directCalls: positions)".into()));
        }
        _ => return Err(ApiError::BadRequest("give exactly one of `position` and `identity`".into())),
    };
    let room =
        state.janus.open_direct(caller, &callee, MAX_LINES + DIRECT_LINES_BEYOND_A_FULL_PANEL).await.map_err(|e| {
            match e {
                OpenDirectError::Refused(DirectError::ToItself) => ApiError::BadRequest(e.to_string()),
                OpenDirectError::Refused(DirectError::NotOnline(_)) => ApiError::NotFound(e.to_string()),
                OpenDirectError::Refused(DirectError::Full(_)) => ApiError::Conflict(e.to_string()),
                OpenDirectError::Janus(e) => unavailable(&e),
            }
        })?;
    Ok(DirectLine { group_id: room, name: callee.username, with: callee.identity, caller: true })
}

fn online_crew(state: &AppState) -> Vec<User> {
    state.users.list().into_iter().filter(is_person).collect()
}

/// A crew member online at a panel (not a WHIP or WHEP client): whom a direct line may reach.
fn is_person(user: &User) -> bool {
    user.kind == UserKind::Crew && user.state == UserState::Connected && user.stream.is_none()
}

/// Open a direct line to a person (a person key pressed): a private line between the two
/// panels, which both are told on their session streams (`event: people`) and join. Opened
/// once and kept while both are online: pressing again finds the same line.
#[utoipa::path(post, path = "/session/direct", tag = "users", request_body = DirectRequest,
    responses((status = 201, body = DirectLine), (status = 400, body = ErrorBody),
        (status = 403, description = "Unknown session (`forbidden`), or `crew.directCalls` does not allow this call (`direct_call_refused`)", body = ErrorBody),
        (status = 404, description = "Nobody is online for this person", body = ErrorBody),
        (status = 409, description = "A panel has as many lines as it holds", body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn open_direct(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<DirectRequest>,
) -> Result<(StatusCode, Json<DirectLine>), ApiError> {
    let caller = state.users.by_token(&body.token).ok_or(ApiError::Forbidden)?;
    Ok((StatusCode::CREATED, Json(open(&state, &caller, &body.to).await?)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DirectClosed {
    pub message: String,
}

/// Close a direct line: taken off both panels, its room destroyed.
#[utoipa::path(delete, path = "/direct/{group_id}", tag = "users", security(("admin_token" = [])),
    params(("group_id" = String, Path, description = "The direct line's room (`direct-…`)")),
    responses((status = 200, body = DirectClosed), (status = 401, body = ErrorBody),
        (status = 404, description = "No such direct line is open", body = ErrorBody)))]
pub async fn close_direct(
    State(state): State<AppState>,
    ApiPath(group_id): ApiPath<String>,
) -> Result<Json<DirectClosed>, ApiError> {
    let not_found = || ApiError::NotFound(format!("no direct line {group_id:?} is open"));
    if !is_direct_room(&group_id) || !state.janus.close_direct(&group_id, "closed by the admin").await {
        return Err(not_found());
    }
    tracing::warn!(group = group_id, by = "admin", "direct line closed by the admin");
    Ok(Json(DirectClosed { message: format!("Direct line {group_id:?} closed") }))
}
