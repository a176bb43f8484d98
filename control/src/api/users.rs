//! Users: tokens for crew members (`/api/token`, `/api/groups`), the connected users and
//! forced disconnects (`/api/admin/users`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::unavailable;
use super::{ApiError, ApiPath, ApiQuery, AppState, ErrorBody};
use crate::bans::BanView;
use crate::janus::{DisconnectError, Disconnected};
use crate::users::{User, UserKind, UserState, UserView};

#[derive(Debug, Serialize, ToSchema)]
pub struct UserList {
    pub users: Vec<UserView>,
    pub count: usize,
}

/// Which users `GET /admin/users` lists.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UserQuery {
    /// `connected` (the default: who is in a room now, as the original system listed),
    /// `pending` (holding a token, not in their room), or `all`.
    #[param(value_type = Option<String>, example = "all")]
    #[serde(default)]
    pub state: Option<StateFilter>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateFilter {
    #[default]
    Connected,
    Pending,
    All,
}

impl StateFilter {
    fn admits(self, state: UserState) -> bool {
        match self {
            StateFilter::Connected => state == UserState::Connected,
            StateFilter::Pending => state == UserState::Pending,
            StateFilter::All => true,
        }
    }
}

/// The users in their group's room (`connected`); with `?state=pending` or `?state=all`, also
/// those holding a token who have not joined.
#[utoipa::path(get, operation_id = "users_list", path = "/api/admin/users", tag = "users", security(("admin_token" = [])), params(UserQuery),
    responses((status = 200, body = UserList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, ApiQuery(query): ApiQuery<UserQuery>) -> Json<UserList> {
    let filter = query.state.unwrap_or_default();
    let users: Vec<UserView> =
        state.users.list().iter().filter(|u| filter.admits(u.state)).map(|u| view(&state, u)).collect();
    Json(UserList { count: users.len(), users })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UserDisconnected {
    pub message: String,
    pub identity: String,
    /// The ban the disconnect came with, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ban: Option<BanView>,
}

/// What a disconnect also bans, and for how long.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BanQuery {
    /// Refuse new tokens to this name (compared as its slug).
    #[serde(default)]
    pub ban_name: bool,
    /// Refuse new tokens to this client address (everyone behind the same NAT too).
    #[serde(default)]
    pub ban_address: bool,
    /// How long a ban lasts: 1 to 1440 minutes (default 60).
    #[serde(default)]
    pub ban_minutes: Option<u32>,
}

/// Disconnect a user for good: kicked from the room, its Janus sessions ended, token revoked (a
/// rejoin with it is refused); with `banName` and/or `banAddress`, new tokens for its name or
/// address are refused for `banMinutes`, and every other session of that name or address ends
/// too. While Janus is unreachable the user is removed all the
/// same, and kicked and revoked once Janus is back (the message says so).
#[utoipa::path(delete, path = "/api/admin/users/{identity}", tag = "users", security(("admin_token" = [])),
    params(("identity" = String, Path, description = "The user's participant identity"), BanQuery),
    responses((status = 200, body = UserDisconnected), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A server audio user: managed under /admin/server-users; or an address ban of a user whose address is not known", body = ErrorBody)))]
pub async fn disconnect(
    State(state): State<AppState>,
    ApiPath(identity): ApiPath<String>,
    ApiQuery(ban): ApiQuery<BanQuery>,
) -> Result<Json<UserDisconnected>, ApiError> {
    let minutes = ban.ban_minutes.unwrap_or(60);
    if !(1..=1440).contains(&minutes) {
        return Err(ApiError::BadRequest(format!("banMinutes: {minutes} is out of range: expected 1 to 1440")));
    }
    let address = state.users.get(&identity).and_then(|u| u.address);
    if ban.ban_address && address.is_none() {
        return Err(ApiError::Conflict(format!(
            "{identity:?} has no known client address (a server audio user, or restored from an older crew file): ban its name"
        )));
    }
    let Disconnected { user, revoked } =
        state.janus.disconnect(&identity, "disconnected by the admin", "admin").await.map_err(refused)?;
    let ban = (ban.ban_name || ban.ban_address).then(|| {
        let name = ban.ban_name.then_some(user.username.as_str());
        let address = address.filter(|_| ban.ban_address);
        let view = state.bans.add(name, address, std::time::Duration::from_secs(u64::from(minutes) * 60));
        tracing::warn!(identity, username = user.username, name = ban.ban_name, address = ?address, minutes, "banned by the admin");
        view
    });
    let also = if ban.is_some() { end_the_banned(&state).await } else { 0 };
    let banned = match (ban.is_some(), also) {
        (false, _) => String::new(),
        (true, 0) => format!(" and banned for {minutes} min"),
        (true, n) => format!(" and banned for {minutes} min, with {n} more session(s) of that name or address"),
    };
    let later = if revoked { "" } else { "; the media server is unreachable: their token is revoked once it is back" };
    let message = format!("User {:?} disconnected{banned}{later}", user.username);
    Ok(Json(UserDisconnected { message, identity: user.identity, ban }))
}

/// Disconnects every crew session a ban in force covers (its name or address), pending or
/// connected: a token fetched before the ban opens nothing after it. How many.
async fn end_the_banned(state: &AppState) -> usize {
    let banned: Vec<User> = state
        .users
        .list()
        .into_iter()
        .filter(|u| u.kind == UserKind::Crew && state.bans.find(&u.username, u.address).is_some())
        .collect();
    let mut ended = 0;
    for user in banned {
        match state.janus.disconnect(&user.identity, "banned by the admin", "admin").await {
            Ok(_) => ended += 1,
            // Gone meanwhile (it left, or another request ended it).
            Err(DisconnectError::NotFound(_)) => {}
            Err(e) => tracing::warn!(identity = user.identity, error = %e, "cannot end a banned session"),
        }
    }
    ended
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BanList {
    pub bans: Vec<BanView>,
}

/// The bans in force.
#[utoipa::path(get, path = "/api/admin/bans", tag = "users", security(("admin_token" = [])),
    responses((status = 200, body = BanList), (status = 401, body = ErrorBody)))]
pub async fn bans(State(state): State<AppState>) -> Json<BanList> {
    Json(BanList { bans: state.bans.list() })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BanLifted {
    pub message: String,
    pub id: u64,
}

/// Lift a ban.
#[utoipa::path(delete, path = "/api/admin/bans/{id}", tag = "users", security(("admin_token" = [])),
    params(("id" = u64, Path, description = "The ban's id")),
    responses((status = 200, body = BanLifted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn lift_ban(State(state): State<AppState>, ApiPath(id): ApiPath<u64>) -> Result<Json<BanLifted>, ApiError> {
    if !state.bans.lift(id) {
        return Err(ApiError::NotFound(format!("no ban has id {id} (or it is over)")));
    }
    tracing::info!(id, "ban lifted by the admin");
    Ok(Json(BanLifted { message: format!("Ban {id} lifted"), id }))
}

pub(super) fn refused(e: DisconnectError) -> ApiError {
    match e {
        DisconnectError::NotFound(_) | DisconnectError::NoSuchLine { .. } | DisconnectError::NoSuchGroup(_) => {
            ApiError::NotFound(e.to_string())
        }
        DisconnectError::ServerUser(_) => ApiError::Conflict(e.to_string()),
        DisconnectError::Janus(e) => unavailable(&e),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LineRemoved {
    pub message: String,
    /// The user as it is now (its other lines go on).
    pub user: UserView,
}

/// Take one line away from a user: kicked from that group's room, which no longer admits its
/// token; its other lines go on. Taking its last line disconnects it.
#[utoipa::path(delete, path = "/api/admin/users/{identity}/lines/{group}", tag = "users", security(("admin_token" = [])),
    params(("identity" = String, Path, description = "The user's participant identity"),
        ("group" = String, Path, description = "The line's group id")),
    responses((status = 200, body = LineRemoved), (status = 401, body = ErrorBody),
        (status = 404, description = "No such user, or no such line of it", body = ErrorBody),
        (status = 409, description = "A server audio user: managed under /admin/server-users", body = ErrorBody),
        (status = 503, description = "Janus is unreachable; nothing was changed", body = ErrorBody)))]
pub async fn remove_line(
    State(state): State<AppState>,
    ApiPath((identity, group)): ApiPath<(String, String)>,
) -> Result<Json<LineRemoved>, ApiError> {
    let user = state.janus.remove_line(&identity, &group, "admin").await.map_err(refused)?;
    let message = format!("Line {group:?} of {:?} removed", user.username);
    Ok(Json(LineRemoved { message, user: view(&state, &user) }))
}

/// A user as the admin sees it: with the lines called in the last seconds.
pub(super) fn view(state: &AppState, user: &User) -> UserView {
    let mut view = user.view();
    for line in &mut view.lines {
        line.call = state.calls.is_calling(&line.group_id);
        line.link = state.links.of(&user.identity, &line.group_id);
    }
    view
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PublicGroup {
    pub id: String,
    pub name: String,
    /// Whether joining it asks for a PIN.
    pub pin: bool,
    /// A program line: joined to listen only.
    pub program: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PublicGroupList {
    pub groups: Vec<PublicGroup>,
}

/// The groups a crew member can join.
#[utoipa::path(get, path = "/api/groups", tag = "users", responses((status = 200, body = PublicGroupList)))]
pub async fn groups(State(state): State<AppState>) -> Json<PublicGroupList> {
    let config = state.config.current();
    let groups = config
        .groups
        .iter()
        .map(|g| PublicGroup { id: g.id(), name: g.name.clone(), pin: g.pin.is_some(), program: g.program })
        .collect();
    Json(PublicGroupList { groups })
}
