//! `/api/admin/config`, `/api/admin/logs`, `/api/admin/stats`, `/api/health`,
//! `/api/openapi.json`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::server_users::ServerUserView;
use super::{ApiError, ApiQuery, AppState, ErrorBody};
use partyline_shared::bridge::BranchStatus;

use crate::bridged_link::BridgeView;
use crate::events::EventStats;
use crate::events::{BridgeViewState, JanusState};
use crate::janus::JanusStatus;
use crate::logring::{self, LogEntry};
use crate::stats::Memory;

/// The config in force, as JSON, with secrets redacted. The API speaks camelCase: the server
/// audio users, snake_case in the file (the original system's keys), are `serverAudioUsers`
/// here, each as `GET /admin/server-users` shows it.
#[utoipa::path(get, path = "/api/admin/config", tag = "system", security(("admin_token" = [])),
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
#[utoipa::path(get, path = "/api/admin/logs", tag = "system", security(("admin_token" = [])), params(LogQuery),
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
    /// The bridge's figures per server audio user, by name (the same as `bridge.branches`).
    pub audio_stats: BTreeMap<String, BranchStatus>,
    /// The live event stream's clients.
    pub events: EventStats,
    pub tls: TlsView,
    pub connections: ConnectionsView,
}

/// The public listener's connections.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionsView {
    /// Open now (page loads, event streams, `/janus` WebSockets).
    pub open: usize,
    /// The cap: past it, new connections are closed at once.
    pub max: usize,
}

/// The listener's TLS, as an admin configuring a control surface needs it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsView {
    /// Whether the listener speaks TLS.
    pub enabled: bool,
    /// The SHA-256 of its certificate (`AB:CD:…`), what a control surface pins; null without TLS.
    pub certificate_sha256: Option<String>,
}

/// Process and connection figures.
#[utoipa::path(get, path = "/api/admin/stats", tag = "system", security(("admin_token" = [])),
    responses((status = 200, body = Stats), (status = 401, body = ErrorBody)))]
pub async fn stats(State(state): State<AppState>) -> Json<Stats> {
    let bridge = state.bridge.view();
    Json(Stats {
        total_connections: state.users.total_connections(),
        active_connections: state.users.active_connections(),
        uptime: state.started.elapsed().as_secs(),
        memory: Memory::of_this_process(),
        audio_stats: bridge.branches.iter().map(|b| (b.name.clone(), b.clone())).collect(),
        bridge,
        janus: state.janus.status(),
        events: state.events.stats(),
        tls: TlsView { enabled: state.tls(), certificate_sha256: state.certificate_sha256.get() },
        connections: ConnectionsView { open: state.connections.open(), max: state.connections.max() },
    })
}

/// Whether partyline can carry audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    /// Everything configured carries audio.
    Ok,
    /// Audio flows, but some server audio users are not in their rooms, or a Janus node other
    /// than the first is down (its crew moved to the others).
    Degraded,
    /// No audio: Janus is down, or the sound card's bridge is gone while server audio users
    /// are configured (answered with 503 and the API's error body, never in a `Health`).
    Unavailable,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub status: HealthStatus,
    /// Seconds since control started.
    pub uptime: u64,
    /// RFC 3339, UTC.
    pub timestamp: String,
    /// Always `up` (it answers).
    #[schema(example = "up")]
    pub control: &'static str,
    /// Janus, as in `/admin/stats`.
    pub janus: JanusState,
    /// partyline-bridged, as in `/admin/stats`.
    pub bridge: BridgeViewState,
    /// Each Janus node of the pool and its state (one, `local`, without `janus.nodes`).
    pub nodes: Vec<NodeHealth>,
    /// What keeps the service `degraded`; empty when `ok`.
    pub problems: Vec<String>,
}

/// A Janus node as `/health` shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeHealth {
    pub name: String,
    pub state: JanusState,
}

/// Health of the service, for load balancers and monitoring: 200 with the states while
/// partyline carries audio (`ok`, or `degraded`), 503 with the API's error body naming what
/// stops it otherwise. Open, like the original system's; it shows states, never configuration
/// or secrets.
#[utoipa::path(get, path = "/api/health", tag = "system",
    responses((status = 200, body = Health),
        (status = 503, description = "partyline cannot carry audio: Janus is not up, or server audio users are configured and partyline-bridged is not running them", body = ErrorBody)))]
pub async fn health(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let (janus, bridge) = (state.janus.status(), state.bridge.view());
    let has_server_users = !state.config.current().server_audio_users.is_empty();
    let nodes: Vec<NodeHealth> =
        janus.nodes.into_iter().map(|node| NodeHealth { name: node.name, state: node.state }).collect();
    // The first node's state is Janus's; another's loss only moves its crew.
    let lost: Vec<&str> =
        nodes.iter().skip(1).filter(|n| n.state == JanusState::Down).map(|n| n.name.as_str()).collect();
    let (status, problems) = judge_health(janus.state, bridge.state, has_server_users, &lost);
    if status == HealthStatus::Unavailable {
        return Err(ApiError::Unavailable(format!("partyline cannot carry audio: {}", problems.join("; "))));
    }
    let timestamp = time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339);
    Ok(Json(Health {
        status,
        uptime: state.started.elapsed().as_secs(),
        timestamp: timestamp.unwrap_or_default(),
        control: "up",
        janus: janus.state,
        bridge: bridge.state,
        nodes,
        problems,
    }))
}

/// The verdict of `/health` from Janus's and bridged's states and the pool's `lost` nodes
/// (down, other than the first). bridged matters only while server audio users are
/// configured: without them the crew talks through Janus alone.
fn judge_health(
    janus: JanusState,
    bridge: BridgeViewState,
    has_server_users: bool,
    lost: &[&str],
) -> (HealthStatus, Vec<String>) {
    let mut problems = Vec::new();
    let mut status = HealthStatus::Ok;
    if janus != JanusState::Up {
        problems.push(format!("the media server (Janus) is {janus}: no group carries audio"));
        status = HealthStatus::Unavailable;
    }
    for node in lost {
        problems.push(format!("Janus node {node} is down: its crew were moved to the live nodes"));
        status = status.max(HealthStatus::Degraded);
    }
    if has_server_users {
        match bridge {
            BridgeViewState::Running | BridgeViewState::Idle => {}
            BridgeViewState::Degraded => {
                problems.push("some server audio users are not in their rooms (partyline-bridged is degraded)".into());
                status = status.max(HealthStatus::Degraded);
            }
            other => {
                problems.push(format!("partyline-bridged is {other}: the sound card is cut off from the groups"));
                status = HealthStatus::Unavailable;
            }
        }
    }
    (status, problems)
}

/// This document.
#[utoipa::path(get, path = "/api/openapi.json", tag = "system", responses((status = 200, body = Object)))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(super::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (Janus, bridged, server users configured, a node other than the first down) → verdict. Data-driven: add a row per case.
    const CASES: &[(JanusState, BridgeViewState, bool, bool, HealthStatus)] = &[
        (JanusState::Up, BridgeViewState::Running, true, false, HealthStatus::Ok),
        (JanusState::Up, BridgeViewState::Absent, false, false, HealthStatus::Ok),
        (JanusState::Up, BridgeViewState::Idle, true, false, HealthStatus::Ok),
        (JanusState::Up, BridgeViewState::Degraded, true, false, HealthStatus::Degraded),
        (JanusState::Up, BridgeViewState::Absent, true, false, HealthStatus::Unavailable),
        (JanusState::Up, BridgeViewState::Unreachable, true, false, HealthStatus::Unavailable),
        (JanusState::Up, BridgeViewState::Error, true, false, HealthStatus::Unavailable),
        (JanusState::Down, BridgeViewState::Running, true, false, HealthStatus::Unavailable),
        (JanusState::Down, BridgeViewState::Degraded, true, false, HealthStatus::Unavailable),
        (JanusState::Unconfigured, BridgeViewState::Absent, false, false, HealthStatus::Unavailable),
        (JanusState::Unknown, BridgeViewState::Running, false, false, HealthStatus::Unavailable),
        (JanusState::Up, BridgeViewState::Running, true, true, HealthStatus::Degraded),
        (JanusState::Up, BridgeViewState::Absent, true, true, HealthStatus::Unavailable),
        (JanusState::Down, BridgeViewState::Running, true, true, HealthStatus::Unavailable),
    ];

    #[test]
    fn health_verdicts() {
        for &(janus, bridge, server_users, node_lost, expected) in CASES {
            let lost: &[&str] = if node_lost { &["truck"] } else { &[] };
            let (status, problems) = judge_health(janus, bridge, server_users, lost);
            assert_eq!(status, expected, "{janus}/{bridge}/{server_users}: {problems:?}");
            assert_eq!(problems.is_empty(), expected == HealthStatus::Ok, "{janus}/{bridge}: {problems:?}");
        }
    }
}
