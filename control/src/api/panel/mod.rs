//! Remote control of a panel (`/api/panel/{key}`): a control surface (Bitfocus Companion, a
//! script) holding a panel's key reads the panel, follows it, and works its keys. Open on the
//! LAN like the panel itself: what admits a surface is the key, a random secret of the session
//! that ends with it. A key never reaches a log line: the refused-request log and the JSON 404
//! of an unknown route show `/api/panel/{key}` in its place (`super::loggable_path`).
//!
//! A command goes to the panel's session stream; the browser applies it as if pressed on its
//! screen and reports back, and the answer is the line as the panel then reports it
//! (`crate::panels`).

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use utoipa::ToSchema;

use super::direct::{People, people_of};
use super::error::too_many_streams;
use super::sse::{self, EventSource, json_event};
use super::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::calls::Call;
use crate::panels::{Command, CommandError, Switch, TalkState};
use crate::users::{Line, User};

pub mod direct;
pub mod talk;

/// The default volume of a line whose panel has not reported yet (the panel's own default).
const DEFAULT_VOLUME: u8 = 80;
/// How often a surface's stream checks that its session still exists.
const SESSION_CHECK: Duration = Duration::from_secs(2);

/// One line of a panel, as a control surface sees it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteLine {
    #[schema(example = "stage-left")]
    pub group_id: String,
    /// The group's name.
    pub name: String,
    /// The line can be heard (the panel's listen switch works).
    pub can_listen: bool,
    /// The line has a talk key.
    pub can_talk: bool,
    /// Heard now.
    pub listen: bool,
    /// 0 to 100.
    pub volume: u8,
    /// The talk key: `off`, `momentary` (held on the panel), `latched`, or `remote` (held on by
    /// a surface: released after `crew.maxRemoteTalkSeconds` without a word from it).
    pub talk: TalkState,
    /// Someone else talks on the line.
    pub active: bool,
    /// Who talks on it.
    pub talkers: Vec<String>,
    /// Someone called the line in the last 5 s.
    pub call: bool,
    /// The admin muted this panel's user on this line: its talk is refused.
    pub muted_by_admin: bool,
    /// The admin muted the whole line: every talk on it is refused.
    pub line_muted: bool,
    /// A program line (the show's sound): listen only.
    pub program: bool,
    /// A program line the panel dims now, while someone talks to it.
    pub dimmed: bool,
    /// A direct line's other end (its name); null on a group's line.
    pub direct_with: Option<String>,
}

/// A panel, as a control surface sees it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemotePanel {
    pub username: String,
    /// The session's participant identity.
    pub identity: String,
    /// The panel is connected to control and can take commands.
    pub online: bool,
    /// How long a talk held on by a surface outlives the surface's last request.
    pub max_remote_talk_seconds: u32,
    /// The panel has an announce key (`POST /panel/{key}/announce`).
    pub announce: bool,
    /// Its announce is on: every talk line the admin does not hold talks.
    pub announcing: bool,
    /// Its lines, the direct lines last.
    pub lines: Vec<RemoteLine>,
    /// Its person keys, its direct lines and whom its reply reaches.
    pub people: People,
}

fn panel_view(state: &AppState, user: &User) -> RemotePanel {
    let config = state.config.current();
    let reported = state.panels.reported(&user.identity);
    let lines: Vec<RemoteLine> = user
        .lines
        .iter()
        .map(|line| {
            let report = reported.iter().find(|r| r.group_id == line.group_id);
            RemoteLine {
                group_id: line.group_id.clone(),
                name: match (&line.direct, config.group(&line.group_id)) {
                    (Some(peer), _) => peer.username.clone(),
                    (None, Some((_, group))) => group.name.clone(),
                    (None, None) => line.group_id.clone(),
                },
                can_listen: line.listen,
                can_talk: line.talk,
                listen: report.map_or(line.listen, |r| r.listen),
                volume: report.map_or(DEFAULT_VOLUME, |r| r.volume),
                talk: report.map_or(TalkState::Off, |r| r.talk),
                active: report.is_some_and(|r| r.active),
                talkers: report.map(|r| r.talkers.clone()).unwrap_or_default(),
                call: state.calls.is_calling(&line.group_id),
                muted_by_admin: line.muted_by_admin,
                line_muted: state.janus.line_muted(&line.group_id),
                program: config.is_program(&line.group_id),
                dimmed: report.is_some_and(|r| r.dimmed),
                direct_with: line.direct.as_ref().map(|p| p.username.clone()),
            }
        })
        .collect();
    let talking = |group: &str| lines.iter().any(|l| l.group_id == group && l.talk != TalkState::Off);
    let announced: Vec<bool> = talk::announce_lines(state, user).map(|l| talking(&l.group_id)).collect();
    RemotePanel {
        username: user.username.clone(),
        identity: user.identity.clone(),
        online: state.panels.online(&user.identity),
        max_remote_talk_seconds: config.crew.max_remote_talk_seconds.get(),
        announce: user.announce,
        announcing: !announced.is_empty() && announced.iter().all(|&on| on),
        lines,
        people: people_of(state, user),
    }
}

/// The panel of `key`; the surface counts as heard.
fn panel_of(state: &AppState, key: &str) -> Result<User, ApiError> {
    let user = state.users.by_panel_key(key).ok_or_else(unknown_key)?;
    state.panels.surface_heard(&user.identity);
    Ok(user)
}

fn unknown_key() -> ApiError {
    ApiError::NotFound("no panel has this key (unknown, or its session ended)".into())
}

fn line_of<'a>(user: &'a User, group: &str) -> Result<&'a Line, ApiError> {
    user.line(group).ok_or_else(|| ApiError::NotFound(format!("the panel has no line {group:?}")))
}

fn remote_line(state: &AppState, user: &User, group: &str) -> Result<Json<RemoteLine>, ApiError> {
    // The user as it is now: a command may have raced the end of the session.
    let now = state.users.get(&user.identity).ok_or_else(unknown_key)?;
    panel_view(state, &now).lines.into_iter().find(|l| l.group_id == group).map(Json).ok_or_else(unknown_key)
}

async fn apply(state: &AppState, user: &User, command: Command) -> Result<(), ApiError> {
    state.panels.command(&user.identity, command).await.map_err(|e| match e {
        CommandError::Offline => ApiError::Refused { code: "panel_offline", message: e.to_string() },
        CommandError::NoAnswer => ApiError::GatewayTimeout(e.to_string()),
    })
}

/// A key's state asked of the panel.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchRequest {
    /// `on`, `off` or `toggle`.
    pub state: Switch,
}

/// A line's volume asked of the panel.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VolumeRequest {
    /// 0 to 100.
    #[schema(maximum = 100)]
    pub value: u8,
}

/// The panel of a key: its lines and their states.
#[utoipa::path(get, path = "/api/panel/{key}", operation_id = "panel_get", tag = "panel",
    params(("key" = String, Path, description = "The panel key")),
    responses((status = 200, body = RemotePanel),
        (status = 404, description = "Unknown key, or its session ended", body = ErrorBody)))]
pub async fn panel(
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
) -> Result<Json<RemotePanel>, ApiError> {
    let user = panel_of(&state, &key)?;
    Ok(Json(panel_view(&state, &user)))
}

/// Switch a line's listen, as if pressed on the panel.
#[utoipa::path(post, path = "/api/panel/{key}/lines/{group}/listen", operation_id = "panel_listen", tag = "panel", request_body = SwitchRequest,
    params(("key" = String, Path, description = "The panel key"), ("group" = String, Path, description = "The line's group id")),
    responses((status = 200, description = "The line as the panel applied it", body = RemoteLine),
        (status = 400, body = ErrorBody), (status = 404, description = "Unknown key or line", body = ErrorBody),
        (status = 409, description = "`cannot_listen` (a talk-only line), `panel_offline`", body = ErrorBody),
        (status = 504, description = "The panel did not apply it in time (`panel_not_responding`)", body = ErrorBody)))]
pub async fn listen(
    State(state): State<AppState>,
    ApiPath((key, group)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<SwitchRequest>,
) -> Result<Json<RemoteLine>, ApiError> {
    let user = panel_of(&state, &key)?;
    if !line_of(&user, &group)?.listen {
        let message = format!("the line {group:?} is talk-only on this panel");
        return Err(ApiError::Refused { code: "cannot_listen", message });
    }
    apply(&state, &user, Command { listen: Some(body.state), ..Command::new(&group) }).await?;
    remote_line(&state, &user, &group)
}

/// Set a line's volume, as if moved on the panel.
#[utoipa::path(post, path = "/api/panel/{key}/lines/{group}/volume", operation_id = "panel_volume", tag = "panel", request_body = VolumeRequest,
    params(("key" = String, Path, description = "The panel key"), ("group" = String, Path, description = "The line's group id")),
    responses((status = 200, description = "The line as the panel applied it", body = RemoteLine),
        (status = 400, body = ErrorBody), (status = 404, description = "Unknown key or line", body = ErrorBody),
        (status = 409, description = "`panel_offline`", body = ErrorBody),
        (status = 504, description = "The panel did not apply it in time (`panel_not_responding`)", body = ErrorBody)))]
pub async fn volume(
    State(state): State<AppState>,
    ApiPath((key, group)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<VolumeRequest>,
) -> Result<Json<RemoteLine>, ApiError> {
    if body.value > 100 {
        return Err(ApiError::BadRequest(format!("value: {} is out of range: expected 0 to 100", body.value)));
    }
    let user = panel_of(&state, &key)?;
    line_of(&user, &group)?;
    apply(&state, &user, Command { volume: Some(body.value), ..Command::new(&group) }).await?;
    remote_line(&state, &user, &group)
}

/// Call a line from the panel: every panel on it (and the admin's user view) flashes it for 5 s.
#[utoipa::path(post, path = "/api/panel/{key}/lines/{group}/call", operation_id = "panel_call", tag = "panel",
    params(("key" = String, Path, description = "The panel key"), ("group" = String, Path, description = "The line's group id")),
    responses((status = 200, description = "The line, calling", body = RemoteLine),
        (status = 404, description = "Unknown key or line", body = ErrorBody)))]
pub async fn call(
    State(state): State<AppState>,
    ApiPath((key, group)): ApiPath<(String, String)>,
) -> Result<Json<RemoteLine>, ApiError> {
    let user = panel_of(&state, &key)?;
    line_of(&user, &group)?;
    super::session::send_call(&state, &user.username, &user.identity, group.clone());
    remote_line(&state, &user, &group)
}

/// The panel's changes (Server-Sent Events): `event: state` with the whole [`RemotePanel`]
/// at once and after every change (a key, listen, volume, who talks on its lines, the admin's
/// mutes, the panel going on- or offline), and `event: call` with a [`Call`] for calls on its
/// lines. Ends when the session does.
#[utoipa::path(get, path = "/api/panel/{key}/events", operation_id = "panel_events", tag = "panel",
    params(("key" = String, Path, description = "The panel key")),
    responses((status = 200, description = "`state` and `call` events", body = RemotePanel, content_type = "text/event-stream"),
        (status = 404, description = "Unknown key, or its session ended", body = ErrorBody),
        (status = 429, description = "The session holds its most streams already (8)", body = ErrorBody)))]
pub async fn events(
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let user = panel_of(&state, &key)?;
    let place = state.stream_places.take(&user.identity).ok_or_else(too_many_streams)?;
    let follow = Follow {
        changes: state.panels.subscribe_changes(),
        calls: state.calls.subscribe(),
        check: tokio::time::interval(SESSION_CHECK),
        first: true,
        people_changes: state.events.watch(),
        people: None,
        identity: user.identity,
        state,
        _place: place,
    };
    Ok(sse::from_source(follow))
}

/// A surface's stream: what it waits on.
struct Follow {
    changes: tokio::sync::broadcast::Receiver<String>,
    calls: tokio::sync::broadcast::Receiver<Call>,
    check: tokio::time::Interval,
    first: bool,
    /// What may change the panel's people (joins, leaves, talk, direct lines, the config)…
    people_changes: tokio::sync::broadcast::Receiver<crate::events::Published>,
    /// …and the people last sent.
    people: Option<People>,
    identity: String,
    state: AppState,
    /// Its place among the member's streams, given back when it ends.
    _place: crate::limits::StreamPlace,
}

impl EventSource for Follow {
    /// The next event; `None` once the session is gone.
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if std::mem::take(&mut self.first) {
                return self.state_event();
            }
            tokio::select! {
                change = self.changes.recv() => match change {
                    Ok(identity) if identity == self.identity => return self.state_event(),
                    Ok(_) => {}
                    // Fell behind: whatever was missed, the state now says it.
                    Err(RecvError::Lagged(_)) => return self.state_event(),
                    Err(RecvError::Closed) => return None,
                },
                call = self.calls.recv() => match call {
                    Ok(call) => {
                        let user = self.state.users.get(&self.identity)?;
                        if user.has_line(&call.group_id) {
                            return Some(json_event("call", &call));
                        }
                    }
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return None,
                },
                _ = self.check.tick() => {
                    self.state.users.get(&self.identity)?;
                }
                change = self.people_changes.recv() => match change {
                    Ok(event) if !event.changes_people() => {}
                    Ok(_) | Err(RecvError::Lagged(_)) => {
                        let user = self.state.users.get(&self.identity)?;
                        if self.people.as_ref() != Some(&people_of(&self.state, &user)) {
                            return self.state_event();
                        }
                    }
                    Err(RecvError::Closed) => return None,
                },
            }
        }
    }
}

impl Follow {
    fn state_event(&mut self) -> Option<Event> {
        let user = self.state.users.get(&self.identity)?;
        let panel = panel_view(&self.state, &user);
        self.people = Some(panel.people.clone());
        Some(json_event("state", &panel))
    }
}
