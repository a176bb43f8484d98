//! Who may feed the card's AES67 inputs: the received stream's multicast group is open to anyone
//! on the LAN, so the receive takes packets only from the host its SDP names (`o=`'s address,
//! read from the sender address udpsrc puts on each buffer: GStreamer 1.22's udpsrc has no
//! source-specific join) and, of those, only from one SSRC: the first seen. A sender may restart
//! with a new SSRC: once the locked one has been silent for [`SSRC_SILENCE`], the next one takes
//! over, with a warning. What is dropped is counted ([`Dropped`]) and reported in the status.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use gst::prelude::*;
use gst_net::gio;
use partyline_shared::sync::lock;

/// How long the locked SSRC must have been silent before another from the same sender takes
/// over (a console restarting takes longer than this; an interleaved injection never leaves it).
pub const SSRC_SILENCE: Duration = Duration::from_millis(500);

/// What the filter says of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// The first packet of the stream: its SSRC is locked from now on.
    Locked(u32),
    /// The locked SSRC fell silent and this one, from the same sender, took over.
    Switched {
        from: u32,
        to: u32,
    },
    /// From another host than the SDP's origin.
    ForeignSender,
    /// From the origin, with another SSRC than the locked one.
    ForeignSsrc,
    /// Too short to be RTP.
    Malformed,
}

/// The receive's admission: its origin and locked SSRC.
#[derive(Debug)]
pub struct SourceFilter {
    origin: Ipv4Addr,
    locked: Option<(u32, Instant)>,
}

impl SourceFilter {
    pub fn new(origin: Ipv4Addr) -> SourceFilter {
        SourceFilter { origin, locked: None }
    }

    /// Judges one RTP packet from `sender` (None: udpsrc did not say).
    pub fn admit(&mut self, sender: Option<IpAddr>, rtp: &[u8], now: Instant) -> Verdict {
        if sender != Some(IpAddr::V4(self.origin)) {
            return Verdict::ForeignSender;
        }
        let Some(ssrc) = rtp.get(8..12).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])) else {
            return Verdict::Malformed;
        };
        let verdict = match self.locked {
            None => Verdict::Locked(ssrc),
            Some((locked, _)) if locked == ssrc => Verdict::Pass,
            Some((locked, seen)) if now.saturating_duration_since(seen) >= SSRC_SILENCE => {
                Verdict::Switched { from: locked, to: ssrc }
            }
            Some(_) => return Verdict::ForeignSsrc,
        };
        self.locked = Some((ssrc, now));
        verdict
    }
}

/// What the filter let through and what it dropped.
#[derive(Debug, Default)]
pub struct Counted {
    /// Packets of the stream (its origin's, of its SSRC) let through.
    pub packets: AtomicU64,
    pub dropped: Dropped,
}

/// The packets the filter dropped.
#[derive(Debug, Default)]
pub struct Dropped {
    pub foreign_sender: AtomicU64,
    pub foreign_ssrc: AtomicU64,
    pub malformed: AtomicU64,
}

impl Dropped {
    /// All of them.
    pub fn total(&self) -> u64 {
        [&self.foreign_sender, &self.foreign_ssrc, &self.malformed].iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

/// Puts `filter` on `udpsrc`'s output: what it refuses never reaches the jitter buffer. `stats`
/// counts what it lets through and what it drops.
pub fn guard(udpsrc: &gst::Element, filter: SourceFilter, stats: Arc<Counted>) {
    let state = std::sync::Mutex::new((filter, Told::default()));
    let pad = udpsrc.static_pad("src").expect("udpsrc's pad");
    pad.add_probe(gst::PadProbeType::BUFFER, move |_, info| {
        let Some(buffer) = info.buffer() else { return gst::PadProbeReturn::Ok };
        let sender = buffer.meta::<gst_net::NetAddressMeta>().and_then(|m| sender_ip(&m.addr()));
        let mut state = lock(&state);
        let (filter, told) = &mut *state;
        let verdict = match buffer.map_readable() {
            Ok(map) => filter.admit(sender, map.as_slice(), Instant::now()),
            Err(_) => Verdict::Malformed,
        };
        let counter = match verdict {
            Verdict::Pass => None,
            Verdict::Locked(ssrc) => {
                tracing::info!("AES67 receive: SSRC {ssrc:08x} locked");
                None
            }
            Verdict::Switched { from, to } => {
                tracing::warn!("AES67 receive: SSRC {from:08x} silent, {to:08x} from the same sender takes over");
                None
            }
            Verdict::ForeignSender => Some(&stats.dropped.foreign_sender),
            Verdict::ForeignSsrc => Some(&stats.dropped.foreign_ssrc),
            Verdict::Malformed => Some(&stats.dropped.malformed),
        };
        let Some(counter) = counter else {
            stats.packets.fetch_add(1, Ordering::Relaxed);
            return gst::PadProbeReturn::Ok;
        };
        counter.fetch_add(1, Ordering::Relaxed);
        told.now_and_then(verdict, sender, &stats.dropped);
        gst::PadProbeReturn::Drop
    });
}

fn sender_ip(address: &gio::SocketAddress) -> Option<IpAddr> {
    let inet = address.clone().downcast::<gio::InetSocketAddress>().ok()?;
    Some(SocketAddr::from(inet).ip())
}

/// How often dropped packets are told (an injection is one warning a minute).
const TOLD_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct Told {
    last: Option<Instant>,
}

impl Told {
    fn now_and_then(&mut self, verdict: Verdict, sender: Option<IpAddr>, dropped: &Dropped) {
        if self.last.is_some_and(|t| t.elapsed() < TOLD_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        let sender = sender.map_or_else(|| "an unknown sender".to_owned(), |s| s.to_string());
        tracing::warn!(
            "AES67 receive: dropping packets that are not the stream's ({verdict:?}, from {sender}): {} dropped so far; \
             put AES67 on a VLAN of its own",
            dropped.total()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 20);

    fn rtp(ssrc: u32) -> Vec<u8> {
        let mut packet = vec![0x80, 96, 0, 1, 0, 0, 0, 0];
        packet.extend(ssrc.to_be_bytes());
        packet.extend([0; 48 * 3]);
        packet
    }

    fn from(ip: Ipv4Addr) -> Option<IpAddr> {
        Some(IpAddr::V4(ip))
    }

    #[test]
    fn only_the_origin_s_first_ssrc_passes_until_it_falls_silent() {
        let (mut filter, t0) = (SourceFilter::new(CONSOLE), Instant::now());
        let intruder = Ipv4Addr::new(10, 79, 0, 66);
        assert_eq!(filter.admit(from(intruder), &rtp(1), t0), Verdict::ForeignSender, "before the stream");
        assert_eq!(filter.admit(from(CONSOLE), &rtp(7), t0), Verdict::Locked(7));
        assert_eq!(filter.admit(from(intruder), &rtp(7), t0), Verdict::ForeignSender, "its SSRC, not its host");
        assert_eq!(filter.admit(None, &rtp(7), t0), Verdict::ForeignSender);
        // Interleaved with the stream, a spoofed source address with another SSRC never gets in.
        for ms in 1..=2000 {
            let now = t0 + Duration::from_millis(ms);
            assert_eq!(filter.admit(from(CONSOLE), &rtp(7), now), Verdict::Pass);
            assert_eq!(filter.admit(from(CONSOLE), &rtp(9), now), Verdict::ForeignSsrc);
        }
        assert_eq!(filter.admit(from(CONSOLE), &rtp(7)[..11], t0), Verdict::Malformed);
        // The console restarts with a new SSRC.
        let later = t0 + Duration::from_millis(2000) + SSRC_SILENCE;
        assert_eq!(filter.admit(from(CONSOLE), &rtp(8), later), Verdict::Switched { from: 7, to: 8 });
        assert_eq!(filter.admit(from(CONSOLE), &rtp(7), later), Verdict::ForeignSsrc);
    }
}
