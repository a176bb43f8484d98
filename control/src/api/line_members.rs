//! Who is on a panel's lines on partyline's own rooms (`event: members` of its session stream):
//! the other members of each line and whether they talk there. A panel on Janus reads the same
//! from Janus's participant lists; a panel on the rooms has it from control, whose registry the
//! rooms' signals and the talk keys keep.

use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use crate::users::User;

/// `event: members`: every line of the session, each with its other members.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Members {
    pub lines: Vec<LineMembers>,
}

/// One line's other members, in identity order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineMembers {
    pub group_id: String,
    pub members: Vec<Member>,
}

/// Another member of a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Member {
    pub identity: String,
    /// Its name as the panels show it.
    pub display: String,
    /// Its talk key is on on this line.
    pub talking: bool,
}

/// The other members on the rooms of each of `user`'s lines, joined now.
pub fn members_of(state: &AppState, user: &User) -> Members {
    let on_rooms: Vec<User> =
        state.users.list().into_iter().filter(|u| u.on_rooms && u.identity != user.identity).collect();
    let lines = user
        .lines
        .iter()
        .map(|line| {
            let mut members: Vec<Member> = on_rooms
                .iter()
                .filter_map(|other| {
                    let theirs = other.line(&line.group_id).filter(|l| l.joined_at.is_some())?;
                    let (identity, display) = (other.identity.clone(), other.username.clone());
                    Some(Member { identity, display, talking: theirs.talking })
                })
                .collect();
            members.sort_by(|a, b| a.identity.cmp(&b.identity));
            LineMembers { group_id: line.group_id.clone(), members }
        })
        .collect();
    Members { lines }
}
