//! The running AES67 console ([`Console`]): its events, and waiting on what it reports.

use std::path::PathBuf;
use std::process::{Child, ChildStdin};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::reports::{Lateness, Levels, Sap, lateness, levels, sap, text};
use super::{Aes67Net, ConsoleBuilder};

/// The events a console printed.
#[derive(Debug, Default)]
pub(super) struct Events {
    pub(super) list: Vec<Value>,
    /// Its stdout closed: it exited.
    pub(super) ended: bool,
}

/// The AES67 console: the `aes67-console` binary in the console's namespace (or the test's:
/// [`ConsoleBuilder::in_test_namespace`]), and what it reports. Stopped on drop (its
/// announcement withdrawn).
#[derive(Debug)]
pub struct Console {
    pub(super) child: Child,
    pub(super) stdin: Option<ChildStdin>,
    pub(super) events: Arc<Mutex<Events>>,
    pub(super) dir: tempfile::TempDir,
}

impl Console {
    pub fn builder() -> ConsoleBuilder {
        ConsoleBuilder::default()
    }

    /// A console with the defaults: a −20 dBFS 1 kHz tone on channel 3 of 8 (L24), sent to
    /// [`CONSOLE_GROUP`](super::CONSOLE_GROUP) and announced as
    /// [`CONSOLE_NAME`](super::CONSOLE_NAME).
    pub fn start(net: &Aes67Net) -> Console {
        Console::builder().start(net)
    }

    /// Every event it printed so far (JSON objects with their `event`).
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).list.clone()
    }

    /// What it wrote on stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("console.log")).unwrap_or_default()
    }

    /// Polls `check` over its events from the `from`th on until it gives a value; panics naming
    /// `what` with its log after `within`, or once it exited.
    async fn wait<T>(&self, what: &str, within: Duration, from: usize, check: impl Fn(&[Value]) -> Option<T>) -> T {
        let deadline = Instant::now() + within;
        loop {
            let ended = {
                let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(value) = check(events.list.get(from..).unwrap_or_default()) {
                    return value;
                }
                events.ended
            };
            let failure = if ended {
                "aes67-console exited"
            } else if Instant::now() >= deadline {
                "timed out"
            } else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let events = self.events();
            let tail: Vec<String> = events[events.len().saturating_sub(8)..].iter().map(Value::to_string).collect();
            panic!(
                "{failure} waiting {within:?} for the console's {what}; its last events:\n{}\nits log:\n{}",
                tail.join("\n"),
                self.log()
            );
        }
    }

    fn count(&self) -> usize {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).list.len()
    }

    /// Waits until its PTP clock syncs; returns the grandmaster it follows first (as
    /// [`Grandmaster::identity`](super::Grandmaster::identity)), which may be the worse of two
    /// until it has heard both: [`Console::wait_grandmaster`] waits for a given one.
    pub async fn wait_synced(&self, within: Duration) -> String {
        self.wait("PTP sync", within, 0, |events| {
            events.iter().find(|e| e["event"] == "synced").map(|e| text(&e["grandmaster"]))
        })
        .await
    }

    /// The grandmaster its clock follows now, once synced.
    pub fn grandmaster(&self) -> Option<String> {
        self.events()
            .iter()
            .rev()
            .find(|e| e["event"] == "synced" || e["event"] == "grandmaster")
            .map(|e| text(&e["grandmaster"]))
    }

    /// Waits until its clock follows the grandmaster `identity`.
    pub async fn wait_grandmaster(&self, identity: &str, within: Duration) {
        self.wait(&format!("grandmaster {identity}"), within, 0, |events| {
            let last = events.iter().rev().find(|e| e["event"] == "synced" || e["event"] == "grandmaster")?;
            (last["grandmaster"] == identity).then_some(())
        })
        .await;
    }

    /// Waits until its stream is on the wire; returns the stream's SDP.
    pub async fn wait_sending(&self, within: Duration) -> String {
        self.wait("stream", within, 0, |events| {
            events.iter().find(|e| e["event"] == "sending").map(|e| text(&e["sdp"]))
        })
        .await
    }

    /// Waits until it receives a stream (from its SDP, or SAP's announcement); returns the
    /// `receiving` event (the stream's `name`, `group`, `port`, `encoding`, `channels`, …).
    pub async fn wait_receiving(&self, within: Duration) -> Value {
        self.wait("receiving", within, 0, |events| events.iter().rev().find(|e| e["event"] == "receiving").cloned())
            .await
    }

    /// Its last `levels` report.
    pub fn latest_levels(&self) -> Option<Levels> {
        self.events().iter().rev().find_map(levels)
    }

    /// A mark in its events, for [`Console::levels_since`].
    pub fn mark(&self) -> usize {
        self.count()
    }

    /// Its `levels` reports made after `mark`.
    pub fn levels_since(&self, mark: usize) -> Vec<Levels> {
        self.events().get(mark..).unwrap_or_default().iter().filter_map(levels).collect()
    }

    /// Waits for a `levels` report made after this call that satisfies `check`.
    pub async fn wait_levels(&self, what: &str, within: Duration, check: impl Fn(&Levels) -> bool) -> Levels {
        let from = self.count();
        self.wait(what, within, from, |events| events.iter().filter_map(levels).find(|l| check(l))).await
    }

    /// Waits for a `levels` report, made after this call, whose tone level on `channel` (from
    /// 1) satisfies `check`; returns that level.
    pub async fn wait_tone(&self, channel: usize, check: impl Fn(f64) -> bool, within: Duration) -> f64 {
        let what = format!("tone level on channel {channel}");
        self.wait_levels(&what, within, |l| l.tone_dbfs.get(channel - 1).is_some_and(|db| check(*db)))
            .await
            .tone(channel)
    }

    /// Every `lateness` report so far.
    pub fn lateness_reports(&self) -> Vec<Lateness> {
        self.events().iter().filter_map(lateness).collect()
    }

    /// The next `reports` `lateness` reports after this call (a window of `--report-ms` each).
    pub async fn next_lateness(&self, reports: usize, within: Duration) -> Vec<Lateness> {
        let from = self.count();
        self.wait(&format!("{reports} lateness reports"), within, from, |events| {
            let all: Vec<Lateness> = events.iter().filter_map(lateness).collect();
            (all.len() >= reports).then(|| all[..reports].to_vec())
        })
        .await
    }

    /// The latencies (ms) of the onsets it heard so far on `channel` (from 1): with its tone in
    /// bursts ([`ConsoleBuilder::bursts`]), how long each burst took to come back to it.
    pub fn onsets(&self, channel: usize) -> Vec<f64> {
        self.onset_events(channel).iter().filter_map(|e| e["latency_ms"].as_f64()).collect()
    }

    /// The PTP time (ns) of every onset heard on `channel` (from 1) so far.
    pub fn onset_times(&self, channel: usize) -> Vec<i64> {
        self.onset_events(channel).iter().filter_map(|e| e["ptp_ns"].as_i64()).collect()
    }

    fn onset_events(&self, channel: usize) -> Vec<Value> {
        let heard_on = |e: &Value| e["event"] == "onset" && e["channel"].as_u64() == Some(channel as u64);
        self.events().into_iter().filter(heard_on).collect()
    }

    /// Every SAP packet it heard so far.
    pub fn sap(&self) -> Vec<Sap> {
        self.events().iter().filter_map(sap).collect()
    }

    /// Whether it heard an announcement of `name`.
    pub fn sap_seen(&self, name: &str) -> bool {
        self.sap().iter().any(|s| !s.deletion && s.name.as_deref() == Some(name))
    }

    /// Waits until it hears an announcement of `name` (or had heard one); returns the latest.
    pub async fn wait_sap(&self, name: &str, within: Duration) -> Sap {
        self.wait(&format!("SAP announcement of {name:?}"), within, 0, |events| {
            events.iter().rev().filter_map(sap).find(|s| !s.deletion && s.name.as_deref() == Some(name))
        })
        .await
    }

    /// Waits until it hears the deletion of `name`'s announcement (named, or with the origin
    /// and hash of an announcement of `name`: RFC 2974 lets a deletion carry only the `o=`
    /// line); returns it.
    pub async fn wait_sap_deletion(&self, name: &str, within: Duration) -> Sap {
        self.wait(&format!("SAP deletion of {name:?}"), within, 0, |events| {
            let heard: Vec<Sap> = events.iter().filter_map(sap).collect();
            let announced: Vec<(&str, u16)> = heard
                .iter()
                .filter(|s| !s.deletion && s.name.as_deref() == Some(name))
                .map(|s| (s.origin.as_str(), s.hash))
                .collect();
            heard
                .iter()
                .find(|s| {
                    s.deletion && (s.name.as_deref() == Some(name) || announced.contains(&(s.origin.as_str(), s.hash)))
                })
                .cloned()
        })
        .await
    }

    /// Its `error` events (a pipeline that failed).
    pub fn errors(&self) -> Vec<Value> {
        self.events().into_iter().filter(|e| e["event"] == "error").collect()
    }

    /// Stops it as a console is switched off cleanly: its stdin closed, it withdraws its
    /// announcement and exits (killed if it has not within 2 s).
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// Kills it with SIGKILL (a console that loses power): no withdrawal.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The folder of its log and SDP file.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.stop();
    }
}
