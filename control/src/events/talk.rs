//! Talk time, counted as the bus publishes the talk events: who talks on which line now, and the
//! seconds talked on each line since control started (`/metrics`).
//!
//! Counted here, from the typed events as they are published, rather than by a watcher of the
//! broadcast: a watcher that falls behind loses events, and a lost "stopped talking" would count
//! a talk for ever. A talk ends at its `stoppedTalking` or at the talker's `userLeft` from that
//! line, whichever comes first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use partyline_shared::config::DIRECT_ROOM_PREFIX;
use partyline_shared::sync::lock;

use super::LiveEvent;

/// Where every direct line's talk is counted: their rooms come and go with each call, and one
/// series per call would grow without bound.
pub const DIRECT_LINES: &str = "direct";

/// The talk on one line (a group, or all direct lines together).
#[derive(Debug, Clone, PartialEq)]
pub struct LineTalk {
    /// The group's id, or [`DIRECT_LINES`].
    pub line: String,
    /// Members talking on it now.
    pub talkers: usize,
    /// Seconds talked on it since control started, the talks going on included: it only grows.
    pub seconds: f64,
}

#[derive(Debug, Default)]
struct Talks {
    /// When each (identity, line) talking now started.
    ongoing: HashMap<(String, String), Instant>,
    /// Seconds of the talks that ended, per line.
    ended: HashMap<String, f64>,
}

/// The talk clock; [`super::EventBus::publish`] feeds it every event.
#[derive(Debug, Default)]
pub struct TalkClock(Mutex<Talks>);

impl TalkClock {
    pub(super) fn observe(&self, event: &LiveEvent, now: Instant) {
        match event {
            LiveEvent::Talking { identity, group_id, .. } => {
                lock(&self.0).ongoing.entry((identity.clone(), line_of(group_id))).or_insert(now);
            }
            LiveEvent::StoppedTalking { identity, group_id, .. } | LiveEvent::UserLeft { identity, group_id, .. } => {
                let mut talks = lock(&self.0);
                let line = line_of(group_id);
                if let Some(started) = talks.ongoing.remove(&(identity.clone(), line.clone())) {
                    *talks.ended.entry(line).or_default() += now.duration_since(started).as_secs_f64();
                }
            }
            _ => {}
        }
    }

    /// Every line talked on since control started, as of `now`, by line.
    pub fn lines(&self, now: Instant) -> Vec<LineTalk> {
        let talks = lock(&self.0);
        let mut lines: HashMap<&str, LineTalk> = talks
            .ended
            .iter()
            .map(|(line, &seconds)| (line.as_str(), LineTalk { line: line.clone(), talkers: 0, seconds }))
            .collect();
        for ((_, line), started) in &talks.ongoing {
            let entry = lines.entry(line).or_insert_with(|| LineTalk { line: line.clone(), talkers: 0, seconds: 0.0 });
            entry.talkers += 1;
            entry.seconds += now.saturating_duration_since(*started).as_secs_f64();
        }
        let mut lines: Vec<LineTalk> = lines.into_values().collect();
        lines.sort_by(|a, b| a.line.cmp(&b.line));
        lines
    }
}

fn line_of(group_id: &str) -> String {
    if group_id.starts_with(DIRECT_ROOM_PREFIX) { DIRECT_LINES.to_owned() } else { group_id.to_owned() }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn talking(identity: &str, group: &str) -> LiveEvent {
        LiveEvent::Talking { identity: identity.into(), username: identity.into(), group_id: group.into() }
    }

    fn stopped(identity: &str, group: &str) -> LiveEvent {
        LiveEvent::StoppedTalking { identity: identity.into(), username: identity.into(), group_id: group.into() }
    }

    fn left(identity: &str, group: &str) -> LiveEvent {
        LiveEvent::UserLeft {
            identity: identity.into(),
            username: identity.into(),
            group_id: group.into(),
            why: "left".into(),
        }
    }

    /// Events at their second after the start.
    type Timeline = Vec<(u64, LiveEvent)>;
    /// Each line's (line, talkers, seconds).
    type Lines = Vec<(&'static str, usize, f64)>;

    /// (seconds after the start, event) in; each line's (talkers, seconds) at the end out.
    fn run(events: &[(u64, LiveEvent)], at: u64) -> Vec<(String, usize, f64)> {
        let clock = TalkClock::default();
        let start = Instant::now();
        let s = |seconds| start + Duration::from_secs(seconds);
        for (seconds, event) in events {
            clock.observe(event, s(*seconds));
        }
        clock.lines(s(at)).into_iter().map(|l| (l.line, l.talkers, l.seconds)).collect()
    }

    #[test]
    fn talk_is_counted_per_line_from_its_start_to_its_stop_or_the_talker_s_leave() {
        let cases: &[(&str, Timeline, u64, Lines)] = &[
            ("one talk", vec![(1, talking("a", "stage")), (4, stopped("a", "stage"))], 10, vec![("stage", 0, 3.0)]),
            ("a talk going on counts up to now", vec![(2, talking("a", "stage"))], 7, vec![("stage", 1, 5.0)]),
            (
                "two talkers at once count twice",
                vec![(0, talking("a", "stage")), (1, talking("b", "stage")), (3, stopped("a", "stage"))],
                5,
                vec![("stage", 1, 7.0)],
            ),
            (
                "a repeated talking event does not restart the talk",
                vec![(0, talking("a", "stage")), (2, talking("a", "stage")), (3, stopped("a", "stage"))],
                9,
                vec![("stage", 0, 3.0)],
            ),
            (
                "leaving the line ends the talk on it, not on another",
                vec![(0, talking("a", "stage")), (0, talking("a", "lx")), (2, left("a", "stage"))],
                6,
                vec![("lx", 1, 6.0), ("stage", 0, 2.0)],
            ),
            ("a stop without a talk counts nothing", vec![(3, stopped("a", "stage"))], 5, vec![]),
            (
                "every direct line counts as one",
                vec![
                    (0, talking("a", "direct-1")),
                    (1, stopped("a", "direct-1")),
                    (1, talking("b", "direct-2")),
                    (3, stopped("b", "direct-2")),
                ],
                5,
                vec![(DIRECT_LINES, 0, 3.0)],
            ),
        ];
        for (what, events, at, expected) in cases {
            let expected: Vec<(String, usize, f64)> =
                expected.iter().map(|(l, t, s)| ((*l).to_owned(), *t, *s)).collect();
            assert_eq!(run(events, *at), expected, "{what}");
        }
    }
}
