//! The group's send, in step with Janus's mixing tick (plain-RTP participants).
//!
//! AudioBridge mixes every 20 ms. A participant's packets wait in a queue of Janus's until a tick
//! takes one; mixing starts once the queue holds prebuffering + 1 packets, and the level it
//! starts at stays for the session (it is trimmed only at twice the prebuffering). A card
//! completes its Opus frames on its own block boundaries, at a phase to Janus's tick that is
//! chance: measured, the same code and card gave 2–3 packets waiting in one run and 1–2 in the
//! next (card → crew 114 against 76 ms), and when the frames' arrivals straddle the tick the
//! level moves during the session.
//!
//! So for a plain-RTP participant bridged takes the tick's phase from the arrival of the room's
//! mix (Janus sends it right after each tick) and:
//! 1. measures, before it sends anything but one packet that makes Janus start, how far ahead of
//!    the next tick its frames end (their *lead*: the frame's last sample, which the card hands
//!    over with the rest of its block), and shifts its frame boundaries once so that the lead is
//!    [`MARGIN`] plus a card block: a frame is sent when the block holding its end arrives, so
//!    every packet then reaches Janus between [`MARGIN`] and [`MARGIN`] plus a block before a
//!    tick, never across one;
//! 2. sends prebuffering packets (with the starting one, the prebuffering + 1 that make Janus
//!    mix), and then skips one frame: the queue settles one packet lower, at prebuffering − 1
//!    after each tick, for the session (the trim threshold stays at twice the prebuffering);
//! 3. keeps the lead there: a card whose clock drifts from the host's moves it, and each
//!    [`HYSTERESIS`] of drift (of the median lead over [`WINDOW`] frames: one late block moves
//!    nothing) is made up by dropping or repeating that much of the send, a frame boundary
//!    moved (so Janus's queue neither grows to a trim nor runs dry).
//!
//! [`Aligner`] is the decision alone, on durations; the feed applies it (`feed.rs`).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use partyline_shared::sync::lock;

/// AudioBridge's mixing period.
const JANUS_TICK_MS: u32 = 20;
pub const JANUS_TICK: Duration = Duration::from_millis(JANUS_TICK_MS as u64);
/// How long before a tick the earliest of the send's packets arrives: room for Janus's own
/// spread between its tick and its packet to us (it encodes and sends each participant's mix in
/// turn) and for the scheduling of the card's thread.
pub const MARGIN: Duration = Duration::from_millis(5);
/// How far the typical lead may wander from its target before the send is moved back.
pub const HYSTERESIS: Duration = Duration::from_micros(1_500);
/// Frames whose leads are measured before the send is placed, and the window the drift is
/// watched over: two cycles of a card block pattern (a 20 ms frame is 3.75 blocks of 5.33 ms).
const WINDOW: usize = 8;
/// Frames waited for the tick's phase (the room's mix) before sending unaligned.
const PHASE_WAIT_FRAMES: u32 = 50;

/// The prebuffering a placed participant joins with for `ms` of buffering: whole 20 ms packets,
/// at least one. A network peer needs two ([`prebuffer_packets`]): its packets reach Janus at a
/// phase to the tick that is chance and drifts with the sender's clock, so two may land within
/// one tick, and at one packet of prebuffering that second one is a lost frame. A placed send
/// lands a margin before each tick, one packet per tick, and follows the drift: one packet is
/// enough, and after the priming's skip Janus mixes each packet at the first tick after it
/// arrives (20 ms less than two packets).
///
/// [`prebuffer_packets`]: partyline_shared::janus::prebuffer_packets
pub fn placed_prebuffer_packets(ms: u32) -> u32 {
    (ms / JANUS_TICK_MS).max(1)
}

/// When the room's mix last arrived: Janus's tick, seen from here. Written by the
/// participant's receiving thread, read by the card's.
#[derive(Debug, Default)]
pub struct TickPhase(Mutex<Option<Instant>>);

impl TickPhase {
    pub fn arrived(&self, at: Instant) {
        *lock(&self.0) = Some(at);
    }

    pub fn forget(&self) {
        *lock(&self.0) = None;
    }

    /// How long from `now` to Janus's next tick, if the mix has arrived yet.
    pub fn lead(&self, now: Instant) -> Option<Duration> {
        let last = (*lock(&self.0))?;
        let since = now.saturating_duration_since(last).as_nanos() % JANUS_TICK.as_nanos();
        Some(JANUS_TICK - Duration::from_nanos(u64::try_from(since).unwrap_or(0)))
    }
}

/// What to do with a completed frame, and how to move the frame boundary after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub send: bool,
    pub shift: Shift,
}

/// A move of the send's frame boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shift {
    None,
    /// Drop this much of the send: the following frames complete that much later.
    Drop(Duration),
    /// Play this much of the send again: the following frames complete that much earlier.
    Repeat(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// No mix from Janus yet: frames are held back (Janus has the one packet that starts it).
    Waiting { frames: u32 },
    /// Measuring the leads; frames still held back.
    Measuring,
    /// Sending the packets that fill Janus's prebuffering; then one frame is skipped.
    Priming { left: u32 },
    /// In step: sending, the lead watched.
    Aligned,
    /// Sending without the tick (no mix came): as a network peer would.
    Unaligned,
}

/// The send's placement against Janus's tick, one decision per completed frame.
#[derive(Debug)]
pub struct Aligner {
    state: State,
    prebuffer: u32,
    leads: VecDeque<Duration>,
}

impl Aligner {
    /// For a participant whose packets Janus prebuffers `prebuffer` deep; the packet that
    /// starts Janus has been sent.
    pub fn new(prebuffer: u32) -> Aligner {
        Aligner { state: State::Waiting { frames: 0 }, prebuffer, leads: VecDeque::with_capacity(WINDOW) }
    }

    /// Whether the send is placed and in step (for the log and the tests).
    pub fn aligned(&self) -> bool {
        self.state == State::Aligned
    }

    /// Whether it gave up waiting for Janus's mix and sends unaligned.
    pub fn unaligned(&self) -> bool {
        self.state == State::Unaligned
    }

    /// A frame whose end had `lead` to Janus's next tick (`None`: no mix arrived yet), on a
    /// card that delivers blocks of `block`.
    pub fn frame(&mut self, lead: Option<Duration>, block: Duration) -> Step {
        let target = MARGIN + block;
        let hold = Step { send: false, shift: Shift::None };
        let send = Step { send: true, shift: Shift::None };
        match self.state {
            State::Waiting { frames } => {
                if lead.is_some() {
                    self.state = State::Measuring;
                    return self.frame(lead, block);
                }
                self.state = if frames + 1 >= PHASE_WAIT_FRAMES {
                    State::Unaligned
                } else {
                    State::Waiting { frames: frames + 1 }
                };
                hold
            }
            State::Measuring => {
                let Some(lead) = self.watch(lead) else { return hold };
                // The lead becomes the target; the shift may cross a tick, which costs nothing
                // while nothing is being sent.
                let drop = (lead + JANUS_TICK - target).as_nanos() % JANUS_TICK.as_nanos();
                self.leads.clear();
                self.state = State::Priming { left: self.prebuffer };
                Step { send: false, shift: Shift::Drop(nanos(drop)) }
            }
            State::Priming { left } => {
                if left == 0 {
                    // Janus mixes from the tick after the last of these: skipping one frame leaves
                    // its queue one packet lower for the rest of the session.
                    self.state = State::Aligned;
                    return hold;
                }
                self.state = State::Priming { left: left - 1 };
                send
            }
            State::Aligned => {
                let Some(lead) = self.watch(lead) else { return send };
                let shift = if lead > target + HYSTERESIS && lead < JANUS_TICK - HYSTERESIS {
                    Shift::Drop(lead - target)
                } else if lead + HYSTERESIS < target {
                    Shift::Repeat(target - lead)
                } else if lead >= JANUS_TICK - HYSTERESIS {
                    // Just past a tick: the send slipped behind by (tick − lead) plus the target.
                    Shift::Repeat(JANUS_TICK - lead + target)
                } else {
                    return send;
                };
                self.leads.clear();
                Step { send: true, shift }
            }
            State::Unaligned => send,
        }
    }

    /// Adds `lead` (if the mix has arrived) to the window; the window's typical lead once full.
    fn watch(&mut self, lead: Option<Duration>) -> Option<Duration> {
        let lead = lead?;
        if self.leads.len() == WINDOW {
            self.leads.pop_front();
        }
        self.leads.push_back(lead);
        (self.leads.len() == WINDOW).then(|| typical(&self.leads))
    }
}

/// The typical lead of a window: the median in the circular sense. The leads of a card's frames
/// differ only by the scheduling of the card's thread and Janus's, maybe across the 0/20 ms wrap:
/// the arc they sit on starts after the widest gap, and a lead before that start counts a tick
/// later. A median, not the least: one late block must not move the send.
fn typical(leads: &VecDeque<Duration>) -> Duration {
    let mut sorted: Vec<Duration> = leads.iter().copied().collect();
    sorted.sort();
    let (Some(&first), Some(&last)) = (sorted.first(), sorted.last()) else { return JANUS_TICK };
    // The gap across the wrap, from the largest lead round to the smallest.
    let mut start = (first + JANUS_TICK - last, first);
    for pair in sorted.windows(2) {
        let gap = pair[1] - pair[0];
        if gap > start.0 {
            start = (gap, pair[1]);
        }
    }
    let mut arc: Vec<Duration> =
        sorted.iter().map(|&lead| if lead < start.1 { lead + JANUS_TICK } else { lead }).collect();
    arc.sort();
    let median = arc[arc.len() / 2];
    if median >= JANUS_TICK { median - JANUS_TICK } else { median }
}

fn nanos(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCK_US: u64 = 5_333;
    const BLOCK: Duration = Duration::from_micros(BLOCK_US);

    /// A card's frames, the first ending `offset_us` after a tick: for each, the lead of its end
    /// (what the aligner is told) and the lead of the block boundary it is sent at (when its
    /// packet reaches Janus).
    fn frames(offset_us: u64, count: usize) -> Vec<(Duration, Duration)> {
        let lead = |t: u64| Duration::from_micros(20_000 - t % 20_000);
        (1..=count as u64)
            .map(|k| {
                let end = 100_000 + offset_us + k * 20_000;
                (lead(end), lead(end.div_ceil(BLOCK_US) * BLOCK_US))
            })
            .collect()
    }

    fn run(aligner: &mut Aligner, frames: &[(Duration, Duration)]) -> Vec<Step> {
        frames.iter().map(|&(lead, _)| aligner.frame(Some(lead), BLOCK)).collect()
    }

    fn micros(duration: Duration) -> u64 {
        u64::try_from(duration.as_micros()).expect("a test duration fits in u64")
    }

    #[test]
    fn a_placed_participant_prebuffers_its_buffering_down_to_one_packet() {
        use partyline_shared::janus::prebuffer_packets;
        for (ms, placed, network) in [(0, 1, 2), (20, 1, 2), (40, 2, 2), (60, 3, 3), (100, 5, 5)] {
            assert_eq!((placed_prebuffer_packets(ms), prebuffer_packets(ms)), (placed, network), "{ms} ms");
        }
    }

    #[test]
    fn nothing_is_sent_until_the_send_is_placed_then_prebuffering_then_one_skip() {
        let mut aligner = Aligner::new(2);
        assert_eq!(aligner.frame(None, BLOCK), Step { send: false, shift: Shift::None });
        let steps = run(&mut aligner, &frames(3_000, WINDOW + 4));
        let sent: Vec<bool> = steps.iter().map(|s| s.send).collect();
        // WINDOW held while measuring, 2 priming, 1 skipped, then sending.
        let mut expected = vec![false; WINDOW];
        expected.extend([true, true, false, true]);
        assert_eq!(sent, expected);
        assert!(matches!(steps[WINDOW - 1].shift, Shift::Drop(_)), "{:?}", steps[WINDOW - 1]);
        assert!(aligner.aligned());
    }

    #[test]
    fn every_packet_reaches_janus_a_margin_before_a_tick_whatever_the_phase() {
        for offset_us in (0..20_000).step_by(333) {
            let mut aligner = Aligner::new(2);
            let steps = run(&mut aligner, &frames(offset_us, WINDOW));
            let Shift::Drop(drop) = steps[WINDOW - 1].shift else { panic!("no shift at {offset_us}") };
            // Dropping delays every later frame's end by `drop`.
            for (_, sent) in frames(offset_us + micros(drop), 3 * WINDOW) {
                assert!(sent >= MARGIN, "offset {offset_us}: a packet {sent:?} before the tick");
                assert!(
                    sent <= MARGIN + BLOCK,
                    "offset {offset_us}: a packet {sent:?} before the tick, more than a block early"
                );
            }
        }
    }

    #[test]
    fn a_drifting_card_is_kept_in_step_and_a_steady_one_is_left_alone() {
        let mut aligner = Aligner::new(2);
        let mut offset = 47_000u64;
        let steps = run(&mut aligner, &frames(offset, WINDOW));
        let Shift::Drop(drop) = steps[WINDOW - 1].shift else { panic!("placed without a shift") };
        offset += micros(drop);
        let steps = run(&mut aligner, &frames(offset, 4 + 200));
        assert!(steps.iter().all(|s| s.shift == Shift::None), "a steady card was moved");
        // From here each frame ends 100 µs later than the one before would (a slow card): the
        // lead shrinks and is made up before any packet crosses a tick.
        let mut repeated = Duration::ZERO;
        for k in 0..200u64 {
            let (lead, sent) = frames(offset + k * 100, 1)[0];
            assert!(sent >= MARGIN - HYSTERESIS - Duration::from_micros(WINDOW as u64 * 100), "frame {k}: {sent:?}");
            if let Shift::Repeat(by) = aligner.frame(Some(lead), BLOCK).shift {
                repeated += by;
                offset -= micros(by);
            }
        }
        assert!(repeated > Duration::from_millis(17), "only {repeated:?} repeated for 20 ms of drift");
    }

    #[test]
    fn without_the_room_mix_it_sends_unaligned_after_a_second() {
        let mut aligner = Aligner::new(2);
        let steps: Vec<Step> = (0..PHASE_WAIT_FRAMES + 2).map(|_| aligner.frame(None, BLOCK)).collect();
        assert!(steps[..PHASE_WAIT_FRAMES as usize].iter().all(|s| !s.send));
        assert!(aligner.unaligned() && steps.last().is_some_and(|s| s.send));
    }

    #[test]
    fn the_typical_lead_is_a_median_across_the_wrap() {
        let set = |us: &[u64]| us.iter().map(|&u| Duration::from_micros(u)).collect::<VecDeque<_>>();
        assert_eq!(typical(&set(&[9_000, 7_000, 11_000])), Duration::from_micros(9_000));
        assert_eq!(typical(&set(&[19_000, 1_000, 19_500])), Duration::from_micros(19_500));
        assert_eq!(typical(&set(&[19_800, 500, 300])), Duration::from_micros(300));
    }

    #[test]
    fn one_late_block_does_not_move_the_send() {
        let mut aligner = Aligner::new(2);
        let steps = run(&mut aligner, &frames(47_000, WINDOW));
        let Shift::Drop(drop) = steps[WINDOW - 1].shift else { panic!("placed without a shift") };
        let placed = frames(47_000 + micros(drop), 4 + 3 * WINDOW);
        let mut steps = run(&mut aligner, &placed[..4 + WINDOW]);
        // The card's thread is 6 ms late for one block: that frame's end looks 6 ms later.
        let (lead, _) = placed[4 + WINDOW];
        steps.push(aligner.frame(Some(lead.saturating_sub(Duration::from_millis(6))), BLOCK));
        steps.extend(run(&mut aligner, &placed[5 + WINDOW..]));
        assert!(steps.iter().all(|s| s.shift == Shift::None), "a hiccup moved the send: {steps:?}");
    }

    #[test]
    fn the_lead_counts_from_the_last_mix() {
        let phase = TickPhase::default();
        let t0 = Instant::now();
        assert_eq!(phase.lead(t0), None);
        phase.arrived(t0);
        assert_eq!(phase.lead(t0 + Duration::from_millis(3)), Some(Duration::from_millis(17)));
        assert_eq!(phase.lead(t0 + Duration::from_millis(45)), Some(Duration::from_millis(15)));
    }
}
