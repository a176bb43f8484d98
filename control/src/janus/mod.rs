//! The link to Janus: rooms kept in step with the config's groups, tokens that admit users,
//! connection tracking from Janus's events and its participant lists, forced disconnects.
//!
//! The config is the source of truth. [`Janus::run`] reconciles at start, on every config
//! event, on Janus's `started` event, and every [`POLL`] (which also keeps the session alive
//! and catches missed events). Janus keeps rooms and tokens in memory only, so whenever the
//! session is lost (Janus restarted), control's own token and every registered user's token
//! are added again and the rooms recreated.

mod rooms;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use partyline_shared::Config;
use partyline_shared::backoff::Backoff;
use partyline_shared::janus::client::{Client, Session};
use partyline_shared::janus::{AllowedAction, AudioBridgeReply, AudioBridgeRequest, JanusEvent, RoomSpec, codes};
use partyline_shared::slugify;
use partyline_shared::sync::lock;
use serde::Serialize;
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio::sync::broadcast::error::TryRecvError;

pub use partyline_shared::janus::JanusError;

use crate::config::ConfigManager;
use crate::events::{EventBus, JanusState, LiveEvent};
use crate::secrets::{JanusSecrets, SecretValue, derive, random_hex};
use crate::users::{Line, UNUSED_TOKEN_LIFETIME, User, UserKind, Users};

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
}

/// The card's participant id in the room of group `group`.
pub fn card_identity(group: &str) -> String {
    format!("card:{group}")
}

/// The card's participant in one group's room: bridged joins with it, sending the group's
/// server audio users' inputs and receiving the remote crew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardParticipant {
    /// The group (its room).
    pub group: String,
    pub identity: String,
    pub token: String,
    /// The group's server audio users' names.
    pub display: String,
    pub bitrate_kbps: u32,
}

#[derive(Debug)]
pub struct Janus {
    http: Client,
    config: Arc<ConfigManager>,
    secrets: JanusSecrets,
    /// control's own stored token, for its session.
    own_token: String,
    /// The session and its AudioBridge handle; `None` until (re)connected.
    link: tokio::sync::Mutex<Option<Session>>,
    /// Rooms as control created them, to notice a changed spec.
    created: Mutex<HashMap<String, RoomSpec>>,
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
    /// Users disconnected while Janus could not be told: kicked and revoked by the next pass.
    revoke_later: Mutex<Vec<User>>,
    wake: Notify,
}

/// How long a removed server audio user keeps its token: bridged tears its branch down in
/// milliseconds and leaves the room with that token; revoked at once, its leave (and the
/// session's destroy) would be refused and the session would linger to Janus's 60 s timeout.
const LEAVE_GRACE: Duration = Duration::from_secs(2);

/// A user disconnected by the admin.
#[derive(Debug)]
pub struct Disconnected {
    pub user: User,
    /// Janus was told (kicked, token revoked); else it is told by the next pass that reaches it.
    pub revoked: bool,
}

/// Why a user could not be disconnected.
#[derive(Debug, thiserror::Error)]
pub enum DisconnectError {
    #[error("no user has identity {0:?}")]
    NotFound(String),
    #[error("{0:?} is a server audio user: it follows the config (change or delete it under /admin/server-users)")]
    ServerUser(String),
    #[error("user {identity:?} has no line {group:?}")]
    NoSuchLine { identity: String, group: String },
    #[error("no group has id {0:?}")]
    NoSuchGroup(String),
    #[error(transparent)]
    Janus(#[from] JanusError),
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
            http: Client::new(REQUEST_TIMEOUT).map_err(std::io::Error::other)?,
            config,
            secrets,
            own_token: random_hex(32)?,
            link: tokio::sync::Mutex::new(None),
            created: Mutex::new(HashMap::new()),
            status: Mutex::new(JanusStatus { state, ..JanusStatus::default() }),
            users,
            events,
            admitting: tokio::sync::Mutex::new(()),
            leaving: Mutex::new(Vec::new()),
            muted_rooms: Mutex::new(HashSet::new()),
            revoke_later: Mutex::new(Vec::new()),
            wake: Notify::new(),
        }))
    }

    pub fn status(&self) -> JanusStatus {
        lock(&self.status).clone()
    }

    /// The event handler's password, if one is configured.
    pub fn event_secret(&self) -> Option<&crate::secrets::SecretValue> {
        self.secrets.event_secret.as_ref()
    }

    /// Asks the background task to reconcile now.
    pub fn reconcile_soon(&self) {
        self.wake.notify_one();
    }

    /// Reconciles forever: on wake-ups, config events, and every [`POLL`].
    pub async fn run(self: Arc<Self>) {
        let mut events = self.config.subscribe();
        let mut retry = RETRY;
        loop {
            let result = self.sync().await;
            let passed = tokio::time::Instant::now();
            let wait = match result {
                Ok(()) => {
                    retry.reset();
                    POLL
                }
                Err(e) => {
                    self.mark_down(&e);
                    retry.next_pause()
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wake.notified() => {}
                event = events.recv() => {
                    if matches!(event, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        return;
                    }
                    // One pass covers every write so far, and a burst of writes gets at most one
                    // pass per MIN_PASS_INTERVAL: a pass may destroy and create rooms, and Janus
                    // keeps the memory of every room it creates (bench/stack load, a minute of
                    // bitrate changes: 30 → 275 MiB without the interval, 30 → 74 MiB with it).
                    // A change after a quiet moment goes through at once, and a new server audio
                    // user's token does not wait for a pass (`admit_server_users`).
                    tokio::time::sleep_until(passed + MIN_PASS_INTERVAL).await;
                    while !matches!(events.try_recv(), Err(TryRecvError::Empty | TryRecvError::Closed)) {}
                }
            }
        }
    }

    /// One reconciliation pass.
    async fn sync(&self) -> Result<(), JanusError> {
        let config = self.config.current();
        let at = self.link().await?;
        let result = self.reconcile(&config, &at).await;
        if let Err(e) = &result
            && e.loses_session()
        {
            *self.link.lock().await = None;
        }
        result
    }

    async fn reconcile(&self, config: &Config, at: &Session) -> Result<(), JanusError> {
        let desired = self.desired_rooms(config)?;
        self.revoke_the_disconnected(at).await;
        self.drop_users_of_gone_groups().await;
        self.expire_unused_tokens().await;
        let reply = at.audiobridge(AudioBridgeRequest::List).await?;
        let plan = {
            let mut created = lock(&self.created);
            rooms::plan(&desired, &reply.list, &mut created)
        };
        for room in &plan.destroy {
            self.destroy_room(at, room).await?;
        }
        for spec in plan.recreate.iter().chain(&plan.create) {
            self.create_room(at, spec, plan.recreate.contains(spec)).await?;
        }
        self.sync_server_users(at).await?;
        let participants = self.reconcile_participants(at, &desired).await?;
        let mut status = lock(&self.status);
        status.rooms = desired.len();
        status.participants = participants;
        if status.state != JanusState::Up {
            self.events.publish(&LiveEvent::JanusState { state: JanusState::Up, message: String::new() });
        }
        status.state = JanusState::Up;
        status.reachable = true;
        status.last_error = None;
        Ok(())
    }

    /// The connected session, (re)connecting when there is none (or when the config moved
    /// Janus to another URL): control's own token is added, a session opened, and every
    /// registered user's token added again.
    async fn link(&self) -> Result<Session, JanusError> {
        let mut link = self.link.lock().await;
        let config = self.config.current();
        if let Some(at) = link.as_ref().filter(|at| at.url() == config.janus.url.trim_end_matches('/')) {
            return Ok(at.clone());
        }
        let admin_secret = self.admin_secret()?;
        let (api, admin) = (&config.janus.url, &config.janus.admin_url);
        self.http.add_token(admin, admin_secret, &self.own_token).await?;
        let at = self.http.open(api, &self.own_token).await?;
        for token in self.users.tokens() {
            self.http.add_token(admin, admin_secret, token.expose()).await?;
        }
        let version = self.http.info(api).await.ok().and_then(|info| info.version_string);
        tracing::info!(url = api, version = version.as_deref().unwrap_or("?"), "connected to Janus");
        lock(&self.status).version = version;
        // Whatever control created before is gone if Janus restarted; `plan` recreates it.
        lock(&self.created).clear();
        *link = Some(at.clone());
        Ok(at)
    }

    fn mark_down(&self, error: &JanusError) {
        let mut status = lock(&self.status);
        let state =
            if matches!(error, JanusError::NotConfigured(_)) { JanusState::Unconfigured } else { JanusState::Down };
        let message = error.to_string();
        // Once per change, not once per retry.
        if status.state != state || status.last_error.as_deref() != Some(message.as_str()) {
            tracing::warn!(error = message, "Janus unavailable; retrying");
        }
        if status.state != state {
            self.events.publish(&LiveEvent::JanusState { state, message: message.clone() });
        }
        status.state = state;
        status.reachable = !matches!(error, JanusError::Unreachable { .. });
        status.last_error = Some(message);
    }

    fn admin_secret(&self) -> Result<&str, JanusError> {
        self.secrets.admin_secret.as_ref().map(|s| s.expose()).ok_or(JanusError::NotConfigured(
            "the Janus admin secret is not configured (PARTYLINE_JANUS_ADMIN_SECRET, janus-admin-secret, janus.adminSecret)",
        ))
    }

    fn desired_rooms(&self, config: &Config) -> Result<Vec<RoomSpec>, JanusError> {
        let admin_key = self.secrets.room_admin_key.as_ref().ok_or(JanusError::NotConfigured(
            "the AudioBridge admin key is not configured (PARTYLINE_JANUS_ROOM_ADMIN_KEY, janus-room-admin-key, janus.roomAdminKey)",
        ))?;
        Ok(rooms::desired(config, admin_key.expose(), self.admin_secret()?))
    }

    async fn create_room(&self, at: &Session, spec: &RoomSpec, replace: bool) -> Result<(), JanusError> {
        if replace {
            self.destroy_room(at, &spec.room).await?;
        }
        let allowed = self.users.tokens_of_room(&spec.room);
        let create = AudioBridgeRequest::Create { spec: spec.clone(), allowed: allowed.clone() };
        match at.audiobridge(create).await {
            Ok(_) => tracing::info!(
                room = spec.room,
                bitrate = spec.default_bitrate,
                prebuffering = spec.default_prebuffering,
                admitted = allowed.len(),
                "room created"
            ),
            Err(e) if e.plugin_code() == Some(codes::ROOM_EXISTS) => {}
            Err(e) => return Err(e),
        }
        // A token issued while the room did not exist yet found no room to be added to; any
        // issued from now on finds it. Those in between are read again here.
        let late: Vec<String> =
            self.users.tokens_of_room(&spec.room).into_iter().filter(|t| !allowed.contains(t)).collect();
        self.allow(at, &spec.room, AllowedAction::Add, late).await?;
        if self.line_muted(&spec.room) {
            let secret = rooms::room_secret(self.admin_secret()?, &spec.room);
            at.audiobridge(AudioBridgeRequest::MuteRoom { room: spec.room.clone(), secret }).await?;
        }
        lock(&self.created).insert(spec.room.clone(), spec.clone());
        Ok(())
    }

    /// Adds tokens to (or removes them from) `room`'s admission list. A room that does not
    /// exist yet is not an error: it is created with the registry's tokens.
    async fn allow(
        &self,
        at: &Session,
        room: &str,
        action: AllowedAction,
        tokens: Vec<String>,
    ) -> Result<(), JanusError> {
        if tokens.is_empty() {
            return Ok(());
        }
        let secret = rooms::room_secret(self.admin_secret()?, room);
        let body = AudioBridgeRequest::Allowed { room: room.to_owned(), secret, action, allowed: tokens };
        match at.audiobridge(body).await {
            Err(e) if e.plugin_code() != Some(codes::NO_SUCH_ROOM) => Err(e),
            _ => Ok(()),
        }
    }

    async fn destroy_room(&self, at: &Session, room: &str) -> Result<(), JanusError> {
        let secret = rooms::room_secret(self.admin_secret()?, room);
        let body = AudioBridgeRequest::Destroy { room: room.to_owned(), secret, permanent: false };
        match at.audiobridge(body).await {
            Ok(_) => tracing::info!(room, "room destroyed"),
            Err(e) if e.plugin_code() == Some(codes::NO_SUCH_ROOM) => {}
            Err(e) => return Err(e),
        }
        lock(&self.created).remove(room);
        Ok(())
    }

    /// Marks who is in each room from `listparticipants` (catching missed events) and
    /// returns how many participants there are in all.
    async fn reconcile_participants(&self, at: &Session, rooms: &[RoomSpec]) -> Result<usize, JanusError> {
        let mut total = 0;
        for spec in rooms {
            let asked = OffsetDateTime::now_utc();
            let body = AudioBridgeRequest::ListParticipants { room: spec.room.clone() };
            let reply: AudioBridgeReply = match at.audiobridge(body).await {
                Err(e) if e.plugin_code() == Some(codes::NO_SUCH_ROOM) => continue,
                other => other?,
            };
            let present: Vec<String> = reply.participants.into_iter().map(|p| p.id).collect();
            total += present.len();
            for id in &present {
                if !self.users.joined(&spec.room, id) {
                    self.kick_stranger(&spec.room, id).await;
                }
            }
            for id in self.users.missing_from(&spec.room, &present, asked) {
                if let Some(user) = self.users.left(&spec.room, &id, "no longer in the room") {
                    self.revoke(&user).await;
                }
            }
        }
        Ok(total)
    }

    /// Acts on one event of Janus's event handler.
    pub async fn on_event(&self, event: JanusEvent) {
        match event {
            JanusEvent::Joined { room, id, .. } => {
                if !self.users.joined(&room, &id) {
                    self.kick_stranger(&room, &id).await;
                } else if self.users.muted_by_admin(&id, &room) {
                    self.enforce_mute(&room, &id).await;
                }
            }
            JanusEvent::Configured { room, id, muted: false } if self.users.muted_by_admin(&id, &room) => {
                // Janus lets a participant unmute itself after the admin's `mute` (measured on
                // 1.1.2): the panel refuses to, so this is a client going around it.
                tracing::warn!(room, identity = id, "a participant muted by the admin unmuted itself: muted again");
                self.enforce_mute(&room, &id).await;
            }
            JanusEvent::Configured { room, id, muted: false } if self.users.listens_only(&id, &room) => {
                // The `/janus` proxy refuses this; whatever reaches Janus otherwise is undone.
                tracing::warn!(room, identity = id, "a participant unmuted itself on a listen-only line: muted again");
                self.enforce_mute(&room, &id).await;
            }
            JanusEvent::Left { room, id } => {
                if let Some(user) = self.users.left(&room, &id, "left the room") {
                    self.revoke(&user).await;
                }
            }
            // The card's talking comes from bridged ([`Janus::card_talking`]): Janus detects
            // none for a plain-RTP participant, and one source for it whatever the transport.
            JanusEvent::Talking { room, id, .. } if id == card_identity(&room) => {}
            JanusEvent::Talking { room, id, talking } => self.users.talking(&room, &id, talking),
            JanusEvent::Started => {
                // Janus retries this post until someone listens, so it may predate our own
                // session: reconcile now, and let a session Janus no longer knows (458/403)
                // tell whether rooms and tokens must be restored.
                tracing::info!("Janus reports it started: reconciling");
                self.reconcile_soon();
            }
            JanusEvent::Shutdown => tracing::warn!("Janus is shutting down"),
            JanusEvent::Attached { .. } | JanusEvent::Configured { .. } | JanusEvent::Other => {}
        }
    }

    /// Issues one token for `username` on `lines` and registers the user as pending; each
    /// line's room admits the token. Nothing stays registered unless Janus took it all. A panel
    /// rejoining gives its previous token and panel key (`resume`): it keeps the key, and the
    /// admin's mutes of its lines, when [`Users::resume`] allows.
    pub async fn issue_token(
        &self,
        username: &str,
        mut lines: Vec<Line>,
        resume: Option<(&str, &str)>,
        address: std::net::IpAddr,
    ) -> Result<User, JanusError> {
        let config = self.config.current();
        let token = random_hex(32).map_err(|e| JanusError::Protocol(e.to_string()))?;
        let base = match slugify(username) {
            slug if slug.is_empty() => "user".to_owned(),
            slug => slug.chars().take(32).collect(),
        };
        let identity = format!("{base}-{}", random_hex(3).map_err(|e| JanusError::Protocol(e.to_string()))?);
        let resumed = resume.and_then(|(token, key)| self.users.resume(token, key));
        let panel_key = match &resumed {
            Some(resumed) => resumed.panel_key.clone(),
            None => SecretValue::new(random_hex(16).map_err(|e| JanusError::Protocol(e.to_string()))?),
        };
        for line in &mut lines {
            // Muted again as it joins (`on_event`).
            line.muted_by_admin = resumed.as_ref().is_some_and(|r| r.muted.contains(&line.group_id));
        }
        let at = self.link().await?;
        self.http.add_token(&config.janus.admin_url, self.admin_secret()?, &token).await?;
        // Registered before its rooms admit it, so that a room created meanwhile lists it.
        let user = self.users.register(identity, username.to_owned(), lines, token, panel_key, Some(address));
        if resumed.is_some() {
            tracing::info!(identity = user.identity, username, "panel key kept by the rejoined panel");
        }
        for line in &user.lines {
            let token = vec![user.token.expose().to_owned()];
            if let Err(e) = self.allow(&at, &line.group_id, AllowedAction::Add, token).await {
                self.users.remove(&user.identity);
                self.revoke(&user).await;
                return Err(e);
            }
        }
        Ok(user)
    }

    /// Disconnects a user for good: removed from the registry (its `/janus` connections close),
    /// kicked from every room it is in and its token revoked, so the same token cannot rejoin.
    /// When Janus cannot be told, the user is removed all the same (the admin can always clear
    /// a stale entry) and the next pass that reaches Janus kicks and revokes it.
    pub async fn disconnect(&self, identity: &str, why: &str, by: &str) -> Result<Disconnected, DisconnectError> {
        let user = self.users.get(identity).ok_or_else(|| DisconnectError::NotFound(identity.to_owned()))?;
        if user.kind == UserKind::Server {
            return Err(DisconnectError::ServerUser(identity.to_owned()));
        }
        let told = self.kick_and_revoke(&user).await;
        self.users.remove(identity);
        self.users.forget_resume(&user.token);
        let groups: Vec<&str> = user.lines.iter().map(|l| l.group_id.as_str()).collect();
        tracing::warn!(identity, username = user.username, group = groups.join(","), by, why, "user disconnected");
        let revoked = match told {
            Ok(()) => {
                self.unlist(&user).await;
                true
            }
            Err(e) => {
                tracing::warn!(identity, error = %e, "Janus cannot be told now: the user is kicked and its token revoked once it can");
                lock(&self.revoke_later).push(user.clone());
                false
            }
        };
        Ok(Disconnected { user, revoked })
    }

    /// Kicks `user` from the rooms it joined and revokes its token.
    async fn kick_and_revoke(&self, user: &User) -> Result<(), JanusError> {
        let at = self.link().await?;
        for line in user.lines.iter().filter(|l| l.joined_at.is_some()) {
            self.kick(&at, &line.group_id, &user.identity).await?;
        }
        let config = self.config.current();
        self.http.remove_token(&config.janus.admin_url, self.admin_secret()?, user.token.expose()).await
    }

    /// Kicks and revokes the users disconnected while Janus could not be told (a token Janus
    /// lost in a restart is refused anyway; its revocation's failure is logged and dropped).
    async fn revoke_the_disconnected(&self, at: &Session) {
        let due = std::mem::take(&mut *lock(&self.revoke_later));
        for user in due {
            for line in user.lines.iter().filter(|l| l.joined_at.is_some()) {
                if let Err(e) = self.kick(at, &line.group_id, &user.identity).await {
                    tracing::warn!(identity = user.identity, error = %e, "cannot kick a user disconnected meanwhile");
                }
            }
            self.revoke(&user).await;
            tracing::info!(
                identity = user.identity,
                "a user disconnected while Janus was unreachable: kicked, token revoked"
            );
        }
    }

    /// Takes one line away from a crew member: kicked from that room, which no longer admits its
    /// token; its other lines go on. Taking its last line disconnects it.
    pub async fn remove_line(&self, identity: &str, group: &str, by: &str) -> Result<User, DisconnectError> {
        let user = self.users.get(identity).ok_or_else(|| DisconnectError::NotFound(identity.to_owned()))?;
        if user.kind == UserKind::Server {
            return Err(DisconnectError::ServerUser(identity.to_owned()));
        }
        if !user.has_line(group) {
            return Err(DisconnectError::NoSuchLine { identity: identity.to_owned(), group: group.to_owned() });
        }
        if user.lines.len() == 1 {
            let why = format!("line {group} removed by the admin");
            return self.disconnect(identity, &why, by).await.map(|gone| gone.user);
        }
        let at = self.link().await?;
        let token = vec![user.token.expose().to_owned()];
        self.allow(&at, group, AllowedAction::Remove, token).await?;
        self.kick(&at, group, identity).await?;
        let Some((_, now, _)) = self.users.remove_line(identity, group) else {
            return Err(DisconnectError::NotFound(identity.to_owned()));
        };
        tracing::warn!(identity, username = user.username, group, by, "line removed from a user");
        Ok(now)
    }

    /// Mutes (or releases) `identity` on its line `group` (AudioBridge `mute` with the room
    /// secret). A muted user stays muted until released: its own unmute is refused by its panel
    /// and undone by control ([`Self::on_event`]). Releasing a crew member leaves it muted in
    /// the room, as its panel is with no talk key on; a server audio user, which never mutes
    /// itself, is unmuted.
    pub async fn mute_user(&self, identity: &str, group: &str, muted: bool, by: &str) -> Result<User, DisconnectError> {
        let user = self.users.get(identity).ok_or_else(|| DisconnectError::NotFound(identity.to_owned()))?;
        let line = user
            .line(group)
            .ok_or_else(|| DisconnectError::NoSuchLine { identity: identity.to_owned(), group: group.to_owned() })?;
        if line.joined_at.is_some() && (muted || user.kind == UserKind::Server) {
            let at = self.link().await?;
            self.set_participant_muted(&at, group, identity, muted).await?;
        }
        let now = self
            .users
            .set_muted_by_admin(identity, group, muted)
            .ok_or_else(|| DisconnectError::NoSuchLine { identity: identity.to_owned(), group: group.to_owned() })?;
        let what = if muted { "user muted on a line" } else { "user unmuted on a line" };
        tracing::warn!(identity, username = user.username, group, by, "{what}");
        Ok(now)
    }

    /// Mutes `identity` in `room` (a participant gone meanwhile is not an error): what a forced
    /// talk-off does at the room, whatever the panel does.
    pub async fn mute_participant(&self, room: &str, identity: &str) -> Result<(), JanusError> {
        let at = self.link().await?;
        self.set_participant_muted(&at, room, identity, true).await
    }

    async fn set_participant_muted(&self, at: &Session, room: &str, id: &str, muted: bool) -> Result<(), JanusError> {
        let (room, id, secret) = (room.to_owned(), id.to_owned(), rooms::room_secret(self.admin_secret()?, room));
        let request = if muted {
            AudioBridgeRequest::Mute { room, secret, id }
        } else {
            AudioBridgeRequest::Unmute { room, secret, id }
        };
        match at.audiobridge(request).await {
            Err(e) if !matches!(e.plugin_code(), Some(codes::NO_SUCH_USER | codes::NO_SUCH_ROOM)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Mutes a participant the admin muted, after a join or its own unmute.
    async fn enforce_mute(&self, room: &str, id: &str) {
        if let Err(e) = self.mute_participant(room, id).await {
            tracing::warn!(room, identity = id, error = %e, "cannot mute a participant muted by the admin");
        }
    }

    /// Mutes (or releases) a whole line: AudioBridge `mute_room`; nobody's audio reaches the
    /// mix, server audio users' included, until released. Kept over room recreations (not over
    /// a restart of control).
    pub async fn mute_line(&self, group: &str, muted: bool, by: &str) -> Result<(), DisconnectError> {
        if self.config.current().group(group).is_none() {
            return Err(DisconnectError::NoSuchGroup(group.to_owned()));
        }
        let at = self.link().await?;
        let (room, secret) = (group.to_owned(), rooms::room_secret(self.admin_secret()?, group));
        let request = if muted {
            AudioBridgeRequest::MuteRoom { room, secret }
        } else {
            AudioBridgeRequest::UnmuteRoom { room, secret }
        };
        match at.audiobridge(request).await {
            Err(e) if e.plugin_code() != Some(codes::NO_SUCH_ROOM) => return Err(e.into()),
            _ => {}
        }
        let mut rooms = lock(&self.muted_rooms);
        if muted {
            rooms.insert(group.to_owned());
        } else {
            rooms.remove(group);
        }
        drop(rooms);
        tracing::warn!(group, by, "{}", if muted { "line muted" } else { "line unmuted" });
        Ok(())
    }

    /// Whether the admin muted the whole line `group`.
    pub fn line_muted(&self, group: &str) -> bool {
        lock(&self.muted_rooms).contains(group)
    }

    /// Kicks the card's participant out of every room that has one. For a partyline-bridged
    /// that just (re)appeared on the bus: a new process holds no participant, so any of these is
    /// a leftover of a predecessor that died without leaving, which Janus keeps until its session
    /// times out (60 s) and which makes the new process's joins fail ("User ID already exists").
    pub async fn kick_card_participants(&self) -> Result<(), JanusError> {
        let config = self.config.current();
        let at = self.link().await?;
        // One failure must not spare the others: each leftover blocks its own room.
        for participant in self.card_participants(&config)? {
            let identity = &participant.identity;
            match self.kick(&at, &participant.group, identity).await {
                Ok(true) => tracing::info!(identity, "kicked the participant a previous partyline-bridged left behind"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(identity, error = %e, "could not kick a previous partyline-bridged's participant");
                }
            }
        }
        Ok(())
    }

    /// Kicks a participant of `room` whose identity is no user registered in it: a token's
    /// holder joining under an identity other than the one issued with it. The room admits only
    /// tokens issued for it, so this is someone with a valid token trying to pass for another.
    async fn kick_stranger(&self, room: &str, id: &str) {
        if id == card_identity(room) {
            let leaving = lock(&self.leaving).iter().any(|(u, _)| u.identity == id);
            if leaving || self.users.get(id).is_some_and(|u| u.kind == UserKind::Server) {
                // The card's participant of a group that lost its server audio users: bridged
                // leaves by itself. Only in its own room: `card:B` anywhere else is a stranger.
                return;
            }
        }
        tracing::warn!(room, identity = id, "a participant joined under an identity not issued for this room: kicked");
        let kicked = match self.link().await {
            Ok(at) => self.kick(&at, room, id).await,
            Err(e) => Err(e),
        };
        if let Err(e) = kicked {
            tracing::warn!(room, identity = id, error = %e, "cannot kick a participant under a foreign identity");
        }
    }

    /// Kicks `identity` out of `room` with the room's secret; whether it was there. A
    /// participant or room already gone is not an error.
    async fn kick(&self, at: &Session, room: &str, identity: &str) -> Result<bool, JanusError> {
        let secret = rooms::room_secret(self.admin_secret()?, room);
        let kick = AudioBridgeRequest::Kick { room: room.to_owned(), secret, id: identity.to_owned() };
        match at.audiobridge(kick).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.plugin_code(), Some(codes::NO_SUCH_USER | codes::NO_SUCH_ROOM)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The card's participants of `config`: one per group that has server audio users, in
    /// the config's order of groups. The identity and token follow from the group's id alone, so
    /// users coming and going never change what the participant joined with.
    pub fn card_participants(&self, config: &Config) -> Result<Vec<CardParticipant>, JanusError> {
        let secret = self.admin_secret()?;
        let participants = config
            .groups
            .iter()
            .filter_map(|group| {
                let id = group.id();
                let names: Vec<&str> =
                    config.server_audio_users.iter().filter(|u| u.group == id).map(|u| u.name.as_str()).collect();
                if names.is_empty() {
                    return None;
                }
                Some(CardParticipant {
                    identity: card_identity(&id),
                    token: derive(secret, &format!("partyline card participant token:{id}")),
                    display: names.join(", "),
                    bitrate_kbps: config.group_bitrate(group).get(),
                    group: id,
                })
            })
            .collect();
        Ok(participants)
    }

    /// bridged says the card started or stopped talking in `room` (its `Talking` signal).
    pub fn card_talking(&self, room: &str, talking: bool) {
        self.users.talking(room, &card_identity(room), talking);
    }

    /// Registers the card's participants of `config` and their Janus tokens (those not
    /// registered yet); returns their identities. The BridgeManager calls it before it hands
    /// bridged a plan, so that a new participant's first request to Janus is never refused for an
    /// unknown token.
    pub async fn admit_server_users(&self, config: &Config) -> Result<Vec<String>, JanusError> {
        let _admitting = self.admitting.lock().await;
        self.admit_server_users_locked(config).await
    }

    /// [`Self::admit_server_users`], for a caller that holds `admitting`.
    async fn admit_server_users_locked(&self, config: &Config) -> Result<Vec<String>, JanusError> {
        let mut identities = Vec::new();
        for participant in self.card_participants(config)? {
            let CardParticipant { identity, token, display, group, .. } = participant;
            // The identity is the group's: a registered participant is in its room's list.
            if self.users.upsert_server(&identity, &display, &group, &token) {
                self.http.add_token(&config.janus.admin_url, self.admin_secret()?, &token).await?;
                let at = self.link().await?;
                self.allow(&at, &group, AllowedAction::Add, vec![token]).await?;
            }
            identities.push(identity);
        }
        Ok(identities)
    }

    /// Keeps the registry's server audio users (and their Janus tokens) in step with the config.
    /// A removed one keeps its token for [`LEAVE_GRACE`], so that bridged leaves the room and
    /// ends its session with it; then it is kicked (should it still be there: its participant
    /// would block a user of the same name) and its token revoked.
    ///
    /// What is removed is decided on the newest config, under `admitting`, not on the snapshot
    /// the pass started with: a user added meanwhile has had its token admitted and its plan
    /// pushed to bridged, and the pass would revoke that token (bridged's join refused, 403,
    /// and retried 500 ms later: 2 of 300 joins in the bench did so).
    async fn sync_server_users(&self, at: &Session) -> Result<(), JanusError> {
        let admitting = self.admitting.lock().await;
        let config = self.config.current();
        let identities = self.admit_server_users_locked(&config).await?;
        let removed = self.users.take_servers_except(&identities);
        let due = {
            let mut leaving = lock(&self.leaving);
            for gone in removed {
                tracing::info!(identity = gone.identity, "server audio user removed");
                leaving.push((gone, std::time::Instant::now()));
            }
            // One added again meanwhile (same name: same identity and token) keeps its token.
            leaving.retain(|(user, _)| self.users.get(&user.identity).is_none());
            let (due, waiting): (Vec<_>, Vec<_>) = leaving.drain(..).partition(|(_, at)| at.elapsed() >= LEAVE_GRACE);
            *leaving = waiting;
            due
        };
        drop(admitting);
        for (gone, _) in due {
            // Normally gone already: bridged left with its token during the grace.
            match self.kick(at, gone.first_group(), &gone.identity).await {
                Ok(true) => tracing::info!(
                    identity = gone.identity,
                    "a removed server audio user was still in its room: kicked"
                ),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(identity = gone.identity, error = %e, "could not kick a removed server audio user");
                }
            }
            self.revoke(&gone).await;
        }
        Ok(())
    }

    /// Users of deleted or renamed groups are disconnected (their room is destroyed). Judged on
    /// the newest config: a user who joined a group created since the pass began keeps its token.
    async fn drop_users_of_gone_groups(&self) {
        let groups: Vec<String> = self.config.current().groups.iter().map(|g| g.id()).collect();
        for user in self.users.take_outside(&groups) {
            tracing::warn!(
                identity = user.identity,
                username = user.username,
                group = user.first_group(),
                by = "config",
                why = "group deleted or renamed",
                "user disconnected"
            );
            self.revoke(&user).await;
        }
    }

    async fn expire_unused_tokens(&self) {
        for user in self.users.take_expired(UNUSED_TOKEN_LIFETIME) {
            tracing::info!(identity = user.identity, username = user.username, "token never used: revoked");
            self.revoke(&user).await;
        }
    }

    /// Revokes a user's token and takes it off its room's admission list; a failure is logged
    /// (the token dies with Janus's memory anyway, and a revoked token is refused everywhere).
    async fn revoke(&self, user: &User) {
        let config = self.config.current();
        let Ok(secret) = self.admin_secret() else { return };
        if let Err(e) = self.http.remove_token(&config.janus.admin_url, secret, user.token.expose()).await {
            tracing::warn!(identity = user.identity, error = %e, "cannot revoke the token");
        }
        self.unlist(user).await;
    }

    /// Takes a gone user's token off its rooms' admission lists (they would otherwise grow with
    /// every session until the room is recreated).
    async fn unlist(&self, user: &User) {
        // Only over a session that is up: a reconnect recreates the rooms from the registry.
        let Some(at) = self.link.lock().await.clone() else { return };
        for line in &user.lines {
            let token = vec![user.token.expose().to_owned()];
            if let Err(e) = self.allow(&at, &line.group_id, AllowedAction::Remove, token).await {
                tracing::debug!(identity = user.identity, error = %e, "cannot take the token off its room's list");
            }
        }
    }
}
