//! The users registry: who holds a token, and who is connected according to Janus.
//!
//! A user is registered `pending` when a token is issued, becomes `connected` when Janus says
//! it joined its group's room, and is removed when it leaves, is disconnected, or never used
//! its token. Every transition is one log line. Tokens are never logged.
//!
//! With a [`CrewStore`] (control's registry: [`Users::restore`]), every change of a crew member
//! is written to the state directory before the change is visible, and the crew comes back as it
//! was after a restart of control; Janus's reconciliation then confirms who is still connected.
//! Server audio users are never stored: they are derived from the config.
//!
//! Beside the registry (this file): `user` (a user, its lines, its view and record), `locked`
//! (the lock every change takes, which hands the crew to the store), `store` (`crew.json`),
//! `resume` (a panel's key across sessions), `sweeps` (what reconciliation takes out),
//! `direct` (direct lines: one line on each of their two ends), `seats` (who holds a position),
//! `talk` (who talks, as Janus says and as a mute hides it).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use time::OffsetDateTime;

mod counts;
mod direct;
mod locked;
mod removals;
mod resume;
mod seats;
mod store;
mod sweeps;
mod talk;
mod user;

pub use direct::{DirectError, DirectRoom};
use removals::Removals;
pub use removals::{Ending, LineRemoval, Removal};
use resume::Ended;
pub use resume::Resumed;
pub use seats::{PositionTaken, Seat};
pub use user::{Line, User, UserKind, UserState, UserView};

use crate::events::{EventBus, LiveEvent};
use crate::secrets::SecretValue;
use store::CrewStore;

/// A token never used for this long is revoked.
pub const UNUSED_TOKEN_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// How long a panel whose session ended by leaving its rooms (network loss, a closed page) may
/// take its panel key (and the admin's mutes of its lines) into the session it rejoins with.
pub const RESUME_GRACE: Duration = Duration::from_secs(2 * 60);

#[derive(Debug, Default)]
pub struct Users {
    by_identity: Mutex<HashMap<String, User>>,
    total_connections: AtomicU64,
    /// Where joins and leaves of lines are published.
    events: EventBus,
    /// Where the crew is kept across restarts; none in unit tests.
    store: Option<CrewStore>,
    /// Crew sessions that ended by leaving their rooms, for [`Users::resume`]: (token, panel
    /// key, groups muted by the admin, when).
    ended: Mutex<Vec<Ended>>,
    /// The crew members removed, as they are: the `/janus` proxy closes their connections
    /// (and so Janus ends their sessions).
    removed: Removals,
}

impl Users {
    /// The registry with its crew kept in `state_dir` (`crew.json`): the crew stored there
    /// comes back as it was (a pending token's lifetime still counts from its issue).
    pub fn restore(state_dir: &Path, events: EventBus) -> Users {
        let (store, records) = CrewStore::open(state_dir);
        let now = OffsetDateTime::now_utc();
        let mut users = HashMap::new();
        for record in records {
            let identity = record.identity.clone();
            let Some(user) = User::from_record(record, now) else {
                tracing::warn!(identity, file = %store.path().display(), "stored crew member with a time out of range: dropped");
                continue;
            };
            tracing::info!(
                identity,
                username = user.username,
                group = user.first_group(),
                lines = user.lines.len(),
                state = ?user.state,
                "user restored"
            );
            users.insert(identity, user);
        }
        if !users.is_empty() {
            tracing::info!(count = users.len(), file = %store.path().display(), "crew members restored");
        }
        // Those connected count among this process's connections, as they show among the active.
        let connected = users.values().filter(|u| u.state == UserState::Connected).count() as u64;
        Users {
            by_identity: Mutex::new(users),
            total_connections: AtomicU64::new(connected),
            events,
            store: Some(store),
            ended: Mutex::default(),
            removed: Removals::default(),
        }
    }

    /// Registers a new pending crew member with its lines (at least one), its panel key and the
    /// address it asked from.
    pub fn register(
        &self,
        identity: String,
        username: String,
        lines: Vec<Line>,
        token: String,
        panel_key: SecretValue,
        address: Option<IpAddr>,
    ) -> User {
        let user = User::pending(identity, username, lines, token, UserKind::Crew);
        self.insert(User { panel_key: Some(panel_key), address, ..user })
    }

    /// Marks a user as a WHIP source or WHEP player.
    pub fn set_stream(&self, identity: &str, kind: partyline_shared::config::StreamKind) {
        let mut users = self.lock();
        if let Some(user) = users.get_mut(identity) {
            user.stream = Some(kind);
            users.crew_changed();
        }
    }

    /// Marks a user's media as in partyline's own rooms (`true`), whose signals say when it
    /// joins and leaves, or on Janus (`false`), whose events and lists do.
    pub fn set_on_rooms(&self, identity: &str, on_rooms: bool) {
        if let Some(user) = self.lock().get_mut(identity) {
            user.on_rooms = on_rooms;
        }
    }

    /// Records the Janus node a crew member's session is placed on (before its token is
    /// handed out: its panel's `/janus` connection goes there).
    pub fn place(&self, identity: &str, node: &str) -> Option<User> {
        let mut users = self.lock();
        let user = users.get_mut(identity)?;
        user.node = Some(node.to_owned());
        let placed = user.clone();
        if placed.kind == UserKind::Crew {
            users.crew_changed();
        }
        Some(placed)
    }

    /// Registers (or updates) a server audio user; true if it was not registered as such.
    pub fn upsert_server(&self, identity: &str, name: &str, group_id: &str, token: &str) -> bool {
        let mut users = self.lock();
        if let Some(user) = users.get_mut(identity).filter(|u| u.kind == UserKind::Server) {
            if user.first_group() != group_id {
                user.state = UserState::Pending;
                user.lines = vec![Line::both(group_id)];
            }
            (user.username, user.token) = (name.to_owned(), SecretValue::new(token.to_owned()));
            return false;
        }
        drop(users);
        let lines = vec![Line::both(group_id)];
        self.insert(User::pending(identity.to_owned(), name.to_owned(), lines, token.to_owned(), UserKind::Server));
        true
    }

    fn insert(&self, user: User) -> User {
        self.insert_locked(&mut self.lock(), user)
    }

    /// Registers `user`, the registry locked by the caller (who checked something first).
    fn insert_locked(&self, users: &mut locked::Registry<'_>, user: User) -> User {
        let groups: Vec<&str> = user.lines.iter().map(|l| l.group_id.as_str()).collect();
        tracing::info!(
            identity = user.identity,
            username = user.username,
            group = groups.join(","),
            position = user.position,
            kind = ?user.kind,
            "user registered (pending)"
        );
        let replaced = users.insert(user.identity.clone(), user.clone());
        if user.kind == UserKind::Crew || replaced.is_some_and(|u| u.kind == UserKind::Crew) {
            users.crew_changed();
        }
        user
    }

    /// Janus says `id` joined `room`: that user is connected. False if no such user is
    /// registered for that room (a participant partyline did not admit).
    pub fn joined(&self, room: &str, id: &str) -> bool {
        let mut users = self.lock();
        let Some(user) = users.get_mut(id) else { return false };
        let Some(line) = user.lines.iter_mut().find(|l| l.group_id == room) else { return false };
        if line.joined_at.is_some() {
            return true;
        }
        let now = OffsetDateTime::now_utc();
        line.joined_at = Some(now);
        user.last_activity = now;
        self.events.publish(&LiveEvent::UserJoined {
            identity: id.to_owned(),
            username: user.username.clone(),
            group_id: room.to_owned(),
        });
        if user.state == UserState::Connected {
            tracing::info!(identity = id, username = user.username, group = room, "user joined a line");
        } else {
            user.state = UserState::Connected;
            user.connected_at = Some(now);
            self.total_connections.fetch_add(1, Ordering::Relaxed);
            tracing::info!(identity = id, username = user.username, group = room, "user connected");
        }
        if user.kind == UserKind::Crew {
            users.crew_changed();
        }
        true
    }

    /// Janus says `id` left `room`: a connected crew member is removed and returned (its
    /// token must then be revoked by the caller); a server audio user goes back to pending
    /// (bridged rejoins). A pending user stays: it may not have joined yet.
    pub fn left(&self, room: &str, id: &str, why: &str) -> Option<User> {
        let mut users = self.lock();
        let user = users.get_mut(id)?;
        let line = user.lines.iter_mut().find(|l| l.group_id == room && l.joined_at.is_some())?;
        line.joined_at = None;
        // A talk ends at its talker's leave (as the talk clock counts it).
        line.talking = false;
        self.events.publish(&LiveEvent::UserLeft {
            identity: id.to_owned(),
            username: user.username.clone(),
            group_id: room.to_owned(),
            why: why.to_owned(),
        });
        if user.lines.iter().any(|l| l.joined_at.is_some()) {
            // Still on other lines: the session goes on.
            tracing::info!(identity = id, username = user.username, group = room, why, "user left a line");
            user.last_activity = OffsetDateTime::now_utc();
            if user.kind == UserKind::Crew {
                users.crew_changed();
            }
            return None;
        }
        tracing::info!(identity = id, username = user.username, group = room, why, "user left");
        match user.kind {
            UserKind::Crew => {
                let gone = users.remove(id);
                users.crew_changed();
                if let Some(user) = &gone {
                    // Kept under the registry's lock, which a rejoin holds while it looks in
                    // both places: it finds the session live or ended, never in neither.
                    self.keep_for_resume(user);
                }
                drop(users);
                if let Some(user) = &gone {
                    self.announce_removed(user, Ending::Ended);
                }
                gone
            }
            UserKind::Server => {
                user.state = UserState::Pending;
                user.last_activity = OffsetDateTime::now_utc();
                None
            }
        }
    }

    /// Removes a user (disconnected by the admin, or its admission failed); the caller logs why.
    pub fn remove(&self, identity: &str, ending: Ending) -> Option<User> {
        let mut users = self.lock();
        let gone = users.remove(identity);
        if let Some(user) = &gone {
            self.publish_left(user, user.lines.iter(), "removed");
            self.announce_removed(user, ending);
        }
        if gone.as_ref().is_some_and(|u| u.kind == UserKind::Crew) {
            users.crew_changed();
        }
        gone
    }

    /// Publishes that `user` left each of `lines` it was on.
    fn publish_left<'a>(&self, user: &User, lines: impl Iterator<Item = &'a Line>, why: &str) {
        for line in lines.filter(|l| l.joined_at.is_some()) {
            self.events.publish(&LiveEvent::UserLeft {
                identity: user.identity.clone(),
                username: user.username.clone(),
                group_id: line.group_id.clone(),
                why: why.to_owned(),
            });
        }
    }

    pub fn get(&self, identity: &str) -> Option<User> {
        self.lock().get(identity).cloned()
    }

    /// The crew member holding `token`, if any (compared in constant time).
    pub fn by_token(&self, token: &str) -> Option<User> {
        self.lock().values().find(|u| u.kind == UserKind::Crew && u.token.matches(token)).cloned()
    }

    /// The crew member whose panel key is `key`, if any (compared in constant time).
    pub fn by_panel_key(&self, key: &str) -> Option<User> {
        self.lock().values().find(|u| u.panel_key.as_ref().is_some_and(|k| k.matches(key))).cloned()
    }

    /// Sets whether the admin mutes `identity` on its line `group`; the user as it is now,
    /// `None` when it has no such line.
    pub fn set_muted_by_admin(&self, identity: &str, group: &str, muted: bool) -> Option<User> {
        let mut users = self.lock();
        let user = users.get_mut(identity)?;
        let line = user.lines.iter_mut().find(|l| l.group_id == group)?;
        line.muted_by_admin = muted;
        let now = user.clone();
        if now.kind == UserKind::Crew {
            users.crew_changed();
        }
        Some(now)
    }

    /// Whether `identity` has the line `group` without its talk.
    pub fn listens_only(&self, identity: &str, group: &str) -> bool {
        self.lock().get(identity).and_then(|u| u.line(group)).is_some_and(|l| !l.talk)
    }

    /// Whether the admin mutes `identity` on `group`.
    pub fn muted_by_admin(&self, identity: &str, group: &str) -> bool {
        self.lock().get(identity).and_then(|u| u.line(group)).is_some_and(|l| l.muted_by_admin)
    }

    /// Every user, sorted by (first) group then name.
    pub fn list(&self) -> Vec<User> {
        let mut users: Vec<User> = self.lock().values().cloned().collect();
        users.sort_by(|a, b| {
            (a.first_group(), &a.username, &a.identity).cmp(&(b.first_group(), &b.username, &b.identity))
        });
        users
    }

    /// Takes `room` off the lines of `identity`: returns the line taken and the user as it is
    /// now, or `None` when it had no such line. A user left with no line is removed (the
    /// caller then disconnects it for good).
    pub fn remove_line(&self, identity: &str, room: &str) -> Option<(Line, User, bool)> {
        let mut users = self.lock();
        let user = users.get_mut(identity)?;
        let index = user.lines.iter().position(|l| l.group_id == room)?;
        let line = user.lines.remove(index);
        self.publish_left(user, std::iter::once(&line), "line removed");
        if !user.lines.iter().any(|l| l.joined_at.is_some()) {
            user.state = UserState::Pending;
        }
        let last = user.lines.is_empty();
        let now = if last { users.remove(identity)? } else { user.clone() };
        if last {
            self.announce_removed(&now, Ending::Disconnected);
        } else {
            self.announce_line_removed(&now, &line.group_id);
        }
        if now.kind == UserKind::Crew {
            users.crew_changed();
        }
        Some((line, now, last))
    }

    /// The tokens a room on Janus admits: those of the users (crew and server) registered in it
    /// whose token is Janus's.
    pub fn tokens_of_room(&self, room: &str) -> Vec<String> {
        let users = self.lock();
        let admitted = users.values().filter(|u| u.has_line(room) && u.token_in_janus());
        admitted.map(|u| u.token.expose().to_owned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_connected_left() {
        let users = Users::default();
        on_stage(&users, "alice-1", "Alice", "t");
        assert!(!users.joined("other-room", "alice-1"), "wrong room");
        assert!(users.left("stage", "alice-1", "test").is_none(), "pending users stay");
        assert!(users.joined("stage", "alice-1"));
        assert!(users.joined("stage", "alice-1"), "idempotent");
        assert_eq!((users.active_connections(), users.total_connections()), (1, 1));
        assert_eq!(users.missing_from("stage", &[], OffsetDateTime::now_utc()), ["alice-1"]);
        assert!(users.left("stage", "alice-1", "test").is_some());
        assert_eq!(users.active_connections(), 0);
        assert!(users.list().is_empty());
    }

    #[test]
    fn talking_is_published_for_users_on_the_line_only() {
        let users = Users::default();
        let published = || users.events.stats().last_id;
        on_stage(&users, "alice-1", "Alice", "t");
        users.talking("stage", "alice-1", true);
        users.talking("stage", "stranger", true);
        assert_eq!(published(), 0, "not joined yet, or not admitted: nothing");
        assert!(users.joined("stage", "alice-1"));
        let joined = published();
        users.talking("backstage", "alice-1", true);
        assert_eq!(published(), joined, "not her line");
        users.talking("stage", "alice-1", true);
        users.talking("stage", "alice-1", false);
        assert_eq!(published(), joined + 2);
    }

    #[test]
    fn a_user_who_joined_after_the_list_was_asked_for_is_not_missing() {
        let users = Users::default();
        on_stage(&users, "alice-1", "Alice", "t");
        let asked = OffsetDateTime::now_utc();
        assert!(users.joined("stage", "alice-1"));
        assert!(users.missing_from("stage", &[], asked).is_empty(), "the list predates the join");
        assert_eq!(users.missing_from("stage", &[], OffsetDateTime::now_utc()), ["alice-1"]);
        assert!(users.missing_from("stage", &["alice-1".to_owned()], OffsetDateTime::now_utc()).is_empty());
        users.set_on_rooms("alice-1", true);
        let missing = users.missing_from("stage", &[], OffsetDateTime::now_utc());
        assert!(missing.is_empty(), "her media is in partyline's rooms, not Janus's to list");
        users.set_on_rooms("alice-1", false);
        let missing = users.missing_from("stage", &[], OffsetDateTime::now_utc());
        assert_eq!(missing, ["alice-1"], "back on Janus, Janus's list judges her again");
    }

    #[test]
    fn debug_output_leaves_the_token_out() {
        let users = Users::default();
        let user = users.register(
            "alice-1".into(),
            "Alice".into(),
            vec![Line::both("stage")],
            "s3cr3t-token".into(),
            SecretValue::new("p4nel-key".into()),
            None,
        );
        let shown = format!("{user:?}");
        assert!(
            shown.contains("alice-1") && !shown.contains("s3cr3t-token") && !shown.contains("p4nel-key"),
            "{shown}"
        );
    }

    /// The proxy closes a disconnected member's connection so that its panel stays out; a
    /// member that left or lost its last group may come back by itself.
    #[test]
    fn removals_say_whether_the_admin_disconnected_the_member() {
        let users = Users::default();
        let mut removals = users.subscribe_removals();
        let mut next = || removals.try_recv().map(|r| (r.identity, r.ending)).expect("a removal");
        on_stage(&users, "al-1", "Al", "t1");
        assert!(users.joined("stage", "al-1"));
        assert!(users.left("stage", "al-1", "left the room").is_some());
        assert_eq!(next(), ("al-1".to_owned(), Ending::Ended));
        on_stage(&users, "bo-2", "Bo", "t2");
        assert!(users.remove("bo-2", Ending::Disconnected).is_some());
        assert_eq!(next(), ("bo-2".to_owned(), Ending::Disconnected));
        on_stage(&users, "cy-3", "Cy", "t3");
        assert!(users.remove_line("cy-3", "stage").is_some_and(|(_, _, last)| last));
        assert_eq!(next(), ("cy-3".to_owned(), Ending::Disconnected), "its last line taken");
        on_stage(&users, "di-4", "Di", "t4");
        assert_eq!(users.take_outside(&[]).len(), 1);
        assert_eq!(next(), ("di-4".to_owned(), Ending::Ended), "its groups deleted");
    }

    #[test]
    fn a_panel_that_left_takes_its_key_and_mutes_into_its_next_session_with_both_secrets() {
        let users = Users::default();
        let lines = vec![Line::both("stage"), Line::both("foh")];
        users.register("alice-1".into(), "Alice".into(), lines, "t1".into(), SecretValue::new("k1".into()), None);
        assert!(users.joined("stage", "alice-1") && users.joined("foh", "alice-1"));
        assert!(users.set_muted_by_admin("alice-1", "foh", true).is_some());
        // Not ended yet: the key moves, the old session keeps none.
        assert!(users.resume("t1", "wrong").is_none() && users.resume("wrong", "k1").is_none());
        let moved = users.resume("t1", "k1").expect("the live session's key");
        assert_eq!((moved.panel_key.expose(), moved.muted.as_slice()), ("k1", ["foh".to_owned()].as_slice()));
        assert!(users.by_panel_key("k1").is_none(), "taken from the old session");
        assert!(users.resume("t1", "k1").is_none(), "once");

        on_stage(&users, "bob-2", "Bob", "t2");
        assert!(users.joined("stage", "bob-2"));
        assert!(users.left("stage", "bob-2", "left the room").is_some());
        assert!(users.resume("t2", "k1").is_none(), "both secrets");
        let taken = users.resume("t2", "key-t2").expect("the ended session's key");
        users.give_back("t2", taken);
        let again = users.resume("t2", "key-t2").expect("given back: its new session was refused");
        assert_eq!(again.panel_key.expose(), "key-t2");
        assert!(users.resume("t2", "key-t2").is_none(), "once");
        on_stage(&users, "cy-3", "Cy", "t3");
        assert!(users.remove("cy-3", Ending::Disconnected).is_some());
        assert!(users.resume("t3", "key-t3").is_none(), "a disconnect by the admin is not resumed");
        on_stage(&users, "di-4", "Di", "t4");
        assert!(users.joined("stage", "di-4"));
        assert!(users.left("stage", "di-4", "kicked").is_some(), "the kick's leave came first");
        users.forget_resume(&SecretValue::new("t4".into()));
        assert!(users.resume("t4", "key-t4").is_none(), "…and the disconnect forgets it");
    }

    /// A panel rejoins as soon as its network is back, while the server may still be handling
    /// its old session's leave: the key moves whichever comes first.
    #[test]
    fn a_rejoin_racing_its_old_sessions_leave_keeps_the_key() {
        for round in 0..2000 {
            let users = Users::default();
            let (identity, token) = (format!("al-{round}"), format!("t{round}"));
            on_stage(&users, &identity, "Al", &token);
            assert!(users.joined("stage", &identity));
            let start = std::sync::Barrier::new(2);
            let resumed = std::thread::scope(|scope| {
                let rejoin = scope.spawn(|| {
                    start.wait();
                    users.resume(&token, &format!("key-{token}"))
                });
                start.wait();
                users.left("stage", &identity, "left the room");
                rejoin.join().expect("the rejoin")
            });
            assert!(resumed.is_some(), "round {round}: the key was lost between the leave's two steps");
        }
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
        on_line(&users, "a", "g1");
        on_line(&users, "b", "g2");
        assert!(users.take_expired(UNUSED_TOKEN_LIFETIME).is_empty());
        assert_eq!(users.take_expired(Duration::ZERO).len(), 2);
        on_line(&users, "c", "g1");
        on_line(&users, "d", "g2");
        let gone = users.take_outside(&["g1".to_owned()]);
        assert_eq!(gone.iter().map(|u| u.identity.as_str()).collect::<Vec<_>>(), ["d"]);
    }

    /// Registers crew member `identity` (its name too, and its token) on one line, `group`.
    fn on_line(users: &Users, identity: &str, group: &str) -> User {
        let (token, key) = (format!("token-{identity}"), SecretValue::new(format!("key-{identity}")));
        users.register(identity.into(), identity.into(), vec![Line::both(group)], token, key, None)
    }

    /// Registers a crew member on one line, "stage", with token `token` (and a panel key of its own).
    fn on_stage(users: &Users, identity: &str, name: &str, token: &str) -> User {
        let key = SecretValue::new(format!("key-{token}"));
        users.register(identity.into(), name.into(), vec![Line::both("stage")], token.into(), key, None)
    }

    /// The crew as `GET /admin/users` shows it, with tokens.
    fn crew(users: &Users) -> Vec<(serde_json::Value, SecretValue)> {
        let crew = users.list().into_iter().filter(|u| u.kind == UserKind::Crew);
        crew.map(|u| (serde_json::to_value(u.view()).expect("json"), u.token)).collect()
    }

    #[test]
    fn the_crew_is_restored_and_server_users_are_not_stored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let users = Users::restore(dir.path(), EventBus::default());
        on_stage(&users, "alice-1", "Alice", "t1");
        on_stage(&users, "bob-2", "Bob", "t2");
        on_stage(&users, "carol-3", "Carol", "t3");
        assert!(users.upsert_server("server-foh", "FOH", "stage", "t4"));
        assert!(users.joined("stage", "alice-1"));
        assert!(users.joined("stage", "carol-3"));
        assert!(users.left("stage", "carol-3", "test").is_some());

        let again = Users::restore(dir.path(), EventBus::default());
        assert_eq!(crew(&again), crew(&users), "as it was, times to the nanosecond");
        assert_eq!(again.list().len(), 2, "no server audio user");
        let counts = (again.active_connections(), again.total_connections());
        assert_eq!(counts, (1, 1), "Alice, connected, counts among the connections since start");
        assert!(again.take_expired(UNUSED_TOKEN_LIFETIME).is_empty(), "a fresh token is not expired");
        assert!(again.remove("bob-2", Ending::Disconnected).is_some());
        assert_eq!(crew(&Users::restore(dir.path(), EventBus::default())), crew(&again));
    }

    #[test]
    fn a_pending_token_keeps_its_age_across_a_restore() {
        let dir = tempfile::tempdir().expect("tempdir");
        Users::restore(dir.path(), EventBus::default()).register(
            "alice-1".into(),
            "Alice".into(),
            vec![Line::both("stage")],
            "t1".into(),
            SecretValue::new("k1".into()),
            None,
        );
        let (store, mut stored) = CrewStore::open(dir.path());
        stored[0].issued_at_unix_ns -= 9 * 60 * 1_000_000_000;
        store.save(&stored);
        let users = Users::restore(dir.path(), EventBus::default());
        assert!(users.take_expired(UNUSED_TOKEN_LIFETIME).is_empty(), "9 min old: 1 min left");
        assert_eq!(users.take_expired(Duration::from_secs(8 * 60)).len(), 1, "older than 8 min");
        assert!(Users::restore(dir.path(), EventBus::default()).list().is_empty(), "the expiry is stored");
    }
}
