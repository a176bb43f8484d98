//! The D-Bus interface between control (client) and bridged (service): `org.partyline.Bridge1`.
//!
//! control sends bridged a complete [`Plan`] (what to capture, what to play, who joins which
//! room); bridged applies the difference and reports [`Status`]. Everything is typed D-Bus
//! (zvariant `Type`), never a JSON string. The name is versioned: once partyline has a release,
//! an incompatible change is `Bridge2`, served beside `Bridge1` for a while. Until then both ends
//! live in one repository and one package and change together under `Bridge1` (the checked-in
//! XML shows every change).
//!
//! Both daemons choose their bus the same way ([`BusChoice`]): the system bus by default,
//! `--session` / `PARTYLINE_BUS=session` for the session bus, `--bus-address ADDR` /
//! `PARTYLINE_BUS=ADDR` for any other (tests use a private `dbus-daemon`).

use serde::{Deserialize, Serialize};
use zbus::zvariant::Type;

pub use crate::config::Transport;

mod status;
pub use status::{
    Aes67Status, AnnouncedStream, BranchState, BranchStatus, BridgeState, CardStatus, ParticipantStatus, PtpState,
    PtpStatus, Status,
};

/// Well-known name bridged owns.
pub const BUS_NAME: &str = "org.partyline.Bridge1";
/// The one object bridged serves.
pub const OBJECT_PATH: &str = "/org/partyline/Bridge1";
/// The interface name.
pub const INTERFACE: &str = "org.partyline.Bridge1";

/// Everything bridged must do: applying the same plan twice does nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct Plan {
    /// Capture device (a PulseAudio source name, an ALSA device); empty: the default.
    pub input_device: String,
    /// Playback device (a PulseAudio sink name, an ALSA device); empty: the default.
    pub output_device: String,
    /// The sound card's sampling rate.
    pub device_sample_rate: u32,
    /// Janus's HTTP API (`http://127.0.0.1:8088/janus`).
    pub janus_url: String,
    /// How the group participants carry their media to and from Janus.
    pub transport: Transport,
    /// Local addresses ICE may use towards Janus (on loopback setups Janus offers none on
    /// `lo`, so the venue interface's address goes here); empty: libnice's own choice. Only
    /// [`Transport::Webrtc`] uses them.
    pub ice_addresses: Vec<String>,
    /// Buffering of every group participant, each way, in ms: Janus's prebuffering of what it
    /// sends (in 20 ms packets: at least one over plain RTP, whose send bridged places against
    /// Janus's tick, at least two over WebRTC: [`crate::janus::prebuffer_packets`]) and the
    /// jitter buffer of the room's mix it receives.
    pub jitter_buffer_ms: u32,
    /// One room participant per group that has server audio users.
    pub groups: Vec<PlanGroup>,
    pub users: Vec<PlanUser>,
    /// AES67 network audio (`audio.aes67`).
    pub aes67: PlanAes67,
}

/// AES67 network audio: the PTP clock, the stream received as card inputs, the stream sent
/// from the card's outputs. Used when a device id of the plan is
/// [`crate::card::AES67_DEVICE`]; with an `interface`, bridged follows PTP and lists SAP's
/// announcements even when neither is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PlanAes67 {
    /// The media network's interface; empty: AES67 is off.
    pub interface: String,
    pub ptp_domain: u8,
    /// The grandmasters followed (EUI-64s as `format_eui64` writes them); empty: any.
    pub ptp_grandmasters: Vec<String>,
    /// The SDP of the stream received as card inputs 1..N; empty: none.
    pub receive_sdp: String,
    /// The receive jitter buffer, ms.
    pub receive_latency_ms: u32,
    /// The sent stream's session name.
    pub send_name: String,
    /// Its multicast group; empty: one picked in `send_range` from the name and the
    /// interface's address.
    pub send_address: String,
    pub send_range: String,
    pub send_port: u16,
    /// Card outputs 1..send_channels are sent.
    pub send_channels: u8,
    pub send_ttl: u8,
}

/// The card's one participant in a group's room: it sends the sum of the group's server
/// users' inputs and receives the room's mix, which is the remote crew only (AudioBridge
/// leaves each participant's own contribution out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PlanGroup {
    /// The room (group id); unique in the plan.
    pub room: String,
    /// Participant id in the room.
    pub identity: String,
    /// Janus stored token admitting this participant to its room.
    pub token: String,
    /// Display name in the room (the group's server users' names).
    pub display: String,
    /// Opus bitrate, kbit/s.
    pub bitrate_kbps: u32,
    /// The admin muted the card on this line. On partyline's own rooms (`Transport::Rooms`)
    /// bridged keeps the group's send out of the room while it is set; on Janus control mutes
    /// the participant in the room itself, and this is always false.
    pub muted: bool,
}

/// One server audio user: an input channel of the card heard in its group, and an output
/// channel that plays the group minus the user itself: the remote crew (the room's mix) plus
/// the group's other server users, mixed locally.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PlanUser {
    /// Unique name (the config's).
    pub name: String,
    /// The group (a room of [`Plan::groups`]).
    pub room: String,
    /// 0..=7.
    pub input_channel: u8,
    /// 0..=7; `None`: the user plays nothing (it only talks into its group).
    ///
    /// D-Bus has no optional type: on the bus this is an array of at most one byte (`ay`,
    /// zvariant's `option-as-array` encoding). Of the encodings D-Bus allows, it is the one
    /// that keeps `Option<u8>` in the Rust types on both sides with no hand-written
    /// conversion, and that cannot say anything but "none" or "this channel": a presence flag
    /// beside a byte (`(by)`) would carry a meaningless channel when the flag is off, and a
    /// sentinel (-1 in an `i`) is a number every reader must remember to test first.
    pub output_channel: Option<u8>,
    /// The output is an IFB (a presenter's earpiece) instead of the group minus the user; at
    /// most one (an array of at most one struct on the bus, as for `output_channel`).
    pub ifb: Option<PlanIfb>,
}

/// An IFB output: it plays the program; while the interrupt group talks, the program dips and
/// the talk is mixed in. The program is a card input or a group of the plan, never both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct PlanIfb {
    /// The program from this card input channel (0..=7); `None`: from `program_room`.
    pub program_channel: Option<u8>,
    /// The program from this group of the plan (its room's mix and its users' inputs); empty
    /// when `program_channel` is set.
    pub program_room: String,
    /// The group whose talk interrupts the program: its room's mix and its users' inputs, less
    /// the IFB user's own input.
    pub interrupt_room: String,
    /// The program's level while interrupted, in dB (-60..=0); `None`: cut.
    pub dim_db: Option<i32>,
}

/// Typed errors of the interface (`org.partyline.Bridge1.Error.*` on the wire).
#[derive(Debug, Clone, PartialEq, zbus::DBusError)]
#[zbus(prefix = "org.partyline.Bridge1.Error")]
pub enum BridgeError {
    #[zbus(error)]
    ZBus(zbus::Error),
    /// The plan breaks a rule (names, channels, rates); nothing was applied.
    InvalidPlan(String),
    /// A device in the plan does not exist; nothing was applied.
    UnknownDevice(String),
    /// Janus refused or could not be reached.
    JanusFailure(String),
}

/// The client side, generated from the interface.
#[zbus::proxy(
    interface = "org.partyline.Bridge1",
    default_service = "org.partyline.Bridge1",
    default_path = "/org/partyline/Bridge1"
)]
pub trait Bridge {
    /// Applies `plan` (only its difference from the plan in force) and returns its generation.
    fn apply(&self, plan: &Plan) -> Result<u64, BridgeError>;

    /// The whole status, with every branch.
    fn status(&self) -> Result<Status, BridgeError>;

    #[zbus(property)]
    fn state(&self) -> zbus::Result<BridgeState>;

    /// Generation of the plan in force.
    #[zbus(property)]
    fn generation(&self) -> zbus::Result<u64>;

    /// The state or a branch changed.
    #[zbus(signal)]
    fn status_changed(&self, state: BridgeState, generation: u64) -> zbus::Result<()>;

    /// One of bridged's log lines (level, source, message), for control's log ring.
    #[zbus(signal)]
    fn log_entry(&self, level: &str, source: &str, message: &str) -> zbus::Result<()>;

    /// The card started or stopped talking in `room`: voice activity of the group's send,
    /// decided as AudioBridge decides it for every participant ([`crate::janus::TALK_WINDOW_PACKETS`],
    /// [`crate::janus::TALK_LEVEL_DBOV`]). Janus reports no voice activity for plain-RTP
    /// participants, so this is where the card's talking comes from.
    #[zbus(signal)]
    fn talking(&self, room: &str, talking: bool) -> zbus::Result<()>;
}

/// Which bus a daemon uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusChoice {
    System,
    Session,
    Address(String),
}

impl BusChoice {
    /// From the command line (`--session`, `--bus-address`), else `PARTYLINE_BUS`
    /// (`system`, `session` or an address), else the system bus.
    pub fn pick(session: bool, address: Option<String>, env: Option<&str>) -> BusChoice {
        match (session, address, env) {
            (_, Some(address), _) => BusChoice::Address(address),
            (true, None, _) => BusChoice::Session,
            (false, None, Some("session")) => BusChoice::Session,
            (false, None, Some("system") | None) => BusChoice::System,
            (false, None, Some(address)) => BusChoice::Address(address.to_owned()),
        }
    }

    /// A connection builder for this bus.
    pub fn builder(&self) -> zbus::Result<zbus::connection::Builder<'static>> {
        match self {
            BusChoice::System => zbus::connection::Builder::system(),
            BusChoice::Session => zbus::connection::Builder::session(),
            BusChoice::Address(address) => zbus::connection::Builder::address(address.as_str()),
        }
    }
}

impl std::fmt::Display for BusChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BusChoice::System => f.write_str("system bus"),
            BusChoice::Session => f.write_str("session bus"),
            BusChoice::Address(address) => write!(f, "bus {address}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_typed() {
        // An IFB: an optional program channel, two rooms, an optional dip.
        assert_eq!(PlanIfb::SIGNATURE.to_string(), "(ayssai)");
        assert_eq!(PlanUser::SIGNATURE.to_string(), "(ssyaya(ayssai))");
        assert_eq!(PlanGroup::SIGNATURE.to_string(), "(ssssub)");
        assert_eq!(Plan::SIGNATURE.to_string(), "(ssussasua(ssssub)a(ssyaya(ayssai))(syassusssqyy))");
        assert_eq!(Status::SIGNATURE.to_string(), "(stsa(ssssttdds)a(sssstts)((sysxx)sttttxa(ssu))(ttd))");
    }

    #[test]
    fn bus_choice() {
        assert_eq!(BusChoice::pick(false, None, None), BusChoice::System);
        assert_eq!(BusChoice::pick(true, None, Some("system")), BusChoice::Session);
        assert_eq!(BusChoice::pick(false, None, Some("session")), BusChoice::Session);
        assert_eq!(BusChoice::pick(false, None, Some("unix:path=/x")), BusChoice::Address("unix:path=/x".into()));
        assert_eq!(BusChoice::pick(true, Some("unix:path=/y".into()), None), BusChoice::Address("unix:path=/y".into()));
    }

    /// The output channel on the bus: no element for no output, one for a channel.
    #[test]
    fn the_output_channel_is_an_array_of_at_most_one_byte() {
        use zbus::zvariant::{LE, serialized::Context, to_bytes};
        let context = Context::new_dbus(LE, 0);
        let user = |output_channel| PlanUser { output_channel, ..PlanUser::default() };
        for output in [None, Some(0), Some(7)] {
            let bytes = to_bytes(context, &user(output)).expect("encodes");
            let (decoded, _): (PlanUser, _) = bytes.deserialize().expect("decodes");
            assert_eq!(decoded.output_channel, output);
        }
        // What a reader without the Option sees: a plain array of bytes.
        type Wire = (String, String, u8, Vec<u8>);
        let wire = |output| {
            let bytes = to_bytes(context, &user(output)).expect("encodes");
            bytes.deserialize::<Wire>().expect("decodes").0.3
        };
        assert_eq!((wire(None), wire(Some(5))), (vec![], vec![5]));
    }
}
