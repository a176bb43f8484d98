//! Admission: the tokens that let a crew member or the card into its rooms. On Janus a token is
//! registered on its node and in the admission list of each room it is for, and taken off both
//! when its holder goes. On partyline's own rooms (`media.engine: bridged`) a crew member's token
//! is the registry's alone: the rooms take a session's lines from control, and Janus, which may
//! be down or absent, is not told.

use std::sync::Arc;

use partyline_shared::janus::client::Session;
use partyline_shared::janus::{AllowedAction, AudioBridgeRequest, JanusError, codes};
use partyline_shared::slugify;

use partyline_shared::config::MediaEngine;
use partyline_shared::janus::RoomSpec;
use partyline_shared::sync::lock;

use super::node::Node;
use super::{Janus, rooms};
use crate::events::JanusState;
use crate::secrets::{SecretValue, random_hex};
use crate::users::{Ending, Line, PositionTaken, Resumed, Seat, User};

/// Why no token was issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error(transparent)]
    Janus(#[from] JanusError),
    /// The position takes one crew member at a time and someone holds it.
    #[error(transparent)]
    Taken(#[from] PositionTaken),
}

impl Janus {
    /// Issues one token for `username` on `lines` and registers the user as pending; on Janus,
    /// placed on a node (at `site` while one is up there) whose rooms for its lines admit the
    /// token, and nothing stays registered unless Janus took it all; on partyline's rooms, in
    /// the rooms (`on_rooms`), with nothing of it in Janus. A panel
    /// rejoining gives its previous token and panel key (`resume`): it keeps the key, and the
    /// admin's mutes of its lines, when [`Users::resume`] allows. A panel of a position gives
    /// its seat (refused while another holds a position for one; the resumed session's hold
    /// passes to the rejoin). A token refused (no node up, Janus
    /// failing) costs the panel nothing: what it resumed may be asked for again.
    pub async fn issue_token(
        &self,
        username: &str,
        lines: Vec<Line>,
        resume: Option<(&str, &str)>,
        address: std::net::IpAddr,
        site: Option<&str>,
        seat: Option<Seat<'_>>,
    ) -> Result<User, IssueError> {
        let resumed = resume.and_then(|(token, key)| self.users.resume(token, key));
        let seat = seat.map(|seat| Seat { resuming: resumed.as_ref().and(resume.map(|(token, _)| token)), ..seat });
        let admitted = self.admit(username, lines, resumed.as_ref(), address, site, seat).await;
        if let (Err(_), Some((token, _)), Some(resumed)) = (&admitted, resume, resumed) {
            self.users.give_back(token, resumed);
        }
        admitted
    }

    /// [`Janus::issue_token`] once the resume, if any, is taken.
    async fn admit(
        &self,
        username: &str,
        mut lines: Vec<Line>,
        resumed: Option<&Resumed>,
        address: std::net::IpAddr,
        site: Option<&str>,
        seat: Option<Seat<'_>>,
    ) -> Result<User, IssueError> {
        let token = random_hex(32).map_err(|e| JanusError::Protocol(e.to_string()))?;
        let base = match slugify(username) {
            slug if slug.is_empty() => "user".to_owned(),
            slug => slug.chars().take(32).collect(),
        };
        let identity = format!("{base}-{}", random_hex(3).map_err(|e| JanusError::Protocol(e.to_string()))?);
        let panel_key = match resumed {
            Some(resumed) => resumed.panel_key.clone(),
            None => SecretValue::new(random_hex(16).map_err(|e| JanusError::Protocol(e.to_string()))?),
        };
        for line in &mut lines {
            // Muted again as it joins (`on_event`): the admin's mute follows the person, through
            // a rejoin or a fresh token under the same name.
            line.muted_by_admin =
                resumed.is_some_and(|r| r.muted.contains(&line.group_id)) || self.name_muted(username, &line.group_id);
        }
        let rejoining = resumed.is_some();
        let on_rooms = self.config.current().media.engine == MediaEngine::Bridged;
        let node = if on_rooms { None } else { Some(self.place(lines.len(), &[], site, rejoining)?) };
        let (name, address) = (username.to_owned(), Some(address));
        let user = match seat {
            Some(seat) => self.users.register_seated(identity, name, lines, token, panel_key, address, seat)?,
            None => self.users.register(identity, name, lines, token, panel_key, address),
        };
        let admitted = match node {
            Some(node) => self.admit_on_janus(user, node, site, rejoining).await,
            None => {
                self.users.set_on_rooms(&user.identity, true);
                Ok(self.users.get(&user.identity).unwrap_or(user))
            }
        };
        if rejoining && let Ok(user) = &admitted {
            tracing::info!(identity = user.identity, username, "panel key kept by the rejoined panel");
        }
        admitted
    }

    /// Readies a registered `user`'s node, `node` first: the node's rooms for its lines admit
    /// its token. Registered, and placed, before its node is readied: the pass then holds its
    /// rooms on that node (it would destroy a replica nobody placed there needs), and a room
    /// created meanwhile lists its token. A node that fails here is marked down and the next is
    /// tried; when none is left, the user is removed.
    async fn admit_on_janus(
        &self,
        user: User,
        mut node: Arc<Node>,
        site: Option<&str>,
        rejoining: bool,
    ) -> Result<User, IssueError> {
        let mut avoid = Vec::new();
        let at = loop {
            self.users.place(&user.identity, &node.name);
            match self.prepare_node(&node, &user.lines, user.token.expose()).await {
                Ok(at) => break at,
                Err(e) if matches!(e, JanusError::Unreachable { .. }) && self.pool().len() > avoid.len() + 1 => {
                    avoid.push(node.name.clone());
                    let next = match self.place(user.lines.len(), &avoid, site, rejoining) {
                        Ok(next) => next,
                        Err(refused) => {
                            self.users.remove(&user.identity, Ending::Ended);
                            return Err(refused.into());
                        }
                    };
                    // Off that node first, then it is down (not at the next pass): its members
                    // move, and nobody else lands there.
                    self.users.place(&user.identity, &next.name);
                    self.mark_node(&node, JanusState::Down, Some(&e));
                    self.reconcile_soon();
                    node = next;
                }
                Err(e) => {
                    self.users.remove(&user.identity, Ending::Ended);
                    return Err(e.into());
                }
            }
        };
        let user = self.users.get(&user.identity).unwrap_or(user);
        for line in &user.lines {
            let token = vec![user.token.expose().to_owned()];
            if let Err(e) = self.allow(&at, &line.group_id, AllowedAction::Add, token).await {
                self.users.remove(&user.identity, Ending::Ended);
                self.revoke(&user).await;
                return Err(e.into());
            }
        }
        Ok(user)
    }

    /// Readies `node` for a session on `lines` with `token`: connected (a node that connects
    /// registers its users' tokens itself), each line's room there, the token registered.
    async fn prepare_node(&self, node: &Node, lines: &[Line], token: &str) -> Result<Session, JanusError> {
        let at = self.connect(node).await?;
        let config = self.config.current();
        let missing: Vec<RoomSpec> = self
            .desired_rooms_on(node, &config)?
            .into_iter()
            .filter(|spec| {
                lines.iter().any(|l| l.group_id == spec.room) && !lock(&node.created).contains_key(&spec.room)
            })
            .collect();
        for spec in &missing {
            self.create_room(node, &at, spec, false).await?;
        }
        node.add_token(&self.admin_secret_of(node)?, token).await?;
        Ok(at)
    }

    /// Adds tokens to (or removes them from) `room`'s admission list. A room that does not
    /// exist yet is not an error: it is created with the registry's tokens.
    pub(super) async fn allow(
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

    /// A Janus session of `user`'s own, under its token on its node: for a participant control
    /// drives on a client's behalf (a WHIP or WHEP session).
    pub async fn session_as(&self, user: &User) -> Result<Session, JanusError> {
        self.node_for(user).open_session_with(user.token.expose()).await
    }

    /// Lets `token` open sessions on `node`.
    pub(super) async fn register_token(&self, node: &Node, token: &str) -> Result<(), JanusError> {
        node.add_token(&self.admin_secret_of(node)?, token).await
    }

    /// Revokes `user`'s token on its node.
    pub(super) async fn revoke_token(&self, user: &User) -> Result<(), JanusError> {
        let node = self.node_for(user);
        node.remove_token(&self.admin_secret_of(&node)?, user.token.expose()).await
    }

    /// Revokes a user's token and takes it off its room's admission list; a failure is logged
    /// (the token dies with Janus's memory anyway, and a revoked token is refused everywhere).
    /// Nothing for a token Janus never had (a crew member's on partyline's rooms).
    pub(super) async fn revoke(&self, user: &User) {
        if !user.token_in_janus() {
            return;
        }
        if let Err(e) = self.revoke_token(user).await {
            tracing::warn!(identity = user.identity, error = %e, "cannot revoke the token");
        }
        self.unlist(user).await;
    }

    /// Takes a gone user's token off its rooms' admission lists (they would otherwise grow with
    /// every session until the room is recreated).
    pub(super) async fn unlist(&self, user: &User) {
        for line in &user.lines {
            // Only over a session that is up: a reconnect recreates the rooms from the registry.
            let Some(at) = self.node_for(user).session_if_up().await else { continue };
            let token = vec![user.token.expose().to_owned()];
            if let Err(e) = self.allow(&at, &line.group_id, AllowedAction::Remove, token).await {
                tracing::debug!(identity = user.identity, error = %e, "cannot take the token off its room's list");
            }
        }
    }
}
