//! CPU time and memory of processes, read from `/proc`: the crew's own cost, and the box's
//! (Janus, control) while the crew loads it. A process's CPU is its threads' sum; its busiest
//! thread says whether one thread (a room's mixer) is the limit before the cores are.

use std::collections::HashMap;
use std::time::Instant;

use serde::Serialize;

/// A process to watch, by name and pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub name: String,
    pub pid: u32,
}

impl std::str::FromStr for Watched {
    type Err = String;

    /// `NAME=PID`.
    fn from_str(text: &str) -> Result<Watched, String> {
        let (name, pid) = text.split_once('=').ok_or_else(|| format!("{text:?}: write NAME=PID"))?;
        let pid = pid.parse().map_err(|_| format!("{text:?}: {pid:?} is not a pid"))?;
        Ok(Watched { name: name.to_owned(), pid })
    }
}

/// One process's use over an interval.
#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    pub name: String,
    /// Percent of one core.
    pub cpu_percent: f64,
    pub busiest_thread: String,
    pub busiest_thread_percent: f64,
    pub rss_mib: f64,
}

/// CPU ticks per thread at one moment.
#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    threads: HashMap<u32, (String, u64)>,
}

/// Measures processes over intervals: [`Meter::start`], then [`Meter::usage`] at the end.
#[derive(Debug)]
pub struct Meter {
    watched: Vec<Watched>,
    before: Vec<Option<Snapshot>>,
}

impl Meter {
    pub fn start(watched: &[Watched]) -> Meter {
        let before = watched.iter().map(|w| snapshot(w.pid)).collect();
        Meter { watched: watched.to_vec(), before }
    }

    /// Each process's use since the start (or the last call), and starts a new interval.
    pub fn usage(&mut self) -> Vec<Usage> {
        let mut usages = Vec::new();
        for (watched, before) in self.watched.iter().zip(self.before.iter_mut()) {
            let now = snapshot(watched.pid);
            if let (Some(then), Some(now)) = (before.as_ref(), now.as_ref()) {
                usages.push(usage(&watched.name, watched.pid, then, now));
            }
            *before = now;
        }
        usages
    }
}

fn usage(name: &str, pid: u32, then: &Snapshot, now: &Snapshot) -> Usage {
    let seconds = now.at.duration_since(then.at).as_secs_f64().max(1e-3);
    let per_second = procfs::ticks_per_second() as f64;
    let percent = |ticks_used: u64| ticks_used as f64 / per_second / seconds * 100.0;
    let mut total = 0;
    let mut busiest = (String::new(), 0);
    for (tid, (comm, ticks_now)) in &now.threads {
        let used = ticks_now.saturating_sub(then.threads.get(tid).map_or(0, |(_, t)| *t));
        total += used;
        if used > busiest.1 {
            busiest = (comm.clone(), used);
        }
    }
    Usage {
        name: name.to_owned(),
        cpu_percent: percent(total),
        busiest_thread: busiest.0,
        busiest_thread_percent: percent(busiest.1),
        rss_mib: rss_kib(pid).unwrap_or(0) as f64 / 1024.0,
    }
}

fn snapshot(pid: u32) -> Option<Snapshot> {
    let process = procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?;
    let mut threads = HashMap::new();
    for task in process.tasks().ok()?.flatten() {
        let (Ok(tid), Ok(stat)) = (u32::try_from(task.tid), task.stat()) else { continue };
        threads.insert(tid, (stat.comm, stat.utime + stat.stime));
    }
    Some(Snapshot { at: Instant::now(), threads })
}

fn rss_kib(pid: u32) -> Option<u64> {
    procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?.status().ok()?.vmrss
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_uses_cpu_when_it_works() {
        let me = Watched { name: "me".into(), pid: std::process::id() };
        let mut meter = Meter::start(std::slice::from_ref(&me));
        let until = Instant::now() + std::time::Duration::from_millis(300);
        let mut spin = 0u64;
        while Instant::now() < until {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        let usage = meter.usage();
        assert!(usage[0].cpu_percent > 30.0, "{usage:?}");
        assert!(usage[0].rss_mib > 0.0, "{usage:?}");
    }
}
