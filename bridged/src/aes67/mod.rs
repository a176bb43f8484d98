//! AES67 network audio as the card: the media network ([`Network`]: the PTP follower and the SAP
//! listener, running while `audio.aes67.interface` is set), and the card's directions on it
//! (`stream.rs`): the received stream as the card's inputs, the card's outputs as a stream of
//! partyline's own, announced by SAP ([`Sender`]) so that Dante Controller can route it.

mod channels;
mod heard;
mod media_clock;
mod ptp;
mod sap;
mod source;
mod stream;

use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, anyhow};
use partyline_shared::aes67::{Aes67Stream, Encoding, PAYLOAD_TYPE};
use partyline_shared::bridge::{PlanAes67, PtpState};
use partyline_shared::config::MulticastRange;

use crate::card_mix::BlockMixer;
use crate::jitter::Jitter;
use crate::state::StatusBoard;
pub use stream::Direction;

/// The media network's interface: its name and IPv4 address.
#[derive(Debug, Clone)]
pub struct Interface {
    pub name: String,
    pub address: Ipv4Addr,
}

impl Interface {
    /// `name`'s first IPv4 address.
    fn find(name: &str) -> anyhow::Result<Interface> {
        let addresses = nix::ifaddrs::getifaddrs().context("list the network interfaces")?;
        let address = addresses
            .filter(|a| a.interface_name == name)
            .find_map(|a| a.address.and_then(|s| s.as_sockaddr_in().map(|v4| v4.ip())))
            .ok_or_else(|| anyhow!("audio.aes67.interface: {name:?} has no IPv4 address (or does not exist)"))?;
        Ok(Interface { name: name.to_owned(), address })
    }
}

/// The media network, followed: PTP and SAP on one interface.
#[derive(Debug)]
pub struct Network {
    pub interface: Interface,
    pub domain: u8,
    ptp: ptp::PtpFollower,
    sap_listener: tokio::task::JoinHandle<()>,
    board: Arc<StatusBoard>,
}

impl Network {
    /// Follows PTP and listens to SAP on `plan.interface`. Must run inside the tokio runtime.
    pub fn start(plan: &PlanAes67, board: Arc<StatusBoard>) -> anyhow::Result<Network> {
        let interface = Interface::find(&plan.interface)?;
        let ptp = ptp::PtpFollower::start(&interface.name, plan.ptp_domain, &plan.ptp_grandmasters, board.clone())?;
        let sap_listener = sap::listen(&interface, board.clone())?;
        tracing::info!("AES67: media network on {} ({})", interface.name, interface.address);
        Ok(Network { interface, domain: plan.ptp_domain, ptp, sap_listener, board })
    }

    /// Whether this is the network `plan` asks for.
    pub fn is(&self, plan: &PlanAes67) -> bool {
        self.interface.name == plan.interface && self.domain == plan.ptp_domain
    }

    /// Follows only the grandmasters `plan` allows from now on.
    pub fn allow(&self, plan: &PlanAes67) {
        self.ptp.set_grandmasters(&plan.ptp_grandmasters);
    }

    /// Stops following PTP and SAP; the card's AES67 directions, which hold the network, are
    /// stopped first (`Player::stop_all`).
    pub fn stop(&self) {
        self.ptp.stop();
        self.sap_listener.abort();
        self.board.set_ptp(partyline_shared::bridge::PtpStatus::default());
        self.board.set_announced(Vec::new());
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.sap_listener.abort();
    }
}

/// The card's capture from the AES67 stream of the plan.
pub fn receive(
    plan: &PlanAes67,
    rate: u32,
    network: &Arc<Network>,
    mixer: BlockMixer,
    board: Arc<StatusBoard>,
) -> anyhow::Result<Receiver> {
    let (direction, stats) = stream::receive(plan, rate, network, mixer, board.clone())?;
    let reporter = tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            let (lost, late) = stats.lost_and_late();
            board.set_receive(
                stats.source.packets.load(Ordering::Relaxed),
                lost,
                late,
                stats.source.dropped.total(),
                stats.offset_p99_us.load(Ordering::Relaxed),
            );
        }
    });
    Ok(Receiver { direction, reporter })
}

/// The card's AES67 capture, running.
#[derive(Debug)]
pub struct Receiver {
    direction: Direction,
    reporter: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub fn stop(&self) {
        self.reporter.abort();
        self.direction.stop();
    }
}

/// The card's AES67 send, running and announced.
#[derive(Debug)]
pub struct Sender {
    direction: Direction,
    announcer: Arc<sap::Announcer>,
    keeper: tokio::task::JoinHandle<()>,
}

impl Sender {
    /// Sends the card's outputs as the plan's stream and announces it once the clock has
    /// synced; a new grandmaster is a new version of the announcement (its `ts-refclk`).
    pub fn start(
        plan: &PlanAes67,
        rate: u32,
        network: &Arc<Network>,
        queue: Arc<Mutex<Jitter>>,
        board: Arc<StatusBoard>,
    ) -> anyhow::Result<Sender> {
        let group = send_group(plan, network.interface.address)?;
        let direction = stream::send(plan, group, rate, network, queue, board.clone())?;
        let announcer = Arc::new(sap::Announcer::start(&network.interface, plan.send_ttl)?);
        let version = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut stream = Aes67Stream {
            name: plan.send_name.clone(),
            session_id: session_id(&plan.send_name, network.interface.address),
            version,
            origin: network.interface.address,
            group,
            port: plan.send_port,
            ttl: plan.send_ttl,
            encoding: Encoding::L24,
            channels: plan.send_channels,
            payload_type: PAYLOAD_TYPE,
            packet_time_us: 1000,
            ptp_domain: network.domain,
            grandmaster: None,
            media_clock_offset: 0,
        };
        let (network, keeper_announcer) = (network.clone(), announcer.clone());
        let keeper = tokio::spawn(async move {
            network.ptp.synced().await;
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                let ptp = board.ptp();
                let grandmaster = (!ptp.grandmaster.is_empty()).then_some(ptp.grandmaster);
                if ptp.state != PtpState::Locked || grandmaster == stream.grandmaster {
                    continue;
                }
                if stream.grandmaster.is_some() {
                    stream.version += 1;
                }
                stream.grandmaster = grandmaster;
                let sdp = stream.to_sdp();
                tracing::info!(
                    "AES67 send: announcing {:?} on {}:{} (version {})",
                    stream.name,
                    group,
                    stream.port,
                    stream.version
                );
                board.set_send_sdp(sdp.clone());
                keeper_announcer.announce(stream.origin, sdp).await;
            }
        });
        Ok(Sender { direction, announcer, keeper })
    }

    /// Stops sending and withdraws the announcement.
    pub async fn stop(&self) {
        self.keeper.abort();
        self.direction.stop();
        self.announcer.stop().await;
    }
}

/// The send's multicast group: the plan's, or one of its range picked from the name and the
/// interface's address (the same at every start on the same network).
fn send_group(plan: &PlanAes67, address: Ipv4Addr) -> anyhow::Result<Ipv4Addr> {
    if !plan.send_address.is_empty() {
        return plan.send_address.parse().map_err(|_| anyhow!("send address {:?} is not IPv4", plan.send_address));
    }
    let range = MulticastRange::parse(&plan.send_range).map_err(|m| anyhow!("send range: {m}"))?;
    Ok(range.pick(session_id(&plan.send_name, address)))
}

/// A session id stable across restarts for one name on one host address.
fn session_id(name: &str, address: Ipv4Addr) -> u64 {
    fnv1a(name.bytes().chain(address.octets())) >> 32
}

/// FNV-1a (64 bits): a hash that is the same in every build and at every start, unlike std's,
/// for the ids partyline announces (a session id, a SAP message hash).
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}
