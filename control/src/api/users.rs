//! Users: tokens for crew members (`/api/token`, `/api/groups`), the connected users and
//! forced disconnects (`/api/admin/users`), and Janus's event posts (internal listener).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use base64::Engine as _;
use partyline_shared::janus::HandlerEvent;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::panel::unavailable;
use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, ErrorBody};
use crate::janus::DisconnectError;
use crate::users::{User, UserState, UserView};

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
#[utoipa::path(get, operation_id = "users_list", path = "/users", tag = "users", security(("admin_token" = [])), params(UserQuery),
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
}

/// Disconnect a user for good: kicked from the room, token revoked (a rejoin with it is refused).
#[utoipa::path(delete, path = "/users/{identity}", tag = "users", security(("admin_token" = [])),
    params(("identity" = String, Path, description = "The user's participant identity")),
    responses((status = 200, body = UserDisconnected), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "A server audio user: managed under /admin/server-users", body = ErrorBody),
        (status = 503, description = "Janus is unreachable; the user was not disconnected", body = ErrorBody)))]
pub async fn disconnect(
    State(state): State<AppState>,
    ApiPath(identity): ApiPath<String>,
) -> Result<Json<UserDisconnected>, ApiError> {
    let user = state.janus.disconnect(&identity, "disconnected by the admin", "admin").await.map_err(refused)?;
    Ok(Json(UserDisconnected { message: format!("User {:?} disconnected", user.username), identity: user.identity }))
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
#[utoipa::path(delete, path = "/users/{identity}/lines/{group}", tag = "users", security(("admin_token" = [])),
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
    }
    view
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PublicGroup {
    pub id: String,
    pub name: String,
    /// Whether joining it asks for a PIN.
    pub pin: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PublicGroupList {
    pub groups: Vec<PublicGroup>,
}

/// The groups a crew member can join.
#[utoipa::path(get, path = "/groups", tag = "users", responses((status = 200, body = PublicGroupList)))]
pub async fn groups(State(state): State<AppState>) -> Json<PublicGroupList> {
    let config = state.config.current();
    let groups =
        config.groups.iter().map(|g| PublicGroup { id: g.id(), name: g.name.clone(), pin: g.pin.is_some() }).collect();
    Json(PublicGroupList { groups })
}

/// Janus's event handler posts (a JSON array of events), on the loopback-only internal
/// listener, with HTTP basic auth `janus:<event secret>`.
#[utoipa::path(post, path = "/internal/janus-events", tag = "internal",
    request_body(content = Vec<Object>, description = "Events of Janus's sample event handler"),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn janus_events(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(events): ApiJson<Vec<HandlerEvent>>,
) -> Result<StatusCode, ApiError> {
    let authorized = state.janus.event_secret().is_some_and(|secret| {
        let expected = base64::engine::general_purpose::STANDARD.encode(format!("janus:{}", secret.expose()));
        let given =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Basic "));
        given.is_some_and(|given| crate::secrets::SecretValue::new(expected).matches(given.trim()))
    });
    if !authorized {
        return Err(ApiError::Unauthorized);
    }
    for event in events {
        state.janus.on_event(event.meaning()).await;
    }
    Ok(StatusCode::NO_CONTENT)
}
