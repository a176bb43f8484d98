//! A session's datagram budget (a token bucket): a flood from one panel's address, its own or a
//! spoofed one, costs the mixing thread a counter, not str0m's work (SRTP authentication, DTLS).

use std::time::Instant;

/// One datagram's cost in credit: credit is counted in datagrams × 10⁻⁹ (a nanosecond at one
/// datagram per second), so the refill is exact integer arithmetic.
const DATAGRAM: u128 = 1_000_000_000;

#[derive(Debug)]
pub(super) struct RateLimit {
    per_second: u128,
    burst: u128,
    credit: u128,
    last: Instant,
}

impl RateLimit {
    /// `per_second` datagrams on average, a fifth of a second's worth at once.
    pub(super) fn new(per_second: u32, now: Instant) -> Self {
        let burst = u128::from((per_second / 5).max(1)) * DATAGRAM;
        RateLimit { per_second: u128::from(per_second), burst, credit: burst, last: now }
    }

    /// Whether one more datagram at `now` is within the budget (and takes it).
    pub(super) fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_nanos();
        self.last = self.last.max(now);
        self.credit = (self.credit + elapsed * self.per_second).min(self.burst);
        if self.credit < DATAGRAM {
            return false;
        }
        self.credit -= DATAGRAM;
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let start = Instant::now();
        let mut limit = RateLimit::new(100, start);
        assert_eq!((0..50).filter(|_| limit.take(start)).count(), 20, "a fifth of a second's worth at once");
        let second_later = start + Duration::from_secs(1);
        assert_eq!((0..500).filter(|_| limit.take(second_later)).count(), 20, "refilled up to the burst only");
        let allowed = (1..=1000).filter(|ms| limit.take(second_later + Duration::from_millis(*ms))).count();
        assert_eq!(allowed, 100, "100 in the next second");
    }
}
