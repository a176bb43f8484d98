//! SAP (RFC 2974) on the media network: the listener keeps the streams announced there (`heard.rs`; the
//! admin picks the card's input stream from them), the announcer announces partyline's send
//! every [`ANNOUNCE_EVERY`] and withdraws it when the send stops.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use partyline_shared::aes67::sap::SapPacket;
use partyline_shared::aes67::{SAP_GROUP, SAP_PORT};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

use super::Interface;
use super::heard::{Heard, MAX_PER_SENDER, MAX_STREAMS, Refused, Streams};
use crate::state::StatusBoard;

/// How often partyline announces its send. RFC 2974's interval for a few small sessions is
/// longer (300 s); AES67 devices and Dante announce about every 30 s, and a receiver that
/// has just started waits at most this long.
pub const ANNOUNCE_EVERY: Duration = Duration::from_secs(30);
/// An announcement not repeated for this long is dropped from the list (RFC 2974: ten
/// announcement intervals, or an hour; devices here announce every 30 s or so).
const FORGET_AFTER: Duration = Duration::from_secs(300);
/// How often the list in the status is rebuilt (ages, forgotten streams, new ones).
const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// How often refused SAP packets are told (a flood is one warning a minute).
const REFUSALS_TOLD_EVERY: Duration = Duration::from_secs(60);

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

/// Listens to SAP on `interface` and keeps the announced streams in the status (not ours),
/// bounded and checked as [`Streams`] says; the status's list is rebuilt every
/// [`REFRESH_EVERY`].
pub fn listen(interface: &Interface, board: Arc<StatusBoard>) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let socket = sap_socket(interface, 1)?;
    let own = interface.address;
    Ok(tokio::spawn(async move {
        let mut streams = Streams::new(own, FORGET_AFTER);
        let mut refused = RefusedCount::default();
        let mut buffer = vec![0; 65_536];
        let mut refresh = tokio::time::interval(REFRESH_EVERY);
        loop {
            tokio::select! {
                received = socket.recv_from(&mut buffer) => {
                    let Ok((length, SocketAddr::V4(sender))) = received else { continue };
                    match SapPacket::decode(&buffer[..length]) {
                        Ok(packet) => {
                            if let Heard::Refused(why) = streams.hear(*sender.ip(), packet, Instant::now()) {
                                refused.add(why, *sender.ip());
                            }
                        }
                        Err(error) => tracing::debug!("SAP: {error}"),
                    }
                }
                _ = refresh.tick() => {
                    board.set_announced(streams.list(Instant::now()));
                    refused.tell_now_and_then();
                }
            }
        }
    }))
}

/// The SAP packets refused since the last warning, told at most once a minute.
#[derive(Debug, Default)]
struct RefusedCount {
    spoofed: u64,
    full: u64,
    malformed: u64,
    last_sender: Option<Ipv4Addr>,
    told: Option<Instant>,
}

impl RefusedCount {
    fn add(&mut self, why: Refused, sender: Ipv4Addr) {
        match why {
            Refused::Spoofed => self.spoofed += 1,
            Refused::Full => self.full += 1,
            Refused::Malformed => self.malformed += 1,
        }
        self.last_sender = Some(sender);
    }

    fn tell_now_and_then(&mut self) {
        let Some(sender) = self.last_sender else { return };
        if self.told.is_some_and(|t| t.elapsed() < REFUSALS_TOLD_EVERY) {
            return;
        }
        tracing::warn!(
            "SAP: refused {} announcements naming another host than their sender, {} over the list's caps \
             ({MAX_PER_SENDER} a sender, {MAX_STREAMS} in all), {} malformed; the last from {sender}",
            self.spoofed,
            self.full,
            self.malformed
        );
        *self = RefusedCount { told: Some(Instant::now()), ..RefusedCount::default() };
    }
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
