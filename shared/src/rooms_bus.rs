//! The D-Bus interface of partyline's own rooms, `org.partyline.Rooms1`: bridged serves it at
//! [`ROOMS_PATH`] beside `org.partyline.Bridge1` (same connection, same name), control calls it.
//!
//! A panel's offer goes through control, which alone knows the session's lines and rights:
//! control calls `Join` with the offer and one [`RoomLine`] per offered audio m-line, bridged's
//! rooms answer; a new offer on the same peer connection (a direct line opened or closed) is
//! `Renegotiate`. The talk keys arrive as `SetTalking` (the server decides who is mixed: a key
//! the session may not press is refused), `DropLine` takes one line away (the admin's removal),
//! and `Leave` ends a session. `KeepOnly` ends every
//! session but the ones control names: control calls it whenever it (re)connects, so that a
//! session a restarted control no longer knows cannot go on talking unseen. bridged says when a
//! session's media is up or gone with `SessionConnected` and `SessionEnded`, and when the rooms
//! receive its audio again or have received none for a second with `SessionReceiving` (what
//! control ends a silent WHIP source on).

use serde::{Deserialize, Serialize};
use zbus::zvariant::Type;

/// The object bridged serves the rooms at.
pub const ROOMS_PATH: &str = "/org/partyline/Rooms1";
/// The interface name.
pub const ROOMS_INTERFACE: &str = "org.partyline.Rooms1";

/// One line of a session, in the offer's order of audio m-lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct RoomLine {
    /// The group (room) the line carries.
    pub room: String,
    /// The panel may talk on it (the rooms receive).
    pub talk: bool,
    /// The panel hears it (the rooms send).
    pub listen: bool,
}

/// A session the rooms took: its id and the SDP answer for the panel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct Joined {
    pub session: u64,
    pub answer: String,
}

/// Typed errors of the interface (`org.partyline.Rooms1.Error.*` on the wire).
#[derive(Debug, Clone, PartialEq, zbus::DBusError)]
#[zbus(prefix = "org.partyline.Rooms1.Error")]
pub enum RoomsError {
    #[zbus(error)]
    ZBus(zbus::Error),
    /// bridged runs no rooms (started without an address for them).
    Disabled(String),
    /// The offer is not one the rooms take (not SDP, no Opus, not bundled, lines that do not
    /// match its m-lines); nothing was joined.
    BadOffer(String),
    /// The rooms hold their maximum of sessions.
    Full(String),
    /// No such session (never joined, or gone).
    UnknownSession(String),
    /// The session has no such line, or may not do that on it (a talk key on a listen-only line).
    NotAllowed(String),
    /// The rooms' thread has stopped.
    Stopped(String),
}

/// The client side, generated from the interface.
#[zbus::proxy(
    interface = "org.partyline.Rooms1",
    default_service = "org.partyline.Bridge1",
    default_path = "/org/partyline/Rooms1"
)]
pub trait Rooms {
    /// Answers a panel's offer: one member per line in its room, with the given rights.
    fn join(&self, offer: &str, lines: &[RoomLine]) -> Result<Joined, RoomsError>;

    /// A new offer on a running session (a line added, one stopped), with the rights of every
    /// m-line in order (a stopped line: neither talk nor listen): the answer.
    fn renegotiate(&self, session: u64, offer: &str, lines: &[RoomLine]) -> Result<String, RoomsError>;

    /// A talk key of a session's line (its index in `Join`'s lines) went on or off.
    fn set_talking(&self, session: u64, line: u32, talking: bool) -> Result<(), RoomsError>;

    /// Ends a session; false when there was none.
    fn leave(&self, session: u64) -> Result<bool, RoomsError>;

    /// Takes a session's line (its index in `Join`'s lines) out of its room; false when there
    /// was none.
    fn drop_line(&self, session: u64, line: u32) -> Result<bool, RoomsError>;

    /// Ends every session but `sessions`; returns how many ended.
    fn keep_only(&self, sessions: &[u64]) -> Result<u32, RoomsError>;

    /// The UDP address the panels reach the rooms at (empty: no rooms).
    #[zbus(property)]
    fn address(&self) -> zbus::Result<String>;

    /// A session's media is up (ICE and DTLS).
    #[zbus(signal)]
    fn session_connected(&self, session: u64) -> zbus::Result<()>;

    /// A session is gone (its panel closed, its network lost, never connected).
    #[zbus(signal)]
    fn session_ended(&self, session: u64) -> zbus::Result<()>;

    /// The rooms receive a session's audio again (true), or have received none of it for a
    /// second (false, also for a session that never sends). Said on a change.
    #[zbus(signal)]
    fn session_receiving(&self, session: u64, receiving: bool) -> zbus::Result<()>;
}
