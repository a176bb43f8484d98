//! The person and reply keys of a remote-controlled panel. A person key opens the direct line
//! to its person when none is open (both panels join it) and works its talk key; the reply key
//! works the talk key of the direct line whoever last spoke to the panel is on.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::ToSchema;

use super::talk::talk_on;
use super::{RemoteLine, panel_of};
use crate::api::direct::{PersonRef, open, people_of};
use crate::api::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::panels::Switch;

/// A person key pressed on a control surface.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PersonKeyRequest {
    #[serde(flatten)]
    pub to: PersonRef,
    /// `on`, `off` or `toggle`, as a line's talk key.
    pub state: Switch,
}

/// Work a person key, as if pressed on the panel: opens the direct line to the person (a
/// position of the panel's `talkTo`, or with `crew.directCalls: all` anyone online) when none
/// is open, then works its talk key (towards a position for many, one line to each crew member
/// at it, each talk key worked). Answers once the panel applied it, with the first line.
#[utoipa::path(post, path = "/api/panel/{key}/direct", operation_id = "panel_direct", tag = "panel", request_body = PersonKeyRequest,
    params(("key" = String, Path, description = "The panel key")),
    responses((status = 200, description = "The direct line as the panel applied it", body = RemoteLine),
        (status = 400, body = ErrorBody),
        (status = 403, description = "`crew.directCalls` does not allow this call (`direct_call_refused`)", body = ErrorBody),
        (status = 404, description = "Unknown key, or nobody online for this person", body = ErrorBody),
        (status = 409, description = "Refused: `panel_offline`, or a panel full of lines", body = ErrorBody),
        (status = 429, description = "The panel opened `crew.directCallsPerMinute` direct lines in the last minute (`too_many_calls`)", body = ErrorBody),
        (status = 504, description = "The panel did not apply it in time (`panel_not_responding`)", body = ErrorBody)))]
pub async fn person(
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
    ApiJson(body): ApiJson<PersonKeyRequest>,
) -> Result<Json<RemoteLine>, ApiError> {
    let user = panel_of(&state, &key)?;
    let lines = open(&state, &user, &body.to).await?;
    let user = panel_of(&state, &key)?;
    // A key reaching several (a position for many) works each of their lines' talk keys.
    let mut answers = Vec::new();
    for line in &lines {
        answers.push(talk_on(&state, &user, &line.group_id, body.state).await?);
    }
    answers.into_iter().next().ok_or_else(|| ApiError::Internal("no direct line opened".into()))
}

/// Work the reply key, as if pressed on the panel: the talk key of the direct line of whoever
/// last opened one to the panel or spoke to it on one (`people.reply` of the panel).
#[utoipa::path(post, path = "/api/panel/{key}/reply", operation_id = "panel_reply", tag = "panel", request_body = super::SwitchRequest,
    params(("key" = String, Path, description = "The panel key")),
    responses((status = 200, description = "The direct line as the panel applied it", body = RemoteLine),
        (status = 400, body = ErrorBody), (status = 404, description = "Unknown key", body = ErrorBody),
        (status = 409, description = "Refused: `nobody_to_reply` (no direct line spoke to the panel), `panel_offline`", body = ErrorBody),
        (status = 504, description = "The panel did not apply it in time (`panel_not_responding`)", body = ErrorBody)))]
pub async fn reply(
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
    ApiJson(body): ApiJson<super::SwitchRequest>,
) -> Result<Json<RemoteLine>, ApiError> {
    let user = panel_of(&state, &key)?;
    let Some(line) = people_of(&state, &user).reply else {
        let message = "nobody to reply to: no direct line was opened to this panel or spoken on".to_owned();
        return Err(ApiError::Refused { code: "nobody_to_reply", message });
    };
    talk_on(&state, &user, &line.group_id, body.state).await
}
