//! Event intake: what control does on each event Janus's event handler posts (joins checked
//! against the registry, mutes enforced, leaves and talking recorded).

use partyline_shared::janus::JanusEvent;

use super::legs::is_trunk;
use super::{Janus, card_identity};

impl Janus {
    /// Acts on one event of Janus's event handler.
    pub async fn on_event(&self, event: JanusEvent) {
        match event {
            // control's own: checked against the legs it made by the reconciliation pass.
            JanusEvent::Joined { id, .. } | JanusEvent::Left { id, .. } | JanusEvent::Talking { id, .. }
                if is_trunk(&id) => {}
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
}
