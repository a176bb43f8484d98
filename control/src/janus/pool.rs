//! The pool of Janus nodes: the nodes the config names (one, `local`, when it names none), the
//! node each session is placed on, and which nodes hold a group's room. The first node is the
//! one beside bridged: it holds every group's room and the card's participants. Another node
//! holds a group's room while someone placed there has that line.

use std::sync::Arc;

use partyline_shared::config::is_direct_room;
use partyline_shared::janus::JanusError;
use partyline_shared::sync::lock;
use serde::Serialize;

use super::Janus;
use super::node::Node;
use crate::events::JanusState;
use crate::users::User;

/// A node as `/admin/stats` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    pub name: String,
    pub site: Option<String>,
    pub state: JanusState,
    pub version: Option<String>,
    /// Users (crew sessions, server audio users) placed here.
    pub sessions: usize,
    /// Their lines: the participants they make here.
    pub participants: usize,
    pub capacity: u32,
    /// Groups whose room is here and on other nodes, joined by trunk legs.
    pub cascaded: Vec<String>,
}

impl Janus {
    /// The nodes, in the config's order.
    pub(super) fn pool(&self) -> Vec<Arc<Node>> {
        self.sync_pool();
        lock(&self.nodes).clone()
    }

    /// The first node: the card's, and every group's room.
    pub(super) fn home(&self) -> Arc<Node> {
        self.pool().swap_remove(0)
    }

    /// Makes the nodes be the config's (by name): a new name gets a node, a changed entry is
    /// taken, and a removed node is drained by the next pass ([`Janus::drain_removed_nodes`]).
    fn sync_pool(&self) {
        let wanted = self.config.current().janus.pool();
        let mut nodes = lock(&self.nodes);
        if nodes.len() == wanted.len() && nodes.iter().zip(&wanted).all(|(node, at)| *lock(&node.at) == *at) {
            return;
        }
        let mut next = Vec::with_capacity(wanted.len());
        for at in &wanted {
            match nodes.iter().find(|n| n.name == at.name) {
                Some(node) => {
                    *lock(&node.at) = at.clone();
                    next.push(Arc::clone(node));
                }
                None => match Node::new(at) {
                    Ok(node) => {
                        tracing::info!(node = at.name, url = at.url, capacity = at.capacity, "Janus node added");
                        next.push(Arc::new(node));
                    }
                    Err(e) => tracing::error!(node = at.name, error = %e, "cannot set up a Janus node"),
                },
            }
        }
        let removed: Vec<Arc<Node>> =
            nodes.iter().filter(|n| !wanted.iter().any(|w| w.name == n.name)).cloned().collect();
        *nodes = next;
        drop(nodes);
        for gone in removed {
            tracing::warn!(node = gone.name, "Janus node removed from the config: its sessions move");
            lock(&self.draining).push(gone);
        }
    }

    /// Drains the nodes removed from the config once their members have moved: their rooms are
    /// destroyed (which ends the legs' forwarders there), their trunks' sessions ended. A node
    /// that cannot be reached has nothing left to drain.
    pub(super) async fn drain_removed_nodes(&self) {
        let draining = std::mem::take(&mut *lock(&self.draining));
        for node in draining {
            let rooms: Vec<String> = lock(&node.created).keys().cloned().collect();
            if let Ok(at) = self.connect(&node).await {
                for room in &rooms {
                    if let Err(e) = self.destroy_room(&node, &at, room).await {
                        tracing::warn!(node = node.name, room, error = %e, "cannot destroy a drained node's room");
                    }
                }
                let _ = at.destroy().await;
            }
            node.forget_legs_of_all();
            tracing::info!(node = node.name, rooms = rooms.len(), "Janus node drained");
        }
    }

    /// The node `user` is placed on: its own, or the first (server audio users, users stored
    /// before placements, users of a node removed meanwhile until they move).
    pub(super) fn node_for(&self, user: &User) -> Arc<Node> {
        let pool = self.pool();
        let placed = user.node.as_deref().and_then(|name| pool.iter().find(|n| n.name == name));
        placed.map_or_else(|| Arc::clone(&pool[0]), Arc::clone)
    }

    /// The WebSocket URL of the node crew member `identity` is placed on (the first node's for
    /// one the registry does not know: Janus refuses its token there anyway).
    pub fn ws_url_for(&self, identity: Option<&str>) -> String {
        let node = identity.and_then(|id| self.users.get(id)).map_or_else(|| self.home(), |u| self.node_for(&u));
        node.config().ws_url
    }

    /// Whether `user` is placed on `node` (a crew member on partyline's rooms is on none).
    pub(super) fn placed_on(&self, user: &User, node: &Node) -> bool {
        user.token_in_janus() && self.node_for(user).name == node.name
    }

    /// The nodes that hold `room`: the first (a group's room: the card is there), and each
    /// where a user placed there has the line.
    pub(super) fn replicas(&self, room: &str) -> Vec<Arc<Node>> {
        let users = self.users.list();
        let pool = self.pool();
        let group = !is_direct_room(room);
        pool.iter()
            .enumerate()
            .filter(|(index, node)| {
                (group && *index == 0) || users.iter().any(|u| u.has_line(room) && self.placed_on(u, node))
            })
            .map(|(_, node)| Arc::clone(node))
            .collect()
    }

    /// Where a session of `lines` participants goes: the live node with the most room left
    /// against its capacity (the first on a tie), at `site` while one there has room. A node never
    /// reached yet counts as live; with none live, the first node (whose failure is Janus's, as
    /// with one node), unless avoided. A node's capacity is a limit for a new session; one that
    /// had a place (`rejoining`: its node lost, its network back) may go over it rather than be
    /// left without a line.
    pub(super) fn place(
        &self,
        lines: usize,
        avoid: &[String],
        site: Option<&str>,
        rejoining: bool,
    ) -> Result<Arc<Node>, JanusError> {
        let live = self.live_loads(avoid);
        let fits = |(node, load): &&(Arc<Node>, usize)| rejoining || load + lines <= node.config().capacity as usize;
        let emptiest = |at_site: bool| {
            live.iter()
                .filter(|(node, _)| !at_site || node.config().site.as_deref() == site)
                .filter(fits)
                .min_by(|(a, a_load), (b, b_load)| {
                    let after = |node: &Node, load: usize| (load + lines) as f64 / f64::from(node.config().capacity);
                    after(a, *a_load).total_cmp(&after(b, *b_load))
                })
                .map(|(node, _)| Arc::clone(node))
        };
        let placed = site.and_then(|_| emptiest(true)).or_else(|| emptiest(false));
        match placed {
            Some(node) => Ok(node),
            None if live.is_empty() => {
                let home = self.home();
                let no_node =
                    || JanusError::Unreachable { url: "every Janus node".into(), reason: "none is up".into() };
                (!avoid.contains(&home.name)).then_some(home).ok_or_else(no_node)
            }
            None => {
                let capacity = live.iter().map(|(node, _)| node.config().capacity).sum();
                tracing::warn!(capacity, lines, "a session refused: every live Janus node is at its capacity");
                Err(JanusError::Full(capacity))
            }
        }
    }

    /// The live nodes, but `avoid`, with the participants placed on each, in the config's order.
    fn live_loads(&self, avoid: &[String]) -> Vec<(Arc<Node>, usize)> {
        let users = self.users.list();
        self.pool()
            .into_iter()
            .filter(|node| node.state() != JanusState::Down && !avoid.contains(&node.name))
            .map(|node| {
                let load = users.iter().filter(|u| self.placed_on(u, &node)).map(|u| u.lines.len()).sum();
                (node, load)
            })
            .collect()
    }

    pub(super) fn node_statuses(&self) -> Vec<NodeStatus> {
        let config = self.config.current();
        let users = self.users.list();
        let cascaded: Vec<String> =
            config.groups.iter().map(|g| g.id()).filter(|room| self.replicas(room).len() > 1).collect();
        self.pool()
            .iter()
            .map(|node| {
                let at = node.config();
                let here: Vec<&User> = users.iter().filter(|u| self.placed_on(u, node)).collect();
                NodeStatus {
                    name: node.name.clone(),
                    site: at.site,
                    state: node.state(),
                    version: node.version(),
                    sessions: here.len(),
                    participants: here.iter().map(|u| u.lines.len()).sum(),
                    capacity: at.capacity,
                    cascaded: cascaded
                        .iter()
                        .filter(|room| self.replicas(room).iter().any(|n| n.name == node.name))
                        .cloned()
                        .collect(),
                }
            })
            .collect()
    }
}
