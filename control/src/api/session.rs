//! A panel's session, by its token: the call signal (`POST /api/call`), the panel's event
//! stream (`GET /api/session/events`: calls, the admin's hold on its lines, its remote control's
//! commands) and its state reports (`POST /api/session/state`); its link's figures are
//! `session_link`'s.

use std::collections::VecDeque;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use partyline_shared::config::is_direct_room;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use utoipa::ToSchema;

use super::direct::{People, people_of};
use super::error::too_many_streams;
use super::line_members::{Members, members_of};
use super::sse::{self, EventSource, json_event};
use super::{ApiError, ApiJson, ApiQuery, AppState, ErrorBody};
use crate::calls::Call;
use crate::events::{LiveEvent, Published};
use crate::panels::{AdminState, LineReport, Push};
use crate::users::{Ending, Line, Removal};

/// A call on one line of the caller's panel.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallRequest {
    /// The caller's token (from `POST /token`).
    pub token: String,
    /// The line called.
    #[schema(example = "stage-left")]
    pub group_id: String,
}

/// Call a line: every panel on it (and the admin's user view) flashes it for 5 s.
#[utoipa::path(post, path = "/api/call", tag = "users", request_body = CallRequest,
    responses((status = 204), (status = 400, body = ErrorBody),
        (status = 403, description = "The token does not hold this line (or no longer exists)", body = ErrorBody)))]
pub async fn call(State(state): State<AppState>, ApiJson(body): ApiJson<CallRequest>) -> Result<StatusCode, ApiError> {
    let user = state.users.by_token(&body.token).filter(|u| u.has_line(&body.group_id)).ok_or(ApiError::Forbidden)?;
    send_call(&state, &user.username, &user.identity, body.group_id);
    Ok(StatusCode::NO_CONTENT)
}

/// `from` (its name as the panels show it, `identity`) calls the line `group_id`: a crew member
/// from its panel or its panel's remote control, or the admin.
pub(super) fn send_call(state: &AppState, from: &str, identity: &str, group_id: String) {
    let at = time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    tracing::info!(identity, username = from, group = group_id, "call");
    state.events.publish(&LiveEvent::Call {
        group_id: group_id.clone(),
        from: from.to_owned(),
        identity: identity.to_owned(),
    });
    state.calls.send(Call { group_id, from: from.to_owned(), identity: identity.to_owned(), at });
}

/// Whose events `GET /session/events` streams.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    /// The session's token (`EventSource` cannot send headers).
    pub token: String,
}

/// The panel's events (Server-Sent Events): `event: call` with a [`Call`] for calls on the
/// session's lines; `event: admin` with an [`AdminState`] per line at once and whenever the
/// admin mutes or releases it; `event: command` with a [`Command`] of its remote control (or
/// of control: a talk forced off, a remote talk released), which the panel applies and then
/// reports with `POST /session/state`; `event: moved` with a [`Moved`] when the session's Janus
/// node was lost or removed (the panel joins again at once, resuming); `event: disconnected`
/// with a [`Disconnected`] when the admin disconnected the session; on partyline's rooms,
/// `event: members` with its lines' [`Members`] at once and whenever they change (who else is
/// on each line and who talks there); `event: people` with its
/// [`People`] at once and whenever they change (person keys and who is online for them, its
/// direct lines, whom its reply reaches). Ends when the session does. A session holds at most
/// 8 event streams (its own and its control surfaces') at once.
#[utoipa::path(get, path = "/api/session/events", tag = "users", params(SessionQuery),
    responses((status = 200, description = "The stream of `call`, `admin` and `command` events", body = Call, content_type = "text/event-stream"),
        (status = 403, description = "Unknown or ended session", body = ErrorBody),
        (status = 429, description = "The session holds its most streams already (8)", body = ErrorBody)))]
pub async fn session_events(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<SessionQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>>, ApiError> {
    let user = state.users.by_token(&query.token).ok_or(ApiError::Forbidden)?;
    let place = state.stream_places.take(&user.identity).ok_or_else(too_many_streams)?;
    state.panels.prune(|identity| state.users.get(identity).is_none());
    let backlog = user.lines.iter().map(|line| Push::Admin(admin_state(&state, line))).collect();
    let session = Session {
        removals: state.users.subscribe_removals(),
        calls: state.calls.subscribe(),
        pushes: state.panels.subscribe_pushes(),
        changes: state.events.watch(),
        people: None,
        members: None,
        on_rooms: user.on_rooms,
        backlog,
        identity: user.identity,
        token: query.token,
        state,
        opened: false,
        ended: false,
        _place: place,
    };
    Ok(sse::from_source(session))
}

/// The admin's hold on `line`, as its panel is told it.
pub(super) fn admin_state(state: &AppState, line: &Line) -> AdminState {
    AdminState {
        group_id: line.group_id.clone(),
        muted_by_admin: line.muted_by_admin,
        line_muted: state.janus.line_muted(&line.group_id),
    }
}

/// Why a panel's session ended under it: its Janus node went away. Its panel joins again at
/// once (`POST /token` with `resume`), and is placed on a live node with the same panel key.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Moved {
    /// The node lost or removed.
    #[schema(example = "truck")]
    pub from: Option<String>,
}

/// Why a panel's session ended under it: the admin disconnected it. Its panel says so and
/// does not join again by itself.
#[derive(Debug, Serialize, ToSchema)]
pub struct Disconnected {}

/// One panel's session stream: what it waits on.
struct Session {
    removals: broadcast::Receiver<Removal>,
    calls: broadcast::Receiver<Call>,
    pushes: broadcast::Receiver<(String, Push)>,
    /// What may change the panel's people: joins and leaves, talk, direct lines, the config.
    changes: broadcast::Receiver<Published>,
    /// The people last sent.
    people: Option<People>,
    /// The line members last sent (a session on partyline's rooms only).
    members: Option<Members>,
    /// Its media is on partyline's rooms (set before its panel opens this stream): only then do
    /// joins and talk changes cost it a `members` reckoning.
    on_rooms: bool,
    /// Sent first: the admin's state of every line.
    backlog: VecDeque<Push>,
    identity: String,
    token: String,
    state: AppState,
    /// Counted as open (for the remote control) from its first event on.
    opened: bool,
    /// The session was removed: nothing more to send.
    ended: bool,
    /// Its place among the member's streams, given back when it ends.
    _place: crate::limits::StreamPlace,
}

impl EventSource for Session {
    async fn next_event(&mut self) -> Option<Event> {
        let event = self.next().await;
        if event.is_none() {
            self.state.panels.prune(|identity| identity == self.identity);
        }
        event
    }
}

impl Session {
    /// The next event; `None` once the session is gone.
    async fn next(&mut self) -> Option<Event> {
        if !self.opened {
            self.opened = true;
            // The guard lives in the panels' count until the stream is dropped.
            self.state.panels.open_stream(&self.identity);
        }
        if self.ended {
            return None;
        }
        loop {
            if let Some(push) = self.backlog.pop_front() {
                return Some(push_event(&push));
            }
            if let Some(event) = self.people_if_changed() {
                return Some(event);
            }
            if let Some(event) = self.members_if_changed() {
                return Some(event);
            }
            tokio::select! {
                removal = self.removals.recv() => match removal {
                    Ok(removal) if removal.identity == self.identity => {
                        self.ended = true;
                        return match removal.ending {
                            Ending::Moved => Some(json_event("moved", &Moved { from: removal.node })),
                            // A panel on Janus also hears it from Janus and the proxy; one on
                            // partyline's rooms only here.
                            Ending::Disconnected => Some(json_event("disconnected", &Disconnected {})),
                            Ending::Ended => None,
                        };
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return None,
                },
                call = self.calls.recv() => match call {
                    Ok(call) => {
                        // The session's lines as they are now; a session that ended ends its stream.
                        let user = self.state.users.by_token(&self.token)?;
                        if user.has_line(&call.group_id) {
                            self.state.panels.changed(&self.identity);
                            return Some(json_event("call", &call));
                        }
                    }
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return None,
                },
                push = self.pushes.recv() => match push {
                    Ok((identity, push)) if identity == self.identity => {
                        self.state.users.by_token(&self.token)?;
                        // A command for a direct line just opened comes after the people that
                        // give the panel that line.
                        if let Some(people) = self.people_if_changed() {
                            self.backlog.push_back(push);
                            return Some(people);
                        }
                        return Some(push_event(&push));
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return None,
                },
                // Read again at the top of the loop; a lag may have skipped a change.
                change = self.changes.recv() => match change {
                    Ok(event) if !(event.changes_people() || self.on_rooms && event.changes_members()) => {}
                    Ok(_) | Err(RecvError::Lagged(_)) => {
                        if let Some(event) = self.people_if_changed().or_else(|| self.members_if_changed()) {
                            return Some(event);
                        }
                    }
                    Err(RecvError::Closed) => return None,
                },
            }
        }
    }

    /// `event: people` when the panel's people differ from those last sent. Nothing once the
    /// session is gone: its removal ends the stream, with `moved` when it was moved.
    fn people_if_changed(&mut self) -> Option<Event> {
        let user = self.state.users.by_token(&self.token)?;
        let people = people_of(&self.state, &user);
        if self.people.as_ref() == Some(&people) {
            return None;
        }
        let event = json_event("people", &people);
        self.people = Some(people);
        Some(event)
    }
}

impl Session {
    /// `event: members` when the lines' members differ from those last sent, for a session on
    /// partyline's rooms (a Janus panel has them from Janus).
    fn members_if_changed(&mut self) -> Option<Event> {
        let user = self.state.users.by_token(&self.token).filter(|u| u.on_rooms)?;
        let members = members_of(&self.state, &user);
        if self.members.as_ref() == Some(&members) {
            return None;
        }
        let event = json_event("members", &members);
        self.members = Some(members);
        Some(event)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.opened {
            self.state.panels.close_stream(&self.identity);
        }
    }
}

fn push_event(push: &Push) -> Event {
    match push {
        Push::Command(command) => json_event("command", command),
        Push::Admin(admin) => json_event("admin", admin),
    }
}

/// A panel's report of its state (after each change, and after applying a command).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StateReport {
    /// The session's token.
    pub token: String,
    /// The id of the command just applied, if any.
    #[serde(default)]
    pub ack: Option<u64>,
    /// Every line of the panel (lines the admin took away left out).
    pub lines: Vec<LineReport>,
}

/// The panel reports its state: what `GET /panel/{key}` shows a control surface.
#[utoipa::path(post, path = "/api/session/state", tag = "users", request_body = StateReport,
    responses((status = 204), (status = 400, body = ErrorBody),
        (status = 403, description = "Unknown or ended session", body = ErrorBody)))]
pub async fn session_state(
    State(state): State<AppState>,
    ApiJson(mut body): ApiJson<StateReport>,
) -> Result<StatusCode, ApiError> {
    let user = state.users.by_token(&body.token).ok_or(ApiError::Forbidden)?;
    // A direct line closed while the report was on its way: the panel drops it on its next event.
    body.lines.retain(|l| user.has_line(&l.group_id) || !is_direct_room(&l.group_id));
    if let Some(line) = body.lines.iter().find(|l| !user.has_line(&l.group_id)) {
        return Err(ApiError::BadRequest(format!("lines: the session has no line {:?}", line.group_id)));
    }
    if let Some(line) = body.lines.iter().find(|l| l.volume > 100) {
        return Err(ApiError::BadRequest(format!("lines: volume {} is out of range: expected 0 to 100", line.volume)));
    }
    state.panels.report(&user.identity, body.lines, body.ack);
    Ok(StatusCode::NO_CONTENT)
}
