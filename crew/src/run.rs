//! The two ways a crew runs: steady (join, talk for a while, report) and a ramp (more members
//! step by step until a listener hears the box struggle: the knee).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cpu::{Meter, Watched};
use crate::crew::Crew;
use crate::report::Report;

/// A steady run.
#[derive(Debug, Clone)]
pub struct Steady {
    pub users: usize,
    /// The joins' starts are spread over this.
    pub ramp: Duration,
    /// Talking and listening, after every join.
    pub duration: Duration,
}

/// A ramp to the knee.
#[derive(Debug, Clone)]
pub struct Ramp {
    pub start: usize,
    pub step: usize,
    pub max: usize,
    /// Each step's joins are spread over this.
    pub ramp: Duration,
    /// Talking before a step is judged (the joins' own glitches are not the load's).
    pub settle: Duration,
    /// Judged talking per step.
    pub measure: Duration,
    /// Degraded when mouth-to-ear's median is this much over the first step's.
    pub latency_margin_ms: f64,
}

/// One step of a ramp.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    #[serde(flatten)]
    pub report: Report,
    /// Why the step counts as degraded, if it does.
    pub degraded: Option<String>,
}

/// The processes to measure: the crew itself and `watched`.
fn meter(watched: &[Watched]) -> Meter {
    let mut all = vec![Watched { name: "crew".into(), pid: std::process::id() }];
    all.extend_from_slice(watched);
    Meter::start(&all)
}

/// Joins, talks for the duration, reports; `progress` gets a line per turn.
pub async fn steady(crew: &mut Crew, plan: &Steady, watched: &[Watched], progress: impl Fn(&str)) -> Report {
    crew.add(plan.users, plan.ramp).await;
    progress(&format!("{} of {} joined", crew.people.len(), plan.users));
    // The joins' moments are not judged: what was heard so far is dropped.
    crew.heard().await;
    let mut meter = meter(watched);
    let started = Instant::now();
    let end = started + plan.duration;
    while Instant::now() < end {
        let chunk = (end - Instant::now()).min(Duration::from_secs(5));
        crew.talk_for(chunk).await;
        progress(&format!(
            "{:.0} s of {:.0} s, {} members",
            started.elapsed().as_secs_f64(),
            plan.duration.as_secs_f64(),
            crew.people.len()
        ));
    }
    let heard = crew.heard().await;
    let report = Report::new(crew, &heard, started.elapsed(), meter.usage());
    crew.silence().await;
    report
}

/// Adds members step by step, judging each step, until one is degraded or `max` is reached.
pub async fn ramp(crew: &mut Crew, plan: &Ramp, watched: &[Watched], progress: impl Fn(&str)) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut adding = plan.start;
    loop {
        crew.add(adding, plan.ramp).await;
        crew.talk_for(plan.settle).await;
        crew.heard().await;
        let mut meter = meter(watched);
        let started = Instant::now();
        crew.talk_for(plan.measure).await;
        let heard = crew.heard().await;
        let report = Report::new(crew, &heard, started.elapsed(), meter.usage());
        let idle = steps.first().and_then(|s| s.report.mouth_to_ear_ms).map(|s| s.median);
        let degraded = degraded(&report, idle, plan.latency_margin_ms);
        progress(&format!(
            "{} members: gaps {}, mouth-to-ear median {}, {}",
            report.users,
            report.gaps,
            report.mouth_to_ear_ms.map_or_else(|| "-".into(), |s| format!("{:.0} ms", s.median)),
            degraded.as_deref().unwrap_or("clean")
        ));
        let stop = degraded.is_some() || crew.people.len() >= plan.max;
        steps.push(Step { report, degraded });
        if stop {
            break;
        }
        adding = plan.step.min(plan.max - crew.people.len());
    }
    crew.silence().await;
    steps
}

/// Why a step's report counts as degraded: a join failed, a listener heard a gap, or
/// mouth-to-ear grew more than `margin_ms` over the first step's (`idle_ms`).
pub fn degraded(report: &Report, idle_ms: Option<f64>, margin_ms: f64) -> Option<String> {
    if report.joins_failed > 0 {
        return Some(format!("{} joins failed", report.joins_failed));
    }
    if report.gaps > 0 {
        return Some(format!("{} gaps heard by {} listeners", report.gaps, report.listeners_with_gaps));
    }
    let median = report.mouth_to_ear_ms.map(|s| s.median)?;
    let idle = idle_ms?;
    (median > idle + margin_ms).then(|| format!("mouth-to-ear {median:.0} ms, {:.0} ms over idle", median - idle))
}
