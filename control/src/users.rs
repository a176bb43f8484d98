//! The users registry: who holds a token, and who is connected according to Janus.
//!
//! A user is registered `pending` when a token is issued, becomes `connected` when Janus says
//! it joined its group's room, and is removed when it leaves, is disconnected, or never used
//! its token. Every transition is one log line. Tokens are never logged.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A token never used for this long is revoked.
pub const UNUSED_TOKEN_LIFETIME: Duration = Duration::from_secs(10 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UserState {
    /// Holds a token, not (yet) in its room.
    Pending,
    /// In its group's room.
    Connected,
}

/// Who a user is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UserKind {
    /// A crew member in a browser, with a one-session token.
    Crew,
    /// A server audio user: a sound-card channel bridged by partyline-bridged, with a
    /// standing token; it stays registered while it is in the config.
    Server,
}

#[derive(Debug, Clone)]
pub struct User {
    /// Its participant id in the room (unique): the slug of the name plus random hex.
    pub identity: String,
    pub username: String,
    pub group_id: String,
    pub token: String,
    pub kind: UserKind,
    pub state: UserState,
    issued: Instant,
    pub connected_at: Option<OffsetDateTime>,
    pub last_activity: OffsetDateTime,
}

/// A user as `GET /admin/users` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserView {
    pub identity: String,
    pub username: String,
    pub group_id: String,
    pub kind: UserKind,
    pub state: UserState,
    /// RFC 3339; null while pending.
    pub connected_at: Option<String>,
    /// RFC 3339: the last transition.
    pub last_activity: String,
}

impl User {
    pub fn view(&self) -> UserView {
        let format = |t: OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
        UserView {
            identity: self.identity.clone(),
            username: self.username.clone(),
            group_id: self.group_id.clone(),
            kind: self.kind,
            state: self.state,
            connected_at: self.connected_at.map(format),
            last_activity: format(self.last_activity),
        }
    }
}

#[derive(Debug, Default)]
pub struct Users {
    by_identity: Mutex<HashMap<String, User>>,
    total_connections: AtomicU64,
}

impl Users {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, User>> {
        self.by_identity.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new pending crew member.
    pub fn register(&self, identity: String, username: String, group_id: String, token: String) -> User {
        self.insert(identity, username, group_id, token, UserKind::Crew)
    }

    /// Registers (or updates) a server audio user; true if it was not registered as such.
    pub fn upsert_server(&self, identity: &str, name: &str, group_id: &str, token: &str) -> bool {
        let mut users = self.lock();
        if let Some(user) = users.get_mut(identity).filter(|u| u.kind == UserKind::Server) {
            if user.group_id != group_id {
                user.state = UserState::Pending;
            }
            (user.username, user.group_id, user.token) = (name.to_owned(), group_id.to_owned(), token.to_owned());
            return false;
        }
        drop(users);
        self.insert(identity.to_owned(), name.to_owned(), group_id.to_owned(), token.to_owned(), UserKind::Server);
        true
    }

    fn insert(&self, identity: String, username: String, group_id: String, token: String, kind: UserKind) -> User {
        let user = User {
            identity: identity.clone(),
            username,
            group_id,
            token,
            kind,
            state: UserState::Pending,
            issued: Instant::now(),
            connected_at: None,
            last_activity: OffsetDateTime::now_utc(),
        };
        tracing::info!(identity, username = user.username, group = user.group_id, ?kind, "user registered (pending)");
        self.lock().insert(identity, user.clone());
        user
    }

    /// Janus says `id` joined `room`: that user is connected. False if no such user is
    /// registered for that room (a participant partyline did not admit).
    pub fn joined(&self, room: &str, id: &str) -> bool {
        let mut users = self.lock();
        let Some(user) = users.get_mut(id).filter(|u| u.group_id == room) else {
            return false;
        };
        if user.state != UserState::Connected {
            let now = OffsetDateTime::now_utc();
            user.state = UserState::Connected;
            user.connected_at = Some(now);
            user.last_activity = now;
            self.total_connections.fetch_add(1, Ordering::Relaxed);
            tracing::info!(identity = id, username = user.username, group = room, "user connected");
        }
        true
    }

    /// Janus says `id` left `room`: a connected crew member is removed and returned (its
    /// token must then be revoked by the caller); a server audio user goes back to pending
    /// (bridged rejoins). A pending user stays: it may not have joined yet.
    pub fn left(&self, room: &str, id: &str, why: &str) -> Option<User> {
        let mut users = self.lock();
        let user = users.get_mut(id).filter(|u| u.group_id == room && u.state == UserState::Connected)?;
        tracing::info!(identity = id, username = user.username, group = room, why, "user left");
        match user.kind {
            UserKind::Crew => users.remove(id),
            UserKind::Server => {
                user.state = UserState::Pending;
                user.last_activity = OffsetDateTime::now_utc();
                None
            }
        }
    }

    /// Removes a user (disconnect by the admin, group gone); the caller logs why.
    pub fn remove(&self, identity: &str) -> Option<User> {
        self.lock().remove(identity)
    }

    pub fn get(&self, identity: &str) -> Option<User> {
        self.lock().get(identity).cloned()
    }

    /// Every user, sorted by group then name.
    pub fn list(&self) -> Vec<User> {
        let mut users: Vec<User> = self.lock().values().cloned().collect();
        users.sort_by(|a, b| (&a.group_id, &a.username, &a.identity).cmp(&(&b.group_id, &b.username, &b.identity)));
        users
    }

    /// Removes and returns the pending users whose token is older than `lifetime`.
    pub fn take_expired(&self, lifetime: Duration) -> Vec<User> {
        let mut users = self.lock();
        let expired: Vec<String> = users
            .values()
            .filter(|u| u.kind == UserKind::Crew && u.state == UserState::Pending && u.issued.elapsed() > lifetime)
            .map(|u| u.identity.clone())
            .collect();
        expired.iter().filter_map(|id| users.remove(id)).collect()
    }

    /// Removes and returns the crew members of groups not in `groups`.
    pub fn take_outside(&self, groups: &[String]) -> Vec<User> {
        self.take_where(|u| u.kind == UserKind::Crew && !groups.contains(&u.group_id))
    }

    /// Removes and returns the server audio users whose identity is not in `identities`.
    pub fn take_servers_except(&self, identities: &[String]) -> Vec<User> {
        self.take_where(|u| u.kind == UserKind::Server && !identities.contains(&u.identity))
    }

    fn take_where(&self, doomed: impl Fn(&User) -> bool) -> Vec<User> {
        let mut users = self.lock();
        let gone: Vec<String> = users.values().filter(|u| doomed(u)).map(|u| u.identity.clone()).collect();
        gone.iter().filter_map(|id| users.remove(id)).collect()
    }

    /// Connected users of `room` that are not among `present` (a missed `left` event).
    pub fn missing_from(&self, room: &str, present: &[String]) -> Vec<String> {
        self.lock()
            .values()
            .filter(|u| u.group_id == room && u.state == UserState::Connected && !present.contains(&u.identity))
            .map(|u| u.identity.clone())
            .collect()
    }

    pub fn active_connections(&self) -> u64 {
        self.lock().values().filter(|u| u.state == UserState::Connected).count() as u64
    }

    pub fn total_connections(&self) -> u64 {
        self.total_connections.load(Ordering::Relaxed)
    }

    pub fn tokens(&self) -> Vec<String> {
        self.lock().values().map(|u| u.token.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_connected_left() {
        let users = Users::default();
        users.register("alice-1".into(), "Alice".into(), "stage".into(), "t".into());
        assert!(!users.joined("other-room", "alice-1"), "wrong room");
        assert!(users.left("stage", "alice-1", "test").is_none(), "pending users stay");
        assert!(users.joined("stage", "alice-1"));
        assert!(users.joined("stage", "alice-1"), "idempotent");
        assert_eq!((users.active_connections(), users.total_connections()), (1, 1));
        assert_eq!(users.missing_from("stage", &[]), ["alice-1"]);
        assert!(users.left("stage", "alice-1", "test").is_some());
        assert_eq!(users.active_connections(), 0);
        assert!(users.list().is_empty());
    }

    #[test]
    fn server_users_stay_registered_when_they_leave() {
        let users = Users::default();
        assert!(users.upsert_server("server-foh", "FOH", "stage", "t"));
        assert!(!users.upsert_server("server-foh", "FOH", "stage", "t"), "already there");
        assert!(users.joined("stage", "server-foh"));
        assert!(users.left("stage", "server-foh", "test").is_none());
        assert_eq!(users.get("server-foh").map(|u| u.state), Some(UserState::Pending));
        assert!(users.take_expired(Duration::ZERO).is_empty(), "standing tokens never expire");
        assert!(users.take_outside(&[]).is_empty(), "group removal is the config's business");
        assert_eq!(users.take_servers_except(&[]).len(), 1);
    }

    #[test]
    fn expiry_and_group_removal() {
        let users = Users::default();
        users.register("a".into(), "A".into(), "g1".into(), "t1".into());
        users.register("b".into(), "B".into(), "g2".into(), "t2".into());
        assert!(users.take_expired(UNUSED_TOKEN_LIFETIME).is_empty());
        assert_eq!(users.take_expired(Duration::ZERO).len(), 2);
        users.register("c".into(), "C".into(), "g1".into(), "t3".into());
        users.register("d".into(), "D".into(), "g2".into(), "t4".into());
        let gone = users.take_outside(&["g1".to_owned()]);
        assert_eq!(gone.iter().map(|u| u.identity.as_str()).collect::<Vec<_>>(), ["d"]);
    }
}
