//! What the endpoint tells its driver, and what it counts.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// A panel session: one PeerConnection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u64);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "session {}", self.0)
    }
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// ICE and DTLS did not complete within the configured time.
    NeverConnected,
    /// The panel's consent checks stopped (ICE): its network or its tab is gone.
    IceLost,
    /// The panel closed DTLS, or str0m found the session broken.
    Closed,
}

/// What happened on the endpoint's sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointEvent {
    /// ICE and DTLS are up: frames sent from now on reach the panel.
    Connected(SessionId),
    /// One Opus packet a panel sent on a line it may talk on.
    Audio {
        session: SessionId,
        /// The line's index, as in the rights given to `accept`.
        line: usize,
        seq: u16,
        rtp_timestamp: u32,
        /// When its datagram arrived (for the jitter buffer's measure).
        arrival: Instant,
        /// The Opus payload, as str0m decrypted it (shared, not copied).
        payload: Arc<[u8]>,
    },
    /// The session is gone (not after [`close`](super::Endpoint::close), which is the driver's own).
    Disconnected(SessionId, EndReason),
}

impl EndpointEvent {
    /// The session the event is about.
    pub fn session(&self) -> SessionId {
        match self {
            EndpointEvent::Connected(session) | EndpointEvent::Disconnected(session, _) => *session,
            EndpointEvent::Audio { session, .. } => *session,
        }
    }
}

/// The endpoint's counters since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams from a source no session knows that were not STUN for a session's ufrag (or
    /// failed its integrity check).
    pub unknown_source: u64,
    /// Datagrams that are neither STUN, DTLS, RTP nor RTCP (a binding request without
    /// MESSAGE-INTEGRITY or PRIORITY is not STUN to str0m either).
    pub garbage: u64,
    /// RTP packets on a line the panel may not talk on (dropped before decryption where the
    /// stream is known).
    pub refused_rtp: u64,
    /// Datagrams over their session's budget ([`EndpointConfig::datagrams_per_second`](super::EndpointConfig)).
    pub rate_limited: u64,
    /// Offers refused because the endpoint has its maximum of sessions.
    pub refused_full: u64,
    /// Datagrams the socket did not take (its buffer full, or an error).
    pub send_failed: u64,
}
