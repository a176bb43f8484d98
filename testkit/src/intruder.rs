//! A host of the tests' AES67 network that sends what it likes ([`Intruder`]): anyone on a venue's
//! LAN can send SAP and RTP to AES67's multicast groups. Its sockets are made in its host's
//! namespace (by a thread that enters it), so its packets come from another host, over the
//! bridge, as an attacker's would.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsFd as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use partyline_shared::aes67::sap::SapPacket;
use partyline_shared::aes67::{SAP_GROUP, SAP_PORT};
use socket2::{Domain, Protocol, Socket, Type};

use crate::aes67::Host;

/// A host that sends SAP and RTP of its own making.
#[derive(Debug)]
pub struct Intruder {
    address: Ipv4Addr,
    namespace: String,
    socket: Arc<UdpSocket>,
}

impl Intruder {
    /// On `host` (its namespace and address).
    pub fn on(host: &Host) -> Intruder {
        let address: Ipv4Addr = host.address.parse().expect("an IPv4 address");
        let socket = in_namespace(&host.namespace, move || {
            let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("a socket");
            socket.bind(&SocketAddrV4::new(address, 0).into()).expect("bind the intruder's socket");
            socket.set_multicast_if_v4(&address).expect("multicast interface");
            socket.set_multicast_ttl_v4(4).expect("multicast ttl");
            UdpSocket::from(socket)
        });
        Intruder { address, namespace: host.namespace.clone(), socket: Arc::new(socket) }
    }

    /// Its own address.
    pub fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// Sends `packet` to SAP's group, whatever its origin field says.
    pub fn send_sap(&self, packet: &SapPacket) {
        self.socket.send_to(&packet.encode(), SocketAddrV4::new(SAP_GROUP, SAP_PORT)).expect("send SAP");
    }

    /// Waits for the first SAP announcement from `origin` on the LAN, as an attacker learns what
    /// to spoof.
    pub fn overhear_sap(&self, origin: Ipv4Addr, within: Duration) -> SapPacket {
        let address = self.address;
        let listener = in_namespace(&self.namespace, move || {
            let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("a socket");
            socket.set_reuse_address(true).expect("reuse");
            socket.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SAP_PORT).into()).expect("bind SAP's port");
            socket.join_multicast_v4(&SAP_GROUP, &address).expect("join SAP's group");
            UdpSocket::from(socket)
        });
        let deadline = Instant::now() + within;
        let mut buffer = vec![0; 65_536];
        loop {
            let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero());
            let Some(left) = left else { panic!("no SAP announcement from {origin} within {within:?}") };
            listener.set_read_timeout(Some(left)).expect("timeout");
            let Ok(length) = listener.recv(&mut buffer) else { continue };
            if let Ok(packet) = SapPacket::decode(&buffer[..length])
                && packet.origin == origin
                && !packet.deletion
            {
                return packet;
            }
        }
    }

    /// Sends an AES67 stream of its own to `group`:`port` until the [`Spray`] is dropped: L24,
    /// `channels` channels, payload type `payload_type`, 1 ms packets at their RTP time on the
    /// host's clock (PTP time here), a sine of `hz` at `dbfs` (RMS) on `channel` (from 1).
    pub fn spray_rtp(&self, to: SocketAddrV4, rtp: RtpStream) -> Spray {
        let (socket, running) = (self.socket.clone(), Arc::new(AtomicBool::new(true)));
        let keep_going = running.clone();
        let thread = std::thread::spawn(move || {
            let mut sequence: u16 = 0;
            let mut next = Instant::now();
            while keep_going.load(Ordering::Relaxed) {
                let now_ns = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_nanos();
                let frame = (now_ns * 48_000 / 1_000_000_000) as u64;
                socket.send_to(&rtp.packet(sequence, frame), to).expect("send RTP");
                sequence = sequence.wrapping_add(1);
                next += Duration::from_millis(1);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        });
        Spray { _sending: Background { running, thread: Some(thread) } }
    }
}

impl Intruder {
    /// Listens to the RTP stream sent to `group`:`port` until the [`Tap`] is dropped, as any host
    /// of the LAN can: each packet's arrival and RTP time.
    pub fn tap_rtp(&self, group: Ipv4Addr, port: u16) -> Tap {
        let address = self.address;
        let socket = in_namespace(&self.namespace, move || {
            let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("a socket");
            socket.set_reuse_address(true).expect("reuse");
            socket.bind(&SocketAddrV4::new(group, port).into()).expect("bind the stream's port");
            socket.join_multicast_v4(&group, &address).expect("join the stream's group");
            socket.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
            UdpSocket::from(socket)
        });
        let (heard, running) = (Arc::new(std::sync::Mutex::new(Vec::new())), Arc::new(AtomicBool::new(true)));
        let (into, keep_going) = (heard.clone(), running.clone());
        let thread = std::thread::spawn(move || {
            let mut buffer = vec![0; 2048];
            while keep_going.load(Ordering::Relaxed) {
                let Ok(length) = socket.recv(&mut buffer) else { continue };
                if length >= 12 {
                    let rtp_time = u32::from_be_bytes([buffer[4], buffer[5], buffer[6], buffer[7]]);
                    into.lock().expect("the tap's packets").push(Tapped { at: Instant::now(), rtp_time });
                }
            }
        });
        Tap { heard, _listening: Background { running, thread: Some(thread) } }
    }
}

/// One packet a [`Tap`] heard.
#[derive(Debug, Clone, Copy)]
pub struct Tapped {
    pub at: Instant,
    pub rtp_time: u32,
}

/// A stream listened to by [`Intruder::tap_rtp`]; stops on drop.
#[derive(Debug)]
pub struct Tap {
    heard: Arc<std::sync::Mutex<Vec<Tapped>>>,
    _listening: Background,
}

impl Tap {
    /// The packets heard since `from`.
    pub fn since(&self, from: Instant) -> Vec<Tapped> {
        self.heard.lock().expect("the tap's packets").iter().filter(|p| p.at >= from).copied().collect()
    }
}

/// What [`Intruder::spray_rtp`] sends.
#[derive(Debug, Clone, Copy)]
pub struct RtpStream {
    pub ssrc: u32,
    pub payload_type: u8,
    pub channels: usize,
    pub channel: usize,
    pub hz: f64,
    pub dbfs: f64,
}

impl RtpStream {
    /// One 1 ms packet (48 frames) starting at frame `frame` of the media clock.
    fn packet(&self, sequence: u16, frame: u64) -> Vec<u8> {
        let mut packet = vec![0x80, self.payload_type & 0x7f];
        packet.extend(sequence.to_be_bytes());
        packet.extend((frame as u32).to_be_bytes());
        packet.extend(self.ssrc.to_be_bytes());
        let amplitude = 10f64.powf(self.dbfs / 20.0) * std::f64::consts::SQRT_2;
        for n in frame..frame + 48 {
            for channel in 1..=self.channels {
                let value = if channel == self.channel {
                    let phase = 2.0 * std::f64::consts::PI * self.hz * (n % 48_000) as f64 / 48_000.0;
                    (amplitude * phase.sin() * 8_388_607.0) as i32
                } else {
                    0
                };
                packet.extend(&value.to_be_bytes()[1..]);
            }
        }
        packet
    }
}

/// An RTP stream being sent; stopped on drop.
#[derive(Debug)]
pub struct Spray {
    _sending: Background,
}

/// A thread that runs while `running` is set; stopped and joined on drop.
#[derive(Debug)]
struct Background {
    running: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Background {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs `make` on a thread that has entered network namespace `namespace` (`ip netns`): a socket
/// made there stays there.
fn in_namespace<T: Send + 'static>(namespace: &str, make: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{namespace}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("enter the namespace");
        make()
    })
    .join()
    .expect("the namespace's thread")
}
