//! `/api/admin/server-users`: sound-card channels bridged into groups by partyline-bridged.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use partyline_shared::config::{Channel, Ifb, ServerAudioUser};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::extract::present;
use super::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::config::{self, ServerUserFields, ServerUserPatch};

/// A server audio user as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerUserView {
    /// The slug of the name (used in URLs).
    #[schema(example = "foh")]
    pub id: String,
    #[schema(example = "FOH")]
    pub name: String,
    /// A group id.
    #[schema(example = "stage-left")]
    pub group: String,
    /// 0..=7: the card's input sent into the group.
    pub input_channel: u8,
    /// 0..=7: the card's output playing the group's mix (or the IFB); `null`: no output.
    pub output_channel: Option<u8>,
    /// The output is an IFB: the program, dipped while the interrupt group talks; `null`: the
    /// output plays the group minus this user.
    pub ifb: Option<Ifb>,
}

impl ServerUserView {
    pub(crate) fn of(user: &ServerAudioUser) -> Self {
        Self {
            id: user.id(),
            name: user.name.clone(),
            group: user.group.clone(),
            input_channel: user.input_channel.get(),
            output_channel: user.output_channel.map(Channel::get),
            ifb: user.ifb.clone(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerUserList {
    pub server_users: Vec<ServerUserView>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerUserChanged {
    pub message: String,
    pub server_user: ServerUserView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ServerUserDeleted {
    pub message: String,
    pub id: String,
}

/// A new server audio user.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateServerUser {
    #[schema(example = "FOH", max_length = 64)]
    pub name: String,
    #[schema(example = "stage-left")]
    pub group: String,
    #[schema(value_type = u8, minimum = 0, maximum = 7)]
    pub input_channel: Channel,
    /// `null` or absent: no output.
    #[schema(value_type = Option<u8>, minimum = 0, maximum = 7)]
    #[serde(default)]
    pub output_channel: Option<Channel>,
    /// `null` or absent: the output plays the group minus this user. Needs an output.
    #[serde(default)]
    pub ifb: Option<Ifb>,
}

/// Changes to a server audio user; absent fields keep their value.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateServerUser {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub group: Option<String>,
    #[schema(value_type = Option<u8>, minimum = 0, maximum = 7)]
    #[serde(default)]
    pub input_channel: Option<Channel>,
    /// `null`: no output.
    #[schema(value_type = Option<u8>, minimum = 0, maximum = 7)]
    #[serde(default, deserialize_with = "present")]
    pub output_channel: Option<Option<Channel>>,
    /// `null`: no IFB (the output plays the group minus this user).
    #[schema(value_type = Option<Ifb>)]
    #[serde(default, deserialize_with = "present")]
    pub ifb: Option<Option<Ifb>>,
}

/// The server audio users.
#[utoipa::path(get, operation_id = "server_users_list", path = "/api/admin/server-users", tag = "audio", security(("admin_token" = [])),
    responses((status = 200, body = ServerUserList), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>) -> Json<ServerUserList> {
    let config = state.config.current();
    Json(ServerUserList { server_users: config.server_audio_users.iter().map(ServerUserView::of).collect() })
}

/// Bridge a sound-card channel into a group.
#[utoipa::path(post, operation_id = "server_users_create", path = "/api/admin/server-users", tag = "audio", security(("admin_token" = [])),
    request_body = CreateServerUser,
    responses((status = 201, body = ServerUserChanged), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 503, description = "partyline-bridged is not running", body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateServerUser>,
) -> Result<(StatusCode, Json<ServerUserChanged>), ApiError> {
    state.require_bridge()?;
    let fields = ServerUserFields {
        name: body.name,
        group: body.group,
        input_channel: body.input_channel,
        output_channel: body.output_channel,
        ifb: body.ifb,
    };
    let what = format!("create server audio user {:?}", fields.name);
    let user = state.config.update(what, move |c| config::create_server_user(c, fields)).await?;
    let server_user = ServerUserView::of(&user);
    let message = format!("Server audio user {:?} created", server_user.name);
    Ok((StatusCode::CREATED, Json(ServerUserChanged { message, server_user })))
}

/// Change a server audio user.
#[utoipa::path(put, operation_id = "server_users_update", path = "/api/admin/server-users/{id}", tag = "audio", security(("admin_token" = [])),
    request_body = UpdateServerUser, params(("id" = String, Path, description = "Server audio user id")),
    responses((status = 200, body = ServerUserChanged), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn update(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateServerUser>,
) -> Result<Json<ServerUserChanged>, ApiError> {
    state.require_bridge()?;
    let what = format!("update server audio user {id:?}");
    let user = state
        .config
        .update(what, move |c| {
            let patch = ServerUserPatch {
                name: body.name,
                group: body.group,
                input_channel: body.input_channel,
                output_channel: body.output_channel,
                ifb: body.ifb,
            };
            config::update_server_user(c, &id, patch)
        })
        .await?;
    let server_user = ServerUserView::of(&user);
    Ok(Json(ServerUserChanged { message: format!("Server audio user {:?} updated", server_user.name), server_user }))
}

/// Stop bridging a server audio user.
#[utoipa::path(delete, operation_id = "server_users_delete", path = "/api/admin/server-users/{id}", tag = "audio", security(("admin_token" = [])),
    params(("id" = String, Path, description = "Server audio user id")),
    responses((status = 200, body = ServerUserDeleted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ServerUserDeleted>, ApiError> {
    state.require_bridge()?;
    let what = format!("delete server audio user {id:?}");
    let user = state.config.update(what, move |c| config::delete_server_user(c, &id)).await?;
    Ok(Json(ServerUserDeleted { message: format!("Server audio user {:?} deleted", user.name), id: user.id() }))
}
