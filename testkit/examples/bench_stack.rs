//! The whole-stack load benchmark and soak (run by `bench/stack`, inside
//! `scripts/netns-run`): release builds of partyline-control and partyline-bridged, a private
//! PulseAudio card, Janus on `pl0`, a private bus, 8 bidirectional server audio users with a tone
//! on every input. Prints a markdown section on stdout; exits non-zero when a run fails its goal.
//!
//!   bench_stack load --control BIN --bridged BIN [--secs 60] [--connections 30] [--delay-ms 10]
//!   bench_stack soak --control BIN --bridged BIN [--secs 600] [--sample-secs 30]
//!
//! load: CPU and RSS of control, bridged and Janus at rest with the 8 users (20 s), then a mixed
//!   read/write load with wrk (`bench/admin.lua -- mixed`: 1 request in 10 a durable PUT) for
//!   `--secs`, paced by wrk's `delay()` to about connections × 1000 / delay-ms requests per second;
//!   0 errors, p99, RSS and open files of the three processes before and after, and the audio:
//!   every branch still joined and its received packets still counting.
//! soak: every second a crew user joins a room (token → Janus session → join) and the oldest of
//!   at most 5 leaves; every 3 s a config change (group created / channel names / server user
//!   added / removed / group deleted, in turn). Samples RSS, open files and threads of the three
//!   processes and Janus's sessions and handles; after the churn stops, everything must return to
//!   what it was after the first minute (open files, threads, sessions, handles) and RSS must not
//!   have grown by more than 20 %.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use partyline_shared::bridge::BranchState;
use partyline_testkit::audio::Tone;
use partyline_testkit::bench::{ProcessSize, cpu_ticks, machine_line, mib, process_size, stack_with_card};
use partyline_testkit::control::Control;
use partyline_testkit::dbus::wait_status;
use partyline_testkit::janus::{Janus, Probe};
use partyline_testkit::stack::Stack;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const USERS: usize = 8;

#[derive(Debug)]
struct Options {
    mode: String,
    control: PathBuf,
    bridged: PathBuf,
    secs: u64,
    connections: u32,
    delay_ms: u32,
    sample_secs: u64,
}

fn options() -> Options {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    assert!(mode == "load" || mode == "soak", "usage: bench_stack load|soak --control BIN --bridged BIN ...");
    let mut o = Options {
        secs: if mode == "load" { 60 } else { 600 },
        mode,
        control: PathBuf::new(),
        bridged: PathBuf::new(),
        connections: 30,
        delay_ms: 10,
        sample_secs: 30,
    };
    let rest: Vec<String> = args.collect();
    for pair in rest.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        let number = || value.parse().unwrap_or_else(|_| panic!("{} takes a number", pair[0]));
        match pair[0].as_str() {
            "--control" => o.control = value.clone().into(),
            "--bridged" => o.bridged = value.clone().into(),
            "--secs" => o.secs = number(),
            "--connections" => o.connections = number() as u32,
            "--delay-ms" => o.delay_ms = number() as u32,
            "--sample-secs" => o.sample_secs = number(),
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(o.control.exists() && o.bridged.exists(), "--control and --bridged: the release binaries");
    o
}

/// Starts the stack with the 8 server users joined. Group x carries them; the other groups take
/// the load's writes (their rooms are edited in Janus, the bridge's plan does not change) and the
/// soak's crew users.
async fn start_stack(o: &Options) -> Stack {
    let groups = "  - name: X\n  - name: Lighting\n  - name: Video\n  - name: Stage Left\n  - name: Stage Right\n";
    let stack = stack_with_card(&o.control, &o.bridged, groups, 20, "warn").await;
    for k in 0..USERS {
        let user = json!({ "name": format!("U{k}"), "group": "x", "inputChannel": k, "outputChannel": k });
        call(&stack.control, Method::POST, "/admin/server-users", user, StatusCode::CREATED).await;
    }
    let proxy = stack.card_side().bus.bridge().await;
    wait_status(&proxy, WAIT, "8 users joined and receiving", |s| {
        s.branches.len() == USERS
            && s.branches.iter().all(|b| b.state == BranchState::Joined && b.packets_received > 100)
    })
    .await;
    stack
}

async fn call(control: &Control, method: Method, path: &str, body: Value, want: StatusCode) -> Value {
    let (status, answer) = control.send(method, path, Some(body.clone())).await;
    assert_eq!(status, want, "{path} {body} → {answer}");
    answer
}

fn janus_pid(janus: &Janus) -> u32 {
    let file = janus.value("JANUS_PID_FILE");
    std::fs::read_to_string(file).expect("janus.pid").trim().parse().expect("a pid")
}

/// Janus's live sessions and handles, from its admin API.
async fn janus_handles(janus: &Janus) -> (usize, usize) {
    let sessions = janus.admin(json!({"janus": "list_sessions"})).await;
    let ids: Vec<u64> =
        sessions["sessions"].as_array().map(|v| v.iter().filter_map(Value::as_u64).collect()).unwrap_or_default();
    let mut handles = 0;
    for id in &ids {
        let body =
            json!({"janus": "list_handles", "transaction": format!("h{id}"), "admin_secret": janus.admin_secret()});
        let url = format!("{}/{id}", janus.admin_url());
        let answer: Value = match partyline_testkit::http().post(url).json(&body).send().await {
            Ok(response) => response.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null, // the session ended meanwhile
        };
        handles += answer["handles"].as_array().map_or(0, Vec::len);
    }
    (ids.len(), handles)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let o = options();
    let machine = machine_line();
    let stack = start_stack(&o).await;
    let tones = Tone::source(
        &stack.card_side().pulse,
        "card_in",
        &[0, 1, 2, 3, 4, 5, 6, 7],
        "audiotestsrc freq=440 is-live=true",
    );
    println!("{machine}\n");
    let ok = if o.mode == "load" { load(&o, &stack).await } else { soak(&o, &stack).await };
    if !ok {
        let tail = |text: String| {
            text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
        };
        eprintln!(
            "control's log (end):\n{}\nbridged's log (end):\n{}",
            tail(stack.control.log_text()),
            tail(stack.card_side().bridged.log())
        );
    }
    // Players first, then the stack; exit() below runs no destructors.
    drop(tones);
    drop(stack);
    std::process::exit(if ok { 0 } else { 1 });
}

/// The three processes, named, for tables.
fn processes(stack: &Stack) -> [(&'static str, u32); 3] {
    [
        ("partyline-control", stack.control.pid()),
        ("partyline-bridged", stack.card_side().bridged.pid()),
        ("janus", janus_pid(&stack.janus)),
    ]
}

async fn packets_received(control: &Control) -> Vec<u64> {
    let (_, stats) = control.get_json("/admin/stats").await;
    let branches = stats["bridge"]["branches"].as_array().cloned().unwrap_or_default();
    branches.iter().filter(|b| b["state"] == "joined").map(|b| b["packetsReceived"].as_u64().unwrap_or(0)).collect()
}

async fn load(o: &Options, stack: &Stack) -> bool {
    let procs = processes(stack);
    // At rest with the 8 users: CPU over 20 s.
    let rest_secs = 20.0;
    let before: Vec<u64> = procs.iter().map(|(_, pid)| cpu_ticks(*pid)).collect();
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(rest_secs)).await;
    let elapsed = t0.elapsed().as_secs_f64();
    println!("### At rest: {USERS} bidirectional server audio users at 48 kHz, a tone on every input\n");
    println!("| process | CPU (% of one core, {rest_secs:.0} s) | RSS MiB | open files | threads |");
    println!("|---|---|---|---|---|");
    for ((name, pid), t) in procs.iter().zip(&before) {
        let u = process_size(*pid);
        let cpu = (cpu_ticks(*pid) - t) as f64 / 100.0 / elapsed * 100.0;
        println!("| {name} | {cpu:.1} | {} | {} | {} |", mib(u.rss_kib), u.fds, u.threads);
    }

    // The mixed load.
    let usage_before: Vec<ProcessSize> = procs.iter().map(|(_, pid)| process_size(*pid)).collect();
    let packets_before = packets_received(&stack.control).await;
    let script = partyline_testkit::repo_path("bench/admin.lua");
    let output = Command::new("wrk")
        .args(["-t2", &format!("-c{}", o.connections), &format!("-d{}s", o.secs), "--latency", "-s"])
        .arg(&script)
        .arg(&stack.control.origin)
        .args(["--", "mixed", &o.delay_ms.to_string(), "lighting", "video", "stage-left", "stage-right"])
        .env("PARTYLINE_ADMIN_TOKEN", &stack.control.token)
        .output()
        .expect("wrk (apt-get install wrk)");
    let report = String::from_utf8_lossy(&output.stdout);
    let line =
        report.lines().find(|l| l.starts_with("BENCH ")).unwrap_or_else(|| panic!("no BENCH line from wrk:\n{report}"));
    let field = |key: &str| -> f64 {
        line.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{key}="))?.parse().ok()).unwrap_or(f64::NAN)
    };
    tokio::time::sleep(Duration::from_secs(2)).await; // settle
    let usage_after: Vec<ProcessSize> = procs.iter().map(|(_, pid)| process_size(*pid)).collect();
    let packets_after = packets_received(&stack.control).await;
    let audio_ok = packets_after.len() == USERS
        && packets_before.len() == USERS
        && packets_after.iter().zip(&packets_before).all(|(a, b)| a > b);
    let (rps, errors) = (field("rps"), field("errors"));
    let ok = errors == 0.0 && rps >= 2000.0 && audio_ok;

    println!(
        "\n### Mixed load: {} s, wrk -t2 -c{} paced by delay() {} ms, 9 reads (groups, stats, users, server users, config, join-page groups) to 1 durable PUT\n",
        o.secs, o.connections, o.delay_ms
    );
    println!("| requests | req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | errors | PUTs |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let ms = |key: &str| format!("{:.2}", field(key) / 1000.0);
    println!(
        "| {:.0} | {rps:.0} | {} | {} | {} | {} | {} | {errors:.0} | {:.0} |",
        field("requests"),
        ms("p50_us"),
        ms("p90_us"),
        ms("p99_us"),
        ms("p999_us"),
        ms("max_us"),
        field("puts")
    );
    println!("\n| process | RSS MiB before → after | open files before → after | threads before → after |");
    println!("|---|---|---|---|");
    for (((name, _), b), a) in procs.iter().zip(&usage_before).zip(&usage_after) {
        println!(
            "| {name} | {} → {} | {} → {} | {} → {} |",
            mib(b.rss_kib),
            mib(a.rss_kib),
            b.fds,
            a.fds,
            b.threads,
            a.threads
        );
    }
    println!(
        "\nAudio during the load: {} of {USERS} branches joined after it, received packets per branch {:?} → {:?}.",
        packets_after.len(),
        packets_before,
        packets_after
    );
    println!(
        "\nVerdict: {} (goal: ≥ 2,000 req/s, 0 errors, audio flowing throughout).",
        if ok { "met" } else { "**missed**" }
    );
    ok
}

/// One row of the soak's table.
struct Sample {
    at_s: u64,
    usage: Vec<ProcessSize>,
    sessions: usize,
    handles: usize,
    crew: usize,
}

async fn sample(stack: &Stack, started: Instant, crew: usize) -> Sample {
    let usage = processes(stack).iter().map(|(_, pid)| process_size(*pid)).collect();
    let (sessions, handles) = janus_handles(&stack.janus).await;
    Sample { at_s: started.elapsed().as_secs(), usage, sessions, handles, crew }
}

/// A crew member in a room: the token's Janus session, joined.
struct Crew {
    probe: Probe,
}

async fn join_crew(stack: &Stack, n: u64) -> Option<Crew> {
    let groups = ["lighting", "video", "stage-left", "stage-right"];
    let group = groups[n as usize % groups.len()];
    let (status, body) =
        stack.control.post_json("/token", json!({ "username": format!("Crew {n}"), "groupId": group })).await;
    if status != StatusCode::OK {
        return None; // the group may be mid-change; counted as a failed join
    }
    let (token, identity) = (body["token"].as_str()?, body["participantIdentity"].as_str()?);
    let probe = Probe::open(&stack.janus, token).await.ok()?;
    probe.join(group, identity, &format!("Crew {n}")).await.ok()?;
    Some(Crew { probe })
}

/// The n-th config change of the soak's cycle.
async fn change_config(control: &Control, n: u64) -> bool {
    let round = n / 5;
    let (status, _) = match n % 5 {
        0 => control.post_json("/admin/groups", json!({ "name": format!("Soak {round}") })).await,
        1 => {
            let names: serde_json::Map<String, Value> =
                (0..8).map(|k| (k.to_string(), json!(format!("In {k} r{round}")))).collect();
            let outputs: serde_json::Map<String, Value> =
                (0..8).map(|k| (k.to_string(), json!(format!("Out {k}")))).collect();
            control.put_json("/admin/audio/channels/names", json!({ "inputs": names, "outputs": outputs })).await
        }
        2 => {
            let user = json!({ "name": "Soak desk", "group": "x", "inputChannel": 2, "outputChannel": null });
            control.post_json("/admin/server-users", user).await
        }
        3 => control.delete("/admin/server-users/soak-desk").await,
        _ => control.delete(&format!("/admin/groups/soak-{round}")).await,
    };
    status.is_success()
}

async fn soak(o: &Options, stack: &Stack) -> bool {
    let started = Instant::now();
    let churn = Duration::from_secs(o.secs);
    let mut crew: VecDeque<Crew> = VecDeque::new();
    let (mut joins, mut failed_joins, mut changes, mut failed_changes) = (0u64, 0u64, 0u64, 0u64);
    let mut samples = Vec::new();
    let mut next_sample = Duration::from_secs(60); // the first after a minute of warm-up
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut second = 0u64;
    while started.elapsed() < churn {
        tick.tick().await;
        second += 1;
        match join_crew(stack, second).await {
            Some(member) => {
                joins += 1;
                crew.push_back(member);
            }
            None => failed_joins += 1,
        }
        if crew.len() > 5
            && let Some(oldest) = crew.pop_front()
        {
            let _ = oldest.probe.destroy().await;
        }
        if second.is_multiple_of(3) {
            failed_changes += u64::from(!change_config(&stack.control, changes).await);
            changes += 1;
        }
        if started.elapsed() >= next_sample {
            samples.push(sample(stack, started, crew.len()).await);
            next_sample += Duration::from_secs(o.sample_secs);
        }
    }
    // Back to the state of the first sample: the crew leaves, the cycle is finished (the
    // server user and the extra group removed), and everything has had time to settle.
    for member in crew.drain(..) {
        let _ = member.probe.destroy().await;
    }
    let _ = stack.control.delete("/admin/server-users/soak-desk").await;
    let groups = stack.control.group_ids().await;
    for id in groups.iter().filter(|id| id.starts_with("soak-")) {
        let _ = stack.control.delete(&format!("/admin/groups/{id}")).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await; // Janus's and control's own timers
    let last = sample(stack, started, 0).await;

    println!(
        "### Soak: {} s of churn, a crew join every second (at most 5 in rooms), a config change every 3 s\n",
        o.secs
    );
    println!(
        "Joins: {joins} ({failed_joins} failed); config changes: {changes} ({failed_changes} refused or failed).\n"
    );
    println!(
        "| t s | control RSS MiB / files / threads | bridged RSS MiB / files / threads | Janus RSS MiB / files / threads | Janus sessions / handles | crew in rooms |"
    );
    println!("|---|---|---|---|---|---|");
    let row = |s: &Sample| {
        let cells: Vec<String> =
            s.usage.iter().map(|u| format!("{} / {} / {}", mib(u.rss_kib), u.fds, u.threads)).collect();
        println!("| {} | {} | {} / {} | {} |", s.at_s, cells.join(" | "), s.sessions, s.handles, s.crew);
    };
    samples.iter().for_each(row);
    row(&last);
    // The reference: the state after the first minute, minus its crew (each crew member is one
    // Janus session with one handle; the processes' files do not depend on them beyond noise).
    let Some(first) = samples.first() else {
        println!("\nNo sample taken: run for more than 60 s.");
        return false;
    };
    let mut verdicts = Vec::new();
    for (k, (name, _)) in processes(stack).iter().enumerate() {
        let (a, b) = (first.usage[k], last.usage[k]);
        let rss_growth = b.rss_kib as f64 / a.rss_kib.max(1) as f64 - 1.0;
        let ok = b.fds <= a.fds + 2 && b.threads <= a.threads + 2 && rss_growth <= 0.20;
        verdicts.push((
            format!(
                "{name}: files {} → {}, threads {} → {}, RSS {:+.0} %",
                a.fds,
                b.fds,
                a.threads,
                b.threads,
                rss_growth * 100.0
            ),
            ok,
        ));
    }
    let handles_ok = last.sessions + first.crew <= first.sessions && last.handles + first.crew <= first.handles;
    verdicts.push((
        format!(
            "Janus: sessions {} → {}, handles {} → {} (crew at the first sample: {})",
            first.sessions, last.sessions, first.handles, last.handles, first.crew
        ),
        handles_ok,
    ));
    println!();
    for (text, ok) in &verdicts {
        println!("- {text}: {}", if *ok { "ok" } else { "**failed**" });
    }
    // bridged: back to its 8 users, all joined, and no join was ever refused for a participant
    // left behind in a room.
    let (_, stats) = stack.control.get_json("/admin/stats").await;
    let branches = stats["bridge"]["branches"].as_array().cloned().unwrap_or_default();
    let joined = branches.iter().filter(|b| b["state"] == "joined").count();
    let refused = stack.card_side().bridged.log().matches("already exists").count();
    verdicts.push((
        format!(
            "bridged: {joined} of {} branches joined at the end, {refused} joins refused as \"already exists\"",
            branches.len()
        ),
        joined == USERS && branches.len() == USERS && refused == 0,
    ));
    let ok = verdicts.iter().all(|(_, ok)| *ok) && failed_joins == 0 && failed_changes == 0;
    println!("\nVerdict: {}.", if ok { "no leak, no failure" } else { "**failed**" });
    ok
}
