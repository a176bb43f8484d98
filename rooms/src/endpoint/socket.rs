//! The endpoint's one UDP socket: bound to an address panels can reach, sends that never stall
//! the mixing thread for long, receives that wait at most until the driver's next deadline.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use super::error::EndpointError;

/// The longest a send may wait for room in the socket's buffer: a full buffer drops a datagram
/// rather than stalling the mixing thread.
const SEND_STALL: Duration = Duration::from_millis(1);
/// The socket's buffers each way. Every session of the rooms shares this one socket, and a crowd
/// joining at once sends its DTLS flights (a kilobyte and more each) together: at the system's
/// default (208 KiB) a burst of 150 panels overflowed it, and the handshakes that lost a flight
/// ran out of time (`bridged/tests/rooms.rs`, `a_crowd_joining_at_once_all_connects`). A process
/// with CAP_NET_ADMIN gets it whatever `net.core.rmem_max`/`wmem_max` say; another gets what
/// they allow (the package raises them: `packaging/sysctl/`).
const BUFFER_BYTES: usize = 4 << 20;
/// The shortest receive wait (the system refuses a zero timeout).
const MIN_WAIT: Duration = Duration::from_micros(50);

#[derive(Debug)]
pub(super) struct Socket {
    udp: UdpSocket,
    local: SocketAddr,
    /// The receive timeout as last set.
    read_timeout: Option<Duration>,
}

/// Asks for [`BUFFER_BYTES`] each way: forced past the system's maximum where this process may,
/// else up to it.
fn size_buffers(udp: &UdpSocket) {
    use nix::sys::socket::{setsockopt, sockopt};
    let forced = setsockopt(udp, sockopt::RcvBufForce, &BUFFER_BYTES)
        .and_then(|()| setsockopt(udp, sockopt::SndBufForce, &BUFFER_BYTES));
    if forced.is_ok() {
        return;
    }
    let sized = socket2::SockRef::from(udp);
    let (receive, send) = (sized.set_recv_buffer_size(BUFFER_BYTES), sized.set_send_buffer_size(BUFFER_BYTES));
    if let (Err(error), _) | (_, Err(error)) = (receive, send) {
        tracing::warn!(%error, "the WebRTC socket keeps the system's buffer sizes");
    }
    let receive_bytes = sized.recv_buffer_size().unwrap_or(0);
    if receive_bytes < BUFFER_BYTES {
        tracing::warn!(
            receive_bytes,
            "the WebRTC socket's receive buffer is capped by net.core.rmem_max: a crowd joining at once may lose handshakes"
        );
    }
}

impl Socket {
    pub(super) fn bind(address: SocketAddr) -> Result<Socket, EndpointError> {
        if address.ip().is_unspecified() {
            return Err(EndpointError::UnspecifiedAddress(address));
        }
        let bind_error = |error| EndpointError::Bind(address, error);
        let udp = UdpSocket::bind(address).map_err(bind_error)?;
        let local = udp.local_addr().map_err(bind_error)?;
        size_buffers(&udp);
        udp.set_write_timeout(Some(SEND_STALL)).map_err(bind_error)?;
        Ok(Socket { udp, local, read_timeout: None })
    }

    pub(super) fn local(&self) -> SocketAddr {
        self.local
    }

    /// Sends one datagram; `false` if the socket did not take it.
    pub(super) fn send(&self, contents: &[u8], destination: SocketAddr) -> bool {
        self.udp.send_to(contents, destination).is_ok()
    }

    /// One datagram into `buffer`, waiting at most `wait`; `None` if none came.
    pub(super) fn receive(&mut self, buffer: &mut [u8], wait: Duration) -> io::Result<Option<(usize, SocketAddr)>> {
        self.wait_at_most(wait.max(MIN_WAIT))?;
        match self.udp.recv_from(buffer) {
            Ok(received) => Ok(Some(received)),
            Err(error) if is_transient(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Sets the receive timeout to `wait`, unless the one set is already no longer and not much
    /// shorter (a system call per datagram saved; waking a little early is harmless).
    fn wait_at_most(&mut self, wait: Duration) -> io::Result<()> {
        if self.read_timeout.is_some_and(|set| set <= wait && set * 2 >= wait) {
            return Ok(());
        }
        self.udp.set_read_timeout(Some(wait))?;
        self.read_timeout = Some(wait);
        Ok(())
    }
}

/// A receive that timed out, or an ICMP error a previous send left on the socket.
fn is_transient(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionRefused
    )
}
