//! The admin's actions on lines: mute or release one user on one line, mute a whole line,
//! force a user's talk off, call a line. Each goes to Janus (AudioBridge `mute`/`unmute`/`mute_room` with the
//! room secret), to the panels concerned (their session streams: they show it and refuse the
//! talk keys it blocks) and to the log.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::session::admin_state;
use super::users::{refused, view};
use super::{ApiError, ApiPath, AppState, ErrorBody};
use crate::panels::{Command, Push, Switch};
use crate::rooms_link::RoomsLinkError;
use crate::users::{User, UserKind, UserView};

#[derive(Debug, Serialize, ToSchema)]
pub struct UserLineChanged {
    pub message: String,
    /// The user as it is now (`lines[].mutedByAdmin`).
    pub user: UserView,
}

/// Mute a user on one line (AudioBridge `mute`): the others stop hearing it there, its panel
/// shows "muted by the admin" and refuses its talk key on that line (its remote control too,
/// `muted_by_admin`), and an unmute it sends Janus itself is undone. Its other lines go on.
#[utoipa::path(post, path = "/api/admin/users/{identity}/lines/{group}/mute", tag = "users", security(("admin_token" = [])),
    params(("identity" = String, Path, description = "The user's participant identity"),
        ("group" = String, Path, description = "The line's group id")),
    responses((status = 200, body = UserLineChanged), (status = 401, body = ErrorBody),
        (status = 404, description = "No such user, or no such line of it", body = ErrorBody),
        (status = 503, description = "Janus is unreachable; nothing was changed", body = ErrorBody)))]
pub async fn mute_user(
    State(state): State<AppState>,
    ApiPath((identity, group)): ApiPath<(String, String)>,
) -> Result<Json<UserLineChanged>, ApiError> {
    set_user_muted(&state, &identity, &group, true).await
}

/// Release a user muted on one line: its talk key works there again (it stays silent until
/// it talks).
#[utoipa::path(post, path = "/api/admin/users/{identity}/lines/{group}/unmute", tag = "users", security(("admin_token" = [])),
    params(("identity" = String, Path, description = "The user's participant identity"),
        ("group" = String, Path, description = "The line's group id")),
    responses((status = 200, body = UserLineChanged), (status = 401, body = ErrorBody),
        (status = 404, description = "No such user, or no such line of it", body = ErrorBody),
        (status = 503, description = "Janus is unreachable; nothing was changed", body = ErrorBody)))]
pub async fn unmute_user(
    State(state): State<AppState>,
    ApiPath((identity, group)): ApiPath<(String, String)>,
) -> Result<Json<UserLineChanged>, ApiError> {
    set_user_muted(&state, &identity, &group, false).await
}

async fn set_user_muted(
    state: &AppState,
    identity: &str,
    group: &str,
    muted: bool,
) -> Result<Json<UserLineChanged>, ApiError> {
    let user = state.janus.mute_user(identity, group, muted, "admin").await.map_err(refused)?;
    if user.kind == UserKind::Server {
        // On partyline's rooms the card's mute is bridged's, in the plan (on Janus, the plan
        // does not change).
        state.bridge.replan();
    } else if muted {
        silence_on_rooms(state, &user, group).await?;
    }
    tell_panel(state, &user, group);
    let done = if muted { "muted" } else { "released" };
    let message = format!("{:?} {done} on {group:?}", user.username);
    Ok(Json(UserLineChanged { message, user: view(state, &user) }))
}

/// A session on partyline's rooms stops being mixed on `group` at once, whatever its panel
/// does (a session whose media is not up yet has nothing to stop).
async fn silence_on_rooms(state: &AppState, user: &User, group: &str) -> Result<(), ApiError> {
    if !user.on_rooms {
        return Ok(());
    }
    match state.rooms.set_talking(user, group, false).await {
        Ok(()) | Err(RoomsLinkError::NoSession) => Ok(()),
        Err(e) => Err(ApiError::Unavailable(format!("partyline's rooms did not take the mute: {e}"))),
    }
}

/// Tells `user`'s panel the admin's state of its line `group`.
fn tell_panel(state: &AppState, user: &User, group: &str) {
    if let Some(line) = user.line(group) {
        state.panels.push(&user.identity, Push::Admin(admin_state(state, line)));
        state.panels.changed(&user.identity);
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TalkForcedOff {
    pub message: String,
    /// The panel reported its talk key off (false: it did not answer in time; it is muted in
    /// the room all the same).
    pub panel_applied: bool,
    pub user: UserView,
}

/// Force a crew member's talk off on one line: muted in the room at once, and its panel lets
/// the key go as if released (it may talk again by pressing it).
#[utoipa::path(post, path = "/api/admin/users/{identity}/lines/{group}/talk-off", tag = "users", security(("admin_token" = [])),
    params(("identity" = String, Path, description = "The user's participant identity"),
        ("group" = String, Path, description = "The line's group id")),
    responses((status = 200, body = TalkForcedOff), (status = 401, body = ErrorBody),
        (status = 404, description = "No such user, or no such line of it", body = ErrorBody),
        (status = 409, description = "A server audio user (it has no talk key: mute it)", body = ErrorBody),
        (status = 503, description = "Janus is unreachable; nothing was changed", body = ErrorBody)))]
pub async fn talk_off(
    State(state): State<AppState>,
    ApiPath((identity, group)): ApiPath<(String, String)>,
) -> Result<Json<TalkForcedOff>, ApiError> {
    let user =
        state.users.get(&identity).ok_or_else(|| ApiError::NotFound(format!("no user has identity {identity:?}")))?;
    if user.kind == UserKind::Server {
        return Err(ApiError::Conflict(format!(
            "{identity:?} is a server audio user: it has no talk key (mute it on the line instead)"
        )));
    }
    if !user.has_line(&group) {
        return Err(ApiError::NotFound(format!("user {identity:?} has no line {group:?}")));
    }
    if user.on_rooms {
        silence_on_rooms(&state, &user, &group).await?;
    } else {
        state.janus.mute_participant(&group, &identity).await.map_err(|e| super::error::unavailable(&e))?;
    }
    tracing::warn!(identity, username = user.username, group, by = "admin", "talk forced off");
    let command = Command { talk: Some(Switch::Off), reason: Some("admin"), ..Command::new(&group) };
    let panel_applied = state.panels.command(&identity, command).await.is_ok();
    let message = format!("Talk of {:?} on {group:?} forced off", user.username);
    Ok(Json(TalkForcedOff { message, panel_applied, user: view(&state, &user) }))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineMuted {
    pub message: String,
    pub group_id: String,
    pub muted: bool,
}

/// Mute a whole line (AudioBridge `mute_room`): nobody on it is heard, server audio users
/// included, and every panel on it shows it and refuses its talk key, until released.
#[utoipa::path(post, path = "/api/admin/groups/{id}/mute", tag = "groups", security(("admin_token" = [])),
    params(("id" = String, Path, description = "Group id")),
    responses((status = 200, body = LineMuted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, description = "Janus is unreachable; nothing was changed", body = ErrorBody)))]
pub async fn mute_line(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<LineMuted>, ApiError> {
    set_line_muted(&state, &id, true).await
}

/// Release a muted line.
#[utoipa::path(post, path = "/api/admin/groups/{id}/unmute", tag = "groups", security(("admin_token" = [])),
    params(("id" = String, Path, description = "Group id")),
    responses((status = 200, body = LineMuted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, description = "Janus is unreachable; nothing was changed", body = ErrorBody)))]
pub async fn unmute_line(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<LineMuted>, ApiError> {
    set_line_muted(&state, &id, false).await
}

async fn set_line_muted(state: &AppState, group: &str, muted: bool) -> Result<Json<LineMuted>, ApiError> {
    state.janus.mute_line(group, muted, "admin").await.map_err(refused)?;
    for user in state.users.list().iter().filter(|u| u.kind == UserKind::Crew) {
        tell_panel(state, user, group);
    }
    let done = if muted { "muted" } else { "released" };
    Ok(Json(LineMuted { message: format!("Line {group:?} {done}"), group_id: group.to_owned(), muted }))
}

/// The name a call from the admin carries: what the panels show ("Call from Admin").
const ADMIN_CALLER: &str = "Admin";

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineCalled {
    pub message: String,
    pub group_id: String,
}

/// Call a whole line from the admin: every panel on it flashes "Call from Admin" for 5 s, as
/// for a crew member's call (`event: call` on their session streams, `from` "Admin", `identity`
/// "admin"), and the admin event stream has its `call`.
#[utoipa::path(post, path = "/api/admin/groups/{id}/call", tag = "groups", security(("admin_token" = [])),
    params(("id" = String, Path, description = "Group id")),
    responses((status = 200, body = LineCalled), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn call_line(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<LineCalled>, ApiError> {
    if state.config.current().group(&id).is_none() {
        return Err(ApiError::NotFound(format!("no group has id {id:?}")));
    }
    super::session::send_call(&state, ADMIN_CALLER, "admin", id.clone());
    Ok(Json(LineCalled { message: format!("Line {id:?} called"), group_id: id }))
}
