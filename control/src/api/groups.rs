//! `/api/admin/groups`: the party lines.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use partyline_shared::Config;
use partyline_shared::config::{Bitrate, Group};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::extract::present;
use super::positions::hash_pin;
use super::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::config;
use crate::rendered::Same;

/// A group as the API shows it: its id is derived from its name.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
    #[schema(example = "stage-left")]
    pub id: String,
    #[schema(example = "Stage Left")]
    pub name: String,
    /// kbit/s: the group's own, or `audio.defaultBitrate` when it has none.
    #[schema(example = 64)]
    pub audio_bitrate: u32,
    /// True when the group has no bitrate of its own and follows `audio.defaultBitrate` (a
    /// write with `"audioBitrate": null` returns a group to it).
    pub follows_default_bitrate: bool,
    /// Whether joining it asks for a PIN.
    pub pin: bool,
    /// A program line: the crew only listen to it; their panels dim it while someone talks to
    /// them.
    pub program: bool,
    /// The admin muted the whole line (`POST /admin/groups/{id}/mute`).
    pub muted: bool,
}

impl GroupView {
    fn of(group: &Group, default_bitrate: Bitrate) -> Self {
        Self {
            id: group.id(),
            name: group.name.clone(),
            audio_bitrate: group.audio_bitrate.unwrap_or(default_bitrate).get(),
            follows_default_bitrate: group.audio_bitrate.is_none(),
            pin: group.pin.is_some(),
            program: group.program,
            muted: false,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupList {
    pub groups: Vec<GroupView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupChanged {
    pub message: String,
    pub group: GroupView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupDeleted {
    pub message: String,
    pub id: String,
}

/// A new group. The id is derived from the name; sending one is an error.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateGroup {
    #[schema(example = "Stage Left", max_length = 64)]
    pub name: String,
    /// kbit/s, 6..=510.
    #[schema(value_type = Option<u32>, minimum = 6, maximum = 510)]
    #[serde(default)]
    pub audio_bitrate: Option<Bitrate>,
    /// 4 to 12 digits asked of whoever joins it. Stored hashed, never shown.
    #[schema(example = "2468")]
    #[serde(default)]
    pub pin: Option<String>,
    /// A program line (the show's sound): the crew only listen to it.
    #[serde(default)]
    pub program: bool,
}

/// Changes to a group; absent fields keep their value. A new name gives a new id.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateGroup {
    #[serde(default)]
    pub name: Option<String>,
    /// kbit/s, 6..=510; `null` returns to `audio.defaultBitrate`.
    #[schema(value_type = Option<u32>, minimum = 6, maximum = 510)]
    #[serde(default, deserialize_with = "present")]
    pub audio_bitrate: Option<Option<Bitrate>>,
    /// 4 to 12 digits; `null` removes the PIN.
    #[schema(value_type = Option<String>, example = "2468")]
    #[serde(default, deserialize_with = "present")]
    pub pin: Option<Option<String>>,
    /// A program line or not; refused while a position talks on it.
    #[serde(default)]
    pub program: Option<bool>,
}

/// List the groups.
#[utoipa::path(get, operation_id = "groups_list", path = "/api/admin/groups", tag = "groups", security(("admin_token" = [])),
    responses((status = 200, body = GroupList), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>) -> impl IntoResponse {
    let (config, muted) = (state.config.current(), state.janus.muted_lines());
    let answer = state.group_list.answer((Same(Arc::clone(&config)), muted.clone()), || {
        let mut list = list_of(&config);
        for group in &mut list.groups {
            group.muted = muted.contains(&group.id);
        }
        Bytes::from(serde_json::to_vec(&list).expect("a group list serialises"))
    });
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], answer)
}

fn list_of(config: &Config) -> GroupList {
    GroupList { groups: config.groups.iter().map(|g| GroupView::of(g, config.audio.default_bitrate)).collect() }
}

/// Create a group.
#[utoipa::path(post, operation_id = "groups_create", path = "/api/admin/groups", tag = "groups", security(("admin_token" = [])), request_body = CreateGroup,
    responses((status = 201, body = GroupChanged), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, description = "Another group has the same id", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateGroup>,
) -> Result<(StatusCode, Json<GroupChanged>), ApiError> {
    let what = format!("create group {:?}", body.name);
    let pin = hash_pin(&state, body.pin.map(Some)).await?.flatten();
    let group = state
        .config
        .update(what, move |c| {
            let group = config::create_group(c, &body.name, body.audio_bitrate, pin)?;
            let group = config::set_program(c, &group.id(), body.program)?;
            Ok(GroupView::of(&group, c.audio.default_bitrate))
        })
        .await?;
    Ok((StatusCode::CREATED, Json(GroupChanged { message: format!("Group {:?} created", group.name), group })))
}

/// Rename a group or change its bitrate. Server audio users follow a rename.
#[utoipa::path(put, operation_id = "groups_update", path = "/api/admin/groups/{id}", tag = "groups", security(("admin_token" = [])), request_body = UpdateGroup,
    params(("id" = String, Path, description = "Group id")),
    responses((status = 200, body = GroupChanged), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn update(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateGroup>,
) -> Result<Json<GroupChanged>, ApiError> {
    let what = format!("update group {id:?}");
    let pin = hash_pin(&state, body.pin).await?;
    let old_id = id.clone();
    let group = state
        .config
        .update(what, move |c| {
            let mut group = config::update_group(c, &id, body.name.as_deref(), body.audio_bitrate, pin)?;
            if let Some(program) = body.program {
                group = config::set_program(c, &group.id(), program)?;
            }
            Ok(GroupView::of(&group, c.audio.default_bitrate))
        })
        .await?;
    if group.id != old_id {
        tracing::info!(from = old_id, to = group.id, name = group.name, "group renamed: a new id");
    }
    Ok(Json(GroupChanged { message: format!("Group {:?} updated", group.name), group }))
}

/// Delete a group (refused while server audio users send into it).
#[utoipa::path(delete, operation_id = "groups_delete", path = "/api/admin/groups/{id}", tag = "groups", security(("admin_token" = [])),
    params(("id" = String, Path, description = "Group id")),
    responses((status = 200, body = GroupDeleted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Server audio users use the group", body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<GroupDeleted>, ApiError> {
    let what = format!("delete group {id:?}");
    let group = state.config.update(what, move |c| config::delete_group(c, &id)).await?;
    Ok(Json(GroupDeleted { message: format!("Group {:?} deleted", group.name), id: group.id() }))
}
