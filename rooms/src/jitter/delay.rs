//! The adaptive target: how long a talker's frames wait before they are played.
//!
//! Each packet's relative delay is its arrival time minus its media time (RTP timestamp in µs):
//! the network delay plus a constant. Over the last [`WINDOW`] packets (2.56 s at 20 ms) the
//! smallest relative delay is the baseline (a packet that came as fast as the network allows)
//! and the spread (largest minus smallest) is the peak-to-peak jitter. The target is that
//! spread, at least one frame (the mixer's tick is 20 ms, so a frame can wait up to one tick
//! for its turn anyway) and at most the ceiling. A frame's deadline is then
//! `baseline + media time + target`: any packet whose delay stayed within the measured spread
//! is there by its deadline.

use std::time::Duration;

/// Packets over which the baseline and the spread are measured: 2.56 s of 20 ms frames, long
/// enough to hold a jitter burst, short enough to follow clock drift between two machines.
pub const WINDOW: usize = 128;
/// The least target: one frame, the mixer's tick.
pub const TARGET_FLOOR: Duration = Duration::from_millis(20);
/// The most a talker's frames ever wait: beyond, a late packet is concealed rather than waited
/// for (an intercom's mouth-to-ear budget is about 60 ms on a LAN).
pub const TARGET_CEILING: Duration = Duration::from_millis(120);
/// A relative delay this far from the baseline is a new stream (a sender restarted its clock),
/// not jitter: the window starts again.
const RESTART: i64 = 2_000_000;

/// The last [`WINDOW`] relative delays, in µs, in a fixed ring.
#[derive(Debug, Clone)]
pub(crate) struct DelayWindow {
    delays: [i64; WINDOW],
    len: usize,
    next: usize,
    baseline: i64,
    spread: i64,
}

impl DelayWindow {
    pub(crate) fn new() -> DelayWindow {
        DelayWindow { delays: [0; WINDOW], len: 0, next: 0, baseline: 0, spread: 0 }
    }

    /// Records one packet's relative delay (arrival µs minus media µs).
    pub(crate) fn record(&mut self, relative_us: i64) {
        if self.len > 0 && (relative_us - self.baseline).abs() > RESTART {
            self.len = 0;
            self.next = 0;
        }
        self.delays[self.next] = relative_us;
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
        let recorded = &self.delays[..self.len];
        let low = recorded.iter().copied().min().unwrap_or(relative_us);
        let high = recorded.iter().copied().max().unwrap_or(relative_us);
        self.baseline = low;
        self.spread = high - low;
    }

    /// The smallest relative delay in the window (µs): when a frame would arrive at the best.
    pub(crate) fn baseline(&self) -> i64 {
        self.baseline
    }

    /// The target delay after the baseline, from the measured spread.
    pub(crate) fn target(&self) -> Duration {
        let spread = Duration::from_micros(u64::try_from(self.spread).unwrap_or(0));
        spread.clamp(TARGET_FLOOR, TARGET_CEILING)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_the_spread_between_its_floor_and_ceiling() {
        let mut window = DelayWindow::new();
        window.record(1_000);
        assert_eq!(window.target(), TARGET_FLOOR, "one packet: no spread");
        window.record(31_000);
        assert_eq!((window.baseline(), window.target()), (1_000, Duration::from_millis(30)));
        window.record(500_000);
        assert_eq!(window.target(), TARGET_CEILING);
        // The window forgets: WINDOW steady packets later the spread is gone.
        for _ in 0..WINDOW {
            window.record(2_000);
        }
        assert_eq!((window.baseline(), window.target()), (2_000, TARGET_FLOOR));
    }

    #[test]
    fn a_sender_that_restarts_its_clock_starts_the_window_again() {
        let mut window = DelayWindow::new();
        window.record(0);
        window.record(10_000_000);
        assert_eq!((window.baseline(), window.target()), (10_000_000, TARGET_FLOOR));
    }
}
