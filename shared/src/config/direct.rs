//! Direct lines: a private two-party line between two panels, opened by a person key.
//! `positions[].talkTo` gives a position person keys to other positions; `crew.directCalls`
//! says who may open one:
//!
//! ```yaml
//! crew: { directCalls: positions }   # all | positions | off
//! positions:
//!   - { name: Director, talk: [stage], talkTo: [camera-1, foh] }
//! ```
//!
//! A direct line's room is not a group: its id starts with [`DIRECT_ROOM_PREFIX`], which no
//! group id may.

use serde::{Deserialize, Serialize};

/// The start of every direct line's room id (`direct-` and random hex), kept out of group ids.
pub const DIRECT_ROOM_PREFIX: &str = "direct-";

/// Who may open a direct line (`crew.directCalls`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DirectCalls {
    /// Any panel may call anyone online (its People list), besides its person keys.
    All,
    /// Only through the person keys of positions (`positions[].talkTo`).
    #[default]
    Positions,
    /// No direct lines at all.
    Off,
}

/// How many crew members may hold a position at once (`positions[].occupants`).
///
/// `many` is the default: a position is also a panel template a whole team joins (a stage
/// crew, `partyline-crew --position` with twenty members), and a person key towards it opens
/// a direct line to every member at it. `one` makes the position a role: while someone holds
/// it (connected, or with a token not used yet), another join is refused; the holder's own
/// rejoin (`resume`) never is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Occupants {
    /// One crew member at a time.
    One,
    /// Anyone may join; person keys reach every one of them.
    #[default]
    Many,
}

impl Occupants {
    /// Whether this is the default (`many`), which the file leaves out.
    pub fn is_default(&self) -> bool {
        *self == Occupants::default()
    }
}

/// Whether `id` is a direct line's room (never a group's).
pub fn is_direct_room(id: &str) -> bool {
    id.starts_with(DIRECT_ROOM_PREFIX)
}

/// A group id must leave the direct lines' prefix alone.
pub fn check_group_id_not_direct(id: &str) -> Result<(), String> {
    if is_direct_room(id) {
        return Err(format!("id {id:?} starts with {DIRECT_ROOM_PREFIX:?}, which is kept for direct lines"));
    }
    Ok(())
}

/// A position's `talkTo`: other positions' ids, each once. `known` says whether an id is a
/// position's. The error is the field (`talkTo` or `talkTo[i]`) and why.
pub fn check_talk_to(own_id: &str, talk_to: &[String], known: impl Fn(&str) -> bool) -> Result<(), (String, String)> {
    for (i, id) in talk_to.iter().enumerate() {
        let field = format!("talkTo[{i}]");
        if id == own_id {
            return Err((field, "a position cannot have a person key to itself".into()));
        }
        if !known(id) {
            return Err((field, format!("no position has id {id:?}")));
        }
        if talk_to[..i].contains(id) {
            return Err((field, format!("{id:?} is listed twice")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn talk_to_names_other_known_positions_once() {
        let known = |id: &str| ["director", "camera-1", "foh"].contains(&id);
        let list = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(check_talk_to("director", &list(&["camera-1", "foh"]), known), Ok(()));
        let cases = [
            (list(&["director"]), "talkTo[0]", "itself"),
            (list(&["foh", "nobody"]), "talkTo[1]", "no position has id \"nobody\""),
            (list(&["foh", "camera-1", "foh"]), "talkTo[2]", "listed twice"),
        ];
        for (talk_to, field, why) in cases {
            let (at, message) = check_talk_to("director", &talk_to, known).expect_err("refused");
            assert_eq!(at, field);
            assert!(message.contains(why), "{message}");
        }
    }

    #[test]
    fn group_ids_keep_off_the_direct_prefix() {
        assert!(is_direct_room("direct-0a1b2c3d4e5f"));
        assert!(check_group_id_not_direct("direct-line").is_err());
        assert!(check_group_id_not_direct("directors").is_ok());
        assert_eq!(serde_json::to_string(&DirectCalls::default()).expect("json"), "\"positions\"");
        assert_eq!(serde_json::to_string(&Occupants::default()).expect("json"), "\"many\"");
        assert_eq!(serde_json::from_str::<Occupants>("\"one\"").expect("one"), Occupants::One);
    }
}
