//! Direct lines at Janus: each is a room of its own (`direct-…`) on the node of each of its
//! two ends, admitting their two tokens and no other (the pass's legs join the two replicas
//! when the ends are on different nodes). Opened on the first press of a person key and kept
//! while both ends are registered: a press afterwards is heard as fast as a line's. Closed when
//! either end goes (every removal from the registry is watched), or by the admin.

use std::sync::Arc;

use partyline_shared::config::DIRECT_ROOM_PREFIX;
use partyline_shared::janus::JanusError;
use partyline_shared::sync::lock;

use super::Janus;
use super::node::Node;
use crate::events::LiveEvent;
use crate::secrets::random_hex;
use crate::users::{DirectError, User};

/// Why a direct line was not opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenDirectError {
    #[error(transparent)]
    Refused(#[from] DirectError),
    #[error(transparent)]
    Janus(#[from] JanusError),
}

impl Janus {
    /// The direct line from `caller` to `callee`: the one open between them, or a new one
    /// (registered on both, its room made on their nodes). Its room.
    pub async fn open_direct(&self, caller: &User, callee: &User, max_lines: usize) -> Result<String, OpenDirectError> {
        if let Some(room) = self.users.direct_between(&caller.identity, &callee.identity) {
            return Ok(room);
        }
        let hex = random_hex(6).map_err(|e| JanusError::Protocol(e.to_string()))?;
        let room = format!("{DIRECT_ROOM_PREFIX}{hex}");
        self.users.open_direct(&caller.identity, &callee.identity, &room, max_lines)?;
        if let Err(e) = self.make_direct_room(&room, [caller, callee]).await {
            self.close_direct(&room, "its room could not be made").await;
            return Err(e.into());
        }
        self.users.direct_ready(&room);
        self.events.publish(&LiveEvent::DirectOpened {
            group_id: room.clone(),
            caller: caller.username.clone(),
            callee: callee.username.clone(),
        });
        // Ends on two nodes: the pass joins the replicas with legs.
        if self.node_for(caller).name != self.node_for(callee).name {
            self.reconcile_soon();
        }
        Ok(room)
    }

    /// The room of direct line `room` on each of its ends' nodes (admitting both tokens); none
    /// for an end on partyline's rooms, which make it themselves.
    async fn make_direct_room(&self, room: &str, ends: [&User; 2]) -> Result<(), JanusError> {
        let config = self.config.current();
        let mut nodes: Vec<Arc<Node>> = ends.iter().filter(|u| u.token_in_janus()).map(|u| self.node_for(u)).collect();
        nodes.dedup_by(|a, b| a.name == b.name);
        for node in nodes {
            let at = self.connect(&node).await?;
            let specs = self.desired_rooms_on(&node, &config)?;
            let Some(spec) = specs.iter().find(|s| s.room == room) else { continue };
            self.create_room(&node, &at, spec, false).await?;
        }
        Ok(())
    }

    /// Closes direct line `room` (`why` is logged and published): off both ends, its room
    /// destroyed wherever it was made. False when no such line was open.
    pub async fn close_direct(&self, room: &str, why: &str) -> bool {
        let ends = self.users.close_direct(room);
        self.destroy_direct_room(room).await;
        if ends.is_empty() {
            return false;
        }
        let names: Vec<&str> = ends.iter().map(|u| u.username.as_str()).collect();
        tracing::info!(room, ends = names.join(","), why, "direct line closed");
        self.events.publish(&LiveEvent::DirectClosed { group_id: room.to_owned(), why: why.to_owned() });
        true
    }

    /// Closes the direct lines of `identity`, which left the registry.
    pub(super) async fn close_directs_of(&self, identity: &str) {
        for (room, _) in self.users.close_directs_of(identity) {
            self.destroy_direct_room(&room).await;
            tracing::info!(room, identity, "direct line closed: one end left");
            let why = "one end left".to_owned();
            self.events.publish(&LiveEvent::DirectClosed { group_id: room, why });
        }
    }

    async fn destroy_direct_room(&self, room: &str) {
        for node in self.pool() {
            if !lock(&node.created).contains_key(room) {
                continue;
            }
            let Some(at) = node.session_if_up().await else { continue };
            if let Err(e) = self.destroy_room(&node, &at, room).await {
                // The pass destroys it: no longer desired.
                tracing::debug!(room, node = node.name, error = %e, "cannot destroy a direct line's room yet");
            }
        }
    }

    /// Closes the direct lines of every crew member removed from the registry, as it goes.
    pub async fn close_directs_of_the_removed(self: Arc<Self>) {
        let mut removals = self.users.subscribe_removals();
        loop {
            match removals.recv().await {
                Ok(removal) => self.close_directs_of(&removal.identity).await,
                // The pass's sweep catches what a lag skipped.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Closes direct lines left with one end (its other end's removal was missed).
    pub(super) async fn close_half_direct_lines(&self) {
        let users = self.users.list();
        let orphans: Vec<(String, String)> = users
            .iter()
            .flat_map(|u| {
                u.lines.iter().filter_map(|l| l.direct.as_ref().map(|p| (l.group_id.clone(), p.identity.clone())))
            })
            .filter(|(room, peer)| !users.iter().any(|u| u.identity == *peer && u.has_line(room)))
            .collect();
        for (room, _) in orphans {
            self.close_direct(&room, "one end left").await;
        }
    }
}
