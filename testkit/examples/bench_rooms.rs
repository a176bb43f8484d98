//! The capacity of partyline's own rooms (run by `bench/rooms`): a release build of
//! partyline-bridged with its rooms on loopback, on CPU 1 alone, and steps of four-line panels
//! (one PeerConnection each, four Opus m-lines, talk and listen on every line) joined through
//! `org.partyline.Rooms1` as control joins them. Prints a markdown section on stdout.
//!
//!   bench_rooms --bridged BIN [--steps 25,50,100] [--secs 10]
//!
//! Per step: every panel joins (the time from `Join` to media, p50 and p95), then for `--secs`
//! one talker per line (four at a time) sends a tone while everyone else listens, the talkers
//! handing over every 5 s (`SetTalking` off for one, on for the next); bridged's CPU over the
//! window (its rooms' thread and the whole process), the packets each listener's line got a
//! second (median and least: 50 is every frame), the frames missing from each line's sequence,
//! and a sample of listeners decoded for their level. The panels run in this process on CPU 0:
//! when they cannot keep up, the table says so (the load generator's CPU) and the rooms' cost per
//! user is still bridged's own.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use partyline_shared::rooms_bus::{RoomLine, RoomsProxy};
use partyline_testkit::bench::{CLOCK_TICKS, cpu_ticks, machine_line, mib, pin, process_size, quantile, thread_ticks};
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::webrtc_panel::{Panel, opus_packets};

const LINES: usize = 4;
const FRAME: Duration = Duration::from_millis(20);
const HANDOVER: Duration = Duration::from_secs(5);
const ROOMS_CPU: u32 = 1;
const PANELS_CPU: u32 = 0;
/// A panel not connected by then is left out of its step (and counted).
const CONNECT_WITHIN: Duration = Duration::from_secs(30);
/// Driven, not measured, between the joins and the window: the joins' work settles.
const WARM_UP: Duration = Duration::from_secs(1);
/// Listeners decoded in full, per step.
const SAMPLE: usize = 4;

#[derive(Debug)]
struct Options {
    bridged: PathBuf,
    steps: Vec<usize>,
    secs: u64,
}

fn options() -> Options {
    let mut o = Options { bridged: PathBuf::new(), steps: vec![25, 50, 100], secs: 10 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--bridged" => o.bridged = value.into(),
            "--steps" => o.steps = value.split(',').map(|n| n.parse().expect("--steps N,N,…")).collect(),
            "--secs" => o.secs = value.parse().expect("--secs N"),
            other => panic!("unknown argument {other} (--bridged BIN --steps N,N --secs N)"),
        }
    }
    assert!(o.bridged.exists(), "--bridged: the release binary of partyline-bridged");
    o
}

/// One step's figures.
#[derive(Debug)]
struct Step {
    users: usize,
    connected: usize,
    join_p50_ms: f64,
    join_p95_ms: f64,
    bridged_percent: f64,
    rooms_thread_percent: f64,
    panels_percent: f64,
    packets_median: f64,
    packets_least: f64,
    missing_per_mille: f64,
    sample_level_dbfs: f32,
    rss_kib: u64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let o = options();
    let machine = machine_line();
    let bus = Bus::start();
    let bridged = Bridged::start_binary(&o.bridged, &bus, &[("PARTYLINE_ROOMS_ADDRESS", "127.0.0.1:0")]);
    pin(bridged.pid(), ROOMS_CPU);
    pin(std::process::id(), PANELS_CPU);
    let connection = bus.connect().await;
    let rooms = RoomsProxy::new(&connection).await.expect("the rooms' proxy");
    let mut steps = Vec::new();
    for &users in &o.steps {
        eprintln!("bench_rooms: {users} four-line panels");
        steps.push(step(&rooms, bridged.pid(), users, o.secs).await);
    }
    print(&o, &machine, &steps);
    let log = bridged.log();
    let notable: Vec<&str> =
        log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("ended")).collect();
    eprintln!("bench_rooms: bridged's log, {} notable lines of {}:", notable.len(), log.lines().count());
    for line in notable.iter().rev().take(10).rev() {
        eprintln!("  {line}");
    }
}

fn four_lines() -> Vec<RoomLine> {
    (1..=LINES).map(|n| RoomLine { room: format!("line-{n}"), talk: true, listen: true }).collect()
}

async fn step(rooms: &RoomsProxy<'_>, pid: u32, users: usize, secs: u64) -> Step {
    // Everyone joins at once, as a crew arriving: the offers go out together (the rooms' thread
    // takes them between two ticks), then every panel is driven.
    let (mut panels, offers): (Vec<Panel>, Vec<String>) = (0..users).map(|_| Panel::offer("127.0.0.1", LINES)).unzip();
    let lines = four_lines();
    let asked = Instant::now();
    let answers = futures_util::future::join_all(offers.iter().map(|offer| rooms.join(offer, &lines))).await;
    let mut sessions = Vec::with_capacity(users);
    for (panel, answer) in panels.iter_mut().zip(answers) {
        let joined = answer.expect("the rooms take the offer");
        panel.accept(&joined.answer);
        sessions.push(joined.session);
    }
    let joins = vec![asked; users];
    let joined = connect_all(&mut panels, &joins);
    let connected = joined.iter().filter(|j| j.is_some()).count();
    let joined_ms: Vec<f64> = joined.iter().flatten().copied().collect();
    if connected < users {
        eprintln!("bench_rooms: {connected} of {users} panels connected within {CONNECT_WITHIN:?}");
    }
    // The step goes on with the panels that connected.
    let mut kept = joined.iter().map(Option::is_some);
    let (mut kept_panels, mut kept_sessions) = (Vec::new(), Vec::new());
    for (panel, session) in panels.into_iter().zip(sessions) {
        if kept.next() == Some(true) {
            kept_panels.push(panel);
            kept_sessions.push(session);
        } else {
            rooms.leave(session).await.expect("Leave");
        }
    }
    let (mut panels, sessions) = (kept_panels, kept_sessions);
    let users = panels.len();
    let talker = |line: usize, turn: usize| (line + LINES * turn) % users;
    for line in 0..LINES {
        let session = sessions[talker(line, 0)];
        rooms.set_talking(session, u32::try_from(line).expect("a line"), true).await.expect("talk");
    }
    drive_for(&mut panels, WARM_UP);
    let heard_before: Vec<usize> = panels.iter().map(|p| p.heard.len()).collect();
    let tone = opus_packets(440.0, 50);
    let (t0, cpu0, threads0, own0) = (Instant::now(), cpu_ticks(pid), thread_ticks(pid), cpu_ticks(std::process::id()));
    let mut turn = 0;
    let mut frame = 0;
    let mut next_frame = t0;
    while t0.elapsed() < Duration::from_secs(secs) {
        let due_turn = (t0.elapsed().as_secs_f64() / HANDOVER.as_secs_f64()) as usize;
        if due_turn != turn {
            for line in 0..LINES {
                let line_u32 = u32::try_from(line).expect("a line");
                rooms.set_talking(sessions[talker(line, turn)], line_u32, false).await.expect("talk off");
                rooms.set_talking(sessions[talker(line, due_turn)], line_u32, true).await.expect("talk on");
            }
            turn = due_turn;
        }
        for line in 0..LINES {
            panels[talker(line, turn)].send(line, &tone[frame % tone.len()]);
        }
        frame += 1;
        next_frame += FRAME;
        drive_for(&mut panels, next_frame.saturating_duration_since(Instant::now()));
    }
    let seconds = t0.elapsed().as_secs_f64();
    let (cpu1, threads1, own1) = (cpu_ticks(pid), thread_ticks(pid), cpu_ticks(std::process::id()));
    let percent = |ticks: u64| ticks as f64 / CLOCK_TICKS / seconds * 100.0;
    let rooms_thread = |t: &std::collections::BTreeMap<String, u64>| t.get("rooms").copied().unwrap_or(0);
    let (per_line, missing) = reception(&panels, &heard_before, seconds);
    let sample: Vec<f32> = panels.iter().take(SAMPLE).map(|p| p.level_dbfs(0, 25)).collect();
    let rss_kib = process_size(pid).rss_kib;
    for session in sessions {
        rooms.leave(session).await.expect("Leave");
    }
    let at = |values: &[f64], q: f64| quantile(values, q).unwrap_or(f64::NAN);
    Step {
        users: joined.len(),
        connected,
        join_p50_ms: at(&joined_ms, 0.5),
        join_p95_ms: at(&joined_ms, 0.95),
        bridged_percent: percent(cpu1 - cpu0),
        rooms_thread_percent: percent(rooms_thread(&threads1) - rooms_thread(&threads0)),
        panels_percent: percent(own1 - own0),
        packets_median: at(&per_line, 0.5),
        packets_least: at(&per_line, 0.0),
        missing_per_mille: missing,
        sample_level_dbfs: sample.iter().copied().fold(f32::INFINITY, f32::min),
        rss_kib,
    }
}

/// Drives every panel until all are connected, at most [`CONNECT_WITHIN`]; each one's time from
/// its `Join` to media, ms (`None`: not connected in time).
fn connect_all(panels: &mut [Panel], asked: &[Instant]) -> Vec<Option<f64>> {
    let mut joined: Vec<Option<f64>> = vec![None; panels.len()];
    let started = Instant::now();
    while joined.iter().any(Option::is_none) && started.elapsed() < CONNECT_WITHIN {
        for (index, panel) in panels.iter_mut().enumerate() {
            panel.drive(Duration::ZERO);
            if panel.connected && joined[index].is_none() {
                joined[index] = Some(asked[index].elapsed().as_secs_f64() * 1000.0);
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    joined
}

/// Drives every panel for `time` without sending.
fn drive_for(panels: &mut [Panel], time: Duration) {
    let until = Instant::now() + time;
    while Instant::now() < until {
        panels.iter_mut().for_each(|panel| panel.drive(Duration::ZERO));
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Packets a second of every listener's line during the window, and the frames missing from the
/// lines' sequences (per mille of those expected).
fn reception(panels: &[Panel], before: &[usize], seconds: f64) -> (Vec<f64>, f64) {
    let mut per_line = Vec::new();
    let (mut missing, mut expected) = (0u64, 0u64);
    for (panel, &start) in panels.iter().zip(before) {
        for line in 0..LINES {
            let seqs: Vec<u64> = panel.heard[start..].iter().filter(|h| h.line == line).map(|h| h.seq).collect();
            per_line.push(seqs.len() as f64 / seconds);
            if let (Some(first), Some(last)) = (seqs.first(), seqs.last()) {
                expected += last - first + 1;
                missing += (last - first + 1).saturating_sub(seqs.len() as u64);
            }
        }
    }
    (per_line, missing as f64 * 1000.0 / expected.max(1) as f64)
}

fn print(o: &Options, machine: &str, steps: &[Step]) {
    println!("### partyline's own rooms: four-line panels against bridged on one core\n");
    println!(
        "{machine} bridged (release) on CPU {ROOMS_CPU} alone, the panels (str0m, in the driver) on CPU \
         {PANELS_CPU}; {} s per step, one talker per line handing over every 5 s.\n",
        o.secs
    );
    println!(
        "| panels (connected) | lines | join → media p50 / p95 (ms) | bridged CPU (% of a core) | rooms thread | per panel | \
         panels per core | packets/s per line (median / least) | missing ‰ | sampled level (dBFS) | bridged RSS (MiB) | \
         driver CPU |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for s in steps {
        let per_panel = s.bridged_percent / s.connected.max(1) as f64;
        println!(
            "| {} ({}) | {} | {:.0} / {:.0} | {:.1} | {:.1} | {:.2} | {:.0} | {:.1} / {:.1} | {:.2} | {:.1} | {} | {:.0} |",
            s.users,
            s.connected,
            s.users * LINES,
            s.join_p50_ms,
            s.join_p95_ms,
            s.bridged_percent,
            s.rooms_thread_percent,
            per_panel,
            100.0 / per_panel.max(1e-6),
            s.packets_median,
            s.packets_least,
            s.missing_per_mille,
            s.sample_level_dbfs,
            mib(s.rss_kib),
            s.panels_percent,
        );
    }
    println!(
        "\nPanels per core: 100 % over bridged's CPU per panel at that step (its whole process; the rooms' \
         thread is most of it). A driver CPU near 100 % means the panels, not the rooms, set the pace."
    );
}
