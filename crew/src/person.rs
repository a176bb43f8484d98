//! One simulated crew member: what the join page and the panel do, in the same order and
//! through the same routes. A token (`POST /api/token`), the session's event stream, one Janus
//! session over control's `/janus`, per line an AudioBridge handle joined with the token and a
//! WebRTC offer (all lines at once, as connection.js does), state reports on every change,
//! talk keys as `configure {muted}`, and at the end Janus's `destroy` (or nothing at all, for a
//! panel that vanishes).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use partyline_shared::config::IceUrl;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::control_api::{ApiError, ControlApi, Credentials, IceServer, Line, LineReport, Lines};
use crate::janus_ws::{HandleEvent, JanusError, JanusSession};
use crate::media::line::LineSetup;
use crate::media::{Heard, LineMedia, Link, MediaError, Offer, Onsets, Relay, RelayError, RelayServer, Voice};

/// How long a line's ICE and DTLS may take once joined.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("token: {0}")]
    Token(ApiError),
    #[error("{0}")]
    Connect(ApiError),
    #[error("line {room}: {error}")]
    Janus { room: String, error: JanusError },
    #[error("line {room}: {error}")]
    Media { room: String, error: MediaError },
    #[error("line {room}: {error}")]
    Relay { room: String, error: RelayError },
    #[error("the token answer names no relay over TLS or TCP (`turns:`, `turn:…?transport=tcp`)")]
    NoRelay,
    #[error("line {room}: no media within {CONNECT_TIMEOUT:?}")]
    NoMedia { room: String },
}

/// Who a simulated panel is and what it asks for.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub lines: Lines,
    pub pin: Option<String>,
    /// The address its media sockets bind to (one Janus can reach).
    pub media_address: IpAddr,
    pub jitter_buffer: Duration,
    /// The simulated network between each of its lines and the server.
    pub link: Link,
    /// A join with other lines than the token's (`rooms_override`): what a hostile page would
    /// try; the proxy or the room must refuse it.
    pub rooms_override: Option<Vec<String>>,
    /// A panel joining again after its connection was lost: its previous session's
    /// credentials, whose panel key it keeps.
    pub previous: Option<Credentials>,
    /// Each line also offers a relayed candidate, allocated on the token answer's relay (its
    /// certificate checked by this), as a browser whose ICE servers name one; None: host only.
    pub relay: Option<Arc<rustls::ClientConfig>>,
}

/// How long the steps of a join took.
#[derive(Debug, Clone, Copy, Default)]
pub struct JoinTimes {
    /// `POST /api/token`.
    pub token: Duration,
    /// The slowest line's join through `/janus`, request to Janus's `joined` with its answer.
    pub join: Duration,
    /// From the start to every line's media connected.
    pub connected: Duration,
}

/// One line of a joined panel.
#[derive(Debug)]
struct PanelLine {
    line: Line,
    index: usize,
    handle: u64,
    media: LineMedia,
    talking: bool,
}

/// A joined simulated panel.
#[derive(Debug)]
pub struct Person {
    pub name: String,
    pub credentials: Credentials,
    pub times: JoinTimes,
    api: ControlApi,
    janus: JanusSession,
    lines: Vec<PanelLine>,
    /// Handles Janus kicked or hung up.
    ended: Arc<Mutex<HashSet<u64>>>,
    tasks: Tasks,
}

impl Person {
    /// Joins as a panel does; `voices[i]` is what line `i` of the token's lines says.
    pub async fn join(
        api: &ControlApi,
        profile: &Profile,
        voices: &[Arc<Voice>],
        onsets: &Onsets,
    ) -> Result<Person, JoinError> {
        let started = Instant::now();
        let previous = profile.previous.as_ref();
        let credentials = api
            .token_again(&profile.name, &profile.lines, profile.pin.as_deref(), previous)
            .await
            .map_err(JoinError::Token)?;
        let token_time = started.elapsed();
        let relay = match &profile.relay {
            Some(tls) => Some((relay_server(&credentials.ice_servers).ok_or(JoinError::NoRelay)?, tls)),
            None => None,
        };
        let events = {
            let (api, token) = (api.clone(), credentials.token.clone());
            tokio::spawn(async move {
                if let Err(error) = api.follow_session_events(&token).await {
                    tracing::debug!(%error, "a session event stream ended");
                }
            })
        };
        let socket = api.connect_janus().await.map_err(JoinError::Connect)?;
        let (janus, handle_events) = JanusSession::create(socket, &credentials.token)
            .await
            .map_err(|error| JoinError::Janus { room: String::new(), error })?;
        let ended: Arc<Mutex<HashSet<u64>>> = Arc::default();
        let watcher =
            tokio::spawn(watch_handles(handle_events, ended.clone(), credentials.participant_identity.clone()));
        let joins = credentials.lines.iter().enumerate().map(|(index, line)| {
            let room = profile.rooms_override.as_ref().and_then(|rooms| rooms.get(index)).unwrap_or(&line.room_name);
            let voice = voices.get(index % voices.len().max(1)).cloned();
            let (janus, credentials, relay) = (&janus, &credentials, relay.clone());
            async move {
                let relay = match relay {
                    Some((server, tls)) => Some(
                        Relay::allocate(&server, tls.clone())
                            .await
                            .map_err(|error| JoinError::Relay { room: room.clone(), error })?,
                    ),
                    None => None,
                };
                join_line(janus, credentials, profile, line, index, room, voice, onsets, relay).await
            }
        });
        let results = join_all(joins).await;
        let join_time = results.iter().flatten().map(|(_, took)| *took).max().unwrap_or_default();
        let mut lines = Vec::new();
        for result in results {
            lines.push(result?.0);
        }
        for line in &mut lines {
            if !line.media.connected(CONNECT_TIMEOUT).await {
                return Err(JoinError::NoMedia { room: line.line.room_name.clone() });
            }
        }
        let times = JoinTimes { token: token_time, join: join_time, connected: started.elapsed() };
        let person = Person {
            name: profile.name.clone(),
            credentials,
            times,
            api: api.clone(),
            janus,
            lines,
            ended,
            tasks: Tasks(vec![events, watcher]),
        };
        person.report_state().await;
        Ok(person)
    }

    pub fn identity(&self) -> &str {
        &self.credentials.participant_identity
    }

    /// Why its Janus connection closed, if it did (close code and reason).
    pub fn lost(&self) -> Option<String> {
        self.janus.closed()
    }

    /// The rooms this panel may talk in.
    pub fn talk_rooms(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter(|l| l.line.talk && !self.is_ended(l.handle)).map(|l| l.line.room_name.as_str())
    }

    /// The rooms this panel talks in now.
    pub fn talking_rooms(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter(|l| l.talking).map(|l| l.line.room_name.as_str())
    }

    fn is_ended(&self, handle: u64) -> bool {
        self.ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&handle)
    }

    /// Sets the talk keys: on for `rooms`, off elsewhere. Keys go off first (after the
    /// current burst), then on (unmuted before the next burst starts).
    pub async fn talk_only(&mut self, rooms: &HashSet<String>) -> Result<(), JanusError> {
        let mut changed = false;
        for on in [false, true] {
            let janus = &self.janus;
            let changes = self
                .lines
                .iter_mut()
                .filter(|l| l.line.talk && rooms.contains(&l.line.room_name) == on && l.talking != on);
            let results = join_all(changes.map(|line| async move {
                line.talking = on;
                if !on {
                    line.media.talk(false).await;
                }
                janus.message(line.handle, json!({"request": "configure", "muted": !on}), None).await?;
                if on {
                    line.media.talk(true).await;
                }
                Ok::<_, JanusError>(())
            }))
            .await;
            changed |= !results.is_empty();
            results.into_iter().collect::<Result<Vec<()>, _>>()?;
        }
        if changed {
            self.report_state().await;
        }
        Ok(())
    }

    /// What each line heard since the last call: (line index, room, heard).
    pub async fn heard(&self) -> Vec<(usize, String, Heard)> {
        let heard = join_all(self.lines.iter().map(|l| l.media.heard())).await;
        self.lines
            .iter()
            .zip(heard)
            .filter(|(l, _)| l.line.listen)
            .map(|(l, h)| (l.index, l.line.room_name.clone(), h))
            .collect()
    }

    /// Reports the panel's lines to control, as the panel does after every change.
    async fn report_state(&self) {
        let lines: Vec<LineReport> = self
            .lines
            .iter()
            .map(|l| LineReport {
                group_id: l.line.group_id.clone(),
                listen: l.line.listen,
                volume: 100,
                talk: if l.talking { "latched" } else { "off" },
                active: false,
                talkers: Vec::new(),
            })
            .collect();
        if let Err(error) = self.api.report_state(&self.credentials.token, &lines).await {
            tracing::debug!(%error, "a state report was refused");
        }
    }

    /// Leaves as the panel does: Janus's `destroy` ends the session and every line.
    pub async fn leave(self) -> Result<(), JanusError> {
        self.janus.destroy().await
    }

    /// Drops off the network: nothing more is sent or read, and nothing is closed; the media
    /// stops. What is left is for control's and Janus's timeouts to clear.
    pub fn vanish(mut self) -> Vanished {
        self.janus.abandon();
        drop(self.tasks);
        Vanished { _janus: self.janus }
    }
}

/// A panel that vanished: its WebSocket held open, silent, until this is dropped.
#[derive(Debug)]
pub struct Vanished {
    _janus: JanusSession,
}

/// A panel's own tasks (its event stream, its handles' watcher), ended with it.
#[derive(Debug)]
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The relay a line allocates on, from the token answer's ICE servers: the first `turns:` URL,
/// else the first `turn:` one over TCP (the crew speaks TURN over a stream only).
fn relay_server(servers: &[IceServer]) -> Option<RelayServer> {
    let urls = servers.iter().flat_map(|server| server.urls.iter().map(move |url| (server, url)));
    let mut relays: Vec<RelayServer> = urls
        .filter_map(|(server, url)| {
            let endpoint = IceUrl::try_from(url.clone()).ok()?.relay_endpoint().filter(|e| e.tcp)?;
            Some(RelayServer { endpoint, username: server.username.clone()?, credential: server.credential.clone()? })
        })
        .collect();
    relays.sort_by_key(|relay| !relay.endpoint.tls);
    relays.into_iter().next()
}

/// Joins one line: a handle, the join with the offer, the end of candidates, the media.
#[allow(clippy::too_many_arguments)]
async fn join_line(
    janus: &JanusSession,
    credentials: &Credentials,
    profile: &Profile,
    line: &Line,
    index: usize,
    room: &str,
    voice: Option<Arc<Voice>>,
    onsets: &Onsets,
    relay: Option<Relay>,
) -> Result<(PanelLine, Duration), JoinError> {
    let janus_error = |error| JoinError::Janus { room: room.to_owned(), error };
    let media_error = |error| JoinError::Media { room: room.to_owned(), error };
    let identity = &credentials.participant_identity;
    let handle = janus.attach(identity).await.map_err(janus_error)?;
    let offer = Offer::new(profile.media_address, line.talk, line.listen, relay).await.map_err(media_error)?;
    let join = json!({"request": "join", "room": room, "id": identity, "display": profile.name, "muted": true,
                      "token": credentials.token});
    let jsep = json!({"type": "offer", "sdp": offer.sdp});
    let asked = Instant::now();
    let (answer, jsep) = janus.message(handle, join, Some(jsep)).await.map_err(janus_error)?;
    let took = asked.elapsed();
    let unexpected = || JanusError::Refused { code: 0, reason: format!("the join answered {answer}") };
    let sdp = jsep.as_ref().and_then(|j| j["sdp"].as_str()).filter(|_| answer["audiobridge"] == "joined");
    let sdp = sdp.ok_or_else(unexpected).map_err(janus_error)?;
    janus.trickle_completed(handle).await.map_err(janus_error)?;
    let setup = LineSetup {
        room: room.to_owned(),
        voice: voice.clone().filter(|_| line.talk),
        listen_tone: line.listen.then(|| voice.map_or(0.0, |v| v.frequency)),
        onsets: onsets.clone(),
        jitter_buffer: profile.jitter_buffer,
        link: profile.link,
    };
    let media = offer.start(sdp, setup).map_err(media_error)?;
    Ok((PanelLine { line: line.clone(), index, handle, media, talking: false }, took))
}

/// Marks the handles Janus kicks or hangs up.
async fn watch_handles(
    mut events: tokio::sync::mpsc::UnboundedReceiver<HandleEvent>,
    ended: Arc<Mutex<HashSet<u64>>>,
    identity: String,
) {
    while let Some(event) = events.recv().await {
        let message = &event.message;
        let data = &message["plugindata"]["data"];
        // AudioBridge tells everyone who was kicked: this line ended if it was us.
        let kicked = data["kicked"] == identity.as_str() || !data["kicked_all"].is_null();
        if message["janus"] == "hangup" || message["janus"] == "detached" || kicked {
            ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(event.handle);
        }
    }
}
