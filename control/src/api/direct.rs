//! Direct lines from the API: a panel (or its remote control) opens one with a person key
//! (`POST /api/session/direct`), its session stream tells it its people (`event: people`), and
//! the admin closes one (`DELETE /api/admin/direct/{groupId}`).
//!
//! Who may call whom is `crew.directCalls`: `positions` lets a panel reach the positions its
//! own lists in `talkTo`; `all` also anyone online by identity (the People list); `off` nobody.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use partyline_shared::config::{DirectCalls, MAX_LINES, Occupants, is_direct_room};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::unavailable;
use super::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::janus::OpenDirectError;
use crate::limits::Take;
use crate::users::{DirectError, Line, User, UserKind, UserState};

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
    /// The crew member online for it (at a position: the first of `occupants`), if any…
    pub identity: Option<String>,
    /// …and their name.
    pub who: Option<String>,
    /// The direct line open to them, if any.
    pub group_id: Option<String>,
    /// Everyone the key reaches: at a position for `many`, every crew member online at it
    /// (first in first), each on a direct line of their own; otherwise the one above.
    pub occupants: Vec<Occupant>,
}

/// A crew member a person key reaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Occupant {
    pub identity: String,
    /// Their name.
    pub who: String,
    /// The direct line open to them, if any.
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
    /// The direct line its reply key talks on: whoever last spoke to it on one (before anyone
    /// has, the first to open one to it).
    pub reply: Option<DirectLine>,
}

/// `user`'s people, as its session stream and its remote control show them.
pub fn people_of(state: &AppState, user: &User) -> People {
    let config = state.config.current();
    let crew: Vec<User> =
        state.users.list().into_iter().filter(|u| is_person(u) && u.identity != user.identity).collect();
    let direct = direct_lines(user);
    let occupant = |u: &User| Occupant {
        identity: u.identity.clone(),
        who: u.username.clone(),
        group_id: direct.iter().find(|d| d.with == u.identity).map(|d| d.group_id.clone()),
    };
    let person = |position: Option<String>, name: String, occupants: Vec<Occupant>| {
        let first = occupants.first();
        let (identity, who) = (first.map(|o| o.identity.clone()), first.map(|o| o.who.clone()));
        Person { position, name, identity, who, group_id: first.and_then(|o| o.group_id.clone()), occupants }
    };
    let position = user.position.as_deref().and_then(|id| config.position(id)).map(|(_, p)| p);
    let keys: Vec<Person> = match config.crew.direct_calls {
        DirectCalls::Off => Vec::new(),
        _ => position.map(|p| p.talk_to.clone()).unwrap_or_default(),
    }
    .into_iter()
    .filter_map(|id| {
        let (_, to) = config.position(&id)?;
        let at = at_position(&crew, &id, to.occupants).into_iter().map(occupant).collect();
        Some(person(Some(id), to.name.clone(), at))
    })
    .collect();
    let online: Vec<Person> = match config.crew.direct_calls {
        DirectCalls::All => crew.iter().map(|u| person(None, u.username.clone(), vec![occupant(u)])).collect(),
        _ => Vec::new(),
    };
    let reply = user.reply_to.as_ref().and_then(|(room, _)| direct.iter().find(|d| d.group_id == *room)).cloned();
    People { direct_calls: config.crew.direct_calls, keys, online, direct, reply }
}

/// `user`'s direct lines a panel may join: those whose room is made.
fn direct_lines(user: &User) -> Vec<DirectLine> {
    let line = |l: &Line| {
        let peer = l.direct.as_ref().filter(|p| p.ready)?;
        let (name, with, caller) = (peer.username.clone(), peer.identity.clone(), peer.caller);
        Some(DirectLine { group_id: l.group_id.clone(), name, with, caller })
    };
    user.lines.iter().filter_map(line).collect()
}

/// Whom a person key towards position `id` reaches among the crew online: at a position for
/// many, everyone at it, first in first; at one for one, its holder (the latest to connect:
/// a rejoin overlaps the session it resumed until that one is gone).
fn at_position<'a>(crew: &'a [User], id: &str, occupants: Occupants) -> Vec<&'a User> {
    let mut at: Vec<&User> = crew.iter().filter(|u| u.position.as_deref() == Some(id)).collect();
    at.sort_by_key(|u| u.connected_at);
    if occupants == Occupants::One {
        at.drain(..at.len().saturating_sub(1));
    }
    at
}

/// Opens (or finds) the direct lines from `caller` to the person `to` names, as
/// `crew.directCalls` allows: one to each crew member the key reaches. Their lines, as the
/// caller sees them. A press that opens a line takes one of the caller's direct calls a
/// minute (`crew.directCallsPerMinute`); one on lines already open takes none.
pub(super) async fn open(state: &AppState, caller: &User, to: &PersonRef) -> Result<Vec<DirectLine>, ApiError> {
    let callees = callees(state, caller, to)?;
    if callees.iter().any(|c| state.users.direct_between(&caller.identity, &c.identity).is_none()) {
        take_call(state, caller)?;
    }
    let max_lines = MAX_LINES + DIRECT_LINES_BEYOND_A_FULL_PANEL;
    let (mut lines, mut refused) = (Vec::new(), None);
    for callee in callees {
        match state.janus.open_direct(caller, &callee, max_lines).await {
            Ok(room) => {
                lines.push(DirectLine { group_id: room, name: callee.username, with: callee.identity, caller: true });
            }
            Err(e) => {
                tracing::warn!(caller = caller.identity, callee = callee.identity, error = %e, "a direct line not opened");
                refused.get_or_insert(e);
            }
        }
    }
    match refused {
        // Some reached: the press talks to them.
        Some(e) if lines.is_empty() => Err(match e {
            OpenDirectError::Refused(DirectError::ToItself) => ApiError::BadRequest(e.to_string()),
            OpenDirectError::Refused(DirectError::NotOnline(_)) => ApiError::NotFound(e.to_string()),
            OpenDirectError::Refused(DirectError::Full(_)) => ApiError::Conflict(e.to_string()),
            OpenDirectError::Janus(e) => unavailable(&e),
        }),
        _ => Ok(lines),
    }
}

/// The crew members online whom `to` reaches from `caller`, as `crew.directCalls` allows.
fn callees(state: &AppState, caller: &User, to: &PersonRef) -> Result<Vec<User>, ApiError> {
    let config = state.config.current();
    let calls = config.crew.direct_calls;
    let refused = |message: String| ApiError::Denied { code: "direct_call_refused", message };
    match (to, calls) {
        (_, DirectCalls::Off) => Err(refused("direct lines are off (crew.directCalls: off)".into())),
        (PersonRef { position: Some(id), identity: None }, _) => {
            let own = caller.position.as_deref().and_then(|p| config.position(p)).map(|(_, p)| p);
            if calls == DirectCalls::Positions && !own.is_some_and(|p| p.talk_to.contains(id)) {
                return Err(refused(format!("this panel has no person key to position {id:?}")));
            }
            let (_, position) =
                config.position(id).ok_or_else(|| ApiError::NotFound(format!("no position has id {id:?}")))?;
            let crew = online_crew(state);
            let at: Vec<User> = at_position(&crew, id, position.occupants).into_iter().cloned().collect();
            if at.is_empty() {
                return Err(ApiError::NotFound(format!("nobody is at position {id:?}")));
            }
            Ok(at)
        }
        (PersonRef { position: None, identity: Some(id) }, DirectCalls::All) => {
            let found = online_crew(state).into_iter().find(|u| u.identity == *id);
            Ok(vec![found.ok_or_else(|| ApiError::NotFound(format!("no crew member {id:?} is online")))?])
        }
        (PersonRef { position: None, identity: Some(_) }, _) => {
            Err(refused("direct lines reach positions only (crew.directCalls: positions)".into()))
        }
        _ => Err(ApiError::BadRequest("give exactly one of `position` and `identity`".into())),
    }
}

/// Takes one of `caller`'s direct calls of the minute, or refuses (429 `too_many_calls`).
fn take_call(state: &AppState, caller: &User) -> Result<(), ApiError> {
    let per_minute = state.config.current().crew.direct_calls_per_minute.get();
    if let Take::Refused { first } = state.call_rate.take_for(caller.identity.clone(), per_minute) {
        if first {
            tracing::warn!(
                identity = caller.identity,
                username = caller.username,
                per_minute,
                "direct lines opened over crew.directCallsPerMinute by one panel: refused"
            );
        }
        return Err(ApiError::Limited {
            code: "too_many_calls",
            message: format!(
                "this panel opened {per_minute} direct lines in the last minute (crew.directCallsPerMinute): wait a moment"
            ),
        });
    }
    Ok(())
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
/// once and kept while both are online: pressing again finds the same line. A key towards a
/// position for many opens one to each crew member at it.
#[utoipa::path(post, path = "/api/session/direct", tag = "users", request_body = DirectRequest,
    responses((status = 201, body = DirectOpened), (status = 400, body = ErrorBody),
        (status = 403, description = "Unknown session (`forbidden`), or `crew.directCalls` does not allow this call (`direct_call_refused`)", body = ErrorBody),
        (status = 404, description = "Nobody is online for this person", body = ErrorBody),
        (status = 409, description = "A panel has as many lines as it holds", body = ErrorBody),
        (status = 429, description = "The panel opened `crew.directCallsPerMinute` direct lines in the last minute (`too_many_calls`)", body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn open_direct(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<DirectRequest>,
) -> Result<(StatusCode, Json<DirectOpened>), ApiError> {
    let caller = state.users.by_token(&body.token).ok_or(ApiError::Forbidden)?;
    let lines = open(&state, &caller, &body.to).await?;
    let first = lines.first().cloned().ok_or_else(|| ApiError::Internal("no direct line opened".into()))?;
    Ok((StatusCode::CREATED, Json(DirectOpened { first, lines })))
}

/// The direct lines a person key reaches.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectOpened {
    /// The first of them (a key to one person reaches one).
    #[serde(flatten)]
    pub first: DirectLine,
    /// Each of them: at a position for many, one line to each crew member at it.
    pub lines: Vec<DirectLine>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DirectClosed {
    pub message: String,
}

/// Close a direct line: taken off both panels, its room destroyed.
#[utoipa::path(delete, path = "/api/admin/direct/{group_id}", tag = "users", security(("admin_token" = [])),
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

/// A panel closes one of its direct lines.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HangUpRequest {
    /// The panel's token (from `POST /token`).
    pub token: String,
    /// The direct line's room (`direct-…`).
    pub group_id: String,
}

/// Close a direct line from one of its ends: the callee declines it, or the caller hangs up.
/// Taken off both panels (the other end's session stream tells it), its room destroyed; the
/// caller's person key opens it again on its next press.
#[utoipa::path(post, path = "/api/session/direct/close", tag = "users", request_body = HangUpRequest,
    responses((status = 200, body = DirectClosed), (status = 400, body = ErrorBody),
        (status = 403, description = "Unknown session", body = ErrorBody),
        (status = 404, description = "The panel has no such direct line open", body = ErrorBody)))]
pub async fn hang_up(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<HangUpRequest>,
) -> Result<Json<DirectClosed>, ApiError> {
    let user = state.users.by_token(&body.token).ok_or(ApiError::Forbidden)?;
    let room = body.group_id;
    let Some(peer) = user.line(&room).and_then(|l| l.direct.clone()) else {
        return Err(ApiError::NotFound(format!("this panel has no direct line {room:?} open")));
    };
    let why =
        if peer.caller { format!("hung up by {}", user.username) } else { format!("declined by {}", user.username) };
    if !state.janus.close_direct(&room, &why).await {
        return Err(ApiError::NotFound(format!("no direct line {room:?} is open")));
    }
    tracing::info!(group = room, identity = user.identity, other = peer.identity, why, "direct line closed by one end");
    Ok(Json(DirectClosed { message: format!("Direct line to {} closed", peer.username) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::SecretValue;
    use crate::users::Users;

    /// Ann, Ben and Cat online at Camera 1, in that order; Dan elsewhere.
    fn crew() -> Vec<User> {
        let users = Users::default();
        let start = time::OffsetDateTime::now_utc();
        let joins = [("cat", "camera-1", 3), ("ann", "camera-1", 1), ("dan", "foh", 2), ("ben", "camera-1", 2)];
        joins
            .into_iter()
            .map(|(name, position, second)| {
                let key = SecretValue::new(format!("key-{name}"));
                let mut user =
                    users.register(format!("{name}-1"), name.into(), vec![Line::both("stage")], name.into(), key, None);
                user.position = Some(position.into());
                user.connected_at = Some(start + time::Duration::seconds(second));
                user
            })
            .collect()
    }

    #[test]
    fn a_key_to_a_position_for_many_reaches_everyone_at_it_and_for_one_its_latest() {
        let crew = crew();
        let names = |at: Vec<&User>| at.into_iter().map(|u| u.username.clone()).collect::<Vec<_>>();
        assert_eq!(names(at_position(&crew, "camera-1", Occupants::Many)), ["ann", "ben", "cat"]);
        assert_eq!(
            names(at_position(&crew, "camera-1", Occupants::One)),
            ["cat"],
            "a rejoin overlapping its old session"
        );
        assert!(at_position(&crew, "nowhere", Occupants::Many).is_empty());
    }

    #[test]
    fn a_direct_line_reaches_the_panels_once_its_room_is_made() {
        let users = Users::default();
        let (ann, ben) = (&crew()[1], &crew()[3]);
        for user in [ann, ben] {
            let key = SecretValue::new(format!("key-{}", user.username));
            users.register(
                user.identity.clone(),
                user.username.clone(),
                vec![Line::both("stage")],
                user.username.clone(),
                key,
                None,
            );
        }
        users.open_direct(&ann.identity, &ben.identity, "direct-1", 8).expect("opened");
        let lines = |identity: &str| direct_lines(&users.get(identity).expect("online"));
        assert!(
            lines(&ann.identity).is_empty() && lines(&ben.identity).is_empty(),
            "a room not made yet is no line to join"
        );
        users.direct_ready("direct-1");
        let (at_ann, at_ben) = (lines(&ann.identity), lines(&ben.identity));
        assert_eq!((at_ann.len(), at_ann[0].name.as_str(), at_ann[0].caller), (1, "ben", true));
        assert_eq!((at_ben.len(), at_ben[0].name.as_str(), at_ben[0].caller), (1, "ann", false));
    }
}
