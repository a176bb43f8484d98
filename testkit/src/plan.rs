//! Plans for bridged as the tests and benches drive it over D-Bus (no control): a server audio
//! user, and the card's participant in a room admitted by the token `tok-ROOM` (the tests' Janus
//! is given that token).

use partyline_shared::bridge::{PlanGroup, PlanUser};

/// A server audio user of group `room`.
pub fn user(name: &str, room: &str, input: u8, output: Option<u8>) -> PlanUser {
    PlanUser { name: name.into(), room: room.into(), input_channel: input, output_channel: output }
}

/// The card's participant in `room`: identity `card:ROOM`, token `tok-ROOM`, shown as "card of
/// ROOM", 64 kb/s.
pub fn group(room: &str) -> PlanGroup {
    PlanGroup {
        room: room.into(),
        identity: format!("card:{room}"),
        token: format!("tok-{room}"),
        display: format!("card of {room}"),
        bitrate_kbps: 64,
    }
}
