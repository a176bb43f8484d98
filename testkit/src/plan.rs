//! Plans for bridged as the tests and benches drive it over D-Bus (no control): a server audio
//! user, the card's participant in a room admitted by the token `tok-ROOM`, and a crew member's
//! (a second bridged) admitted by `crew-ROOM` (the tests' Janus is given both tokens).

use partyline_shared::bridge::{Plan, PlanGroup, PlanUser, Transport};

/// A server audio user of group `room`.
pub fn user(name: &str, room: &str, input: u8, output: Option<u8>) -> PlanUser {
    PlanUser { name: name.into(), room: room.into(), input_channel: input, output_channel: output, ifb: None }
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
        muted: false,
    }
}

/// What a crew member's bridged plays (`crew_in`/`crew_out`, its microphone on input 0 and its
/// ears on output 0) in `room`, over WebRTC as a browser joins, `base` giving the rest (Janus,
/// rate, buffering).
pub fn crew_member(room: &str, base: Plan) -> Plan {
    Plan {
        input_device: "crew_in.monitor".into(),
        output_device: "crew_out".into(),
        groups: vec![PlanGroup {
            identity: format!("crew-member:{room}"),
            token: format!("crew-{room}"),
            display: "crew member".into(),
            ..group(room)
        }],
        users: vec![user("crew", room, 0, Some(0))],
        transport: Transport::Webrtc,
        ..base
    }
}
