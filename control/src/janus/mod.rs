//! The link to Janus: rooms kept in step with the config's groups, tokens that admit users,
//! connection tracking from Janus's events and its participant lists, forced disconnects.
//!
//! The config is the source of truth. [`Janus::run`] reconciles at start, on every config
//! event, on Janus's `started` event, and every [`POLL`] (which also keeps the session alive
//! and catches missed events). Janus keeps rooms and tokens in memory only, so whenever the
//! session is lost (Janus restarted), control's own token and every registered user's token
//! are added again and the rooms recreated.
//!
//! By job: `reconcile` (the pass, rooms from groups with `rooms`), `admission` (tokens and the
//! rooms' admission lists), `moderation` (disconnects, mutes, kicks), `card` (the card's
//! participants), `intake` (Janus's events), `node` (one Janus: its session and the rooms
//! created there), `pool` (the nodes from the config, and where a session is placed), `legs`
//! (a group's rooms on several nodes joined by trunk legs), `direct` (direct lines' rooms,
//! opened and closed at runtime). A user's requests go to the node
//! it is placed on ([`Janus::node_for`]); the card's to the pool's first node.

mod admission;
mod card;
mod direct;
mod intake;
mod legs;
mod moderation;
mod node;
mod pool;
mod reconcile;
mod rooms;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use partyline_shared::backoff::Backoff;
use partyline_shared::janus::client::Session;
use partyline_shared::sync::lock;
use serde::Serialize;
use tokio::sync::Notify;

pub use admission::IssueError;
pub use card::card_identity;
pub use direct::OpenDirectError;
pub use moderation::{DisconnectError, Disconnected};
pub use partyline_shared::janus::JanusError;
pub use pool::NodeStatus;

use crate::config::ConfigManager;
use crate::events::{EventBus, JanusState};
use crate::secrets::JanusSecrets;
use crate::users::{User, Users};
use node::Node;

/// How often control reconciles with Janus while it is up (a session needs a request at
/// least every 60 s; missed leave events are noticed within this time).
pub const POLL: Duration = Duration::from_secs(2);
/// The pauses between passes while Janus is unreachable or refusing.
const RETRY: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(5));
/// The least time between two passes a burst of config writes triggers.
const MIN_PASS_INTERVAL: Duration = Duration::from_millis(100);
/// Longest wait for one answer of Janus (on loopback it answers in about a millisecond).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Janus as `/admin/stats` shows it.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JanusStatus {
    pub state: JanusState,
    pub reachable: bool,
    pub version: Option<String>,
    /// Rooms (groups) in Janus.
    pub rooms: usize,
    /// Participants in those rooms.
    pub participants: usize,
    pub last_error: Option<String>,
    /// The pool's nodes, the first beside bridged.
    pub nodes: Vec<NodeStatus>,
}

#[derive(Debug)]
pub struct Janus {
    /// The pool, in the config's order: the first holds every group's room and the card.
    nodes: Mutex<Vec<Arc<Node>>>,
    /// Nodes removed from the config, drained by the next pass.
    draining: Mutex<Vec<Arc<Node>>>,
    config: Arc<ConfigManager>,
    secrets: JanusSecrets,
    status: Mutex<JanusStatus>,
    users: Arc<Users>,
    /// Where changes of [`JanusState`] are published.
    events: EventBus,
    /// Held while server audio users' tokens are registered, so that whoever comes second
    /// (the reconcile pass or a plan push) waits until Janus has them.
    admitting: tokio::sync::Mutex<()>,
    /// Server audio users removed from the config, with when: kicked and revoked once
    /// [`LEAVE_GRACE`] has passed (bridged leaves by itself in the meantime).
    leaving: Mutex<Vec<(User, std::time::Instant)>>,
    /// Rooms (lines) the admin muted whole: muted again whenever control creates them.
    muted_rooms: Mutex<HashSet<String>>,
    /// The admin's mutes of a person on a line, as (name slug, group): a fresh token under the
    /// same name is muted there too. For the show: in memory, as bans are.
    muted_names: Mutex<HashSet<(String, String)>>,
    /// Users disconnected while Janus could not be told: kicked and revoked by the next pass.
    revoke_later: Mutex<Vec<User>>,
    wake: Notify,
}

impl Janus {
    /// The link to Janus, keeping Janus in step with the config and `users` (the registry the
    /// app state owns) in step with Janus.
    pub fn new(
        config: Arc<ConfigManager>,
        secrets: JanusSecrets,
        users: Arc<Users>,
        events: EventBus,
    ) -> std::io::Result<Arc<Janus>> {
        let state = if secrets.admin_secret.is_some() && secrets.room_admin_key.is_some() {
            JanusState::Unknown
        } else {
            JanusState::Unconfigured
        };
        Ok(Arc::new(Janus {
            nodes: Mutex::new(Vec::new()),
            draining: Mutex::new(Vec::new()),
            config,
            secrets,
            status: Mutex::new(JanusStatus { state, ..JanusStatus::default() }),
            users,
            events,
            admitting: tokio::sync::Mutex::new(()),
            leaving: Mutex::new(Vec::new()),
            muted_rooms: Mutex::new(HashSet::new()),
            muted_names: Mutex::new(HashSet::new()),
            revoke_later: Mutex::new(Vec::new()),
            wake: Notify::new(),
        }))
    }

    pub fn status(&self) -> JanusStatus {
        let version = self.pool().first().and_then(|home| home.version());
        JanusStatus { version, nodes: self.node_statuses(), ..lock(&self.status).clone() }
    }

    /// Asks the background task to reconcile now.
    pub fn reconcile_soon(&self) {
        self.wake.notify_one();
    }

    /// The session on `node`, connecting (and registering its users' tokens) when needed.
    async fn connect(&self, node: &Node) -> Result<Session, JanusError> {
        let tokens = || self.users.list().into_iter().filter(|u| self.placed_on(u, node)).map(|u| u.token).collect();
        node.session(&self.admin_secret_of(node)?, tokens).await
    }

    /// The session on the node `user` is placed on.
    async fn session_for(&self, user: &User) -> Result<Session, JanusError> {
        self.connect(&self.node_for(user)).await
    }

    /// The session on the node participant `identity` is placed on (the first node for one
    /// the registry does not know).
    async fn session_of_participant(&self, identity: &str) -> Result<Session, JanusError> {
        match self.users.get(identity) {
            Some(user) => self.session_for(&user).await,
            None => self.connect(&self.home()).await,
        }
    }

    fn room_admin_key(&self) -> Result<&str, JanusError> {
        self.secrets.room_admin_key.as_ref().map(|s| s.expose()).ok_or(JanusError::NotConfigured(
            "the AudioBridge admin key is not configured (PARTYLINE_JANUS_ROOM_ADMIN_KEY, janus-room-admin-key, janus.roomAdminKey)",
        ))
    }

    /// `node`'s Janus admin secret: its own (`janus.nodes[].adminSecret`) or the pool's.
    fn admin_secret_of(&self, node: &Node) -> Result<String, JanusError> {
        match &lock(&node.at).admin_secret {
            Some(own) => Ok(own.0.clone()),
            None => self.admin_secret().map(str::to_owned),
        }
    }

    /// `node`'s AudioBridge admin key: its own (`janus.nodes[].roomAdminKey`) or the pool's.
    fn room_admin_key_of(&self, node: &Node) -> Result<String, JanusError> {
        match &lock(&node.at).room_admin_key {
            Some(own) => Ok(own.0.clone()),
            None => self.room_admin_key().map(str::to_owned),
        }
    }

    /// The pool's Janus admin secret, which also derives the rooms' secrets on every node
    /// (control sets them when it creates a room).
    fn admin_secret(&self) -> Result<&str, JanusError> {
        self.secrets.admin_secret.as_ref().map(|s| s.expose()).ok_or(JanusError::NotConfigured(
            "the Janus admin secret is not configured (PARTYLINE_JANUS_ADMIN_SECRET, janus-admin-secret, janus.adminSecret)",
        ))
    }
}
