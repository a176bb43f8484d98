//! What the Janus link's reconciliation takes out of the registry: tokens never used, lines of
//! groups gone, server audio users the config dropped, and who is missing from a room.

use std::time::Duration;

use time::OffsetDateTime;

use super::{Ending, Line, User, UserKind, UserState, Users};

impl Users {
    /// Removes and returns the pending users whose token is older than `lifetime`.
    pub fn take_expired(&self, lifetime: Duration) -> Vec<User> {
        let mut users = self.lock();
        let expired: Vec<String> = users
            .values()
            .filter(|u| u.kind == UserKind::Crew && u.state == UserState::Pending && u.issued.elapsed() > lifetime)
            .map(|u| u.identity.clone())
            .collect();
        let expired: Vec<User> = expired.iter().filter_map(|id| users.remove(id)).collect();
        expired.iter().for_each(|user| self.announce_removed(user, Ending::Ended));
        if !expired.is_empty() {
            users.crew_changed();
        }
        expired
    }

    /// Takes the lines of groups not in `groups` off the crew members; removes and returns
    /// those left with none.
    pub fn take_outside(&self, groups: &[String]) -> Vec<User> {
        let mut users = self.lock();
        let mut changed = false;
        for user in users.values_mut().filter(|u| u.kind == UserKind::Crew) {
            let (kept, gone): (Vec<Line>, Vec<Line>) =
                user.lines.drain(..).partition(|l| l.direct.is_some() || groups.contains(&l.group_id));
            user.lines = kept;
            self.publish_left(user, gone.iter(), "group deleted");
            changed |= !gone.is_empty();
        }
        if changed {
            users.crew_changed();
        }
        drop(users);
        // A direct line alone is no panel.
        self.take_where(|u| u.kind == UserKind::Crew && u.lines.iter().all(|l| l.direct.is_some()))
    }

    /// Removes and returns the server audio users whose identity is not in `identities`.
    pub fn take_servers_except(&self, identities: &[String]) -> Vec<User> {
        self.take_where(|u| u.kind == UserKind::Server && !identities.contains(&u.identity))
    }

    fn take_where(&self, doomed: impl Fn(&User) -> bool) -> Vec<User> {
        let mut users = self.lock();
        let gone: Vec<String> = users.values().filter(|u| doomed(u)).map(|u| u.identity.clone()).collect();
        let gone: Vec<User> = gone.iter().filter_map(|id| users.remove(id)).collect();
        for user in &gone {
            self.publish_left(user, user.lines.iter(), "removed");
            self.announce_removed(user, Ending::Ended);
        }
        if gone.iter().any(|u| u.kind == UserKind::Crew) {
            users.crew_changed();
        }
        gone
    }

    /// Connected users of `room` that are not among `present` (a missed `left` event); never
    /// one whose media is in partyline's own rooms (they are not Janus's to list).
    /// `present` is Janus's list of the room's participants, asked for at `asked`; a user who
    /// connected after that (its `joined` event overtook the list's reply) is not missing.
    pub fn missing_from(&self, room: &str, present: &[String], asked: OffsetDateTime) -> Vec<String> {
        self.lock()
            .values()
            .filter(|u| !u.on_rooms && !present.contains(&u.identity))
            .filter(|u| u.lines.iter().any(|l| l.group_id == room && l.joined_at.is_some_and(|at| at < asked)))
            .map(|u| u.identity.clone())
            .collect()
    }
}
