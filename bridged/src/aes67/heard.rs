//! The streams SAP announces on the media network, as bridged keeps them: what anyone on the LAN
//! may send, so bounded and checked. An announcement counts only from the host its SDP names
//! (`o=`'s address is its UDP sender, and so is SAP's origin field): a host cannot replace or
//! withdraw another's stream. Each sender keeps at most [`MAX_PER_SENDER`] streams and the list
//! at most [`MAX_STREAMS`]; a stream already listed is always refreshed, a new one over a cap is
//! dropped. The list handed to the status is built on a tick ([`Heard::list`]), never per packet.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use partyline_shared::aes67::sap::SapPacket;
use partyline_shared::bridge::AnnouncedStream;

/// The most streams listed: a large venue's AES67 devices announce a few each.
pub const MAX_STREAMS: usize = 256;
/// The most streams of one sender (a large Dante device announces one per multicast flow).
pub const MAX_PER_SENDER: usize = 32;
/// The longest SDP kept: RFC 2974 asks for SAP packets of 1 KB at most, an AES67 SDP is about
/// 500 bytes, and the list crosses D-Bus every second.
pub const MAX_SDP_BYTES: usize = 2048;

/// Why a SAP packet changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// SAP's origin field or the SDP's `o=` address is not the UDP sender.
    Spoofed,
    /// The sender has [`MAX_PER_SENDER`] streams, or the list [`MAX_STREAMS`].
    Full,
    /// An SDP over [`MAX_SDP_BYTES`], or with no `o=` line to know its session by.
    Malformed,
}

/// What one SAP packet did to the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    Added,
    Refreshed,
    Withdrawn,
    /// A deletion of nothing listed, or our own announcement.
    Ignored,
    Refused(Refused),
}

#[derive(Debug)]
struct Entry {
    /// The `o=` session id: one session per sender, whatever its version.
    session: String,
    hash: u16,
    sdp: String,
    seen: Instant,
}

/// The announced streams, by sender.
#[derive(Debug)]
pub struct Streams {
    own: Ipv4Addr,
    forget_after: Duration,
    by_sender: HashMap<Ipv4Addr, Vec<Entry>>,
    count: usize,
}

impl Streams {
    /// An empty list that ignores `own` announcements and forgets a stream not announced for
    /// `forget_after`.
    pub fn new(own: Ipv4Addr, forget_after: Duration) -> Streams {
        Streams { own, forget_after, by_sender: HashMap::new(), count: 0 }
    }

    /// Takes one SAP packet that came from `sender`.
    pub fn hear(&mut self, sender: Ipv4Addr, packet: SapPacket, now: Instant) -> Heard {
        if sender == self.own {
            return Heard::Ignored;
        }
        let named = sdp_origin(&packet.sdp);
        if packet.origin != sender || named.is_some_and(|(_, address)| address != sender) {
            return Heard::Refused(Refused::Spoofed);
        }
        if packet.deletion {
            return self.withdraw(sender, packet.hash);
        }
        let Some((session, _)) = named.filter(|_| packet.sdp.len() <= MAX_SDP_BYTES) else {
            return Heard::Refused(Refused::Malformed);
        };
        let session = session.to_owned();
        let full = self.count >= MAX_STREAMS;
        let entries = self.by_sender.entry(sender).or_default();
        // A changed SDP comes with a new hash and version: it replaces its session's.
        if let Some(entry) = entries.iter_mut().find(|e| e.session == session) {
            *entry = Entry { session, hash: packet.hash, sdp: packet.sdp, seen: now };
            return Heard::Refreshed;
        }
        if full || entries.len() >= MAX_PER_SENDER {
            return Heard::Refused(Refused::Full);
        }
        entries.push(Entry { session, hash: packet.hash, sdp: packet.sdp, seen: now });
        self.count += 1;
        Heard::Added
    }

    fn withdraw(&mut self, sender: Ipv4Addr, hash: u16) -> Heard {
        let Some(entries) = self.by_sender.get_mut(&sender) else { return Heard::Ignored };
        let before = entries.len();
        entries.retain(|e| e.hash != hash);
        let gone = before - entries.len();
        self.count -= gone;
        if entries.is_empty() {
            self.by_sender.remove(&sender);
        }
        if gone > 0 { Heard::Withdrawn } else { Heard::Ignored }
    }

    /// Forgets what was not announced for long, and lists the rest, newest first.
    pub fn list(&mut self, now: Instant) -> Vec<AnnouncedStream> {
        let forget_after = self.forget_after;
        self.by_sender.retain(|_, entries| {
            entries.retain(|e| now.saturating_duration_since(e.seen) < forget_after);
            !entries.is_empty()
        });
        self.count = self.by_sender.values().map(Vec::len).sum();
        let mut streams: Vec<AnnouncedStream> = self
            .by_sender
            .iter()
            .flat_map(|(sender, entries)| entries.iter().map(move |e| (sender, e)))
            .map(|(sender, e)| AnnouncedStream {
                source: sender.to_string(),
                sdp: e.sdp.clone(),
                age_s: u32::try_from(now.saturating_duration_since(e.seen).as_secs()).unwrap_or(u32::MAX),
            })
            .collect();
        streams.sort_by_key(|s| s.age_s);
        streams
    }

    /// How many streams are listed.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.count
    }
}

/// The session id and address of an SDP's `o=` line (`o=- 1311738121 1311738122 IN IP4
/// 192.168.1.232`); None without one, or with an address that is no IPv4 address.
fn sdp_origin(sdp: &str) -> Option<(&str, Ipv4Addr)> {
    let origin = sdp.lines().find_map(|l| l.strip_prefix("o="))?;
    let fields: Vec<&str> = origin.split_whitespace().collect();
    match fields[..] {
        [_, session, _, "IN", "IP4", address] => Some((session, address.parse().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);
    const CONSOLE: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 20);
    const INTRUDER: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 66);

    fn sdp(session: u64, address: Ipv4Addr, name: &str) -> String {
        format!("v=0\r\no=- {session} {session} IN IP4 {address}\r\ns={name}\r\nc=IN IP4 239.69.20.1/32\r\n")
    }

    fn announce(origin: Ipv4Addr, hash: u16, sdp: String) -> SapPacket {
        SapPacket { deletion: false, origin, hash, sdp }
    }

    fn streams() -> Streams {
        Streams::new(OWN, Duration::from_secs(300))
    }

    #[test]
    fn a_host_cannot_replace_or_withdraw_another_s_stream() {
        let (mut list, now) = (streams(), Instant::now());
        assert_eq!(list.hear(CONSOLE, announce(CONSOLE, 7, sdp(1, CONSOLE, "console")), now), Heard::Added);
        // The console's origin in SAP and in the SDP, from the intruder's address.
        let spoof = announce(CONSOLE, 9, sdp(1, CONSOLE, "fake"));
        assert_eq!(list.hear(INTRUDER, spoof, now), Heard::Refused(Refused::Spoofed));
        let deletion = SapPacket { deletion: true, origin: CONSOLE, hash: 7, sdp: String::new() };
        assert_eq!(list.hear(INTRUDER, deletion.clone(), now), Heard::Refused(Refused::Spoofed));
        // Its own origin in SAP, the console's in the SDP.
        assert_eq!(
            list.hear(INTRUDER, announce(INTRUDER, 9, sdp(1, CONSOLE, "fake")), now),
            Heard::Refused(Refused::Spoofed)
        );
        let listed = list.list(now);
        assert_eq!(listed.len(), 1);
        assert!(listed[0].sdp.contains("s=console") && listed[0].source == "10.79.0.20", "{listed:?}");
        // The console itself withdraws it.
        assert_eq!(list.hear(CONSOLE, deletion, now), Heard::Withdrawn);
        assert_eq!(list.list(now), vec![]);
    }

    #[test]
    fn a_new_version_of_a_session_replaces_it_and_our_own_is_ignored() {
        let (mut list, now) = (streams(), Instant::now());
        list.hear(CONSOLE, announce(CONSOLE, 7, sdp(1, CONSOLE, "v1")), now);
        assert_eq!(list.hear(CONSOLE, announce(CONSOLE, 8, sdp(1, CONSOLE, "v2")), now), Heard::Refreshed);
        assert_eq!(list.hear(OWN, announce(OWN, 1, sdp(5, OWN, "partyline")), now), Heard::Ignored);
        let listed = list.list(now);
        assert_eq!((listed.len(), listed[0].sdp.contains("s=v2")), (1, true), "{listed:?}");
        // The old version's hash withdraws nothing now.
        let stale = SapPacket { deletion: true, origin: CONSOLE, hash: 7, sdp: String::new() };
        assert_eq!(list.hear(CONSOLE, stale, now), Heard::Ignored);
    }

    #[test]
    fn a_flood_fills_its_sender_s_share_and_the_list_s_cap_and_no_more() {
        let (mut list, now) = (streams(), Instant::now());
        list.hear(CONSOLE, announce(CONSOLE, 7, sdp(1, CONSOLE, "console")), now);
        let mut added = 0;
        for session in 0..10_000_u64 {
            let packet = announce(INTRUDER, session as u16, sdp(session, INTRUDER, "flood"));
            added += usize::from(list.hear(INTRUDER, packet, now) == Heard::Added);
        }
        assert_eq!((added, list.count()), (MAX_PER_SENDER, MAX_PER_SENDER + 1));
        // Many senders: the list stops at its cap, and what was listed stays refreshed.
        for host in 0..=255_u8 {
            let sender = Ipv4Addr::new(10, 80, 0, host);
            list.hear(sender, announce(sender, 1, sdp(1, sender, "device")), now);
        }
        assert_eq!(list.count(), MAX_STREAMS);
        assert_eq!(list.hear(CONSOLE, announce(CONSOLE, 8, sdp(1, CONSOLE, "console")), now), Heard::Refreshed);
        assert_eq!(list.list(now).len(), MAX_STREAMS);
    }

    #[test]
    fn an_sdp_too_long_or_without_origin_is_refused_and_old_streams_are_forgotten() {
        let (mut list, now) = (streams(), Instant::now());
        let long = sdp(1, CONSOLE, &"x".repeat(MAX_SDP_BYTES));
        assert_eq!(list.hear(CONSOLE, announce(CONSOLE, 1, long), now), Heard::Refused(Refused::Malformed));
        assert_eq!(
            list.hear(CONSOLE, announce(CONSOLE, 1, "v=0\r\ns=x\r\n".into()), now),
            Heard::Refused(Refused::Malformed)
        );
        list.hear(CONSOLE, announce(CONSOLE, 1, sdp(1, CONSOLE, "console")), now);
        assert_eq!(list.list(now + Duration::from_secs(299)).len(), 1);
        assert_eq!(list.list(now + Duration::from_secs(300)).len(), 0);
        assert_eq!(list.count(), 0);
    }
}
