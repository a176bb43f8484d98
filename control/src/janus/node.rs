//! One Janus node of the pool: control's HTTP client for it, control's session on it, the rooms
//! control created there and the trunk legs that join them to the same rooms on other nodes.
//! The link ([`super::Janus`]) places each session on a node and keeps every group's room on
//! the pool's first node (beside bridged) and on each node where someone of the group is.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

use partyline_shared::config::JanusNode;
use partyline_shared::janus::client::{Client, Session};
use partyline_shared::janus::{JanusError, RoomSpec};
use partyline_shared::sync::lock;

use super::REQUEST_TIMEOUT;
use crate::events::JanusState;
use crate::secrets::{SecretValue, random_hex};

/// A trunk joined here: the mix of a room's replica on another node, received as a plain-RTP
/// participant (`trunk:NODE`, group `trunk`) on a session of its own.
#[derive(Debug, Clone)]
pub(super) struct Trunk {
    pub session: Session,
    /// Where this node receives the trunk's packets (its AudioBridge's `local_ip`).
    pub ip: String,
    pub port: u16,
}

/// A forwarder from here: a room's `local` mix sent to a trunk on another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Forward {
    pub stream_id: u64,
    pub ip: String,
    pub port: u16,
}

#[derive(Debug)]
pub(super) struct Node {
    pub name: String,
    /// Its entry of the config as last seen (kept once removed, to drain it).
    pub at: Mutex<JanusNode>,
    http: Client,
    /// control's own stored token, for its sessions; rooms admit it too (the trunks join with it).
    pub own_token: String,
    /// The session and its AudioBridge handle; `None` until (re)connected.
    session: tokio::sync::Mutex<Option<Session>>,
    /// Rooms as control created them here, to notice a changed spec.
    pub created: Mutex<HashMap<String, RoomSpec>>,
    /// Trunks joined here, by (room, node they come from).
    pub trunks: Mutex<HashMap<(String, String), Trunk>>,
    /// Forwarders from here, by (room, node they go to).
    pub forwards: Mutex<HashMap<(String, String), Forward>>,
    /// Janus's version, once connected.
    version: Mutex<Option<String>>,
    state: AtomicU8,
}

impl Node {
    pub fn new(at: &JanusNode) -> std::io::Result<Node> {
        Ok(Node {
            name: at.name.clone(),
            at: Mutex::new(at.clone()),
            http: Client::new(REQUEST_TIMEOUT).map_err(std::io::Error::other)?,
            own_token: random_hex(32)?,
            session: tokio::sync::Mutex::new(None),
            created: Mutex::new(HashMap::new()),
            trunks: Mutex::new(HashMap::new()),
            forwards: Mutex::new(HashMap::new()),
            version: Mutex::new(None),
            state: AtomicU8::new(JanusState::Unknown as u8),
        })
    }

    /// The connected session, (re)connecting when there is none (or when the config moved the
    /// node to another URL): control's own token is added, a session opened, and `tokens`
    /// (those of the users placed here) added again.
    pub async fn session(
        &self,
        admin_secret: &str,
        tokens: impl FnOnce() -> Vec<SecretValue>,
    ) -> Result<Session, JanusError> {
        let at = self.config();
        let mut session = self.session.lock().await;
        let (api, admin) = (&at.url, &at.admin_url);
        if let Some(at) = session.as_ref().filter(|at| at.url() == api.trim_end_matches('/')) {
            return Ok(at.clone());
        }
        self.http.add_token(admin, admin_secret, &self.own_token).await?;
        let opened = self.http.open(api, &self.own_token).await?;
        for token in tokens() {
            self.http.add_token(admin, admin_secret, token.expose()).await?;
        }
        let version = self.http.info(api).await.ok().and_then(|info| info.version_string);
        tracing::info!(node = self.name, url = api, version = version.as_deref().unwrap_or("?"), "connected to Janus");
        *lock(&self.version) = version;
        // Whatever control created before is gone if Janus restarted; `rooms::plan` recreates it.
        self.forget_rooms();
        *session = Some(opened.clone());
        Ok(opened)
    }

    /// Its entry of the config (as last seen, for a node removed since).
    pub fn config(&self) -> JanusNode {
        lock(&self.at).clone()
    }

    /// A session of its own on this node (a trunk's: a handle is in one room at a time).
    pub async fn open_session(&self) -> Result<Session, JanusError> {
        self.http.open(&self.config().url, &self.own_token).await
    }

    /// A session on this node under `token` (registered here).
    pub async fn open_session_with(&self, token: &str) -> Result<Session, JanusError> {
        self.http.open(&self.config().url, token).await
    }

    /// The session if one is up, without connecting.
    pub async fn session_if_up(&self) -> Option<Session> {
        self.session.lock().await.clone()
    }

    /// Forgets a session Janus no longer knows: the next request connects again.
    pub async fn lose_session(&self) {
        *self.session.lock().await = None;
        self.forget_rooms();
    }

    /// Forgets the rooms made here, with their legs (Janus lost them).
    fn forget_rooms(&self) {
        lock(&self.created).clear();
        lock(&self.trunks).clear();
        lock(&self.forwards).clear();
    }

    /// Forgets the legs of `room` here (made again or destroyed: its trunks and forwarders are
    /// gone with it); the trunks' own sessions end.
    pub fn forget_legs_of(&self, room: &str) {
        let ended: Vec<Trunk> = {
            let mut trunks = lock(&self.trunks);
            let keys: Vec<_> = trunks.keys().filter(|(r, _)| r == room).cloned().collect();
            keys.iter().filter_map(|k| trunks.remove(k)).collect()
        };
        lock(&self.forwards).retain(|(r, _), _| r != room);
        for trunk in ended {
            tokio::spawn(async move { trunk.session.destroy().await });
        }
    }

    /// Forgets every leg here, ending the trunks' sessions.
    pub fn forget_legs_of_all(&self) {
        let rooms: Vec<String> = lock(&self.trunks).keys().map(|(room, _)| room.clone()).collect();
        for room in rooms {
            self.forget_legs_of(&room);
        }
        lock(&self.forwards).clear();
    }

    pub fn version(&self) -> Option<String> {
        lock(&self.version).clone()
    }

    /// Up, down, or unknown (not asked yet): a node down takes no new session, and those
    /// placed on it move.
    pub fn state(&self) -> JanusState {
        match self.state.load(Ordering::Relaxed) {
            s if s == JanusState::Up as u8 => JanusState::Up,
            s if s == JanusState::Down as u8 => JanusState::Down,
            _ => JanusState::Unknown,
        }
    }

    /// Records what the last request found; true when that changed the state.
    pub fn set_state(&self, state: JanusState) -> bool {
        self.state.swap(state as u8, Ordering::Relaxed) != state as u8
    }

    /// Lets `token` open sessions here.
    pub async fn add_token(&self, admin_secret: &str, token: &str) -> Result<(), JanusError> {
        self.http.add_token(&self.config().admin_url, admin_secret, token).await
    }

    /// Revokes `token` here (one Janus does not know is not an error).
    pub async fn remove_token(&self, admin_secret: &str, token: &str) -> Result<(), JanusError> {
        self.http.remove_token(&self.config().admin_url, admin_secret, token).await
    }
}
