//! `/api/admin/groups/{id}/stream-tokens`: the tokens that let other systems publish into a
//! line (WHIP) or listen to it (WHEP). The secret is made here, shown once in the answer to
//! its creation, and only its SHA-256 is stored (`groups[].streamTokens`); revoking one ends
//! its running sessions.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use partyline_shared::config::{StreamKind, StreamToken};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::streams::hash_secret;
use super::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::config;
use crate::secrets::random_hex;

/// A stream token as the admin sees it (never its secret, once created).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamTokenView {
    pub id: String,
    pub kind: StreamKind,
    pub name: String,
    /// Where its client sends its offer: `/api/whip/{group}` or `/api/whep/{group}`.
    pub path: String,
    /// Its sessions running now.
    pub sessions: usize,
}

impl StreamTokenView {
    fn of(state: &AppState, group: &str, token: &StreamToken) -> Self {
        StreamTokenView {
            id: token.id.clone(),
            kind: token.kind,
            name: token.name.clone(),
            path: format!("/api/{}/{group}", token.kind.as_str()),
            sessions: state.streams.of_token(&token.id),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StreamTokenList {
    pub tokens: Vec<StreamTokenView>,
}

/// A new stream token.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateStreamToken {
    pub kind: StreamKind,
    /// What it is for, 1 to 64 characters ("Vision mixer"): its sessions show as `NAME (WHIP)`.
    #[schema(example = "Vision mixer")]
    pub name: String,
}

/// A stream token just created: its secret, shown this once.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamTokenCreated {
    pub message: String,
    pub token: StreamTokenView,
    /// The bearer token to give the client (OBS Studio's "Bearer Token"). Not stored: lost, it
    /// is revoked and another created.
    pub secret: String,
    /// This origin's endpoint for it (OBS Studio's "Server").
    pub url: String,
}

/// The group's stream tokens.
#[utoipa::path(get, operation_id = "stream_tokens_list", path = "/api/admin/groups/{id}/stream-tokens", tag = "streams", security(("admin_token" = [])),
    params(("id" = String, Path, description = "Group id")),
    responses((status = 200, body = StreamTokenList), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<StreamTokenList>, ApiError> {
    let config = state.config.current();
    let (_, group) = config.group(&id).ok_or_else(|| ApiError::NotFound(format!("no group has id {id:?}")))?;
    Ok(Json(StreamTokenList {
        tokens: group.stream_tokens.iter().map(|t| StreamTokenView::of(&state, &id, t)).collect(),
    }))
}

/// Create a stream token for the group: its secret is in this answer only.
#[utoipa::path(post, operation_id = "stream_tokens_create", path = "/api/admin/groups/{id}/stream-tokens", tag = "streams", security(("admin_token" = [])),
    request_body = CreateStreamToken, params(("id" = String, Path, description = "Group id")),
    responses((status = 201, body = StreamTokenCreated), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The group has 16 stream tokens", body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<CreateStreamToken>,
) -> Result<(StatusCode, Json<StreamTokenCreated>), ApiError> {
    let random = |bytes| random_hex(bytes).map_err(|e| ApiError::Internal(format!("no randomness: {e}")));
    let secret = random(24)?;
    let token = StreamToken { id: random(4)?, kind: body.kind, name: body.name, hash: hash_secret(&secret) };
    let what = format!("create {} token {:?} of group {id:?}", token.kind.as_str(), token.name);
    let group = id.clone();
    let token = state.config.update(what, move |c| config::add_stream_token(c, &group, token)).await?;
    let view = StreamTokenView::of(&state, &id, &token);
    let url = format!("{}{}", super::token::origin(&headers, state.tls()), view.path);
    let message = format!(
        "{} token {:?} created: copy its secret now, it is not shown again",
        token.kind.as_str().to_uppercase(),
        token.name
    );
    Ok((StatusCode::CREATED, Json(StreamTokenCreated { message, token: view, secret, url })))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StreamTokenRevoked {
    pub message: String,
    pub id: String,
}

/// Revoke a stream token: its running sessions end, its secret is refused from now on.
#[utoipa::path(delete, operation_id = "stream_tokens_revoke", path = "/api/admin/groups/{id}/stream-tokens/{token}", tag = "streams", security(("admin_token" = [])),
    params(("id" = String, Path, description = "Group id"), ("token" = String, Path, description = "The token's id")),
    responses((status = 200, body = StreamTokenRevoked), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn revoke(
    State(state): State<AppState>,
    ApiPath((id, token_id)): ApiPath<(String, String)>,
) -> Result<Json<StreamTokenRevoked>, ApiError> {
    let what = format!("revoke stream token {token_id:?} of group {id:?}");
    let group = id.clone();
    let revoked = state.config.update(what, move |c| config::revoke_stream_token(c, &group, &token_id)).await?;
    state.streams.end_of_token(&state.janus, &revoked.id).await;
    let message = format!("{} token {:?} revoked", revoked.kind.as_str().to_uppercase(), revoked.name);
    Ok(Json(StreamTokenRevoked { message, id: revoked.id }))
}
