//! The one retry policy of both daemons: pauses that double from a minimum to a maximum, and
//! start again from the minimum after a success.
//!
//! Every retry loop in partyline is a supervisor that runs for as long as the process does
//! (control's link to Janus, its D-Bus connection, bridged's branch joins): it waits in a
//! `select!` beside cancellation and wake-ups, and decides for itself what counts as a success
//! (a reconciliation pass, a join that held). So the policy is a value the loop asks for its
//! next pause, not a combinator that retries a closure (which is what `backon` and similar
//! crates offer, and none of these loops is).

use std::time::Duration;

/// Doubling pauses between `min` and `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// The first pause is `min`; each further one doubles, up to `max`.
    pub const fn new(min: Duration, max: Duration) -> Backoff {
        Backoff { min, max, next: min }
    }

    /// The pause before the next try (and the following one doubles).
    pub fn next_pause(&mut self) -> Duration {
        let pause = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        pause
    }

    /// After a success: the next pause is the minimum again.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_maximum_and_starts_over_after_a_success() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new(ms(500), ms(5_000));
        let pauses: Vec<Duration> = (0..7).map(|_| backoff.next_pause()).collect();
        assert_eq!(pauses, [ms(500), ms(1_000), ms(2_000), ms(4_000), ms(5_000), ms(5_000), ms(5_000)]);
        backoff.reset();
        assert_eq!((backoff.next_pause(), backoff.next_pause()), (ms(500), ms(1_000)));
    }

    #[test]
    fn a_flat_policy_and_huge_bounds_do_not_overflow() {
        let mut flat = Backoff::new(Duration::from_secs(1), Duration::from_secs(1));
        assert_eq!((flat.next_pause(), flat.next_pause()), (Duration::from_secs(1), Duration::from_secs(1)));
        let mut huge = Backoff::new(Duration::MAX / 2 + Duration::from_secs(1), Duration::MAX);
        huge.next_pause();
        assert_eq!(huge.next_pause(), Duration::MAX);
    }
}
