//! The reconciliation pass: Janus's rooms made to be the config's groups, participants
//! checked against the registry (strangers kicked, missed leaves caught), stale tokens revoked;
//! run at start, on config events, on wake-ups and every [`POLL`](super::POLL).

use std::collections::HashMap;
use std::sync::Arc;

use partyline_shared::Config;
use partyline_shared::janus::client::Session;
use partyline_shared::janus::{AllowedAction, AudioBridgeReply, AudioBridgeRequest, JanusError, RoomSpec, codes};
use partyline_shared::sync::lock;
use time::OffsetDateTime;
use tokio::sync::broadcast::error::TryRecvError;

use super::legs::{is_trunk, trunk_identity};
use super::node::Node;
use super::{Janus, MIN_PASS_INTERVAL, POLL, RETRY, rooms};
use crate::events::{JanusState, LiveEvent};
use crate::users::UNUSED_TOKEN_LIFETIME;

impl Janus {
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
        let result = self.reconcile(&config).await;
        if let Err(e) = &result
            && e.loses_session()
        {
            // The first node no longer knows our session: it restarted.
            self.home().lose_session().await;
        }
        result
    }

    async fn reconcile(&self, config: &Config) -> Result<(), JanusError> {
        let desired = self.desired_rooms(config)?;
        self.revoke_the_disconnected().await;
        self.drop_users_of_gone_groups().await;
        self.expire_unused_tokens().await;
        self.close_half_direct_lines().await;
        // The first node's failure is Janus's (as with one node); another's moves its users.
        let pool = self.pool();
        let mut placement = Vec::with_capacity(pool.len());
        for (index, node) in pool.iter().enumerate() {
            match self.reconcile_node(node, config).await {
                Ok(rooms) => {
                    self.mark_node(node, JanusState::Up, None);
                    placement.push((Arc::clone(node), rooms));
                }
                Err(e) if index == 0 => {
                    self.mark_node(node, JanusState::Down, Some(&e));
                    return Err(e);
                }
                Err(e) => {
                    if e.loses_session() {
                        node.lose_session().await;
                    }
                    self.mark_node(node, JanusState::Down, Some(&e));
                }
            }
        }
        self.move_off_lost_nodes(&pool).await;
        self.drain_removed_nodes().await;
        self.reconcile_legs(&placement).await;
        self.sync_server_users().await?;
        let participants = self.reconcile_participants(&placement).await?;
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

    /// Records a node's state, logging and publishing a change.
    pub(super) fn mark_node(&self, node: &Node, state: JanusState, error: Option<&JanusError>) {
        if !node.set_state(state) {
            return;
        }
        let message = error.map(ToString::to_string).unwrap_or_default();
        match state {
            JanusState::Down => tracing::warn!(node = node.name, error = message, "Janus node down"),
            _ => tracing::info!(node = node.name, "Janus node up"),
        }
        self.events.publish(&LiveEvent::NodeState { node: node.name.clone(), state, message });
    }

    /// The crew placed on a node that is down or no longer in the pool leave the registry with
    /// their panel keys kept: the proxy closes their connections and each panel joins again
    /// by itself, placed on a live node with the same lines, name and key.
    async fn move_off_lost_nodes(&self, pool: &[Arc<Node>]) {
        for user in self.users.list() {
            let Some(name) = user.node.as_deref() else { continue };
            let lost = pool.iter().find(|n| n.name == name).is_none_or(|n| n.state() == JanusState::Down);
            if lost && self.users.move_off(&user.identity).is_some() {
                tracing::warn!(
                    identity = user.identity,
                    username = user.username,
                    node = name,
                    "session moved off a lost Janus node"
                );
                self.events.publish(&LiveEvent::SessionMoved {
                    identity: user.identity.clone(),
                    username: user.username.clone(),
                    node: name.to_owned(),
                });
            }
        }
    }

    /// Creates, recreates and destroys `node`'s rooms so that they are `desired`.
    async fn reconcile_rooms(&self, node: &Node, desired: &[RoomSpec]) -> Result<(), JanusError> {
        let at = self.connect(node).await?;
        let reply = at.audiobridge(AudioBridgeRequest::List).await?;
        let plan = rooms::plan(desired, &reply.list, &mut lock(&node.created));
        for room in &plan.destroy {
            self.destroy_room(node, &at, room).await?;
        }
        for spec in plan.recreate.iter().chain(&plan.create) {
            self.create_room(node, &at, spec, plan.recreate.contains(spec)).await?;
        }
        Ok(())
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

    /// The rooms `node` holds made as desired; their names.
    async fn reconcile_node(&self, node: &Node, config: &Config) -> Result<Vec<String>, JanusError> {
        let replicas: Vec<RoomSpec> = self
            .desired_rooms_on(node, config)?
            .into_iter()
            .filter(|spec| self.replicas(&spec.room).iter().any(|n| std::ptr::eq(n.as_ref(), node)))
            .collect();
        self.reconcile_rooms(node, &replicas).await?;
        Ok(replicas.into_iter().map(|spec| spec.room).collect())
    }

    pub(super) fn desired_rooms(&self, config: &Config) -> Result<Vec<RoomSpec>, JanusError> {
        Ok(rooms::desired(config, &self.users.direct_rooms(), self.room_admin_key()?, self.admin_secret()?))
    }

    /// The rooms as created on `node`: with its own AudioBridge admin key.
    pub(super) fn desired_rooms_on(&self, node: &Node, config: &Config) -> Result<Vec<RoomSpec>, JanusError> {
        let directs = self.users.direct_rooms();
        Ok(rooms::desired(config, &directs, &self.room_admin_key_of(node)?, self.admin_secret()?))
    }

    pub(super) async fn create_room(
        &self,
        node: &Node,
        at: &Session,
        spec: &RoomSpec,
        replace: bool,
    ) -> Result<(), JanusError> {
        if replace {
            self.destroy_room(node, at, &spec.room).await?;
        }
        // control's own token too: the trunks from other nodes join with it.
        let mut allowed = self.users.tokens_of_room(&spec.room);
        allowed.push(node.own_token.clone());
        let create = AudioBridgeRequest::Create { spec: spec.clone(), allowed: allowed.clone() };
        match at.audiobridge(create).await {
            Ok(_) => tracing::info!(
                room = spec.room,
                node = node.name,
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
        node.forget_legs_of(&spec.room);
        lock(&node.created).insert(spec.room.clone(), spec.clone());
        Ok(())
    }

    pub(super) async fn destroy_room(&self, node: &Node, at: &Session, room: &str) -> Result<(), JanusError> {
        let secret = rooms::room_secret(self.admin_secret()?, room);
        let body = AudioBridgeRequest::Destroy { room: room.to_owned(), secret, permanent: false };
        match at.audiobridge(body).await {
            Ok(_) => tracing::info!(room, node = node.name, "room destroyed"),
            Err(e) if e.plugin_code() == Some(codes::NO_SUCH_ROOM) => {}
            Err(e) => return Err(e),
        }
        node.forget_legs_of(room);
        lock(&node.created).remove(room);
        Ok(())
    }

    /// Marks who is in each room from `listparticipants` on every node holding it (catching
    /// missed events) and returns how many participants there are in all, trunks left out.
    async fn reconcile_participants(&self, placement: &[(Arc<Node>, Vec<String>)]) -> Result<usize, JanusError> {
        let mut total = 0;
        let mut present: HashMap<&str, (Vec<String>, OffsetDateTime)> = HashMap::new();
        for (node, rooms) in placement {
            let at = self.connect(node).await?;
            for room in rooms {
                let asked = OffsetDateTime::now_utc();
                let body = AudioBridgeRequest::ListParticipants { room: room.clone() };
                let reply: AudioBridgeReply = match at.audiobridge(body).await {
                    Err(e) if e.plugin_code() == Some(codes::NO_SUCH_ROOM) => continue,
                    other => other?,
                };
                let ids: Vec<String> = reply.participants.into_iter().map(|p| p.id).collect();
                for id in &ids {
                    let trunk = is_trunk(id)
                        && lock(&node.trunks).keys().any(|(r, from)| r == room && trunk_identity(from) == *id);
                    if !trunk && !self.users.joined(room, id) {
                        self.kick_stranger_at(node, room, id).await;
                    }
                }
                let ids: Vec<String> = ids.into_iter().filter(|id| !is_trunk(id)).collect();
                total += ids.len();
                let entry = present.entry(room.as_str()).or_insert_with(|| (Vec::new(), asked));
                entry.0.extend(ids);
                entry.1 = entry.1.min(asked);
            }
        }
        for (room, (ids, asked)) in present {
            for id in self.users.missing_from(room, &ids, asked) {
                if let Some(user) = self.users.left(room, &id, "no longer in the room") {
                    self.revoke(&user).await;
                }
            }
        }
        Ok(total)
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
}
