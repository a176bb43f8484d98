//! SAP (RFC 2974) on the media network: the listener keeps the streams announced there (the
//! admin picks the card's input stream from them), the announcer announces partyline's send
//! every [`ANNOUNCE_EVERY`] and withdraws it when the send stops.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use partyline_shared::aes67::sap::SapPacket;
use partyline_shared::aes67::{SAP_GROUP, SAP_PORT};
use partyline_shared::bridge::AnnouncedStream;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

use super::Interface;
use crate::state::StatusBoard;

/// How often partyline announces its send. RFC 2974's interval for a few small sessions is
/// longer (300 s); AES67 devices and Dante announce about every 30 s, and a receiver that
/// has just started waits at most this long.
pub const ANNOUNCE_EVERY: Duration = Duration::from_secs(30);
/// An announcement not repeated for this long is dropped from the list (RFC 2974: ten
/// announcement intervals, or an hour; devices here announce every 30 s or so).
const FORGET_AFTER: Duration = Duration::from_secs(300);
/// How often the list in the status is refreshed (ages, forgotten streams).
const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// A UDP socket on SAP's port that other SAP listeners of the host can share, in SAP's group on
/// `interface`, sending there.
fn sap_socket(interface: &Interface, ttl: u8) -> anyhow::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SAP_PORT).into()).context("bind SAP's port 9875")?;
    socket
        .join_multicast_v4(&SAP_GROUP, &interface.address)
        .with_context(|| format!("join SAP's group on {}", interface.name))?;
    socket.set_multicast_if_v4(&interface.address)?;
    socket.set_multicast_ttl_v4(u32::from(ttl))?;
    Ok(UdpSocket::from_std(socket.into())?)
}

/// Listens to SAP on `interface` and keeps the announced streams in the status (not ours).
pub fn listen(interface: &Interface, board: Arc<StatusBoard>) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let socket = sap_socket(interface, 1)?;
    let own = interface.address;
    Ok(tokio::spawn(async move {
        let mut heard: HashMap<(Ipv4Addr, u16), (String, Instant)> = HashMap::new();
        let mut buffer = vec![0; 65_536];
        let mut refresh = tokio::time::interval(REFRESH_EVERY);
        loop {
            tokio::select! {
                received = socket.recv_from(&mut buffer) => {
                    let Ok((length, _)) = received else { continue };
                    match SapPacket::decode(&buffer[..length]) {
                        Ok(packet) if packet.origin == own => {}
                        Ok(packet) if packet.deletion => {
                            heard.remove(&(packet.origin, packet.hash));
                        }
                        Ok(packet) => {
                            // A changed SDP comes with a new hash: the old one goes.
                            heard.retain(|(origin, _), (sdp, _)| *origin != packet.origin || !same_session(sdp, &packet.sdp));
                            heard.insert((packet.origin, packet.hash), (packet.sdp, Instant::now()));
                        }
                        Err(error) => tracing::debug!("SAP: {error}"),
                    }
                }
                _ = refresh.tick() => {}
            }
            heard.retain(|_, (_, seen)| seen.elapsed() < FORGET_AFTER);
            let mut streams: Vec<AnnouncedStream> = heard
                .iter()
                .map(|((origin, _), (sdp, seen))| AnnouncedStream {
                    source: origin.to_string(),
                    sdp: sdp.clone(),
                    age_s: u32::try_from(seen.elapsed().as_secs()).unwrap_or(u32::MAX),
                })
                .collect();
            streams.sort_by_key(|s| s.age_s);
            board.set_announced(streams);
        }
    }))
}

/// Whether two SDPs describe the same session (their `o=` lines' session id), whatever the
/// version.
fn same_session(a: &str, b: &str) -> bool {
    let session = |sdp: &str| {
        sdp.lines().find_map(|l| l.strip_prefix("o=")).and_then(|o| o.split_whitespace().nth(1)).map(str::to_owned)
    };
    session(a).is_some() && session(a) == session(b)
}

/// Announces one SDP on `interface` until stopped; then withdraws it.
#[derive(Debug)]
pub struct Announcer {
    task: tokio::task::JoinHandle<()>,
    socket: Arc<UdpSocket>,
    current: Arc<std::sync::Mutex<Option<SapPacket>>>,
}

impl Announcer {
    pub fn start(interface: &Interface, ttl: u8) -> anyhow::Result<Announcer> {
        let socket = Arc::new(sap_socket(interface, ttl)?);
        let current: Arc<std::sync::Mutex<Option<SapPacket>>> = Arc::default();
        let (task_socket, task_current) = (socket.clone(), current.clone());
        let task = tokio::spawn(async move {
            let mut every = tokio::time::interval(ANNOUNCE_EVERY);
            loop {
                every.tick().await;
                let packet = partyline_shared::sync::lock(&task_current).clone();
                if let Some(packet) = packet {
                    send(&task_socket, &packet).await;
                }
            }
        });
        Ok(Announcer { task, socket, current })
    }

    /// Announces `sdp` from now on (at once, then every [`ANNOUNCE_EVERY`]), withdrawing what
    /// was announced before.
    pub async fn announce(&self, origin: Ipv4Addr, sdp: String) {
        let packet = SapPacket { deletion: false, origin, hash: hash(&sdp), sdp };
        let before = partyline_shared::sync::lock(&self.current).replace(packet.clone());
        if let Some(before) = before.filter(|b| b.hash != packet.hash) {
            send(&self.socket, &SapPacket { deletion: true, ..before }).await;
        }
        send(&self.socket, &packet).await;
    }

    /// Stops announcing and withdraws the announcement.
    pub async fn stop(&self) {
        self.task.abort();
        let before = partyline_shared::sync::lock(&self.current).take();
        if let Some(before) = before {
            send(&self.socket, &SapPacket { deletion: true, ..before }).await;
        }
    }
}

impl Drop for Announcer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn send(socket: &UdpSocket, packet: &SapPacket) {
    if let Err(error) = socket.send_to(&packet.encode(), SocketAddrV4::new(SAP_GROUP, SAP_PORT)).await {
        tracing::warn!("SAP: cannot announce: {error}");
    }
}

/// The message id hash of an announcement: RFC 2974 asks only that it change with the SDP.
fn hash(sdp: &str) -> u16 {
    super::fnv1a(sdp.bytes()) as u16
}
