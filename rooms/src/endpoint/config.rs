//! How the endpoint is set up.

use std::net::SocketAddr;
use std::time::Duration;

/// How the endpoint is set up.
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// The socket's address: the host candidate panels reach (not 0.0.0.0).
    pub address: SocketAddr,
    pub max_sessions: usize,
    /// A session whose ICE and DTLS are not up by then is dropped.
    pub connect_within: Duration,
    /// `a=ptime` and `a=maxptime` (ms) in every answer's audio m-line: the frame length the
    /// panels are asked to send. `None`: not said (browsers send 20 ms).
    pub answer_ptime: Option<u16>,
    /// The datagrams a session may send per second on average (a fifth of a second's worth at
    /// once); more are dropped and counted. A four-line panel sends about 220 at 20 ms frames.
    pub datagrams_per_second: u32,
}

impl EndpointConfig {
    pub fn new(address: SocketAddr) -> Self {
        EndpointConfig {
            address,
            max_sessions: 1000,
            connect_within: Duration::from_secs(20),
            answer_ptime: None,
            datagrams_per_second: 2000,
        }
    }
}
