//! One simulated crew member: what the join page and the panel do, in the same order and
//! through the same routes. A token (`POST /api/token`), the session's event stream, then the
//! media of the engine the token names ([`janus`] or partyline's own [`rooms`]), state reports on
//! every change, talk keys, and at the end a leave (or nothing at all, for a panel that
//! vanishes).

mod janus;
mod rooms;

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use partyline_shared::config::{IceUrl, MediaEngine};
use tokio::task::JoinHandle;

use crate::control_api::{ApiError, ControlApi, Credentials, IceServer, Line, LineReport, Lines};
use crate::janus_ws::{JanusError, JanusSession};
use crate::media::line::LineSetup;
use crate::media::{Heard, LineMedia, Link, MediaError, Onsets, RelayError, RelayServer, Voice};

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
    #[error("the rooms' media: {0}")]
    Rooms(ApiError),
    #[error("line {room}: {error}")]
    Media { room: String, error: MediaError },
    #[error("line {room}: {error}")]
    Relay { room: String, error: RelayError },
    #[error("the token answer names no relay over TLS or TCP (`turns:`, `turn:…?transport=tcp`)")]
    NoRelay,
    #[error("line {room}: no media within {CONNECT_TIMEOUT:?}")]
    NoMedia { room: String },
}

/// Why a talk key or a leave did not reach the media server.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Janus(#[from] JanusError),
    #[error(transparent)]
    Rooms(#[from] ApiError),
}

/// Who a simulated panel is and what it asks for.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub lines: Lines,
    pub pin: Option<String>,
    /// The address its media sockets bind to (one the media server can reach).
    pub media_address: IpAddr,
    pub jitter_buffer: Duration,
    /// The simulated network between each of its lines and the server.
    pub link: Link,
    /// A join with other lines than the token's (`rooms_override`): what a hostile page would
    /// try; the proxy or the room must refuse it (Janus only: on partyline's own rooms the token
    /// alone names the lines).
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
    /// The slowest line's join through `/janus`, request to Janus's `joined` with its answer;
    /// on partyline's own rooms, the offer's `POST /api/session/media` to its answer.
    pub join: Duration,
    /// From the start to every line's media connected.
    pub connected: Duration,
}

/// One line of a joined panel.
#[derive(Debug)]
struct PanelLine {
    line: Line,
    index: usize,
    /// Its Janus handle (none on partyline's own rooms, where one peer carries every line).
    handle: Option<u64>,
    media: LineMedia,
    talking: bool,
}

impl PanelLine {
    /// What the line sends and hears.
    fn setup(line: &Line, room: &str, voice: Option<Arc<Voice>>, profile: &Profile, onsets: &Onsets) -> LineSetup {
        LineSetup {
            room: room.to_owned(),
            voice: voice.clone().filter(|_| line.talk),
            listen_tone: line.listen.then(|| voice.map_or(0.0, |v| v.frequency)),
            onsets: onsets.clone(),
            jitter_buffer: profile.jitter_buffer,
        }
    }
}

/// Where a panel's lines are mixed and how its keys get there.
#[derive(Debug)]
enum Engine {
    /// One Janus session over control's `/janus`, a handle per line: keys are `configure
    /// {muted}`; the handles Janus kicked or hung up are kept.
    Janus { session: JanusSession, ended: Arc<Mutex<HashSet<u64>>> },
    /// partyline's own rooms: one bundled peer connection, keys through control's API.
    Rooms,
}

/// A joined simulated panel.
#[derive(Debug)]
pub struct Person {
    pub name: String,
    pub credentials: Credentials,
    pub times: JoinTimes,
    api: ControlApi,
    engine: Engine,
    lines: Vec<PanelLine>,
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
        let events = {
            let (api, token) = (api.clone(), credentials.token.clone());
            tokio::spawn(async move {
                if let Err(error) = api.follow_session_events(&token).await {
                    tracing::debug!(%error, "a session event stream ended");
                }
            })
        };
        let mut tasks = Tasks(vec![events]);
        let joined = match credentials.engine {
            MediaEngine::Janus => janus::join(api, &credentials, profile, voices, onsets, &mut tasks).await?,
            MediaEngine::Bridged => rooms::join(api, &credentials, profile, voices, onsets).await?,
        };
        let Joined { engine, mut lines, join_time } = joined;
        for line in &mut lines {
            if !line.media.connected(CONNECT_TIMEOUT).await {
                return Err(JoinError::NoMedia { room: line.line.room_name.clone() });
            }
        }
        let times = JoinTimes { token: token_time, join: join_time, connected: started.elapsed() };
        let person = Person { name: profile.name.clone(), credentials, times, api: api.clone(), engine, lines, tasks };
        person.report_state().await;
        Ok(person)
    }

    pub fn identity(&self) -> &str {
        &self.credentials.participant_identity
    }

    /// Why its connection closed, if it did: Janus's WebSocket's close code and reason; on
    /// partyline's own rooms, the media's end.
    pub fn lost(&self) -> Option<String> {
        match &self.engine {
            Engine::Janus { session, .. } => session.closed(),
            Engine::Rooms => {
                let ended = self.lines.first().is_some_and(|line| !line.media.is_connected());
                ended.then(|| "the rooms' media ended".to_owned())
            }
        }
    }

    /// The rooms this panel may talk in.
    pub fn talk_rooms(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter(|l| l.line.talk && !self.is_ended(l.handle)).map(|l| l.line.room_name.as_str())
    }

    /// The rooms this panel talks in now.
    pub fn talking_rooms(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter(|l| l.talking).map(|l| l.line.room_name.as_str())
    }

    fn is_ended(&self, handle: Option<u64>) -> bool {
        match (&self.engine, handle) {
            (Engine::Janus { ended, .. }, Some(handle)) => {
                ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&handle)
            }
            _ => false,
        }
    }

    /// Sets the talk keys: on for `rooms`, off elsewhere. Keys go off first (after the
    /// current burst), then on (the key on before the next burst starts).
    pub async fn talk_only(&mut self, rooms: &HashSet<String>) -> Result<(), KeyError> {
        let mut changed = false;
        for on in [false, true] {
            let (engine, api, token) = (&self.engine, &self.api, &self.credentials.token);
            let changes = self
                .lines
                .iter_mut()
                .filter(|l| l.line.talk && rooms.contains(&l.line.room_name) == on && l.talking != on);
            let results = join_all(changes.map(|line| async move {
                line.talking = on;
                if !on {
                    line.media.talk(false).await;
                }
                match (engine, line.handle) {
                    (Engine::Janus { session, .. }, Some(handle)) => janus::key(session, handle, on).await?,
                    _ => api.talk(token, &line.line.group_id, on).await?,
                }
                if on {
                    line.media.talk(true).await;
                }
                Ok::<_, KeyError>(())
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

    /// Leaves as the panel does: Janus's `destroy` ends the session and every line; on
    /// partyline's own rooms, the peer connection closes (DTLS close_notify).
    pub async fn leave(self) -> Result<(), KeyError> {
        match &self.engine {
            Engine::Janus { session, .. } => session.destroy().await?,
            Engine::Rooms => {
                if let Some(line) = self.lines.first() {
                    line.media.close().await;
                }
            }
        }
        Ok(())
    }

    /// Drops off the network: nothing more is sent or read, and nothing is closed; the media
    /// stops. What is left is for control's and the media server's timeouts to clear.
    pub fn vanish(self) -> Vanished {
        drop(self.tasks);
        match self.engine {
            Engine::Janus { mut session, .. } => {
                session.abandon();
                Vanished { _janus: Some(session) }
            }
            Engine::Rooms => Vanished { _janus: None },
        }
    }
}

/// What a join through one engine made.
struct Joined {
    engine: Engine,
    lines: Vec<PanelLine>,
    join_time: Duration,
}

/// A panel that vanished: its Janus WebSocket held open, silent, until this is dropped.
#[derive(Debug)]
pub struct Vanished {
    _janus: Option<JanusSession>,
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

/// The relay the panel's peer connections allocate on and the TLS that checks it, when its
/// profile offers relayed candidates.
fn relay_of(
    profile: &Profile,
    credentials: &Credentials,
) -> Result<Option<(RelayServer, Arc<rustls::ClientConfig>)>, JoinError> {
    let Some(tls) = &profile.relay else { return Ok(None) };
    let server = relay_server(&credentials.ice_servers).ok_or(JoinError::NoRelay)?;
    Ok(Some((server, tls.clone())))
}

/// The relay a panel allocates on, from the token answer's ICE servers: the first `turns:` URL,
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
