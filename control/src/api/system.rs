//! `/api/admin/config`, `/api/admin/logs`, `/api/admin/stats`, `/api/openapi.json`.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::server_users::ServerUserView;
use super::{ApiError, ApiQuery, AppState, ErrorBody};
use crate::bridge::BridgeView;
use crate::janus::JanusStatus;
use crate::logring::{self, LogEntry};
use crate::stats::Memory;

/// The config in force, as JSON, with secrets redacted. The API speaks camelCase: the server
/// audio users, snake_case in the file (the original system's keys), are `serverAudioUsers`
/// here, each as `GET /admin/server-users` shows it.
#[utoipa::path(get, path = "/config", tag = "system", security(("admin_token" = [])),
    responses((status = 200, description = "The config file's content as JSON (camelCase keys)", body = Object), (status = 401, body = ErrorBody)))]
pub async fn config(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let config = state.config.current().redacted();
    let render = |e: serde_json::Error| ApiError::Internal(format!("cannot render the config: {e}"));
    let mut value = serde_json::to_value(&config).map_err(render)?;
    let users: Vec<ServerUserView> = config.server_audio_users.iter().map(ServerUserView::of).collect();
    if let Some(object) = value.as_object_mut() {
        object.remove("server_audio_users");
        object.insert("serverAudioUsers".into(), serde_json::to_value(users).map_err(render)?);
    }
    Ok(Json(value))
}

/// Filter of `GET /admin/logs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LogQuery {
    /// The least severe level to return: `warn` returns warn and error. Default `trace` (all).
    #[param(value_type = Option<String>, example = "warn")]
    #[serde(default)]
    pub level: Option<LevelParam>,
    /// How many entries at most, 1..=1000 (default 100).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only entries with a `seq` above this one (for incremental fetches).
    #[serde(default)]
    pub after: Option<u64>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LevelParam {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl From<LevelParam> for tracing::Level {
    fn from(level: LevelParam) -> Self {
        match level {
            LevelParam::Trace => tracing::Level::TRACE,
            LevelParam::Debug => tracing::Level::DEBUG,
            LevelParam::Info => tracing::Level::INFO,
            LevelParam::Warn => tracing::Level::WARN,
            LevelParam::Error => tracing::Level::ERROR,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LogList {
    /// Newest first.
    pub logs: Vec<LogEntry>,
    /// How many entries match the filter (before `limit`).
    pub total: usize,
}

/// The newest log entries, newest first.
#[utoipa::path(get, path = "/logs", tag = "system", security(("admin_token" = [])), params(LogQuery),
    responses((status = 200, body = LogList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn logs(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<LogQuery>,
) -> Result<Json<LogList>, ApiError> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=logring::CAPACITY).contains(&limit) {
        return Err(ApiError::BadRequest(format!("limit: {limit} is out of range 1..={}", logring::CAPACITY)));
    }
    let level = query.level.map_or(tracing::Level::TRACE, Into::into);
    let page = state.logs.query(level, query.after.unwrap_or(0), limit);
    Ok(Json(LogList { logs: page.entries, total: page.total }))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// Connections (joins) since start.
    pub total_connections: u64,
    /// Users connected now.
    pub active_connections: u64,
    /// Seconds since start.
    pub uptime: u64,
    /// Bytes.
    pub memory: Memory,
    pub bridge: BridgeView,
    pub janus: JanusStatus,
}

/// Process and connection figures.
#[utoipa::path(get, path = "/stats", tag = "system", security(("admin_token" = [])),
    responses((status = 200, body = Stats), (status = 401, body = ErrorBody)))]
pub async fn stats(State(state): State<AppState>) -> Json<Stats> {
    Json(Stats {
        total_connections: state.janus.users.total_connections(),
        active_connections: state.janus.users.active_connections(),
        uptime: state.started.elapsed().as_secs(),
        memory: Memory::of_this_process(),
        bridge: state.bridge.view(),
        janus: state.janus.status(),
    })
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "system", responses((status = 200, body = Object)))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(super::openapi())
}
