//! A line's TURN relay (RFC 8656) over TLS or TCP: what a browser does with the token answer's
//! `turns:` server when its network lets no UDP through to the media server.
//!
//! Each line allocates on its own connection to the relay. A task owns the connection and the
//! sans-IO client (turn-client-proto) and is, to the line, a socket at the relayed address:
//! datagrams to send go in through one channel, datagrams from peers come out of another. A peer
//! gets a permission the first time something is sent to it; what is sent before the relay has
//! granted it is dropped (ICE sends its checks again), as a congested path would drop it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use partyline_shared::config::RelayEndpoint;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use turn_client_proto::api::{Transmit, TurnClientApi, TurnConfig, TurnEvent, TurnPollRet, TurnRecvRet};
use turn_client_proto::stun::types::TransportType;
use turn_client_proto::tcp::TurnClientTcp;
use turn_client_proto::types::TurnCredentials;

/// How long a relay may take to connect, shake hands and allocate.
const ALLOCATE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("the relay {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("the relay {0}: TLS: {1}")]
    Tls(String, std::io::Error),
    #[error("the relay {0} refused the allocation (a credential expired or wrong?)")]
    Refused(String),
    #[error("the relay {0} allocated nothing within {ALLOCATE_TIMEOUT:?}")]
    Timeout(String),
}

/// A relay and the credential a token answer gave for it.
#[derive(Debug, Clone)]
pub struct RelayServer {
    pub endpoint: RelayEndpoint,
    pub username: String,
    pub credential: String,
}

impl RelayServer {
    fn name(&self) -> String {
        format!("{}:{}", self.endpoint.host, self.endpoint.port)
    }
}

/// An allocation on a relay, as a socket at [`Relay::relayed`].
#[derive(Debug)]
pub struct Relay {
    /// The address the relay sends and receives from on the line's behalf.
    pub relayed: SocketAddr,
    /// This end of the connection to the relay.
    pub local: SocketAddr,
    outgoing: mpsc::UnboundedSender<(SocketAddr, Vec<u8>)>,
    incoming: mpsc::UnboundedReceiver<(SocketAddr, Vec<u8>)>,
    task: JoinHandle<()>,
}

impl Relay {
    /// Connects to `server` (TLS checked by `tls` for a `turns:` one) and allocates a relayed
    /// UDP address.
    pub async fn allocate(server: &RelayServer, tls: Arc<rustls::ClientConfig>) -> Result<Relay, RelayError> {
        let name = server.name();
        let tcp = TcpStream::connect((server.endpoint.host.as_str(), server.endpoint.port))
            .await
            .map_err(|e| RelayError::Connect(name.clone(), e))?;
        let addresses = tcp.local_addr().and_then(|local| Ok((local, tcp.peer_addr()?)));
        let (local, remote) = addresses.map_err(|e| RelayError::Connect(name.clone(), e))?;
        // Nagle's algorithm would hold a 20 ms frame back behind the previous one's ACK.
        let _ = tcp.set_nodelay(true);
        let config = TurnConfig::new(TurnCredentials::new(&server.username, &server.credential));
        let (allocated, allocation) = oneshot::channel();
        let (outgoing, to_send) = mpsc::unbounded_channel();
        let (received, incoming) = mpsc::unbounded_channel();
        let connection = Connection {
            client: TurnClientTcp::allocate(local, remote, config),
            base: Instant::now(),
            local,
            remote,
            name: name.clone(),
            allocated: Some(allocated),
            received,
        };
        let task = if server.endpoint.tls {
            let server_name = ServerName::try_from(server.endpoint.host.clone())
                .map_err(|e| RelayError::Tls(name.clone(), std::io::Error::other(e)))?;
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(server_name, tcp)
                .await
                .map_err(|e| RelayError::Tls(name.clone(), e))?;
            tokio::spawn(connection.run(stream, to_send))
        } else {
            tokio::spawn(connection.run(tcp, to_send))
        };
        let relay = |relayed| Relay { relayed, local, outgoing, incoming, task };
        match tokio::time::timeout(ALLOCATE_TIMEOUT, allocation).await {
            Ok(Ok(Some(relayed))) => Ok(relay(relayed)),
            Ok(_) => Err(RelayError::Refused(name)),
            Err(_) => Err(RelayError::Timeout(name)),
        }
    }

    /// Sends `data` to `peer` through the relay.
    pub fn send(&self, peer: SocketAddr, data: &[u8]) {
        let _ = self.outgoing.send((peer, data.to_vec()));
    }

    /// The next datagram a peer sent through the relay (None: the relay's connection ended).
    pub async fn recv(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        self.incoming.recv().await
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // Closing the connection ends a TCP allocation (RFC 6062 §4.1 ties them).
        self.task.abort();
    }
}

/// The task's state: the sans-IO client and the two channels.
struct Connection {
    client: TurnClientTcp,
    /// The client counts time from here.
    base: Instant,
    local: SocketAddr,
    remote: SocketAddr,
    name: String,
    /// Told the relayed address (or None: refused) once.
    allocated: Option<oneshot::Sender<Option<SocketAddr>>>,
    received: mpsc::UnboundedSender<(SocketAddr, Vec<u8>)>,
}

impl Connection {
    async fn run<S: AsyncRead + AsyncWrite + Unpin>(
        mut self,
        mut stream: S,
        mut to_send: mpsc::UnboundedReceiver<(SocketAddr, Vec<u8>)>,
    ) {
        let mut buffer = vec![0u8; 8192];
        loop {
            let now = self.now();
            let mut wrote = false;
            while let Some(transmit) = self.client.poll_transmit(now) {
                wrote = true;
                if stream.write_all(&transmit.data).await.is_err() {
                    return self.ended("its connection closed");
                }
            }
            if wrote && stream.flush().await.is_err() {
                return self.ended("its connection closed");
            }
            while let Some(event) = self.client.poll_event() {
                self.event(event);
            }
            let wake = match self.client.poll(now) {
                TurnPollRet::WaitUntil(at) => at.to_std(self.base),
                TurnPollRet::Closed => return self.ended("the allocation ended"),
                // Only TCP allocations (RFC 6062) ask for more; this one is UDP.
                _ => Instant::now() + Duration::from_secs(1),
            };
            tokio::select! {
                read = stream.read(&mut buffer) => match read {
                    Ok(0) | Err(_) => return self.ended("its connection closed"),
                    Ok(length) => self.receive(&buffer[..length]),
                },
                datagram = to_send.recv() => {
                    let Some((peer, data)) = datagram else { return };
                    if let Some(bytes) = self.send(peer, data)
                        && (stream.write_all(&bytes).await.is_err() || stream.flush().await.is_err())
                    {
                        return self.ended("its connection closed");
                    }
                }
                () = tokio::time::sleep_until(wake.into()) => {}
            }
        }
    }

    fn now(&self) -> turn_client_proto::stun::Instant {
        let nanos = i64::try_from(self.base.elapsed().as_nanos()).unwrap_or(i64::MAX);
        turn_client_proto::stun::Instant::from_nanos(nanos)
    }

    fn receive(&mut self, bytes: &[u8]) {
        let now = self.now();
        let transmit = Transmit::new(bytes, TransportType::Tcp, self.remote, self.local);
        if let TurnRecvRet::PeerData(data) = self.client.recv(transmit, now) {
            let _ = self.received.send((data.peer, data.data().to_vec()));
        }
        while let Some(data) = self.client.poll_recv(now) {
            let _ = self.received.send((data.peer, data.data().to_vec()));
        }
    }

    /// The bytes that carry `data` to `peer`, once the relay lets it through to that address.
    fn send(&mut self, peer: SocketAddr, data: Vec<u8>) -> Option<Vec<u8>> {
        let now = self.now();
        if !self.client.have_permission(TransportType::Udp, peer.ip()) {
            // Asked once; the request goes out with the next poll_transmit.
            let _ = self.client.create_permission(TransportType::Udp, peer.ip(), now);
            return None;
        }
        match self.client.send_to(TransportType::Udp, peer, data, now) {
            Ok(transmit) => transmit.map(|t| t.build().data),
            Err(error) => {
                tracing::debug!(relay = %self.name, %peer, ?error, "a datagram the relay client refused");
                None
            }
        }
    }

    fn event(&mut self, event: TurnEvent) {
        match event {
            TurnEvent::AllocationCreated(TransportType::Udp, relayed) => {
                tracing::debug!(relay = %self.name, %relayed, "allocated");
                if let Some(allocated) = self.allocated.take() {
                    let _ = allocated.send(Some(relayed));
                }
            }
            TurnEvent::AllocationCreateFailed(family) => {
                tracing::warn!(relay = %self.name, ?family, "the relay refused an allocation");
                if let Some(allocated) = self.allocated.take() {
                    let _ = allocated.send(None);
                }
            }
            TurnEvent::PermissionCreateFailed(_, peer) => {
                tracing::warn!(relay = %self.name, %peer, "the relay refused to relay to this address");
            }
            other => tracing::debug!(relay = %self.name, ?other, "relay"),
        }
    }

    fn ended(&mut self, why: &str) {
        tracing::debug!(relay = %self.name, why, "a relay connection ended");
        if let Some(allocated) = self.allocated.take() {
            let _ = allocated.send(None);
        }
    }
}
