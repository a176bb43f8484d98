//! Moderation: the admin's disconnects, line removals and mutes, and what control enforces by
//! itself (a stranger kicked, an admin's mute kept).

use partyline_shared::config::is_direct_room;
use partyline_shared::janus::client::Session;
use partyline_shared::janus::{AllowedAction, AudioBridgeRequest, JanusError, codes};
use partyline_shared::sync::lock;

use super::node::Node;
use super::{Janus, card_identity, rooms};
use crate::users::{Ending, User, UserKind};

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
    /// Disconnects a user for good: removed from the registry (its `/janus` connections close,
    /// its session leaves partyline's rooms), kicked from every Janus room it is in and its token
    /// revoked there, so the same token cannot rejoin. When Janus cannot be told, the user is
    /// removed all the same (the admin can always clear a stale entry) and the next pass that
    /// reaches Janus kicks and revokes it. A user on partyline's rooms has nothing in Janus.
    pub async fn disconnect(&self, identity: &str, why: &str, by: &str) -> Result<Disconnected, DisconnectError> {
        let user = self.users.get(identity).ok_or_else(|| DisconnectError::NotFound(identity.to_owned()))?;
        if user.kind == UserKind::Server {
            return Err(DisconnectError::ServerUser(identity.to_owned()));
        }
        // Out of the registry before Janus is told: the kick's own leave event then finds no one
        // to record as "left" (which would let the panel resume), and the proxy closes the
        // member's connections as disconnected, not ended.
        self.users.remove(identity, Ending::Disconnected);
        self.users.forget_resume(&user.token);
        let groups: Vec<&str> = user.lines.iter().map(|l| l.group_id.as_str()).collect();
        tracing::warn!(identity, username = user.username, group = groups.join(","), by, why, "user disconnected");
        let revoked = !user.token_in_janus() || self.tell_janus_of_the_disconnected(&user).await;
        Ok(Disconnected { user, revoked })
    }

    /// Kicks a disconnected `user` and revokes its token on Janus, or queues both for the next
    /// pass that reaches Janus (false).
    async fn tell_janus_of_the_disconnected(&self, user: &User) -> bool {
        match self.kick_and_revoke(user).await {
            Ok(()) => {
                self.unlist(user).await;
                true
            }
            Err(e) => {
                let identity = &user.identity;
                tracing::warn!(identity, error = %e, "Janus cannot be told now: the user is kicked and its token revoked once it can");
                lock(&self.revoke_later).push(user.clone());
                false
            }
        }
    }

    /// Kicks `user` from the rooms it joined and revokes its token.
    async fn kick_and_revoke(&self, user: &User) -> Result<(), JanusError> {
        for line in user.lines.iter().filter(|l| l.joined_at.is_some()) {
            let at = self.session_for(user).await?;
            self.kick(&at, &line.group_id, &user.identity).await?;
        }
        self.revoke_token(user).await
    }

    /// Kicks and revokes the users disconnected while Janus could not be told (a token Janus
    /// lost in a restart is refused anyway; its revocation's failure is logged and dropped).
    pub(super) async fn revoke_the_disconnected(&self) {
        let due = std::mem::take(&mut *lock(&self.revoke_later));
        for user in due {
            for line in user.lines.iter().filter(|l| l.joined_at.is_some()) {
                let kicked = match self.session_for(&user).await {
                    Ok(at) => self.kick(&at, &line.group_id, &user.identity).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = kicked {
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
        if is_direct_room(group) {
            // A direct line has two ends or none.
            self.close_direct(group, &format!("closed by {by}")).await;
            return self.users.get(identity).ok_or_else(|| DisconnectError::NotFound(identity.to_owned()));
        }
        if user.lines.len() == 1 {
            let why = format!("line {group} removed by the admin");
            return self.disconnect(identity, &why, by).await.map(|gone| gone.user);
        }
        // A session on partyline's rooms has nothing in Janus: its line is dropped there
        // (`RoomsLink`, on the registry's word).
        if user.token_in_janus() {
            let at = self.session_for(&user).await?;
            let token = vec![user.token.expose().to_owned()];
            self.allow(&at, group, AllowedAction::Remove, token).await?;
            self.kick(&at, group, identity).await?;
        }
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
        // A session on partyline's rooms is muted there by the caller (`RoomsLink`).
        if line.joined_at.is_some() && !user.on_rooms && (muted || user.kind == UserKind::Server) {
            let at = self.session_for(&user).await?;
            self.set_participant_muted(&at, group, identity, muted).await?;
        }
        let now = self
            .users
            .set_muted_by_admin(identity, group, muted)
            .ok_or_else(|| DisconnectError::NoSuchLine { identity: identity.to_owned(), group: group.to_owned() })?;
        if user.kind == UserKind::Crew {
            let person = (partyline_shared::slugify(&user.username), group.to_owned());
            let mut names = lock(&self.muted_names);
            if muted {
                names.insert(person);
            } else {
                names.remove(&person);
            }
        }
        let what = if muted { "user muted on a line" } else { "user unmuted on a line" };
        tracing::warn!(identity, username = user.username, group, by, "{what}");
        Ok(now)
    }

    /// Whether the admin muted the person named `username` on `group` (under any identity).
    pub(super) fn name_muted(&self, username: &str, group: &str) -> bool {
        lock(&self.muted_names).contains(&(partyline_shared::slugify(username), group.to_owned()))
    }

    /// Mutes `identity` in `room` (a participant gone meanwhile is not an error): what a forced
    /// talk-off does at the room, whatever the panel does.
    pub async fn mute_participant(&self, room: &str, identity: &str) -> Result<(), JanusError> {
        let at = self.session_of_participant(identity).await?;
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
    pub(super) async fn enforce_mute(&self, room: &str, id: &str) {
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
        // On every node holding the line: a trunk carries no one from a muted room.
        for node in self.replicas(group) {
            let at = self.connect(&node).await?;
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

    /// The lines the admin muted whole, sorted (empty, the usual case, allocates nothing).
    pub fn muted_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = lock(&self.muted_rooms).iter().cloned().collect();
        lines.sort_unstable();
        lines
    }

    /// Kicks a participant of `room` whose identity is no user registered in it off `node`
    /// (where its join was posted from, or where `listparticipants` found it): a token's holder
    /// joining under an identity other than the one issued with it. The room admits only tokens
    /// issued for it, so this is someone with a valid token trying to pass for another.
    pub(super) async fn kick_stranger_at(&self, node: &Node, room: &str, id: &str) {
        if id == card_identity(room) && self.card_may_be(id) {
            return;
        }
        let kicked = match self.connect(node).await {
            Ok(at) => self.kick(&at, room, id).await,
            Err(e) => Err(e),
        };
        match kicked {
            Ok(true) => tracing::warn!(
                room,
                node = node.name,
                identity = id,
                "a participant joined under an identity not issued for this room: kicked"
            ),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(room, identity = id, error = %e, "cannot kick a participant under a foreign identity");
            }
        }
    }

    /// Whether the card's participant `id` may be in its room: a server audio user's, or one
    /// leaving (bridged leaves by itself; only in its own room: `card:B` elsewhere is a stranger).
    fn card_may_be(&self, id: &str) -> bool {
        let leaving = lock(&self.leaving).iter().any(|(u, _)| u.identity == id);
        leaving || self.users.get(id).is_some_and(|u| u.kind == UserKind::Server)
    }

    /// Kicks `identity` out of `room` with the room's secret; whether it was there. A
    /// participant or room already gone is not an error.
    pub(super) async fn kick(&self, at: &Session, room: &str, identity: &str) -> Result<bool, JanusError> {
        let secret = rooms::room_secret(self.admin_secret()?, room);
        let kick = AudioBridgeRequest::Kick { room: room.to_owned(), secret, id: identity.to_owned() };
        match at.audiobridge(kick).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.plugin_code(), Some(codes::NO_SUCH_USER | codes::NO_SUCH_ROOM)) => Ok(false),
            Err(e) => Err(e),
        }
    }
}
