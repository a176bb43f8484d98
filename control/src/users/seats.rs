//! Who holds a position. A position for one crew member at a time (`positions[].occupants:
//! one`) is held by whoever registered for it, from its token's issue (a token not used yet
//! holds it too: its panel is joining) until it leaves the registry. A second registration is
//! refused under the same lock that would insert it, so two joins at once cannot both get in.
//! The holder's own rejoin (a `resume` whose secrets matched) replaces its old session.

use std::net::IpAddr;

use partyline_shared::config::Occupants;

use super::{Line, User, UserKind, Users};
use crate::secrets::SecretValue;

/// The position a crew member joins as.
#[derive(Debug, Clone, Copy)]
pub struct Seat<'a> {
    /// The position's id.
    pub position: &'a str,
    /// Its panel has an announce key.
    pub announce: bool,
    pub occupants: Occupants,
    /// The token of the session a rejoin resumed (its secrets checked): that session's hold
    /// passes to the new one.
    pub resuming: Option<&'a str>,
}

/// A position for one crew member is held by someone else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("position {position:?} is taken: {holder} is at it, and it takes one crew member at a time")]
pub struct PositionTaken {
    pub position: String,
    /// The holder's name.
    pub holder: String,
}

impl Users {
    /// Registers a new pending crew member at `seat`, as [`Users::register`] does, unless the
    /// position is for one crew member and someone else holds it.
    #[allow(clippy::too_many_arguments)]
    pub fn register_seated(
        &self,
        identity: String,
        username: String,
        lines: Vec<Line>,
        token: String,
        panel_key: SecretValue,
        address: Option<IpAddr>,
        seat: Seat<'_>,
    ) -> Result<User, PositionTaken> {
        let user = User::pending(identity, username, lines, token, UserKind::Crew);
        let position = Some(seat.position.to_owned());
        let user = User { panel_key: Some(panel_key), address, position, announce: seat.announce, ..user };
        let mut users = self.lock();
        if seat.occupants == Occupants::One
            && let Some(holder) = users.values().find(|u| holds(u, seat))
        {
            let taken = PositionTaken { position: seat.position.to_owned(), holder: holder.username.clone() };
            tracing::info!(
                position = seat.position,
                holder = holder.identity,
                username = user.username,
                "a second crew member asked for a position for one: refused"
            );
            return Err(taken);
        }
        Ok(self.insert_locked(&mut users, user))
    }
}

/// Whether `user` holds `seat`'s position (a rejoin's old session gives its hold up).
fn holds(user: &User, seat: Seat<'_>) -> bool {
    user.kind == UserKind::Crew
        && user.stream.is_none()
        && user.position.as_deref() == Some(seat.position)
        && !seat.resuming.is_some_and(|token| user.token.matches(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(occupants: Occupants, resuming: Option<&str>) -> Seat<'_> {
        Seat { position: "camera-1", announce: false, occupants, resuming }
    }

    fn join(users: &Users, name: &str, seat: Seat<'_>) -> Result<User, PositionTaken> {
        let (identity, key) = (format!("{name}-1"), SecretValue::new(format!("key-{name}")));
        users.register_seated(identity, name.into(), vec![Line::both("stage")], format!("t-{name}"), key, None, seat)
    }

    #[test]
    fn a_position_for_one_refuses_a_second_until_its_holder_leaves_but_not_its_rejoin() {
        let users = Users::default();
        let ben = join(&users, "ben", seat(Occupants::One, None)).expect("the first");
        assert_eq!(ben.position.as_deref(), Some("camera-1"));
        let taken = join(&users, "bob", seat(Occupants::One, None)).expect_err("a second, Ben's token unused");
        assert_eq!(taken, PositionTaken { position: "camera-1".into(), holder: "ben".into() });
        assert!(users.get("bob-1").is_none(), "nothing registered");
        assert!(users.joined("stage", &ben.identity));
        assert!(join(&users, "bob", seat(Occupants::One, None)).is_err(), "Ben connected");
        assert!(join(&users, "bob", seat(Occupants::One, Some("t-bob"))).is_err(), "a resume of another's token");
        join(&users, "ben2", seat(Occupants::One, Some("t-ben"))).expect("Ben's rejoin");
        assert!(join(&users, "cat", seat(Occupants::Many, None)).is_ok(), "a position for many");
    }

    #[test]
    fn a_position_for_one_is_free_again_once_its_holder_left() {
        let users = Users::default();
        let ben = join(&users, "ben", seat(Occupants::One, None)).expect("the first");
        assert!(users.joined("stage", &ben.identity));
        assert!(users.left("stage", &ben.identity, "left the room").is_some());
        assert!(join(&users, "bob", seat(Occupants::One, None)).is_ok(), "free again");
    }
}
