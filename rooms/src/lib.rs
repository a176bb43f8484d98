//! partyline's own rooms: a group's crew, each on one WebRTC session per panel, mixed at a
//! fixed frame clock with every distinct mix encoded once.
//!
//! No I/O of its own beyond the endpoint's UDP socket, no GStreamer, no D-Bus: bridged hosts the
//! rooms and drives them; the tests drive them on arrays and on loopback.
//!
//! - [`jitter`]: per talker, packets in, one decoded frame per tick out (waiting for a late
//!   packet up to an adaptive target, FEC and concealment for a lost one).
//! - [`mixer`]: per room and tick, the talkers' frames summed, the full mix encoded once for
//!   every listener who is not talking and a mix-minus for each talker.
//! - [`endpoint`]: the WebRTC side (str0m, ICE-lite on one UDP socket): one PeerConnection per
//!   panel session, one audio m-line per line, its direction the line's rights.
//! - [`engine`]: the two together on one thread: each line of a session a member of its room,
//!   one tick every 20 ms (receive, mix, send).

pub mod endpoint;
pub mod engine;
pub mod jitter;
pub mod mixer;
