//! The event stream's fan-out benchmark (run by `bench/events`): a release build of
//! partyline-control alone on loopback, `--clients` clients of `GET /api/admin/events`, and
//! `--rate` config changes a second for `--secs` seconds, each a real API action (`PUT` of a
//! group's `audioBitrate`: a durable write, and a `configChanged` event). Prints a markdown
//! section on stdout; exits non-zero when an event was lost.
//!
//!   bench_events --control BIN [--clients 200] [--rate 50] [--secs 60]
//!
//! Every client timestamps each event as it arrives; each change is timed from the start of its
//! request, so a delivery latency is request → event at one client (the durable write included:
//! the disk's stalls show in the tail). Also per change: the spread from the first client that
//! had it to the last (the fan-out's own cost). Loss: at every client the ids must be
//! consecutive from its first event, every change must arrive, and no `overflow` or `reset` may
//! come. control's CPU over the changes, its RSS with the clients and at the end, and how busy
//! the machine was meanwhile (this driver included: it shares the machine).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use partyline_testkit::bench::{cpu_ticks, machine_line, machine_ticks, mib, process_size, quantile};
use partyline_testkit::control::Control;
use reqwest::StatusCode;
use serde_json::json;

#[derive(Debug)]
struct Options {
    control: PathBuf,
    clients: usize,
    rate: u32,
    secs: u64,
}

fn options() -> Options {
    let mut o = Options { control: PathBuf::new(), clients: 200, rate: 50, secs: 60 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        let number = || value.parse::<u64>().unwrap_or_else(|_| panic!("{} takes a number", pair[0]));
        match pair[0].as_str() {
            "--control" => o.control = value.clone().into(),
            "--clients" => o.clients = number() as usize,
            "--rate" => o.rate = number() as u32,
            "--secs" => o.secs = number(),
            other => panic!("unknown argument {other} (--control BIN --clients N --rate N --secs N)"),
        }
    }
    assert!(o.control.exists(), "--control: the release binary of partyline-control");
    o
}

/// What one client saw: every event's id, and when each `configChanged` arrived.
#[derive(Debug, Default)]
struct Seen {
    ids: Vec<u64>,
    changes: Vec<Instant>,
    /// `overflow`, `reset`, or the stream's end.
    trouble: Vec<String>,
}

/// Reads the stream into `seen` until it ends.
async fn client(mut response: reqwest::Response, seen: Arc<Mutex<Seen>>) {
    let mut buffer = String::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let (mut id, mut name) = (None, "");
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim();
                }
            }
            let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
            match (id, name) {
                (Some(id), name) => {
                    seen.ids.push(id);
                    if name == "configChanged" {
                        seen.changes.push(Instant::now());
                    }
                }
                (None, "") => {} // a keep-alive comment
                (None, name) => seen.trouble.push(name.to_owned()),
            }
        }
        match response.chunk().await {
            Ok(Some(chunk)) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(None) | Err(_) => break,
        }
    }
    seen.lock().unwrap_or_else(PoisonError::into_inner).trouble.push("end of the stream".into());
}

/// `duration` in milliseconds.
fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let o = options();
    let machine = machine_line();
    // As the packaged unit runs it (packaging/systemd).
    let control = Control::builder().binary(&o.control).env("MALLOC_ARENA_MAX", "2").start().await;
    let pid = control.pid();
    let (status, body) = control.post_json("/admin/groups", json!({ "name": "FOH" })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let rss_idle = process_size(pid).rss_kib;

    // The clients, each its own connection, with no timeout (they stay for the whole run).
    let http = reqwest::Client::builder().no_proxy().build().expect("client");
    let mut seen = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..o.clients {
        let request = http.get(control.url("/admin/events")).bearer_auth(&control.token);
        let response = request.send().await.expect("GET /api/admin/events");
        assert_eq!(response.status(), StatusCode::OK);
        let log = Arc::new(Mutex::new(Seen::default()));
        tasks.push(tokio::spawn(client(response, Arc::clone(&log))));
        seen.push(log);
    }
    let (_, stats) = control.get_json("/admin/stats").await;
    assert_eq!(stats["events"]["clients"], json!(o.clients), "{stats}");
    let rss_clients = process_size(pid).rss_kib;
    eprintln!("bench_events: {} clients connected; {} changes/s for {} s", o.clients, o.rate, o.secs);

    // The changes, one request at a time at the rate (a stalled write delays the next ones,
    // which then catch up: the count stays).
    let count = o.rate as usize * o.secs as usize;
    let mut sent = Vec::with_capacity(count);
    let mut pace = tokio::time::interval(Duration::from_secs(1) / o.rate);
    let (cpu_before, machine_before, own_before) = (cpu_ticks(pid), machine_ticks(), cpu_ticks(std::process::id()));
    let started = Instant::now();
    for k in 0..count {
        pace.tick().await;
        sent.push(Instant::now());
        let body = json!({ "audioBitrate": 32 + (k % 400) });
        let (status, answer) = control.put_json("/admin/groups/foh", body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = (cpu_ticks(pid) - cpu_before) as f64 / 100.0 / elapsed * 100.0;
    let own = (cpu_ticks(std::process::id()) - own_before) as f64 / 100.0 / elapsed * 100.0;
    let machine_after = machine_ticks();
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let busy = (machine_after.0 - machine_before.0) as f64 / (machine_after.1 - machine_before.1) as f64;
    let busy = busy * cores * 100.0;

    // Every change at every client, or 10 s more for stragglers.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && seen.iter().any(|s| s.lock().unwrap_or_else(PoisonError::into_inner).changes.len() < count)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (rss_end, rss_peak) = (process_size(pid).rss_kib, process_size(pid).peak_rss_kib);
    let (_, stats) = control.get_json("/admin/stats").await;
    for task in &tasks {
        task.abort();
    }

    let (mut latencies, mut first, mut last) = (Vec::new(), vec![None::<Instant>; count], vec![None::<Instant>; count]);
    let (mut lost, mut gaps, mut trouble) = (0, 0, Vec::new());
    for log in &seen {
        let log = log.lock().unwrap_or_else(PoisonError::into_inner);
        lost += count.saturating_sub(log.changes.len());
        gaps += log.ids.windows(2).filter(|w| w[1] != w[0] + 1).count();
        trouble.extend(log.trouble.iter().filter(|t| *t != "end of the stream").cloned());
        for (k, at) in log.changes.iter().enumerate().take(count) {
            latencies.push(ms(at.saturating_duration_since(sent[k])));
            first[k] = Some(first[k].map_or(*at, |f: Instant| f.min(*at)));
            last[k] = Some(last[k].map_or(*at, |l: Instant| l.max(*at)));
        }
    }
    let spreads: Vec<f64> = first
        .iter()
        .zip(&last)
        .filter_map(|(f, l)| Some(ms(l.as_ref()?.saturating_duration_since(*f.as_ref()?))))
        .collect();
    let at = |values: &[f64], q: f64| quantile(values, q).unwrap_or(f64::NAN);
    let ok = lost == 0 && gaps == 0 && trouble.is_empty() && stats["events"]["clientsCut"] == 0;

    println!("### Event fan-out (`bench/events`)\n");
    println!("{machine}\n");
    println!(
        "{} clients of `GET /api/admin/events`, {} config changes a second for {} s ({count} changes, \
         each `PUT /api/admin/groups/foh` with a new `audioBitrate`: a durable write and one event), \
         release build, `MALLOC_ARENA_MAX=2`, all on loopback.\n",
        o.clients, o.rate, o.secs
    );
    println!("| figure | value |\n|---|---|");
    println!("| changes sent, achieved rate | {count} in {elapsed:.1} s ({:.1}/s) |", count as f64 / elapsed);
    println!(
        "| delivery latency, request → event at a client ({} samples) | p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms |",
        latencies.len(),
        at(&latencies, 0.5),
        at(&latencies, 0.99),
        at(&latencies, 0.999),
        at(&latencies, 1.0)
    );
    println!(
        "| fan-out spread, first client → last client, per change | p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms |",
        at(&spreads, 0.5),
        at(&spreads, 0.99),
        at(&spreads, 1.0)
    );
    println!(
        "| loss | {lost} changes missing, {gaps} gaps in the ids, {} cut, {} |",
        stats["events"]["clientsCut"],
        if trouble.is_empty() { "no overflow or reset".to_owned() } else { format!("{trouble:?}") }
    );
    println!("| control CPU during the changes | {cpu:.1} % of one core |");
    println!(
        "| control RSS: idle, with the clients, at the end (peak) | {} / {} / {} MiB ({} MiB) |",
        mib(rss_idle),
        mib(rss_clients),
        mib(rss_end),
        mib(rss_peak)
    );
    println!(
        "| the machine meanwhile: busy, of which control, this driver, everything else | {busy:.0} % of {:.0} %: {cpu:.0} %, {own:.0} %, {:.0} % |\n",
        cores * 100.0,
        (busy - cpu - own).max(0.0)
    );
    if !ok {
        println!("**Events were lost.**\n");
        std::process::exit(1);
    }
}
