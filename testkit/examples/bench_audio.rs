//! The audio benchmark (run by `bench/audio`, inside `scripts/netns-run`): release
//! builds of partyline-control and partyline-bridged, a private PulseAudio card, Janus on `pl0`,
//! a private bus; everything driven through control's API. Prints a markdown section.
//!
//!   bench_audio --control BIN --bridged BIN [--changes N] [--rooms N] [--ticks-secs S] [--cpu-secs S]
//!               [--jitter-ms MS (bridge.jitterBufferMs)] [--bridged-log PATH]
//!
//! The tick latency is measured in `--rooms` fresh rooms, `--ticks-secs` each: the latency is
//! constant within a room but moves between rooms (74 to 111 ms in one run at the defaults):
//! each room has its own Janus mixing phase, and the test card gives each start an offset of its
//! own (`bench/card-loop`: 60 to 89 ms per run with no Janus at all). One room is one draw.
//!
//! `--bridged-log PATH` keeps bridged's log there; its filter is `BRIDGED_LOG` (default `warn`),
//! e.g. `BRIDGED_LOG=partyline_bridged=debug` for the timed stages of every join.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use partyline_shared::bridge::{BranchState, BridgeProxy, Status};
use partyline_testkit::audio::{TickRecorder, Tone};
use partyline_testkit::bench::{
    CLOCK_TICKS, ProcessSize, cpu_ticks, load_average, median, process_size, quantile, stack_with_card,
};
use partyline_testkit::control::Control;
use partyline_testkit::dbus::wait_status;
use partyline_testkit::pulse::PulseServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
/// From both branches joined to the first tick: Janus's prebuffering and the receive jitter
/// buffer settle.
const ROOM_SETTLE: Duration = Duration::from_secs(1);
/// From the card side's start to the first room: the virtual card (PulseAudio null sinks) serves
/// a new low-latency stream only after sleeping out the long block it rendered while nobody asked
/// for low latency, so the playback stalls for 1–3 s (bridged/README.md, "The card side's first
/// seconds on a virtual card").
const CARD_SETTLE: Duration = Duration::from_secs(4);

#[derive(Debug)]
struct Options {
    control: PathBuf,
    bridged: PathBuf,
    changes: usize,
    rooms: usize,
    ticks_secs: f64,
    cpu_secs: f64,
    jitter_ms: u32,
    bridged_log: Option<PathBuf>,
}

fn options() -> Options {
    let mut o = Options {
        control: PathBuf::new(),
        bridged: PathBuf::new(),
        changes: 10,
        rooms: 6,
        ticks_secs: 6.0,
        cpu_secs: 20.0,
        jitter_ms: 20,
        bridged_log: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--control" => o.control = value.into(),
            "--bridged" => o.bridged = value.into(),
            "--changes" => o.changes = value.parse().expect("--changes N"),
            "--rooms" => o.rooms = value.parse().expect("--rooms N"),
            "--ticks-secs" => o.ticks_secs = value.parse().expect("--ticks-secs S"),
            "--cpu-secs" => o.cpu_secs = value.parse().expect("--cpu-secs S"),
            "--jitter-ms" => o.jitter_ms = value.parse().expect("--jitter-ms MS"),
            "--bridged-log" => o.bridged_log = Some(value.into()),
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(o.control.exists() && o.bridged.exists(), "--control and --bridged: the release binaries");
    o
}

async fn call(control: &Control, method: Method, path: &str, body: Value, want: StatusCode) -> Value {
    let (status, answer) = control.send(method, path, Some(body.clone())).await;
    assert_eq!(status, want, "{path} {body} → {answer}");
    answer
}

fn summary(values: &[f64]) -> String {
    let at = |q: f64| quantile(values, q).unwrap_or(f64::NAN);
    format!("median {:.1}, p90 {:.1}, min {:.1}, max {:.1} (n = {})", at(0.5), at(0.9), at(0.0), at(1.0), values.len())
}

/// CPU (percent of one core) of `pid` over `secs`.
async fn cpu_percent(pid: u32, secs: f64) -> f64 {
    let (t0, c0) = (Instant::now(), cpu_ticks(pid));
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    let (c1, elapsed) = (cpu_ticks(pid), t0.elapsed().as_secs_f64());
    (c1 - c0) as f64 / CLOCK_TICKS / elapsed * 100.0
}

fn branch_joined(bridge: &Value, name: &str) -> bool {
    bridge["branches"].as_array().is_some_and(|v| v.iter().any(|b| b["name"] == name && b["state"] == "joined"))
}

/// Ticks of 20 ms (1 kHz) every 300 ms on input 0 for `secs`, through A{room} (input 0, no
/// output) → room of group T{room} → B{room} (output 1); both monitors recorded in one pipeline,
/// started before the joins so that its own start-up is over by the first tick. The ticks start
/// [`ROOM_SETTLE`] after both joined.
/// Each tick's latency in ms, None for a tick not heard on the output.
async fn room_ticks(
    control: &Control,
    proxy: &BridgeProxy<'_>,
    pulse: &PulseServer,
    room: usize,
    secs: f64,
) -> Vec<Option<f64>> {
    let (a, b, group) = (format!("A{room}"), format!("B{room}"), format!("t{room}"));
    let user = |name: &str, input: u8, output: Option<u8>| json!({ "name": name, "group": group, "inputChannel": input, "outputChannel": output });
    let recorder = TickRecorder::start(pulse, 0, 1);
    call(control, Method::POST, "/admin/server-users", user(&a, 0, None), StatusCode::CREATED).await;
    call(control, Method::POST, "/admin/server-users", user(&b, 1, Some(1)), StatusCode::CREATED).await;
    let joined = |s: &Status| {
        [&a, &b].iter().all(|n| s.branches.iter().any(|x| &&x.name == n && x.state == BranchState::Joined))
    };
    wait_status(proxy, WAIT, "A and B joined", joined).await;
    tokio::time::sleep(ROOM_SETTLE).await;

    let latencies = recorder.ticks_through(pulse, Duration::from_secs_f64(secs)).await;

    for name in [&a, &b] {
        let path = format!("/admin/server-users/{}", name.to_lowercase());
        call(control, Method::DELETE, &path, Value::Null, StatusCode::OK).await;
    }
    wait_status(proxy, WAIT, "A and B gone", |s| !s.branches.iter().any(|x| x.name == a || x.name == b)).await;
    latencies
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let o = options();
    let log_filter = std::env::var("BRIDGED_LOG").unwrap_or_else(|_| "warn".into());
    let groups: String = (0..o.rooms).map(|k| format!("  - name: T{k}\n")).collect();
    let groups = format!("  - name: X\n{groups}");
    let stack = stack_with_card(&o.control, &o.bridged, &groups, o.jitter_ms, &log_filter).await;
    let card = stack.card_side();
    let (control, bridged, pulse) = (&stack.control, &card.bridged, &card.pulse);
    let proxy = card.bus.bridge().await;

    // A (input 0, no output) and B (input 1, output 1).
    let a = json!({ "name": "A", "group": "x", "inputChannel": 0, "outputChannel": null });
    let b = json!({ "name": "B", "group": "x", "inputChannel": 1, "outputChannel": 1 });
    let first = Instant::now();
    call(control, Method::POST, "/admin/server-users", a, StatusCode::CREATED).await;
    call(control, Method::POST, "/admin/server-users", b, StatusCode::CREATED).await;
    wait_status(&proxy, WAIT, "A and B joined", |s| {
        s.branches.len() == 2 && s.branches.iter().all(|b| b.state == BranchState::Joined)
    })
    .await;
    let first_ms = first.elapsed().as_secs_f64() * 1000.0;

    // 1. Config change → the new branch joined (media up), N times: POST a user, poll Status on
    //    the bus every 2 ms; then DELETE it and wait until its branch is gone.
    let mut api_ms = Vec::new();
    let mut joined_ms = Vec::new();
    let mut removed_ms = Vec::new();
    let rss_before_changes = process_size(bridged.pid()).rss_kib;
    for n in 0..o.changes {
        let user = json!({ "name": format!("N{n}"), "group": "x", "inputChannel": 2, "outputChannel": 2 });
        let started = Instant::now();
        call(control, Method::POST, "/admin/server-users", user, StatusCode::CREATED).await;
        api_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let name = format!("N{n}");
        loop {
            let status = proxy.status().await.expect("Status");
            if status.branches.iter().any(|b| b.name == name && b.state == BranchState::Joined) {
                break;
            }
            assert!(started.elapsed() < WAIT, "N{n} never joined: {status:#?}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        joined_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let started = Instant::now();
        call(control, Method::DELETE, &format!("/admin/server-users/n{n}"), Value::Null, StatusCode::OK).await;
        wait_status(&proxy, WAIT, "N gone", |s| s.branches.len() == 2).await;
        removed_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let (_, stats) = control.get_json("/admin/stats").await;
    assert!(branch_joined(&stats["bridge"], "B"), "{stats}");
    let rss_after_changes = process_size(bridged.pid()).rss_kib;

    // 2. Tick latency card_in → A → room → B → card_out, in fresh rooms (groups T0, T1, …).
    //    K (input 7, no output, alone in X) keeps the card side running from room to room.
    let k = json!({ "name": "K", "group": "x", "inputChannel": 7, "outputChannel": null });
    call(control, Method::POST, "/admin/server-users", k, StatusCode::CREATED).await;
    call(control, Method::DELETE, "/admin/server-users/a", Value::Null, StatusCode::OK).await;
    call(control, Method::DELETE, "/admin/server-users/b", Value::Null, StatusCode::OK).await;
    tokio::time::sleep(CARD_SETTLE.saturating_sub(first.elapsed())).await;
    let mut latencies = Vec::new();
    let mut room_medians = Vec::new();
    let (mut matched, mut ticks, mut slips) = (0, 0, 0);
    for room in 0..o.rooms {
        // The recorder now and then captures nothing at all (no tick on the input either): the
        // harness's fault, not the path's; that room is measured again.
        let mut heard = room_ticks(control, &proxy, pulse, room, o.ticks_secs).await;
        for _ in 0..2 {
            if !heard.is_empty() {
                break;
            }
            eprintln!("bench_audio: room {room}: the recording holds no tick, measuring it again");
            heard = room_ticks(control, &proxy, pulse, room, o.ticks_secs).await;
        }
        let these: Vec<f64> = heard.iter().flatten().copied().collect();
        // A tick's latency moves by a whole 20 ms frame when one is dropped (Janus trims a
        // queue that grew past twice its prebuffering) or when one is missing (a queue ran dry).
        slips += these.windows(2).filter(|w| (w[1] - w[0]).abs() >= 15.0).count();
        (matched, ticks) = (matched + these.len(), ticks + heard.len());
        latencies.extend_from_slice(&these);
        let median = median(&these).unwrap_or(f64::NAN);
        eprintln!("bench_audio: room {room}: median {median:.0} ms, {} of {} ticks heard", these.len(), heard.len());
        room_medians.push(format!("{median:.0}"));
    }

    // 3. CPU and RSS of bridged with 8 bidirectional users (a tone on every input).
    call(control, Method::DELETE, "/admin/server-users/k", Value::Null, StatusCode::OK).await;
    let _tones = Tone::source(pulse, "card_in", &[0, 1, 2, 3, 4, 5, 6, 7], "audiotestsrc freq=440 is-live=true");
    for k in 0..8 {
        let user = json!({ "name": format!("U{k}"), "group": "x", "inputChannel": k, "outputChannel": k });
        call(control, Method::POST, "/admin/server-users", user, StatusCode::CREATED).await;
    }
    wait_status(&proxy, WAIT, "8 users joined and receiving", |s| {
        s.branches.len() == 8 && s.branches.iter().all(|b| b.state == BranchState::Joined && b.packets_received > 100)
    })
    .await;
    let pid = bridged.pid();
    let rss_before = process_size(pid).rss_kib;
    let cpu = cpu_percent(pid, o.cpu_secs).await;
    let ProcessSize { rss_kib: rss, peak_rss_kib: hwm, threads, .. } = process_size(pid);
    let status = proxy.status().await.expect("Status");
    let load = load_average();

    println!(
        "### Run (bridge.jitterBufferMs {}: Janus prebuffering of the server users {} packet(s), webrtcbin latency {} ms)\n",
        o.jitter_ms,
        partyline_shared::janus::prebuffer_packets(o.jitter_ms),
        o.jitter_ms
    );
    println!("- load average at the end: {load}");
    println!("- first plan (pipeline + A and B) POST → both joined: {first_ms:.0} ms");
    println!("- config change (POST a server user) → API answered: {} ms", summary(&api_ms));
    println!("- config change (POST a server user) → its branch joined (media up): {} ms", summary(&joined_ms));
    println!("- DELETE a server user → its branch gone: {} ms", summary(&removed_ms));
    println!(
        "- RSS of bridged around those {} changes (A and B joined before and after): {:.1} → {:.1} MiB",
        o.changes,
        rss_before_changes as f64 / 1024.0,
        rss_after_changes as f64 / 1024.0
    );
    println!(
        "- tick latency card_in → Janus → card_out, {} rooms × {:.0} s: {} ms; medians per room {} ms; {matched} of {ticks} ticks matched; {slips} step(s) of ≥ 15 ms between consecutive ticks (a 20 ms frame dropped or missing)",
        o.rooms,
        o.ticks_secs,
        summary(&latencies),
        room_medians.join(", ")
    );
    println!(
        "- bridged with 8 bidirectional users at 48 kHz: CPU {cpu:.1} % of one core over {:.0} s; RSS {:.1} MiB (before {:.1} MiB, peak {:.1} MiB), {threads} threads; packets sent per branch {:?}",
        o.cpu_secs,
        rss as f64 / 1024.0,
        rss_before as f64 / 1024.0,
        hwm as f64 / 1024.0,
        status.branches.iter().map(|b| b.packets_sent).collect::<Vec<_>>()
    );
    if let Some(path) = &o.bridged_log {
        std::fs::write(path, bridged.log()).expect("--bridged-log");
    }
}
