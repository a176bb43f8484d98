//! A PTPv2 grandmaster of the tests' own whose clock runs at a rate of its own: what linuxptp's
//! `ptp4l` cannot be here, since with software timestamps its time is the host's
//! `CLOCK_REALTIME`, which every namespace shares. A device on its own crystal (a console, a
//! Dante box as grandmaster) is a few ppm off any other; this one is `--ppm` off the host, so
//! that what follows it (GStreamer's PTP clock in partyline and in the console) runs off the
//! host's clock, and a local sound card (on the host's clock) drifts against AES67.
//!
//! IEEE 1588-2008, as much as a follower needs: Announce every 2 s, two-step Sync and Follow_Up
//! every 125 ms (AES67's media profile), Delay_Resp to every Delay_Req, stamped with the kernel's
//! arrival time as `ptp4l`'s software timestamps are (a stamp taken when the thread gets to the
//! packet would make the path delay an outlier that GStreamer's follower drops); UDP over IPv4 to
//! 224.0.1.129, event messages on port 319, general ones on 320. Master only: it never listens
//! to another grandmaster. Prints `port 1: LISTENING to MASTER` as `ptp4l` does once it sends,
//! so the tests wait on both alike (`testkit::aes67::Grandmaster`).
//!
//! ```text
//! ip netns exec NS ptp-grandmaster --address 10.79.0.11 --identity 02-00-00-FF-FE-79-00-11 --ppm -200
//! ```

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use partyline_shared::aes67::parse_eui64;
use socket2::{Domain, Protocol, Socket, Type};

const PTP_GROUP: Ipv4Addr = Ipv4Addr::new(224, 0, 1, 129);
const EVENT_PORT: u16 = 319;
const GENERAL_PORT: u16 = 320;
/// log2 of the intervals in seconds: Announce 2 s, Sync 125 ms (AES67's media profile, as the
/// tests' `ptp4l` grandmasters have it), Delay_Req 125 ms at least (the profile's shortest).
/// GStreamer's follower takes a sync only with a delay request after it, and measures the
/// path delay on its own clock against the grandmaster's: over the random wait before a
/// request (up to twice this interval) a clock 200 ppm off adds up to 50 µs of error at 125 ms,
/// 400 µs at 1 s, which its filter then drops as an outlier.
const LOG_ANNOUNCE: i8 = 1;
const LOG_SYNC: i8 = -3;
const LOG_DELAY_REQ: i8 = -3;
/// TAI − UTC, as Announce carries it.
const UTC_OFFSET: i16 = 37;

#[derive(Parser, Debug)]
struct Args {
    /// The address of the interface to send on (its multicast interface).
    #[arg(long)]
    address: Ipv4Addr,
    /// The clock identity, an EUI-64 as SDP's ts-refclk writes it (02-00-00-FF-FE-79-00-11).
    #[arg(long)]
    identity: String,
    #[arg(long, default_value_t = 0)]
    domain: u8,
    /// BMCA's priority1: lower wins.
    #[arg(long, default_value_t = 128)]
    priority1: u8,
    /// How fast its clock runs against the host's, in ppm (negative: slower).
    #[arg(long, allow_hyphen_values = true, default_value_t = 0.0)]
    ppm: f64,
    /// How far its time is from the host's at its start, in ms (negative: behind): a
    /// grandmaster set to another time than the last one (or a rogue's).
    #[arg(long, allow_hyphen_values = true, default_value_t = 0)]
    offset_ms: i64,
}

/// The grandmaster's time: the host's at its start (plus an offset), then running
/// `1 + ppm × 10⁻⁶` times as fast.
struct Clock {
    started: Instant,
    at_start: Duration,
    rate: f64,
}

impl Clock {
    fn new(ppm: f64, offset_ms: i64) -> Clock {
        let host = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
        let offset = Duration::from_millis(offset_ms.unsigned_abs());
        let at_start = if offset_ms < 0 { host - offset } else { host + offset };
        Clock { started: Instant::now(), at_start, rate: 1.0 + ppm * 1e-6 }
    }

    fn now(&self) -> Duration {
        self.at(Instant::now())
    }

    fn at(&self, instant: Instant) -> Duration {
        self.at_start + instant.saturating_duration_since(self.started).mul_f64(self.rate)
    }

    /// Its time at `realtime`, a `CLOCK_REALTIME` stamp of the recent past (the kernel's).
    fn at_realtime(&self, realtime: Duration) -> Duration {
        let host_now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        self.at(Instant::now() - host_now.saturating_sub(realtime))
    }
}

/// Reads the next packet into `buffer`: its length and the kernel's `CLOCK_REALTIME` stamp of
/// its arrival (`SO_TIMESTAMPNS`).
fn receive(socket: &UdpSocket, buffer: &mut [u8]) -> Option<(usize, Option<Duration>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::AsRawFd;
    let mut control = nix::cmsg_space!(nix::sys::time::TimeSpec);
    let mut buffers = [std::io::IoSliceMut::new(buffer)];
    let message = recvmsg::<()>(socket.as_raw_fd(), &mut buffers, Some(&mut control), MsgFlags::empty()).ok()?;
    let stamp = message.cmsgs().ok()?.find_map(|c| match c {
        ControlMessageOwned::ScmTimestampns(t) => {
            Some(Duration::new(u64::try_from(t.tv_sec()).ok()?, u32::try_from(t.tv_nsec()).ok()?))
        }
        _ => None,
    });
    Some((message.bytes, stamp))
}

/// PTP's 10-byte timestamp: 48 bits of seconds, 32 of nanoseconds.
fn timestamp(t: Duration) -> [u8; 10] {
    let mut out = [0; 10];
    out[..6].copy_from_slice(&t.as_secs().to_be_bytes()[2..]);
    out[6..].copy_from_slice(&t.subsec_nanos().to_be_bytes());
    out
}

/// What every message of this port starts with.
struct Port {
    domain: u8,
    identity: [u8; 8],
}

impl Port {
    /// The 34-byte common header of a message of `kind` and `length` bytes.
    fn header(&self, kind: u8, length: u16, sequence: u16, control: u8, log_interval: i8, flags: [u8; 2]) -> Vec<u8> {
        let mut m = Vec::with_capacity(usize::from(length));
        m.extend([kind, 2]);
        m.extend(length.to_be_bytes());
        m.extend([self.domain, 0]);
        m.extend(flags);
        m.extend([0; 8]); // correctionField
        m.extend([0; 4]);
        m.extend(self.identity);
        m.extend(1u16.to_be_bytes()); // port number
        m.extend(sequence.to_be_bytes());
        m.extend([control, log_interval.to_be_bytes()[0]]);
        m
    }

    fn sync(&self, sequence: u16) -> Vec<u8> {
        // twoStepFlag: the time is in the Follow_Up.
        let mut m = self.header(0x0, 44, sequence, 0, LOG_SYNC, [0x02, 0x08]);
        m.extend([0; 10]);
        m
    }

    fn follow_up(&self, sequence: u16, sent: Duration) -> Vec<u8> {
        let mut m = self.header(0x8, 44, sequence, 2, LOG_SYNC, [0x00, 0x08]);
        m.extend(timestamp(sent));
        m
    }

    fn announce(&self, sequence: u16, priority1: u8) -> Vec<u8> {
        let mut m = self.header(0xB, 64, sequence, 5, LOG_ANNOUNCE, [0x00, 0x08]);
        m.extend([0; 10]); // originTimestamp
        m.extend(UTC_OFFSET.to_be_bytes());
        m.push(0);
        m.push(priority1);
        // clockClass 248 (default), accuracy unknown, variance the largest: any real
        // grandmaster wins against it, as against ptp4l's defaults.
        m.extend([248, 0xFE, 0xFF, 0xFF]);
        m.push(128); // priority2
        m.extend(self.identity);
        m.extend(0u16.to_be_bytes()); // stepsRemoved
        m.push(0xA0); // timeSource: internal oscillator
        m
    }

    /// The answer to the Delay_Req `request`, received at `received`.
    fn delay_resp(&self, request: &[u8], received: Duration) -> Vec<u8> {
        let sequence = u16::from_be_bytes([request[30], request[31]]);
        let mut m = self.header(0x9, 54, sequence, 3, LOG_DELAY_REQ, [0x00, 0x08]);
        m.extend(timestamp(received));
        m.extend(&request[20..30]); // requestingPortIdentity
        m
    }
}

/// A socket bound to `port` on every address, in PTP's group on `interface`, sending there.
fn socket(port: u16, interface: Ipv4Addr) -> UdpSocket {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).expect("a UDP socket");
    socket.set_reuse_address(true).expect("SO_REUSEADDR");
    socket.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)).into()).expect("bind the PTP port");
    socket.join_multicast_v4(&PTP_GROUP, &interface).expect("join 224.0.1.129");
    socket.set_multicast_if_v4(&interface).expect("IP_MULTICAST_IF");
    socket.set_multicast_loop_v4(false).expect("IP_MULTICAST_LOOP");
    socket.set_multicast_ttl_v4(1).expect("IP_MULTICAST_TTL");
    nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::ReceiveTimestampns, &true)
        .expect("SO_TIMESTAMPNS");
    socket.into()
}

fn main() {
    let args = Args::parse();
    let clock = std::sync::Arc::new(Clock::new(args.ppm, args.offset_ms));
    let port = std::sync::Arc::new(Port {
        domain: args.domain,
        identity: parse_eui64(&args.identity).expect("an EUI-64: 02-00-00-FF-FE-79-00-11"),
    });
    let event = socket(EVENT_PORT, args.address);
    let general = socket(GENERAL_PORT, args.address);
    let to = |port| SocketAddr::from((PTP_GROUP, port));

    // Delay_Req in, Delay_Resp out, stamped as soon as it is read.
    let (answers, answer_clock, answer_port) =
        (general.try_clone().expect("a second handle"), clock.clone(), port.clone());
    let requests = event.try_clone().expect("a second handle");
    std::thread::spawn(move || {
        let mut buffer = [0u8; 128];
        loop {
            let Some((length, stamp)) = receive(&requests, &mut buffer) else { continue };
            let received = stamp.map_or_else(|| answer_clock.now(), |at| answer_clock.at_realtime(at));
            let message = &buffer[..length];
            if length >= 44 && message[0] & 0x0F == 0x1 && message[4] == answer_port.domain {
                let _ = answers.send_to(&answer_port.delay_resp(message, received), to(GENERAL_PORT));
            }
        }
    });

    println!(
        "port 1: LISTENING to MASTER on ANNOUNCE_RECEIPT_TIMEOUT_EXPIRES (a clock {:+} ppm off the host's)",
        args.ppm
    );
    let sync_every = Duration::from_millis(125);
    let (mut sync_sequence, mut announce_sequence) = (0u16, 0u16);
    let mut next = Instant::now();
    for tick in 0u64.. {
        if tick % 16 == 0 {
            let _ = general.send_to(&port.announce(announce_sequence, args.priority1), to(GENERAL_PORT));
            announce_sequence = announce_sequence.wrapping_add(1);
        }
        // The Sync's time is taken as it leaves, and follows it.
        let _ = event.send_to(&port.sync(sync_sequence), to(EVENT_PORT));
        let sent = clock.now();
        let _ = general.send_to(&port.follow_up(sync_sequence, sent), to(GENERAL_PORT));
        sync_sequence = sync_sequence.wrapping_add(1);
        next += sync_every;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
}
