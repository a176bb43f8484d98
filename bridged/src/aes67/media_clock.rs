//! The clock the card's AES67 directions run on: PTP time as GStreamer's follower computes it,
//! held by bridged.
//!
//! GStreamer's PTP clock follows whichever grandmaster wins its domain, and like every
//! `GstClock` it never goes back: after a step back of Δ (a grandmaster stepping its time, or a
//! grandmaster behind the last one taking over) it stands still for Δ, and every pipeline on it
//! with it. So the directions run on a clock of bridged's own, a system clock
//! (`CLOCK_MONOTONIC` inside, as GStreamer's domain clock) that:
//! - takes the calibration of GStreamer's domain clock while the grandmaster is one partyline
//!   follows ([`MediaClock::follow`]); between two looks the two differ by nanoseconds;
//! - keeps its last calibration while it is not (a rogue grandmaster on the LAN, or one silent):
//!   it runs free at the last allowed grandmaster's rate;
//! - is replaced by a new clock, set at the new time, when PTP time steps either way (seen on two
//!   looks in a row, so that one odd calibration is not a step): the directions start again on
//!   the new clock (`stream.rs`), the send's RTP time follows PTP time again at once.

use std::time::{Duration, Instant};

use gst::prelude::*;
use tokio::sync::watch;

/// A difference between PTP time and the clock over this is a step: GStreamer moves its clock
/// by at most 3/4 of a LAN's round trip (microseconds) per sync while locked, and rate errors
/// between two looks add nanoseconds.
const STEP_NS: i64 = 1_000_000;

/// How long raw measurements are trusted over GStreamer's calibration after the last one: a
/// follower whose path delay wrapped gives none (`ptp.rs`).
const MEASURED_WITHIN: Duration = Duration::from_secs(5);

/// One sync of the grandmaster followed, as GStreamer measured it (its statistics): the local
/// (monotonic) time of the sync, corrected for the path delay, and the grandmaster's time then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub local: gst::ClockTime,
    pub ptp: gst::ClockTime,
}

/// The directions' clock, replaced at each step.
#[derive(Debug)]
pub struct MediaClock {
    current: watch::Sender<gst::Clock>,
    /// Not calibrated yet: the first calibration is no step.
    calibrated: bool,
    /// A step seen once, not taken yet (ns).
    pending_step: Option<i64>,
    last_measured: Option<Instant>,
}

impl MediaClock {
    pub fn new() -> MediaClock {
        MediaClock {
            current: watch::channel(system_clock()).0,
            calibrated: false,
            pending_step: None,
            last_measured: None,
        }
    }

    /// The clock in force, and each new one after a step.
    pub fn clocks(&self) -> watch::Receiver<gst::Clock> {
        self.current.subscribe()
    }

    fn clock(&self) -> gst::Clock {
        self.current.borrow().clone()
    }

    /// Follows the grandmaster: its sync `measured` since the last look (if any), and `domain`'s
    /// calibration (GStreamer's domain clock). A sync measured off this clock by more than a
    /// step, twice in a row, is a step taken at once; GStreamer's calibration is taken when it
    /// agrees with this clock (after a new grandmaster it wanders for seconds, even tens, before
    /// it settles: the syncs tell the time meanwhile). Returns the step (ns) when a new clock
    /// took over.
    pub fn follow(&mut self, domain: &gst::Clock, measured: Option<Measured>) -> Option<i64> {
        let calibration = domain.calibration();
        let clock = self.clock();
        if !self.calibrated {
            let (internal, external, num, denom) = calibration;
            clock.set_calibration(internal, external, num, denom);
            self.calibrated = true;
            return None;
        }
        let own = clock.calibration();
        if let Some(sync) = measured {
            self.last_measured = Some(Instant::now());
            let off = difference(sync.ptp, at(own, sync.local));
            if off.abs() > STEP_NS {
                return self.step_if_seen_twice(off, (sync.local, sync.ptp, own.2, own.3));
            }
            self.pending_step = None;
        }
        let now = domain.internal_time();
        let off = difference(at(calibration, now), at(own, now));
        if off.abs() <= STEP_NS {
            let (internal, external, num, denom) = calibration;
            clock.set_calibration(internal, external, num, denom);
            return None;
        }
        if self.last_measured.is_some_and(|t| t.elapsed() < MEASURED_WITHIN) {
            // The syncs say this clock is right: GStreamer's is settling.
            return None;
        }
        self.step_if_seen_twice(off, calibration)
    }

    /// A step of `off` ns, to a new clock calibrated `to`, when the last look saw the same.
    fn step_if_seen_twice(&mut self, off: i64, to: Calibration) -> Option<i64> {
        match self.pending_step.replace(off) {
            Some(seen) if (seen - off).abs() <= STEP_NS => {
                self.pending_step = None;
                let next = system_clock();
                let (internal, external, num, denom) = to;
                next.set_calibration(internal, external, num, denom);
                self.current.send_replace(next);
                Some(off)
            }
            _ => None,
        }
    }
}

/// A clock's calibration: internal, external, rate numerator and denominator.
type Calibration = (gst::ClockTime, gst::ClockTime, u64, u64);

/// The time `calibration` gives at internal time `internal`.
fn at(calibration: Calibration, internal: gst::ClockTime) -> gst::ClockTime {
    let (cinternal, cexternal, num, denom) = calibration;
    gst::Clock::adjust_with_calibration(internal, cinternal, cexternal, num, denom)
}

/// `a − b`, ns.
fn difference(a: gst::ClockTime, b: gst::ClockTime) -> i64 {
    a.nseconds() as i64 - b.nseconds() as i64
}

/// A new system clock on `CLOCK_MONOTONIC`, as GStreamer's PTP domain clocks are.
fn system_clock() -> gst::Clock {
    gst::glib::Object::builder::<gst::SystemClock>().property("clock-type", gst::ClockType::Monotonic).build().upcast()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A domain clock (as GStreamer's are: a system clock it calibrates) at PTP time `offset`
    /// from the monotonic clock.
    fn domain_at(offset_ns: u64) -> gst::Clock {
        let domain = system_clock();
        let now = domain.internal_time();
        domain.set_calibration(now, now + gst::ClockTime::from_nseconds(offset_ns), 1, 1);
        domain
    }

    fn offset_of(clock: &gst::Clock) -> i64 {
        clock.time().nseconds() as i64 - clock.internal_time().nseconds() as i64
    }

    fn measured_at(offset_ns: u64) -> Option<Measured> {
        let local = system_clock().internal_time();
        Some(Measured { local, ptp: local + gst::ClockTime::from_nseconds(offset_ns) })
    }

    #[test]
    fn a_step_either_way_is_a_new_clock_at_the_new_time_once_seen_twice() {
        gst::init().expect("GStreamer");
        let mut media = MediaClock::new();
        let clocks = media.clocks();
        let start = 1_000_000 * gst::ClockTime::SECOND.nseconds();
        assert_eq!(media.follow(&domain_at(start), None), None, "the first calibration is no step");
        assert!((offset_of(&media.clock()) - start as i64).abs() < 1_000_000);
        assert_eq!(media.follow(&domain_at(start + 200_000), None), None, "0.2 ms: followed in place");
        assert!(!clocks.has_changed().expect("open"));

        // GStreamer's calibration alone (no syncs measured: a wrapped path delay).
        let back = start - 3_000_000_000;
        assert_eq!(media.follow(&domain_at(back), None), None, "a step seen once is held");
        assert!((offset_of(&media.clock()) - start as i64).abs() < 1_000_000, "the clock held");
        let step = media.follow(&domain_at(back), None).expect("seen twice: a step");
        assert!((step + 3_000_000_000).abs() < 1_000_000, "{step}");
        assert!(clocks.has_changed().expect("open"), "a new clock");
        assert!((offset_of(&media.clock()) - back as i64).abs() < 1_000_000, "the new clock at the new time");
        assert_eq!(media.follow(&domain_at(start + 4_000_000), None), None, "one odd look is no step");
        assert_eq!(media.follow(&domain_at(back), None), None);

        // Syncs measured 3 s ahead while GStreamer's calibration wanders: the syncs win.
        assert_eq!(media.follow(&domain_at(back + 900_000_000), measured_at(start)), None);
        let step = media.follow(&domain_at(back + 1_700_000_000), measured_at(start)).expect("forward");
        assert!((step - 3_000_000_000).abs() < 1_000_000, "{step}");
        assert!((offset_of(&media.clock()) - start as i64).abs() < 1_000_000, "at the syncs' time");
        assert_eq!(media.follow(&domain_at(start - 500_000_000), measured_at(start)), None, "held while it settles");
        assert!((offset_of(&media.clock()) - start as i64).abs() < 1_000_000);
    }
}
