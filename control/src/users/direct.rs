//! Direct lines in the registry: a private two-party line is one [`Line`] on each of its two
//! crew members, on the same room, each naming the other ([`Peer`]). Both are added and taken
//! away together, so a direct line always has its two ends or none. The callee's reply key
//! reaches whoever last spoke to it on a direct line, or the first to open one while nobody
//! had ([`User::reply_to`]): opening a line does not take the reply from the last talker.

use std::time::Instant;

use super::{Line, User, UserKind, Users};

/// The other end of a direct line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub identity: String,
    pub username: String,
    /// This end opened the line (pressed the person key).
    pub caller: bool,
    /// Its room is made on the ends' nodes: until then the line is not shown to the panels,
    /// whose join would find no room (and drop the line).
    pub ready: bool,
}

/// A direct line as the registry knows it: its room and its two ends' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectRoom {
    pub room: String,
    /// (identity, username) of the caller, then the callee.
    pub ends: [(String, String); 2],
}

/// Why a direct line cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectError {
    #[error("no crew member {0:?} is online")]
    NotOnline(String),
    #[error("a panel cannot open a direct line to itself")]
    ToItself,
    #[error("{0:?} has as many lines as a panel holds")]
    Full(String),
}

impl Users {
    /// The direct line between `a` and `b`, if one is open.
    pub fn direct_between(&self, a: &str, b: &str) -> Option<String> {
        let users = self.lock();
        let user = users.get(a)?;
        user.lines.iter().find(|l| l.direct.as_ref().is_some_and(|p| p.identity == b)).map(|l| l.group_id.clone())
    }

    /// Opens direct line `room` from `caller` to `callee` (both crew members registered):
    /// a listen-and-talk line on each; the callee's reply reaches the caller if it reached
    /// nobody. Both ends or neither.
    pub fn open_direct(&self, caller: &str, callee: &str, room: &str, max_lines: usize) -> Result<(), DirectError> {
        if caller == callee {
            return Err(DirectError::ToItself);
        }
        let mut users = self.lock();
        let crew = |id: &str| users.get(id).filter(|u| u.kind == UserKind::Crew).cloned();
        let from = crew(caller).ok_or_else(|| DirectError::NotOnline(caller.to_owned()))?;
        let to = crew(callee).ok_or_else(|| DirectError::NotOnline(callee.to_owned()))?;
        for user in [&from, &to] {
            if user.lines.len() >= max_lines {
                return Err(DirectError::Full(user.username.clone()));
            }
        }
        let end = |other: &User, caller: bool| Line {
            direct: Some(Peer {
                identity: other.identity.clone(),
                username: other.username.clone(),
                caller,
                ready: false,
            }),
            ..Line::both(room)
        };
        let (caller_line, callee_line) = (end(&to, true), end(&from, false));
        if let Some(user) = users.get_mut(caller) {
            user.lines.push(caller_line);
        }
        if let Some(user) = users.get_mut(callee) {
            user.lines.push(callee_line);
            // A line opened is not a word spoken: the reply stays with whoever last talked to
            // the callee, and reaches the new caller only when it reached nobody.
            user.reply_to.get_or_insert_with(|| (room.to_owned(), Instant::now()));
        }
        users.crew_changed();
        tracing::info!(room, caller, callee, "direct line opened");
        Ok(())
    }

    /// Direct line `room`'s room is made: its ends may join it.
    pub fn direct_ready(&self, room: &str) {
        let mut users = self.lock();
        let ends = users.values_mut().flat_map(|u| u.lines.iter_mut()).filter(|l| l.group_id == room);
        for peer in ends.filter_map(|l| l.direct.as_mut()) {
            peer.ready = true;
        }
    }

    /// Closes every direct line one of whose ends is `identity` (registered or not any more):
    /// taken off both ends. Returns each line's room and the ends still registered.
    pub fn close_directs_of(&self, identity: &str) -> Vec<(String, Vec<User>)> {
        let rooms: Vec<String> = {
            let users = self.lock();
            let named = |u: &User| {
                u.lines
                    .iter()
                    .filter(|l| l.direct.as_ref().is_some_and(|p| p.identity == identity))
                    .map(|l| l.group_id.clone())
                    .collect::<Vec<_>>()
            };
            let mut rooms: Vec<String> = users.values().flat_map(named).collect();
            if let Some(own) = users.get(identity) {
                rooms.extend(own.lines.iter().filter(|l| l.direct.is_some()).map(|l| l.group_id.clone()));
            }
            rooms.sort();
            rooms.dedup();
            rooms
        };
        rooms
            .into_iter()
            .map(|room| {
                let ends = self.close_direct(&room);
                (room, ends)
            })
            .collect()
    }

    /// Closes direct line `room`: taken off both ends (as they are now: registered). Empty when
    /// no such line is open.
    pub fn close_direct(&self, room: &str) -> Vec<User> {
        let mut users = self.lock();
        let mut ends = Vec::new();
        for user in users.values_mut() {
            let Some(index) = user.lines.iter().position(|l| l.group_id == room && l.direct.is_some()) else {
                continue;
            };
            let line = user.lines.remove(index);
            if user.reply_to.as_ref().is_some_and(|(r, _)| r == room) {
                user.reply_to = None;
            }
            self.publish_left(user, std::iter::once(&line), "direct line closed");
            ends.push(user.clone());
        }
        if !ends.is_empty() {
            users.crew_changed();
            tracing::info!(room, ends = ends.len(), "direct line closed");
        }
        ends
    }

    /// Every open direct line.
    pub fn direct_rooms(&self) -> Vec<DirectRoom> {
        let users = self.lock();
        let mut rooms: Vec<DirectRoom> = users
            .values()
            .flat_map(|u| {
                u.lines.iter().filter_map(move |l| {
                    let peer = l.direct.as_ref().filter(|p| p.caller)?;
                    let ends =
                        [(u.identity.clone(), u.username.clone()), (peer.identity.clone(), peer.username.clone())];
                    Some(DirectRoom { room: l.group_id.clone(), ends })
                })
            })
            .collect();
        rooms.sort_by(|a, b| a.room.cmp(&b.room));
        rooms
    }

    /// `id` spoke on direct line `room`: the other end's reply now reaches it.
    pub(super) fn heard_on_direct(&self, users: &mut super::locked::Registry<'_>, room: &str, id: &str) {
        let Some(peer) = users.get(id).and_then(|u| u.line(room)).and_then(|l| l.direct.clone()) else { return };
        if let Some(other) = users.get_mut(&peer.identity) {
            other.reply_to = Some((room.to_owned(), Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::SecretValue;

    fn crew(users: &Users, name: &str) -> String {
        let identity = format!("{name}-1");
        let key = SecretValue::new(format!("key-{name}"));
        users.register(identity.clone(), name.into(), vec![Line::both("stage")], format!("t-{name}"), key, None);
        identity
    }

    #[test]
    fn a_direct_line_is_on_both_ends_or_neither() {
        let users = Users::default();
        let (ann, ben, cat) = (crew(&users, "ann"), crew(&users, "ben"), crew(&users, "cat"));
        users.open_direct(&ann, &ben, "direct-01", 12).expect("opened");
        assert_eq!(users.direct_between(&ann, &ben).as_deref(), Some("direct-01"));
        assert_eq!(users.direct_between(&ben, &ann).as_deref(), Some("direct-01"));
        assert_eq!(users.direct_between(&ann, &cat), None);
        let ben_now = users.get(&ben).expect("ben");
        let line = ben_now.line("direct-01").expect("callee's end");
        assert_eq!(line.direct.as_ref().map(|p| (p.username.as_str(), p.caller)), Some(("ann", false)));
        assert_eq!(ben_now.reply_to.as_ref().map(|(r, _)| r.as_str()), Some("direct-01"), "reply reaches the caller");
        let mut tokens = users.tokens_of_room("direct-01");
        tokens.sort();
        assert_eq!(tokens, ["t-ann", "t-ben"], "the room admits its two ends only");
        let rooms = users.direct_rooms();
        assert_eq!(rooms.len(), 1);
        assert_eq!((rooms[0].ends[0].1.as_str(), rooms[0].ends[1].1.as_str()), ("ann", "ben"));

        assert_eq!(users.open_direct(&ann, &ann, "direct-02", 12), Err(DirectError::ToItself));
        assert_eq!(users.open_direct(&ann, "gone-1", "direct-02", 12), Err(DirectError::NotOnline("gone-1".into())));
        assert_eq!(users.open_direct(&ann, &cat, "direct-02", 2), Err(DirectError::Full("ann".into())));
        assert!(!users.get(&cat).expect("cat").has_line("direct-02"), "nothing half-opened");

        let closed = users.close_directs_of(&ann);
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].1.len(), 2);
        for id in [&ann, &ben] {
            let user = users.get(id).expect("still registered");
            assert!(!user.has_line("direct-01"), "{id}: closed on both ends");
            assert!(user.reply_to.is_none());
        }
        assert!(users.direct_rooms().is_empty());
    }

    #[test]
    fn the_reply_follows_whoever_spoke_last() {
        let users = Users::default();
        let (ann, ben, cat) = (crew(&users, "ann"), crew(&users, "ben"), crew(&users, "cat"));
        users.open_direct(&ann, &ben, "direct-01", 12).expect("opened");
        let reply = |id: &str| users.get(id).and_then(|u| u.reply_to).map(|(room, _)| room);
        assert_eq!(reply(&ben).as_deref(), Some("direct-01"), "the first caller, nobody else to reply to");
        users.open_direct(&cat, &ben, "direct-02", 12).expect("opened");
        assert_eq!(reply(&ben).as_deref(), Some("direct-01"), "a line opened takes no reply");
        let heard = |room: &str, id: &str| users.heard_on_direct(&mut users.lock(), room, id);
        heard("direct-02", &cat);
        assert_eq!(reply(&ben).as_deref(), Some("direct-02"), "the last who spoke");
        heard("direct-01", &ann);
        assert_eq!(reply(&ben).as_deref(), Some("direct-01"), "the last who spoke");
        users.close_direct("direct-01");
        assert_eq!(reply(&ben), None, "its line closed");
    }
}
