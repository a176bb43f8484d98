//! Event intake: who posted (each node under its own name and password), whether the event is
//! about what that node carries, and what control does on it (joins checked against the
//! registry, mutes enforced, leaves and talking recorded).

use std::sync::Arc;

use partyline_shared::janus::JanusEvent;

use super::legs::is_trunk;
use super::node::Node;
use super::{Janus, card_identity};
use crate::secrets::SecretValue;

/// The basic-auth user the packaged Janus posts as: the first node's other name.
const PACKAGED_EVENT_USER: &str = "janus";

impl Janus {
    /// The node whose event handler posts with `user` and `password`: a node's name and its
    /// `eventSecret`, the first node's defaulting to the pool's (`janus.eventSecret`), which
    /// it may also give as the user `janus`. `None`: nobody's.
    pub fn event_poster(&self, user: &str, password: &str) -> Option<String> {
        let pool = self.config.current().janus.pool();
        let (index, node) = pool
            .iter()
            .enumerate()
            .find(|(index, node)| node.name == user || (*index == 0 && user == PACKAGED_EVENT_USER))?;
        let expected = match (&node.event_secret, index) {
            (Some(own), _) => SecretValue::new(own.0.clone()),
            (None, 0) => self.secrets.event_secret.clone()?,
            (None, _) => return None,
        };
        expected.matches(password).then(|| node.name.clone())
    }

    /// Acts on one event that node `from` posted, if it is about what that node carries: a
    /// participant placed there (the card's on the first node only). A node's password then
    /// speaks for its own participants, never for another node's.
    pub async fn on_event_from(&self, from: &str, event: JanusEvent) {
        let Some(node) = self.pool().into_iter().find(|node| node.name == from) else {
            tracing::warn!(node = from, "an event from a node no longer in the pool: ignored");
            return;
        };
        if let Some((room, id)) = self.not_carried_by(&node, &event) {
            tracing::warn!(
                node = from,
                room,
                identity = id,
                ?event,
                "an event about a participant another node carries: ignored"
            );
            return;
        }
        self.on_event(&node, event).await;
    }

    /// The room and participant of `event` when `node` does not carry that participant.
    fn not_carried_by<'e>(&self, node: &Node, event: &'e JanusEvent) -> Option<(&'e str, &'e str)> {
        let (room, id) = match event {
            JanusEvent::Joined { room, id, .. }
            | JanusEvent::Left { room, id }
            | JanusEvent::Talking { room, id, .. }
            | JanusEvent::Configured { room, id, .. } => (room.as_str(), id.as_str()),
            _ => return None,
        };
        let carried = if id == card_identity(room) {
            self.home().name == node.name
        } else {
            // One nobody placed is a stranger where it is: that node's to kick.
            self.users.get(id).is_none_or(|user| self.placed_on(&user, node))
        };
        (!carried).then_some((room, id))
    }

    /// Acts on one event of `node`'s event handler.
    async fn on_event(&self, node: &Arc<Node>, event: JanusEvent) {
        match event {
            // control's own: checked against the legs it made by the reconciliation pass.
            JanusEvent::Joined { id, .. } | JanusEvent::Left { id, .. } | JanusEvent::Talking { id, .. }
                if is_trunk(&id) => {}
            JanusEvent::Joined { room, id, .. } => {
                if !self.users.joined(&room, &id) {
                    self.kick_stranger_at(node, &room, &id).await;
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
            JanusEvent::Configured { room, id, muted } => self.users.muted_self(&room, &id, muted),
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
            JanusEvent::Attached { .. } | JanusEvent::Other => {}
        }
    }
}
