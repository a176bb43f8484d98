//! The figures of a run: joins, what each line's listeners heard, what it cost. Printed as a
//! table, or as JSON for scripts (`bench/capacity`).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::cpu::Usage;
use crate::crew::{Crew, PersonHeard};
use crate::media::Heard;
use crate::media::ear::GAP_MS;

/// Order statistics of a set of figures.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub median: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Summary {
    /// None for no figures. Percentiles by the nearest rank.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Summary> {
        let mut sorted: Vec<f64> = values.into_iter().collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let rank = |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        Some(Summary { count: sorted.len(), median: rank(0.5), p95: rank(0.95), p99: rank(0.99), max: rank(1.0) })
    }
}

/// What the listeners of one line heard.
#[derive(Debug, Clone, Serialize)]
pub struct LineFigures {
    pub room: String,
    pub listeners: usize,
    pub bursts: u64,
    /// The line's tone, the median listener (dBFS).
    pub tone_db: Option<f64>,
    /// Anything else, the loudest listener (dBFS).
    pub other_db: Option<f64>,
    pub gaps: u64,
    /// Talk spurts heard (per listener) and the gaps in their opening bursts.
    pub spurts: u64,
    pub onset_gaps: u64,
    pub longest_gap_ms: u64,
    pub lost: u64,
    pub late: u64,
    pub concealed_ms: u64,
    /// Sound its talkers heard on it: their own voice, which the mix should leave out.
    pub own_voice_ms: u64,
    /// Its talkers' frames sent 10 ms or more late (the generator's own lateness).
    pub sent_late: u64,
    /// Listeners who heard the line through the TURN relay (most of their datagrams came
    /// through it): `--relay` with no straight path.
    pub relayed_listeners: usize,
    pub mouth_to_ear_ms: Option<Summary>,
}

/// A run's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub users: usize,
    pub joins_failed: usize,
    pub lines: usize,
    pub seconds: f64,
    pub token_ms: Option<Summary>,
    pub join_ms: Option<Summary>,
    pub connected_ms: Option<Summary>,
    pub per_line: Vec<LineFigures>,
    pub mouth_to_ear_ms: Option<Summary>,
    /// Dropouts of 10 ms or more heard by any listener.
    pub gaps: u64,
    pub listeners_with_gaps: usize,
    /// Talk spurts heard, counted per listener, and the gaps in their opening bursts (part
    /// of `gaps`): holes at talk onsets apart from holes later in a spurt.
    pub spurts: u64,
    pub onset_gaps: u64,
    /// The crew's own CPU (percent of one core) and per simulated line.
    pub crew_cpu_percent: Option<f64>,
    pub crew_cpu_per_line_percent: Option<f64>,
    pub processes: Vec<Usage>,
}

impl Report {
    /// The report of `crew` over `elapsed`, from what its listeners heard and what it cost.
    pub fn new(crew: &Crew, heard: &[PersonHeard], elapsed: Duration, mut usage: Vec<Usage>) -> Report {
        let ok = || crew.joins.iter().filter_map(|j| j.as_ref().ok());
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let lines: usize = crew.people.iter().map(|p| p.credentials.lines.len()).sum();
        let crew_usage = usage.iter().position(|u| u.name == "crew").map(|i| usage.remove(i));
        let crew_cpu_percent = crew_usage.map(|u| u.cpu_percent);
        let mut rooms: Vec<String> = Vec::new();
        for (_, room, _) in heard.iter().flat_map(|p| &p.lines) {
            if !rooms.contains(room) {
                rooms.push(room.clone());
            }
        }
        let per_line: Vec<LineFigures> = rooms.iter().map(|room| line_figures(room, heard)).collect();
        let all = heard.iter().flat_map(|p| &p.lines).map(|(_, _, h)| h);
        Report {
            users: crew.people.len(),
            joins_failed: crew.joins.iter().filter(|j| j.is_err()).count(),
            lines,
            seconds: elapsed.as_secs_f64(),
            token_ms: Summary::of(ok().map(|t| ms(t.token))),
            join_ms: Summary::of(ok().map(|t| ms(t.join))),
            connected_ms: Summary::of(ok().map(|t| ms(t.connected))),
            mouth_to_ear_ms: Summary::of(all.clone().flat_map(|h| h.mouth_to_ear_ms.iter().copied())),
            gaps: all.clone().map(|h| h.gaps).sum(),
            spurts: all.clone().map(|h| h.spurts).sum(),
            onset_gaps: all.clone().map(|h| h.onset_gaps).sum(),
            listeners_with_gaps: all.filter(|h| h.gaps > 0).count(),
            per_line,
            crew_cpu_percent,
            crew_cpu_per_line_percent: crew_cpu_percent.filter(|_| lines > 0).map(|cpu| cpu / lines as f64),
            processes: usage,
        }
    }

    /// The report as a plain-text table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let summary = |s: &Option<Summary>| {
            s.map_or_else(
                || "-".to_owned(),
                |s| format!("median {:.0}, p95 {:.0}, p99 {:.0}, max {:.0}", s.median, s.p95, s.p99, s.max),
            )
        };
        let _ = writeln!(
            out,
            "users {} ({} lines), joins failed {}, {:.0} s",
            self.users, self.lines, self.joins_failed, self.seconds
        );
        let _ = writeln!(out, "POST /api/token ms: {}", summary(&self.token_ms));
        let _ = writeln!(out, "join through /janus ms: {}", summary(&self.join_ms));
        let _ = writeln!(out, "token to media connected ms: {}", summary(&self.connected_ms));
        let _ = writeln!(out, "mouth-to-ear ms: {}", summary(&self.mouth_to_ear_ms));
        let _ = writeln!(out, "gaps >= {GAP_MS} ms: {} ({} listeners)", self.gaps, self.listeners_with_gaps);
        let _ = writeln!(
            out,
            "  of them at talk onsets (a spurt's first burst): {} in {} spurts heard",
            self.onset_gaps, self.spurts
        );
        let _ = writeln!(
            out,
            "{:<16} {:>9} {:>7} {:>8} {:>8} {:>5} {:>8} {:>6} {:>6} {:>7} {:>10}",
            "line",
            "listeners",
            "bursts",
            "tone dB",
            "other dB",
            "gaps",
            "longest",
            "lost",
            "late",
            "own ms",
            "m2e median"
        );
        let db = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        for line in &self.per_line {
            let m2e = line.mouth_to_ear_ms.map_or_else(|| "-".to_owned(), |s| format!("{:.0}", s.median));
            let _ = writeln!(
                out,
                "{:<16} {:>9} {:>7} {:>8} {:>8} {:>5} {:>8} {:>6} {:>6} {:>7} {:>9} {:>10}",
                line.room,
                line.listeners,
                line.bursts,
                db(line.tone_db),
                db(line.other_db),
                line.gaps,
                line.longest_gap_ms,
                line.lost,
                line.late,
                line.own_voice_ms,
                line.sent_late,
                m2e
            );
        }
        if let (Some(cpu), Some(per_line)) = (self.crew_cpu_percent, self.crew_cpu_per_line_percent) {
            let _ = writeln!(out, "crew CPU {cpu:.1} % of a core, {per_line:.3} % per line");
        }
        for p in &self.processes {
            let _ = writeln!(
                out,
                "{} CPU {:.1} % (busiest thread {} {:.1} %), RSS {:.0} MiB",
                p.name, p.cpu_percent, p.busiest_thread, p.busiest_thread_percent, p.rss_mib
            );
        }
        out
    }
}

fn line_figures(room: &str, heard: &[PersonHeard]) -> LineFigures {
    let listeners: Vec<&Heard> =
        heard.iter().flat_map(|p| &p.lines).filter(|(_, r, _)| r == room).map(|(_, _, h)| h).collect();
    let mut total = Heard::default();
    for h in &listeners {
        total.add(h);
    }
    LineFigures {
        room: room.to_owned(),
        listeners: listeners.len(),
        bursts: total.bursts,
        tone_db: Summary::of(listeners.iter().filter_map(|h| h.tone_db())).map(|s| s.median),
        other_db: listeners.iter().filter_map(|h| h.other_db()).max_by(f64::total_cmp),
        gaps: total.gaps,
        spurts: total.spurts,
        onset_gaps: total.onset_gaps,
        longest_gap_ms: total.longest_gap_ms,
        lost: total.lost,
        late: total.late,
        concealed_ms: total.concealed_ms,
        own_voice_ms: total.own_voice_ms,
        sent_late: total.sent_late,
        relayed_listeners: listeners.iter().filter(|h| h.relayed_datagrams > h.packets / 2).count(),
        mouth_to_ear_ms: Summary::of(total.mouth_to_ear_ms.iter().copied()),
    }
}

#[cfg(test)]
mod tests {
    use super::Summary;

    #[test]
    fn percentiles_are_nearest_ranks() {
        let s = Summary::of((1..=100).map(f64::from)).expect("figures");
        assert_eq!((s.count, s.median, s.p95, s.p99, s.max), (100, 50.0, 95.0, 99.0, 100.0));
        assert_eq!(Summary::of([7.0]).map(|s| (s.median, s.p99)), Some((7.0, 7.0)));
        assert_eq!(Summary::of([]), None);
    }
}
