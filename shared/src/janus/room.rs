//! How partyline makes its AudioBridge rooms: the room spec, the participant groups, voice
//! activity's settings and prebuffering.

use serde::Serialize;

/// AudioBridge's prebuffering of a network peer (a crew member, a WebRTC participant), in its
/// 20 ms packets, for `ms` of buffering: at least two (bridged's plain-RTP participants place
/// their send against Janus's tick and need one: `bridged/src/tick.rs`).
/// Janus mixes a participant once it holds prebuffering + 1 packets, takes one per 20 ms tick,
/// and drops the oldest whenever the queue reaches twice the prebuffering. At one packet, two
/// packets arriving within one tick already lose a frame (the sender runs on the sound card's
/// clock, Janus on the host's): a 20 ms hole every few seconds in the rooms whose mixing phase
/// falls near the sender's (`bench/audio`, 6 rooms: 7 frame slips in 114 ticks at one packet,
/// 0 and 1 in two runs at two).
pub fn prebuffer_packets(ms: u32) -> u32 {
    (ms / 20).max(2)
}

/// Voice activity as every room decides it (`audio_active_packets`): over this many 20 ms
/// packets (200 ms)...
pub const TALK_WINDOW_PACKETS: u32 = 10;
/// ...the average RFC 6464 level (dBov: 0 loudest, 127 silence) must be under this for a
/// participant to be talking (`audio_level_average`; −40 dBov).
pub const TALK_LEVEL_DBOV: u32 = 40;

/// The participant group (AudioBridge `groups`, 1.1.2+) of everyone joining a room on its own
/// node: crew, the card. A room's mix forwarded to another node is this group's only, so what
/// came from there is never sent back.
pub const LOCAL_GROUP: &str = "local";
/// The participant group of the trunks: the mixes of the same group's rooms on other nodes.
pub const TRUNK_GROUP: &str = "trunk";

/// A room as partyline creates it: one per group, id = group id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoomSpec {
    pub room: String,
    pub description: String,
    /// The AudioBridge `admin_key`: required to create rooms.
    pub admin_key: String,
    /// The room secret: required to kick, destroy and edit.
    pub secret: String,
    pub sampling_rate: u32,
    /// Packets (20 ms each) buffered per participant before mixing: the room's latency.
    pub default_prebuffering: u32,
    /// Bits per second of the mix sent to each participant (0: Opus decides).
    pub default_bitrate: u32,
    /// The loss (%) each participant's mix is encoded for (`audio.expectedLossPercent`): with
    /// the participant's own offer of `useinbandfec=1` (browsers', the crew's), Opus in-band
    /// FEC in what it hears.
    pub default_expectedloss: u32,
    /// Lets clients (and the admin UI) see who talks: AudioBridge sends `talking` and
    /// `stopped-talking` events to the room's participants (from their RFC 6464 audio levels).
    pub audiolevel_event: bool,
    /// Packets (20 ms each) a talking decision looks at.
    pub audio_active_packets: u32,
    /// Average level (0 loudest ..127 silence, dBov) over those packets above which a
    /// participant talks.
    pub audio_level_average: u32,
    /// Rooms live in Janus's memory only; partyline recreates them from the config.
    pub permanent: bool,
    /// Admits bridged's plain-RTP participants (`bridge.transport: rtp`) and the trunks from
    /// other nodes. Crew clients cannot use it: control's `/janus` proxy refuses any request
    /// that asks for plain RTP.
    pub allow_rtp_participants: bool,
    /// The participant groups, [`LOCAL_GROUP`] and [`TRUNK_GROUP`]; with groups, every join
    /// must name one (Janus refuses a join without).
    pub groups: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prebuffering_is_whole_packets_and_never_below_two() {
        for (ms, packets) in [(20, 2), (39, 2), (40, 2), (59, 2), (60, 3), (1000, 50)] {
            assert_eq!(prebuffer_packets(ms), packets, "{ms} ms");
        }
    }
}
