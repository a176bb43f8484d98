//! The `levels` and `lateness` reports made every `--report-ms` from a received stream's
//! [`Window`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use partyline_testkit::audio::{rms_db, tone_db};
use serde_json::{Value, json};

use super::receive::{Window, realtime_ns};
use super::{Args, emit};

/// Every `--report-ms`, while a stream is received: its `levels` and `lateness` over the window,
/// with how far this console's PTP time is from the host's `CLOCK_REALTIME` (the test
/// grandmasters' time: a measure of how well it follows them).
pub(crate) fn report(args: &Args, clock: &gst::Clock, window: Arc<Mutex<Option<Window>>>) {
    let (every, tone_hz, clock) = (Duration::from_millis(args.report_ms), args.tone_hz, clock.clone());
    std::thread::spawn(move || {
        let mut next = Instant::now();
        loop {
            next += every;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            let taken = {
                let mut window = window.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(current) = window.as_mut() else { continue };
                let fresh = Window { last_seq: current.last_seq, ..Window::new(current.channels) };
                std::mem::replace(current, fresh)
            };
            let round = |v: f64| (v * 100.0).round() / 100.0;
            emit(&json!({
                "event": "levels",
                "frames": taken.samples.first().map_or(0, Vec::len),
                "dbfs": taken.samples.iter().map(|s| round(rms_db(s))).collect::<Vec<_>>(),
                "tone_dbfs": taken.samples.iter().map(|s| round(tone_db(s, tone_hz))).collect::<Vec<_>>(),
            }));
            let ptp = clock.time().nseconds() as i64;
            let offset = ptp - realtime_ns() as i64;
            let (ptp, host) = (spread(taken.lateness), spread(taken.host_lateness));
            emit(&json!({
                "event": "lateness",
                "packets": ptp.len,
                "lost": taken.lost,
                "min_us": ptp.min_us,
                "p50_us": ptp.p50_us,
                "p99_us": ptp.p99_us,
                "max_us": ptp.max_us,
                "host": host.json(),
                "clock_offset_us": micros(offset),
            }));
        }
    });
}

fn micros(ns: i64) -> f64 {
    (ns as f64 / 100.0).round() / 10.0
}

/// The least, median, 99th percentile and greatest of a window's latenesses (µs; null for none).
struct Spread {
    len: usize,
    min_us: Option<f64>,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    max_us: Option<f64>,
}

fn spread(mut ns: Vec<i64>) -> Spread {
    ns.sort_unstable();
    let at = |q: f64| {
        let rank = (ns.len() as f64 * q).ceil() as usize;
        ns.get(rank.max(1) - 1).map(|v| micros(*v))
    };
    Spread { len: ns.len(), min_us: at(0.0), p50_us: at(0.5), p99_us: at(0.99), max_us: at(1.0) }
}

impl Spread {
    fn json(&self) -> Value {
        json!({"min_us": self.min_us, "p50_us": self.p50_us, "p99_us": self.p99_us, "max_us": self.max_us})
    }
}
