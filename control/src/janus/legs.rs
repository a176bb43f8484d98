//! Trunk legs: a group's rooms on several nodes joined into one line with Janus's own parts.
//! For every ordered pair of the room's replicas (from, to), `to` holds a trunk participant
//! `trunk:FROM` (group `trunk`, plain RTP that only sends into the room) and `from` forwards
//! its room's `local` group mix to that trunk (`rtp_forward` with `group`). A full mesh of such
//! one-way legs carries each node's own participants to every other node once, and what came
//! in by a trunk never goes out again: no echo, no doubling. A room on one node has no legs.

use std::sync::Arc;
use std::time::Duration;

use partyline_shared::janus::client::Session;
use partyline_shared::janus::{AudioBridgeRequest, JanusError, LOCAL_GROUP, SessionEvent, TRUNK_GROUP, codes};
use partyline_shared::sync::lock;

use super::node::{Forward, Node, Trunk};
use super::{Janus, rooms};
use crate::events::JanusState;

/// Packets a trunk's node holds before mixing it. The other node's mixer sends one per tick on
/// its own timer, and the phase of the two ticks decides on which tick a packet is taken: at 1,
/// a packet landing near the tick boundary makes a hole (1 to 11 gaps per listener in 18 s,
/// three nodes on one 2-core host), at 2 none; AudioBridge's queue then sits between 2 and 3
/// packets, which is most of what a cascade adds to mouth-to-ear (BENCHMARKS.md, "Pool").
const TRUNK_PREBUFFER: u32 = 2;
/// How long a trunk's join may take to be answered on its session's long poll.
const TRUNK_JOIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The participant id of the trunk that carries node `from`'s mix.
pub fn trunk_identity(from: &str) -> String {
    format!("trunk:{from}")
}

/// Whether `id` is a trunk's participant id (never a crew member's: the proxy gives each its
/// own identity, and identities are slugs).
pub fn is_trunk(id: &str) -> bool {
    id.starts_with("trunk:")
}

impl Janus {
    /// Makes the legs be the replicas: `placement` is each live node with its rooms.
    pub(super) async fn reconcile_legs(&self, placement: &[(Arc<Node>, Vec<String>)]) {
        // The legs wanted: (room, from, to).
        let mut wanted = Vec::new();
        for (to, rooms) in placement {
            for room in rooms {
                for (from, theirs) in placement {
                    if from.name != to.name && theirs.contains(room) {
                        wanted.push((room.clone(), Arc::clone(from), Arc::clone(to)));
                    }
                }
            }
        }
        for (to, _) in placement {
            self.drop_unwanted_trunks(to, &wanted).await;
        }
        for (from, _) in placement {
            self.drop_unwanted_forwards(from, &wanted).await;
        }
        for (room, from, to) in &wanted {
            if let Err(e) = self.make_leg(room, from, to).await {
                tracing::warn!(room, from = from.name, to = to.name, error = %e, "cannot make a trunk leg; retrying");
            }
        }
    }

    /// A leg's trunk on `to` and forwarder on `from`, each made when missing (a trunk whose
    /// session died, a forwarder aimed at a trunk that was made again).
    async fn make_leg(&self, room: &str, from: &Node, to: &Node) -> Result<(), JanusError> {
        let key = (room.to_owned(), from.name.clone());
        let trunk = lock(&to.trunks).get(&key).cloned();
        let trunk = match trunk {
            Some(trunk) if trunk.session.keepalive().await.is_ok() => trunk,
            _ => {
                let trunk = self.join_trunk(room, from, to).await?;
                lock(&to.trunks).insert(key, trunk.clone());
                trunk
            }
        };
        let key = (room.to_owned(), to.name.clone());
        let forward = lock(&from.forwards).get(&key).cloned();
        if forward.as_ref().is_some_and(|f| f.ip == trunk.ip && f.port == trunk.port) {
            return Ok(());
        }
        let at = self.connect(from).await?;
        if let Some(stale) = forward {
            self.stop_forward(from, &at, room, stale.stream_id).await?;
        }
        let forward = self.forward(from, &at, room, &trunk).await?;
        tracing::info!(room, from = from.name, to = to.name, port = trunk.port, "trunk leg made");
        lock(&from.forwards).insert(key, forward);
        Ok(())
    }

    /// Joins `from`'s trunk into `room` on `to`, on a session of its own.
    async fn join_trunk(&self, room: &str, from: &Node, to: &Node) -> Result<Trunk, JanusError> {
        let session = to.open_session().await?;
        let join = AudioBridgeRequest::JoinTrunk {
            room: room.to_owned(),
            id: trunk_identity(&from.name),
            display: format!("trunk from {}", from.name),
            token: to.own_token.clone(),
            group: TRUNK_GROUP.to_owned(),
            muted: false,
            prebuffer: TRUNK_PREBUFFER,
            rtp: serde_json::Map::new(),
        };
        let joined = async {
            let transaction = session.send(join, None).await?;
            let poller = session.poller();
            loop {
                for event in poller.next().await? {
                    let SessionEvent::Event(news) = event else { continue };
                    if news.transaction.as_deref() != Some(&transaction) {
                        continue;
                    }
                    let reply = news.plugindata.map(|p| p.data.checked()).transpose()?;
                    if let Some(peer) = reply.and_then(|r| r.rtp) {
                        return Ok(Trunk { session: session.clone(), ip: peer.ip, port: peer.port });
                    }
                }
            }
        };
        let result = tokio::time::timeout(TRUNK_JOIN_TIMEOUT, joined)
            .await
            .unwrap_or_else(|_| Err(JanusError::Protocol("the trunk's join was not answered".into())));
        if result.is_err() {
            let _ = session.destroy().await;
        }
        result
    }

    async fn forward(&self, from: &Node, at: &Session, room: &str, trunk: &Trunk) -> Result<Forward, JanusError> {
        let request = AudioBridgeRequest::RtpForward {
            room: room.to_owned(),
            secret: rooms::room_secret(self.admin_secret()?, room),
            admin_key: self.room_admin_key_of(from)?,
            group: LOCAL_GROUP.to_owned(),
            host: trunk.ip.clone(),
            port: trunk.port,
            codec: "opus".to_owned(),
            always_on: true,
        };
        let reply = at.audiobridge(request).await?;
        let stream_id = reply.stream_id.ok_or_else(|| JanusError::Protocol("rtp_forward gave no stream_id".into()))?;
        Ok(Forward { stream_id, ip: trunk.ip.clone(), port: trunk.port })
    }

    async fn stop_forward(&self, from: &Node, at: &Session, room: &str, stream_id: u64) -> Result<(), JanusError> {
        let request = AudioBridgeRequest::StopRtpForward {
            room: room.to_owned(),
            secret: rooms::room_secret(self.admin_secret()?, room),
            admin_key: self.room_admin_key_of(from)?,
            stream_id,
        };
        match at.audiobridge(request).await {
            Err(e) if e.plugin_code() != Some(codes::NO_SUCH_ROOM) => Err(e),
            _ => Ok(()),
        }
    }

    /// Ends the trunks on `to` that no wanted leg needs (destroying a trunk's session takes it
    /// out of its room and frees its port).
    async fn drop_unwanted_trunks(&self, to: &Node, wanted: &[(String, Arc<Node>, Arc<Node>)]) {
        let unwanted: Vec<((String, String), Trunk)> = {
            let mut trunks = lock(&to.trunks);
            let keys: Vec<(String, String)> = trunks
                .keys()
                .filter(|(room, from)| {
                    !wanted.iter().any(|(r, f, t)| r == room && &f.name == from && t.name == to.name)
                })
                .cloned()
                .collect();
            keys.into_iter().filter_map(|k| trunks.remove(&k).map(|t| (k, t))).collect()
        };
        for ((room, from), trunk) in unwanted {
            let _ = trunk.session.destroy().await;
            tracing::info!(room, from, to = to.name, "trunk leg removed");
        }
    }

    async fn drop_unwanted_forwards(&self, from: &Node, wanted: &[(String, Arc<Node>, Arc<Node>)]) {
        let unwanted: Vec<((String, String), Forward)> = {
            let mut forwards = lock(&from.forwards);
            let keys: Vec<(String, String)> = forwards
                .keys()
                .filter(|(room, to)| !wanted.iter().any(|(r, f, t)| r == room && f.name == from.name && &t.name == to))
                .cloned()
                .collect();
            keys.into_iter().filter_map(|k| forwards.remove(&k).map(|f| (k, f))).collect()
        };
        if unwanted.is_empty() || from.state() == JanusState::Down {
            return;
        }
        let Ok(at) = self.connect(from).await else { return };
        for ((room, _), forward) in unwanted {
            if let Err(e) = self.stop_forward(from, &at, &room, forward.stream_id).await {
                tracing::warn!(room, node = from.name, error = %e, "cannot stop a forwarder");
            }
        }
    }
}
