//! What bridged reports to control ([`Status`]): its state, each branch's and group participant's,
//! the card's playback, and AES67 (PTP, the streams received, sent and announced).

use serde::{Deserialize, Serialize};
use zbus::zvariant::{OwnedValue, Type, Value};

/// bridged's state as a whole; a string on the bus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, Type, Value, OwnedValue)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[zvariant(signature = "s", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum BridgeState {
    /// No plan yet, or a plan without server audio users.
    #[default]
    Idle,
    /// Every group participant joined or joining.
    Running,
    /// Some group participant is retrying.
    Degraded,
    /// The card side failed.
    Error,
}

/// A group participant's state (and that of each server audio user of its group); a string
/// on the bus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[zvariant(signature = "s")]
#[serde(rename_all = "lowercase")]
pub enum BranchState {
    /// Joining its room.
    #[default]
    Connecting,
    /// In its room, media flowing.
    Joined,
    /// Failed; joins again after a backoff.
    Retrying,
    /// Given up (the plan no longer has it).
    Stopped,
}

/// bridged's state as a whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Type)]
pub struct Status {
    pub state: BridgeState,
    /// Generation of the plan in force (0: none yet).
    pub generation: u64,
    /// Why the state is what it is, for people.
    pub message: String,
    /// One per server audio user (its path through the card: a branch).
    pub branches: Vec<BranchStatus>,
    /// One per group participant.
    pub participants: Vec<ParticipantStatus>,
    pub aes67: Aes67Status,
    pub card: CardStatus,
}

/// The card's playback as bridged plays it: its faults since bridged started (each audible on
/// every output), and the clock drift it makes up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, Type)]
#[serde(rename_all = "camelCase")]
pub struct CardStatus {
    /// Times the playback queue ran dry and played silence.
    pub underruns: u64,
    /// Samples dropped because the playback queue went over its limit.
    pub overflowed_samples: u64,
    /// How much faster the capture's clock runs than the playback's, in ppm (0 until measured).
    pub drift_ppm: f64,
}

/// AES67 network audio as bridged runs it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Aes67Status {
    pub ptp: PtpStatus,
    /// The SDP of the stream partyline sends (and announces); empty when it sends none.
    pub send_sdp: String,
    /// The received stream: packets so far, and how far from its media time (+ the receive
    /// latency) each card block was handed to the mix, 99th percentile over the last second, µs.
    pub receive_packets: u64,
    /// Of those, how many the jitter buffer counted lost (never came) and late (came after
    /// their time, dropped): more than a few, and the receive latency is too short.
    pub receive_lost: u64,
    pub receive_late: u64,
    /// Packets to the stream's group and port from another host than its SDP's origin, or
    /// with another SSRC than the stream's: dropped before the jitter buffer.
    pub receive_foreign: u64,
    pub receive_offset_p99_us: i64,
    /// The streams SAP announces on the media network, newest first.
    pub announced: Vec<AnnouncedStream>,
}

/// A stream announced by SAP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AnnouncedStream {
    /// The announcer's address.
    pub source: String,
    pub sdp: String,
    /// Seconds since its last announcement.
    pub age_s: u32,
}

/// bridged's PTP follower.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PtpStatus {
    pub state: PtpState,
    pub domain: u8,
    /// The grandmaster followed (EUI-64, `XX-XX-…`); empty before one is seen.
    pub grandmaster: String,
    /// The last correction of the clock against the grandmaster, ns.
    pub offset_ns: i64,
    /// The mean path delay to the grandmaster, ns; -1 when GStreamer's own figure is not a
    /// path's (it wrapped: bridged's log says why and what to change on the grandmaster).
    pub path_delay_ns: i64,
}

/// Whether bridged's clock follows a grandmaster; a string on the bus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[zvariant(signature = "s")]
#[serde(rename_all = "lowercase")]
pub enum PtpState {
    /// AES67 is off.
    #[default]
    Off,
    /// Looking for a grandmaster; nothing is clocked yet.
    Acquiring,
    /// Following the grandmaster.
    Locked,
    /// The grandmaster went silent: the clock runs free from its last rate, audio goes on.
    Lost,
    /// A grandmaster outside `audio.aes67.grandmasters` won the domain: not followed, the clock
    /// holds (runs free from the last allowed grandmaster's rate), audio goes on.
    Held,
}

/// One server audio user. The room side (state, participant id, packets, last error) is its
/// group participant's, repeated so that a reader of one user needs nothing else.
///
/// control's API shows this and [`ParticipantStatus`] as they are: hence the camelCase names
/// (D-Bus structs carry no field names, so they change nothing on the bus).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct BranchStatus {
    pub name: String,
    pub room: String,
    pub state: BranchState,
    /// Janus's participant id of the group participant once joined.
    pub participant_id: String,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Level of the input channel, dBFS (-100 for silence or unknown).
    pub input_level_db: f64,
    /// Level of what the user's output channel plays, dBFS (-100 for silence, or no output
    /// channel).
    pub output_level_db: f64,
    /// The last error, empty when none.
    pub last_error: String,
}

/// The card's participant in one group's room.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Type)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ParticipantStatus {
    pub room: String,
    /// Its display name in the room: the group's server audio users.
    pub display: String,
    pub state: BranchState,
    /// Janus's participant id once joined.
    pub participant_id: String,
    /// RTP packets sent to the room and received from it.
    pub packets_sent: u64,
    pub packets_received: u64,
    /// The last error, empty when none.
    pub last_error: String,
}
