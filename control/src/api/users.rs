//! Users: tokens for crew members (`/api/token`, `/api/groups`), the connected users and
//! forced disconnects (`/api/admin/users`), and Janus's event posts (internal listener).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use base64::Engine as _;
use partyline_shared::config::{MAX_NAME_CHARS, check_name_chars};
use partyline_shared::janus::HandlerEvent;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ApiJson, ApiPath, ApiQuery, AppState, ErrorBody};
use crate::janus::{DisconnectError, JanusError};
use crate::users::{UserState, UserView};

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
#[utoipa::path(get, path = "/users", tag = "users", security(("admin_token" = [])), params(UserQuery),
    responses((status = 200, body = UserList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, ApiQuery(query): ApiQuery<UserQuery>) -> Json<UserList> {
    let filter = query.state.unwrap_or_default();
    let users: Vec<UserView> =
        state.janus.users.list().iter().filter(|u| filter.admits(u.state)).map(|u| u.view()).collect();
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
    let user = state.janus.disconnect(&identity, "disconnected by the admin", "admin").await.map_err(|e| match e {
        DisconnectError::NotFound(_) => ApiError::NotFound(e.to_string()),
        DisconnectError::ServerUser(_) => ApiError::Conflict(e.to_string()),
        DisconnectError::Janus(e) => unavailable(&e),
    })?;
    Ok(Json(UserDisconnected { message: format!("User {:?} disconnected", user.username), identity: user.identity }))
}

/// A crew member asking to join a group.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequest {
    /// 1 to 64 printable characters.
    #[schema(example = "Alice")]
    pub username: String,
    #[schema(example = "stage-left")]
    pub group_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenResponse {
    /// The Janus token: valid for one session; revoked when it ends or after 10 minutes unused.
    pub token: String,
    /// Janus's WebSocket API on this origin (`wss://HOST/janus`).
    pub url: String,
    /// The AudioBridge room to join: the group id.
    pub room_name: String,
    /// The participant id to join with.
    pub participant_identity: String,
}

/// Get a token to join a group's room.
#[utoipa::path(post, path = "/token", tag = "users", request_body = TokenRequest,
    responses((status = 200, body = TokenResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, description = "Janus is unreachable; nothing was registered", body = ErrorBody)))]
pub async fn token(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<Json<TokenResponse>, ApiError> {
    let username = body.username.trim();
    if username.is_empty() {
        return Err(ApiError::BadRequest("username: must not be empty".into()));
    }
    check_name_chars(username)
        .map_err(|m| ApiError::BadRequest(format!("username: {m} (1 to {MAX_NAME_CHARS} printable characters)")))?;
    if state.config.current().group(&body.group_id).is_none() {
        return Err(ApiError::NotFound(format!("no group has id {:?}", body.group_id)));
    }
    let user = state.janus.issue_token(username, &body.group_id).await.map_err(|e| unavailable(&e))?;
    Ok(Json(TokenResponse {
        url: janus_websocket_url(&headers, state.tls),
        room_name: user.group_id,
        participant_identity: user.identity,
        // Handed out to the crew member who asked for it (and only here).
        token: user.token.expose().to_owned(),
    }))
}

/// This origin's `/janus`, as the browser reached it.
fn janus_websocket_url(headers: &HeaderMap, tls: bool) -> String {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    let scheme = if tls { "wss" } else { "ws" };
    format!("{scheme}://{host}/janus")
}

fn unavailable(error: &JanusError) -> ApiError {
    ApiError::Unavailable(format!("the media server is unavailable: {error}"))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PublicGroup {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PublicGroupList {
    pub groups: Vec<PublicGroup>,
}

/// The groups a crew member can join.
#[utoipa::path(get, path = "/groups", tag = "users", responses((status = 200, body = PublicGroupList)))]
pub async fn groups(State(state): State<AppState>) -> Json<PublicGroupList> {
    let config = state.config.current();
    let groups = config.groups.iter().map(|g| PublicGroup { id: g.id(), name: g.name.clone() }).collect();
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
