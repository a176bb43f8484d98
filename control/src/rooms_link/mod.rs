//! The panels' media on partyline's own rooms (`media.engine: bridged`), through bridged's
//! `org.partyline.Rooms1`.
//!
//! control alone knows a session's lines and rights: it hands the panel's offer to the rooms
//! with them (one audio m-line per line, in the token's order), passes on the talk keys it
//! allows, and follows the rooms' signals into the users' registry (a session's media up: its
//! user joined its lines; gone: left them), so that the admin UI, the events and Companion see
//! what they see with Janus. A user removed from the registry (left, disconnected, banned)
//! leaves the rooms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use partyline_shared::backoff::Backoff;
use partyline_shared::bridge::{BUS_NAME, BusChoice};
use partyline_shared::rooms_bus::{RoomLine, RoomsError, RoomsProxy};
use partyline_shared::sync::lock;
use tokio::sync::broadcast::error::RecvError;

use crate::users::{User, Users};
use sessions::{RoomsSession, Sessions};

mod sessions;

/// The pauses between attempts to reach the rooms on the bus.
const BUS_RETRY: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(5));

/// What a request to the rooms came to, when not an answer.
#[derive(Debug, thiserror::Error)]
pub enum RoomsLinkError {
    /// control has no connection to bridged's rooms now.
    #[error("partyline-bridged's rooms are not reachable on D-Bus")]
    Unreachable,
    /// The rooms refused (typed: a bad offer, full, not allowed, …).
    #[error("{0}")]
    Rooms(#[from] RoomsError),
    /// The session has no line for that group, or may not talk on it.
    #[error("{0}")]
    NotAllowed(String),
    /// The user has no media session in the rooms.
    #[error("the session has no media in the rooms yet: post its offer first")]
    NoSession,
}

#[derive(Debug)]
pub struct RoomsLink {
    bus: BusChoice,
    users: Arc<Users>,
    /// The rooms' proxy while control is connected to the bus.
    proxy: Mutex<Option<RoomsProxy<'static>>>,
    sessions: Mutex<Sessions>,
    /// The identity of every session that leaves the rooms, for whatever reason.
    gone: tokio::sync::broadcast::Sender<String>,
    /// A session's audio coming in or not (`SessionReceiving`), by identity.
    receiving: tokio::sync::broadcast::Sender<(String, bool)>,
}

impl RoomsLink {
    pub fn new(bus: BusChoice, users: Arc<Users>) -> Arc<RoomsLink> {
        let (gone, _) = tokio::sync::broadcast::channel(64);
        let (receiving, _) = tokio::sync::broadcast::channel(64);
        Arc::new(RoomsLink { bus, users, proxy: Mutex::new(None), sessions: Mutex::default(), gone, receiving })
    }

    /// The identities whose session leaves the rooms from now on: ended by the rooms (its
    /// connection lost or never up, or bridged gone) or left at its user's removal. (A session
    /// its user's new offer replaces is not gone: the user has the new one.)
    pub fn subscribe_gone(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.gone.subscribe()
    }

    /// Whether the rooms receive audio from a session, from now on, by identity: true again, or
    /// false after a second without (said on a change; a session that never sends is said
    /// false once).
    pub fn subscribe_receiving(&self) -> tokio::sync::broadcast::Receiver<(String, bool)> {
        self.receiving.subscribe()
    }

    /// Whether `identity` has a session in the rooms.
    pub fn has_session(&self, identity: &str) -> bool {
        lock(&self.sessions).by_identity.contains_key(identity)
    }

    /// Says that `identity`'s session left (no one listening is fine).
    fn went(&self, identity: &str) {
        let _ = self.gone.send(identity.to_owned());
    }

    fn proxy(&self) -> Result<RoomsProxy<'static>, RoomsLinkError> {
        lock(&self.proxy).clone().ok_or(RoomsLinkError::Unreachable)
    }

    /// Answers `user`'s offer: one member per m-line, in the room its group names (`None`: a
    /// stopped m-line), with the session's rights on that line. A second offer from the same
    /// session (the panel reconnecting its media) replaces the first.
    pub async fn join(&self, user: &User, offer: &str, groups: &[Option<String>]) -> Result<String, RoomsLinkError> {
        let proxy = self.proxy()?;
        let lines = room_lines(user, groups)?;
        let joined = proxy.join(offer, &lines).await?;
        let rooms = lines.into_iter().map(|line| line.room).collect();
        let session = RoomsSession { id: joined.session, rooms, connected: false };
        let replaced = lock(&self.sessions).insert(&user.identity, session);
        if let Some(old) = replaced {
            // No longer ours: its end is not the user's leave.
            leave(&proxy, old.id).await;
        }
        tracing::info!(
            identity = user.identity,
            username = user.username,
            session = joined.session,
            "media joined in partyline's rooms"
        );
        Ok(joined.answer)
    }

    /// A new offer on `user`'s joined peer connection (a direct line added or stopped): the
    /// rooms' answer; a line added to a session whose media is up is joined at once, a line gone
    /// is left.
    pub async fn renegotiate(
        &self,
        user: &User,
        offer: &str,
        groups: &[Option<String>],
    ) -> Result<String, RoomsLinkError> {
        let lines = room_lines(user, groups)?;
        let session = lock(&self.sessions).by_identity.get(&user.identity).cloned();
        let session = session.ok_or(RoomsLinkError::NoSession)?;
        let answer = self.proxy()?.renegotiate(session.id, offer, &lines).await?;
        let rooms: Vec<String> = lines.into_iter().map(|line| line.room).collect();
        {
            let mut sessions = lock(&self.sessions);
            let Some(now) = sessions.by_identity.get_mut(&user.identity).filter(|s| s.id == session.id) else {
                // Replaced or ended meanwhile: its own join or end says what happened.
                return Ok(answer);
            };
            now.rooms.clone_from(&rooms);
        }
        if session.connected {
            for room in rooms.iter().filter(|room| !room.is_empty() && !session.rooms.contains(room)) {
                self.users.joined(room, &user.identity);
            }
            for room in session.rooms.iter().filter(|room| !room.is_empty() && !rooms.contains(room)) {
                self.users.left(room, &user.identity, "its line stopped in the rooms");
            }
        }
        tracing::info!(identity = user.identity, session = session.id, ?rooms, "media renegotiated in the rooms");
        Ok(answer)
    }

    /// `user`'s talk key on `group` went on or off: passed on, then published as its talk.
    pub async fn set_talking(&self, user: &User, group: &str, talking: bool) -> Result<(), RoomsLinkError> {
        let line = user.line(group).ok_or_else(|| RoomsLinkError::NotAllowed(format!("no line {group:?}")))?;
        if talking && !line.talk {
            return Err(RoomsLinkError::NotAllowed(format!("{group:?} is listen-only for this session")));
        }
        let session = lock(&self.sessions).by_identity.get(&user.identity).cloned();
        let session = session.ok_or(RoomsLinkError::NoSession)?;
        let index = session.rooms.iter().position(|room| room == group).ok_or(RoomsLinkError::NoSession)?;
        let index = u32::try_from(index).map_err(|_| RoomsLinkError::NoSession)?;
        self.proxy()?.set_talking(session.id, index, talking).await?;
        self.users.talking(group, &user.identity, talking);
        Ok(())
    }

    /// `group` was taken from `identity` (the admin's removal, a direct line closed): its
    /// session's line leaves its room at once, whatever its panel does (the m-line stays,
    /// silent, until the panel offers again). A session not on the rooms has nothing to drop.
    async fn drop_line(&self, proxy: &RoomsProxy<'static>, identity: &str, group: &str) {
        let dropped = {
            let mut sessions = lock(&self.sessions);
            let session = sessions.by_identity.get_mut(identity);
            session.and_then(|session| {
                let index = session.rooms.iter().position(|room| room == group)?;
                session.rooms[index].clear();
                Some((session.id, u32::try_from(index).ok()?))
            })
        };
        let Some((id, index)) = dropped else { return };
        match proxy.drop_line(id, index).await {
            Ok(_) => tracing::info!(identity, group, session = id, "a removed line left the rooms"),
            Err(e) => {
                tracing::warn!(identity, group, session = id, error = %e, "the rooms did not take a line's removal");
            }
        }
    }

    /// Line removals were missed (a burst): every session's lines its user no longer holds leave.
    async fn drop_the_unheld_lines(&self, proxy: &RoomsProxy<'static>) {
        let sessions: Vec<(String, Vec<String>)> = lock(&self.sessions)
            .by_identity
            .iter()
            .map(|(identity, session)| (identity.clone(), session.rooms.clone()))
            .collect();
        for (identity, rooms) in sessions {
            let Some(user) = self.users.get(&identity) else { continue };
            for room in rooms.iter().filter(|room| !room.is_empty() && !user.has_line(room)) {
                self.drop_line(proxy, &identity, room).await;
            }
        }
    }

    /// Follows the rooms forever: their sessions' signals into the registry, the registry's
    /// removals into `Leave`; reconnects when the bus goes.
    pub async fn run(self: Arc<Self>) {
        let mut retry = BUS_RETRY;
        let mut removals = self.users.subscribe_removals();
        let mut line_removals = self.users.subscribe_line_removals();
        loop {
            let error = match self.bus.builder() {
                Ok(builder) => match builder.build().await {
                    Ok(connection) => {
                        retry.reset();
                        self.follow(&connection, &mut removals, &mut line_removals).await.err()
                    }
                    Err(e) => Some(e),
                },
                Err(e) => Some(e),
            };
            *lock(&self.proxy) = None;
            let message = error.map_or_else(|| "the bus connection ended".to_owned(), |e| e.to_string());
            tracing::warn!(bus = %self.bus, error = message, "no D-Bus connection for the rooms; retrying");
            tokio::time::sleep(retry.next_pause()).await;
        }
    }

    async fn follow(
        &self,
        connection: &zbus::Connection,
        removals: &mut tokio::sync::broadcast::Receiver<crate::users::Removal>,
        line_removals: &mut tokio::sync::broadcast::Receiver<crate::users::LineRemoval>,
    ) -> zbus::Result<()> {
        let proxy = RoomsProxy::new(connection).await?;
        let mut connected = proxy.receive_session_connected().await?;
        let mut ended = proxy.receive_session_ended().await?;
        let mut receiving = proxy.receive_session_receiving().await?;
        let dbus = zbus::fdo::DBusProxy::new(connection).await?;
        let mut owners = dbus.receive_name_owner_changed_with_args(&[(0, BUS_NAME)]).await?;
        self.keep_only_known(&proxy).await;
        *lock(&self.proxy) = Some(proxy.clone());
        loop {
            tokio::select! {
                // bridged gone or restarted: its rooms and every session in them went with it.
                Some(_) = owners.next() => self.end_all("partyline-bridged left the bus"),
                Some(signal) = connected.next() => {
                    if let Ok(args) = signal.args() {
                        self.connected(args.session);
                    }
                }
                Some(signal) = ended.next() => {
                    if let Ok(args) = signal.args() {
                        self.ended(args.session);
                    }
                }
                Some(signal) = receiving.next() => {
                    if let Ok(args) = signal.args() {
                        self.said_receiving(args.session, args.receiving);
                    }
                }
                removal = removals.recv() => match removal {
                    Ok(removal) => {
                        let gone = lock(&self.sessions).remove_identity(&removal.identity);
                        if let Some(session) = gone {
                            self.went(&removal.identity);
                            tracing::info!(identity = removal.identity, session = session.id, ending = ?removal.ending,
                                "a removed user's media leaves the rooms");
                            leave(&proxy, session.id).await;
                        }
                    }
                    Err(RecvError::Lagged(_)) => self.leave_the_unregistered(&proxy).await,
                    Err(RecvError::Closed) => return Ok(()),
                },
                removal = line_removals.recv() => match removal {
                    Ok(removal) => self.drop_line(&proxy, &removal.identity, &removal.group).await,
                    Err(RecvError::Lagged(_)) => self.drop_the_unheld_lines(&proxy).await,
                    Err(RecvError::Closed) => return Ok(()),
                },
                else => return Ok(()),
            }
        }
    }

    /// Ends the rooms' sessions control does not know: after control's restart, every one (their
    /// panels join again with new tokens); after a lost bus connection, none. No join is in
    /// flight meanwhile: the proxy is set after.
    async fn keep_only_known(&self, proxy: &RoomsProxy<'static>) {
        let known: Vec<u64> = lock(&self.sessions).identity_of.keys().copied().collect();
        match proxy.keep_only(&known).await {
            Ok(0) => {}
            Ok(ended) => tracing::warn!(ended, "the rooms' sessions control did not know were ended"),
            // No bridged on the bus yet, or one without rooms: no session to end.
            Err(error) => tracing::debug!(%error, "the rooms did not take KeepOnly"),
        }
    }

    /// A session's media is up: its user joined each of its lines.
    fn connected(&self, id: u64) {
        let session = {
            let mut sessions = lock(&self.sessions);
            let identity = sessions.identity_of.get(&id).cloned();
            identity.and_then(|identity| {
                let session = sessions.by_identity.get_mut(&identity)?;
                session.connected = true;
                Some((identity, session.rooms.clone()))
            })
        };
        if let Some((identity, rooms)) = session {
            for room in rooms.iter().filter(|room| !room.is_empty()) {
                self.users.joined(room, &identity);
            }
        }
    }

    /// The rooms receive a session's audio again, or stopped: said to the streams (no one
    /// listening is fine).
    fn said_receiving(&self, id: u64, receiving: bool) {
        let identity = lock(&self.sessions).identity_of.get(&id).cloned();
        if let Some(identity) = identity {
            let _ = self.receiving.send((identity, receiving));
        }
    }

    /// A session is gone (its panel closed, its network lost): its user left its lines.
    fn ended(&self, id: u64) {
        let Some((identity, session)) = lock(&self.sessions).remove_session(id) else { return };
        for room in session.rooms.iter().filter(|room| !room.is_empty()) {
            self.users.left(room, &identity, "its media ended in the rooms");
        }
        self.went(&identity);
    }

    /// Every session ended at once (the rooms went): their users left their lines.
    fn end_all(&self, why: &str) {
        let gone = std::mem::take(&mut *lock(&self.sessions));
        if !gone.by_identity.is_empty() {
            tracing::warn!(sessions = gone.by_identity.len(), why, "the rooms' sessions ended");
        }
        for (identity, session) in gone.by_identity {
            for room in session.rooms.iter().filter(|room| !room.is_empty()) {
                self.users.left(room, &identity, why);
            }
            self.went(&identity);
        }
    }

    /// Removals were missed (a burst): the sessions of users no longer registered leave.
    async fn leave_the_unregistered(&self, proxy: &RoomsProxy<'static>) {
        let gone: Vec<u64> = {
            let mut sessions = lock(&self.sessions);
            let identities: Vec<String> =
                sessions.by_identity.keys().filter(|identity| self.users.get(identity).is_none()).cloned().collect();
            let gone = identities.iter().filter_map(|identity| sessions.remove_identity(identity)).map(|s| s.id);
            let gone = gone.collect();
            identities.iter().for_each(|identity| self.went(identity));
            gone
        };
        for id in gone {
            tracing::info!(session = id, "an unregistered user's media leaves the rooms");
            leave(proxy, id).await;
        }
    }
}

/// The rooms' lines of the m-lines `groups` name: each with the session's rights on it; a
/// stopped m-line (`None`) neither talks nor listens.
fn room_lines(user: &User, groups: &[Option<String>]) -> Result<Vec<RoomLine>, RoomsLinkError> {
    groups
        .iter()
        .map(|group| match group {
            None => Ok(RoomLine { room: String::new(), talk: false, listen: false }),
            Some(group) => user
                .line(group)
                .map(|line| RoomLine { room: group.clone(), talk: line.talk, listen: line.listen })
                .ok_or_else(|| RoomsLinkError::NotAllowed(format!("no line {group:?}"))),
        })
        .collect()
}

/// Ends a session in the rooms; a failure is logged (the rooms end it anyway when its panel's
/// media stops).
async fn leave(proxy: &RoomsProxy<'static>, id: u64) {
    if let Err(e) = proxy.leave(id).await {
        tracing::warn!(session = id, error = %e, "the rooms did not take a session's leave");
    }
}
