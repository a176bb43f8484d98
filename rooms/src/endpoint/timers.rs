//! The sessions' timers in one heap: the driver learns the earliest in O(1) and runs only the
//! due sessions, whatever their number (a scan of every session per datagram would cost the
//! mixing thread more than the datagram).
//!
//! An entry is only pushed when it is earlier than the session's earliest one (`scheduled`), so a
//! session has few entries; an entry that a later change made stale pops and is ignored.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

use super::event::SessionId;

#[derive(Debug, Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, SessionId)>>,
}

impl Timers {
    /// `session` is due at `at`; `scheduled` is its earliest entry, kept up to date.
    pub(super) fn schedule(&mut self, session: SessionId, at: Instant, scheduled: &mut Option<Instant>) {
        if scheduled.is_some_and(|earliest| earliest <= at) {
            return;
        }
        self.heap.push(Reverse((at, session)));
        *scheduled = Some(at);
    }

    /// Moves the entries due at `now` into `due` (emptied first).
    pub(super) fn take_due(&mut self, now: Instant, due: &mut Vec<(Instant, SessionId)>) {
        due.clear();
        while let Some(Reverse((at, _))) = self.heap.peek()
            && *at <= now
        {
            if let Some(Reverse(entry)) = self.heap.pop() {
                due.push(entry);
            }
        }
    }

    /// The earliest entry (perhaps a stale one: a wake-up too early, never too late).
    pub(super) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn only_an_earlier_time_is_pushed_and_due_entries_come_out_in_order() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut timers = Timers::default();
        let (mut first, mut second) = (None, None);
        timers.schedule(SessionId(1), at(30), &mut first);
        timers.schedule(SessionId(1), at(40), &mut first);
        timers.schedule(SessionId(1), at(10), &mut first);
        timers.schedule(SessionId(2), at(20), &mut second);
        assert_eq!((first, second, timers.next()), (Some(at(10)), Some(at(20)), Some(at(10))));
        let mut due = Vec::new();
        timers.take_due(at(25), &mut due);
        assert_eq!(due, [(at(10), SessionId(1)), (at(20), SessionId(2))]);
        assert_eq!(timers.next(), Some(at(30)), "the stale entry stays until due");
    }
}
