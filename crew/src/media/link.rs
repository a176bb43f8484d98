//! A simulated network link between a line and the server: random or bursty loss and jitter on
//! the line's own datagrams, each way.
//!
//! What netem would do on a real interface; this platform's kernel has no netem (nor any other
//! shaping qdisc but `pfifo`), so a simulated panel impairs its own socket instead: a datagram
//! str0m transmits, or one the socket receives, is dropped or held back here before it goes on.
//! Each direction has its own [`Impairment`] state, seeded, so a run can be repeated.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How packets are lost on one direction of a link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    None,
    /// Each packet lost with this probability (0–1), independently.
    Random(f64),
    /// Gilbert–Elliott: a good state that loses nothing and a bad state that loses every packet.
    /// `enter` is the chance per packet of going bad, `leave` of coming back: the average loss
    /// is `enter / (enter + leave)`, bursts `1 / leave` packets long on average.
    Bursty {
        enter: f64,
        leave: f64,
    },
}

impl Loss {
    /// Bursty loss averaging `percent` % in bursts of `burst` packets on average.
    pub fn bursty(percent: f64, burst: f64) -> Loss {
        let leave = 1.0 / burst;
        let share = percent / 100.0;
        Loss::Bursty { enter: leave * share / (1.0 - share), leave }
    }
}

/// One direction of a link: its loss and its jitter (each packet delayed by a uniform 0 to
/// `jitter`, so packets may overtake each other, as netem's `delay 0 J` does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Path {
    pub loss: Loss,
    pub jitter: Duration,
}

impl Path {
    pub const CLEAN: Path = Path { loss: Loss::None, jitter: Duration::ZERO };

    pub fn is_clean(&self) -> bool {
        *self == Path::CLEAN
    }
}

/// Both directions of a line's link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// From the panel to the server.
    pub up: Path,
    /// From the server to the panel.
    pub down: Path,
}

impl Default for Link {
    fn default() -> Link {
        Link { up: Path::CLEAN, down: Path::CLEAN }
    }
}

/// A datagram held back until `due`.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    pub due: Instant,
    /// Orders datagrams due at the same instant as they came.
    order: u64,
    pub peer: SocketAddr,
    pub contents: Vec<u8>,
}

/// One direction's impairment at work: which packets go, and when.
#[derive(Debug)]
pub struct Impairment {
    path: Path,
    random: fastrand::Rng,
    bad: bool,
    held: BinaryHeap<Reverse<Held>>,
    order: u64,
    /// Datagrams dropped so far.
    pub dropped: u64,
}

impl Impairment {
    pub fn new(path: Path, seed: u64) -> Impairment {
        Impairment {
            path,
            random: fastrand::Rng::with_seed(seed),
            bad: false,
            held: BinaryHeap::new(),
            order: 0,
            dropped: 0,
        }
    }

    pub fn is_clean(&self) -> bool {
        self.path.is_clean()
    }

    /// Takes a datagram sent at `now`: dropped, or held until it is due.
    pub fn offer(&mut self, now: Instant, peer: SocketAddr, contents: &[u8]) {
        if self.lost() {
            self.dropped += 1;
            return;
        }
        let delay = self.path.jitter.mul_f64(self.random.f64());
        self.order += 1;
        self.held.push(Reverse(Held { due: now + delay, order: self.order, peer, contents: contents.to_vec() }));
    }

    /// When the next held datagram is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.held.peek().map(|Reverse(held)| held.due)
    }

    /// The next datagram due by `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<Held> {
        if self.next_due()? > now {
            return None;
        }
        self.held.pop().map(|Reverse(held)| held)
    }

    fn lost(&mut self) -> bool {
        match self.path.loss {
            Loss::None => false,
            Loss::Random(p) => self.random.f64() < p,
            Loss::Bursty { enter, leave } => {
                let flip = if self.bad { leave } else { enter };
                if self.random.f64() < flip {
                    self.bad = !self.bad;
                }
                self.bad
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9);

    /// Sends `count` packets 20 ms apart through `path`; (lost, longest run of losses).
    fn run(path: Path, count: u64) -> (u64, u64) {
        let mut link = Impairment::new(path, 7);
        let start = Instant::now();
        let (mut delivered, mut run, mut longest) = (0, 0, 0);
        for n in 0..count {
            let now = start + Duration::from_millis(20 * n);
            let before = link.dropped;
            link.offer(now, PEER, &n.to_be_bytes());
            run = if link.dropped > before { run + 1 } else { 0 };
            longest = longest.max(run);
            while link.pop_due(now + path.jitter).is_some() {
                delivered += 1;
            }
        }
        assert_eq!(delivered + link.dropped, count);
        (link.dropped, longest)
    }

    #[test]
    fn random_loss_loses_its_share_one_packet_at_a_time() {
        let (lost, longest) = run(Path { loss: Loss::Random(0.05), jitter: Duration::ZERO }, 20_000);
        assert!((900..1100).contains(&lost), "{lost} of 20000");
        assert!(longest <= 4, "{longest}");
    }

    #[test]
    fn bursty_loss_averages_its_share_in_bursts() {
        let (lost, longest) = run(Path { loss: Loss::bursty(3.0, 3.0), jitter: Duration::ZERO }, 20_000);
        assert!((450..750).contains(&lost), "{lost} of 20000");
        assert!(longest >= 6, "bursts of 3 on average reach 6 somewhere in 20000: {longest}");
    }

    #[test]
    fn jitter_holds_each_packet_up_to_its_bound_and_may_reorder() {
        let jitter = Duration::from_millis(30);
        let mut link = Impairment::new(Path { loss: Loss::None, jitter }, 3);
        let start = Instant::now();
        for n in 0u64..200 {
            link.offer(start + Duration::from_millis(20 * n), PEER, &n.to_be_bytes());
        }
        let mut order = Vec::new();
        let mut last_due = start;
        while let Some(held) = link.pop_due(start + Duration::from_secs(10)) {
            let n = u64::from_be_bytes(held.contents.try_into().expect("8 bytes"));
            let sent = start + Duration::from_millis(20 * n);
            assert!(held.due >= sent && held.due <= sent + jitter, "packet {n}");
            assert!(held.due >= last_due, "held in the order they are due");
            last_due = held.due;
            order.push(n);
        }
        assert_eq!(order.len(), 200);
        assert!(order.windows(2).any(|w| w[1] < w[0]), "30 ms of jitter on a 20 ms stream reorders");
    }
}
