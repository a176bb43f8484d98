//! The matrix benchmark (run by `bench/matrix`, inside `scripts/netns-run`): a
//! release build of partyline-bridged on the PipeWire test card (null sinks at a forced quantum
//! of 256 frames at 48 kHz: the same timing in every run), a private Janus on `pl0`, a private
//! bus, and a second bridged on a card of its own (`crew_in`/`crew_out`) as the crew member in
//! the room. bridged is driven over D-Bus (`Apply`), as control drives it. Prints a markdown
//! section; exits 1 when a goal is missed. The card's participants use `--transport` (`rtp`,
//! the default, or `webrtc`); the crew member always joins over WebRTC, as a browser does.
//!
//!   bench_matrix --bridged BIN [--secs S] [--changes N] [--cpu-secs S] [--trace-secs S]
//!                [--jitter-ms MS] [--transport rtp|webrtc] [--trace PATH] [--sound-log PATH]
//!
//! Latencies are measured on the card's ports themselves: the input's and the outputs' monitor
//! ports are linked into one recording ([`PipeWireServer::record_ports`]), so input and output
//! come from the same graph cycles, with no recorder offset. A tick is 20 ms of 1 kHz every
//! 300 ms; its latency is its onset on the output minus its onset on the input (1 ms windows).
//!
//! The share of each stage inside bridged comes from GStreamer's `latency` tracer on a second
//! bridged process (tracing costs CPU and writes from the streaming threads, so the latency and
//! CPU figures come from a bridged without it): the time a buffer takes from a source element
//! to a sink element, and each element's own.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use partyline_shared::bridge::{BranchState, BridgeProxy, Plan, PlanIfb, PlanUser, Status, Transport};
use partyline_shared::janus::prebuffer_packets;
use partyline_testkit::audio::{RATE, Recording, TICKS, Tone, channel, gst_launch, rms_db, tick_latencies};
use partyline_testkit::bench::{
    cpu_ticks, load_average, machine_line, machine_ticks, median, mib, process_size, quantile, thread_ticks,
};
use partyline_testkit::card::QUANTUM;
use partyline_testkit::dbus::{Bridged, Bus, wait_status};
use partyline_testkit::janus::Janus;
use partyline_testkit::pipewire::PipeWireServer;
use partyline_testkit::plan::{crew_member, group, user};
use partyline_testkit::{ICE_ADDRESS, ICE_IFACE, SoundServer, require_namespace};

const WAIT: Duration = Duration::from_secs(30);
/// From every participant joined to the first measurement: Janus's prebuffering fills and
/// bridged's queues trim what their start left (they trim once a second).
const SETTLE: Duration = Duration::from_secs(3);
/// The malloc setting of the packaged unit (packaging/systemd).
const MALLOC_ARENAS: (&str, &str) = ("MALLOC_ARENA_MAX", "2");
/// Opus frame of bridged's encoder and of Janus's mixer, ms.
const FRAME_MS: f64 = 20.0;
/// The element table leaves out elements whose median is under this (ms): the RTP plumbing.
const ELEMENT_LEAST_MS: f64 = 0.05;
/// The goals (BENCHMARKS.md, "The matrix", Targets).
const LOCAL_GOAL_MS: f64 = 20.0;
const OVER_FLOOR_GOAL_MS: f64 = 10.0;
const ONE_GROUP_CPU_GOAL: f64 = 5.0;
const EIGHT_GROUPS_RATIO_GOAL: f64 = 1.3;
/// How much later than a plain output of the same talker an IFB output may be (ms).
const IFB_OVER_OUTPUT_GOAL_MS: f64 = 1.0;
/// Samples of Janus's participant queues after the latency paths.
const QUEUE_SAMPLES: usize = 20;
/// Rounds of bridged in eight groups against the bare Opus work.
const CPU_ROUNDS: usize = 3;

/// One round of the eight-groups CPU comparison (percent of one core; the machine's CPUs
/// busy meanwhile, percent).
#[derive(Debug, Clone, Copy)]
struct CpuRound {
    eight_cpu: f64,
    eight_busy: f64,
    bare_cpu: f64,
    bare_busy: f64,
}

impl std::fmt::Display for CpuRound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} / {:.1} = {:.2} (machine {:.0} / {:.0} %)",
            self.eight_cpu,
            self.bare_cpu,
            self.eight_cpu / self.bare_cpu,
            self.eight_busy,
            self.bare_busy
        )
    }
}

#[derive(Debug)]
struct Options {
    bridged: PathBuf,
    secs: f64,
    changes: usize,
    /// How many times the crew member joins for the paths through Janus.
    joins: usize,
    cpu_secs: f64,
    trace_secs: f64,
    jitter_ms: u32,
    transport: Transport,
    trace: Option<PathBuf>,
    sound_log: Option<PathBuf>,
}

fn options() -> Options {
    let mut o = Options {
        bridged: PathBuf::new(),
        secs: 20.0,
        changes: 10,
        joins: 10,
        cpu_secs: 20.0,
        trace_secs: 10.0,
        jitter_ms: 20,
        transport: Transport::Rtp,
        trace: None,
        sound_log: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--bridged" => o.bridged = value.into(),
            "--secs" => o.secs = value.parse().expect("--secs S"),
            "--changes" => o.changes = value.parse().expect("--changes N"),
            "--joins" => o.joins = value.parse::<usize>().expect("--joins N").max(1),
            "--cpu-secs" => o.cpu_secs = value.parse().expect("--cpu-secs S"),
            "--trace-secs" => o.trace_secs = value.parse().expect("--trace-secs S"),
            "--jitter-ms" => o.jitter_ms = value.parse().expect("--jitter-ms MS"),
            "--transport" => {
                o.transport = match value.as_str() {
                    "rtp" => Transport::Rtp,
                    "webrtc" => Transport::Webrtc,
                    _ => panic!("--transport rtp|webrtc"),
                }
            }
            "--trace" => o.trace = Some(value.into()),
            "--sound-log" => o.sound_log = Some(value.into()),
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(o.bridged.exists(), "--bridged: the release binary");
    o
}

/// Median and p95 of a set of figures.
#[derive(Debug, Clone, Copy)]
struct Spread {
    median: f64,
    p95: f64,
    min: f64,
    max: f64,
    n: usize,
}

fn spread(values: &[f64]) -> Spread {
    let at = |q: f64| quantile(values, q).unwrap_or(f64::NAN);
    Spread { median: at(0.5), p95: at(0.95), min: at(0.0), max: at(1.0), n: values.len() }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median {:.1}, p95 {:.1} (min {:.1}, max {:.1}, n = {})",
            self.median, self.p95, self.min, self.max, self.n
        )
    }
}

/// CPU (percent of one core) of `pid` over `secs`, and the machine's busy share of all its CPUs
/// over the same time (percent of the whole machine), from /proc.
async fn cpu_percent(pid: u32, secs: f64) -> (f64, f64) {
    let (cpu, busy, _) = cpu_by_thread(pid, secs).await;
    (cpu, busy)
}

/// [`cpu_percent`], and the share of each kind of thread (percent of one core, largest first).
async fn cpu_by_thread(pid: u32, secs: f64) -> (f64, f64, Vec<(String, f64)>) {
    let (t0, c0, m0, threads0) = (Instant::now(), cpu_ticks(pid), machine_ticks(), thread_ticks(pid));
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    let (c1, m1, threads1) = (cpu_ticks(pid), machine_ticks(), thread_ticks(pid));
    let elapsed = t0.elapsed().as_secs_f64();
    let busy = (m1.0 - m0.0) as f64 / ((m1.1 - m0.1) as f64).max(1.0) * 100.0;
    let percent = |ticks: u64| ticks as f64 / 100.0 / elapsed * 100.0;
    let mut threads: Vec<(String, f64)> = threads1
        .into_iter()
        .map(|(kind, ticks)| (kind.clone(), percent(ticks.saturating_sub(threads0.get(&kind).copied().unwrap_or(0)))))
        .collect();
    threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    (percent(c1 - c0), busy, threads)
}

/// A thread breakdown of [`cpu_by_thread`] as `kind percent, …`, the kinds under 0.05 % left out.
fn by_kind(threads: &[(String, f64)]) -> String {
    let kinds: Vec<String> = threads
        .iter()
        .filter(|(_, percent)| *percent >= 0.05)
        .map(|(kind, percent)| format!("{kind} {percent:.1}"))
        .collect();
    kinds.join(", ")
}

/// Each AudioBridge participant's incoming queue as Janus's admin API reports it (packets
/// waiting to be mixed), `samples` times 50 ms apart: `display → (min, median, max)`. The queue
/// a path's packets wait in is most of what moved a Janus path's latency between runs.
async fn janus_queues(janus: &Janus, samples: usize) -> BTreeMap<String, (f64, f64, f64)> {
    let seen = janus.incoming_queues(samples, Duration::from_millis(50)).await;
    seen.into_iter()
        .map(|(display, q)| {
            let s = spread(&q.into_iter().map(|n| n as f64).collect::<Vec<_>>());
            (display, (s.min, s.median, s.max))
        })
        .collect()
}

/// The card's plan (`o.transport`, `o.jitter_ms`).
fn plan(janus: &Janus, o: &Options, rooms: &[&str], users: Vec<PlanUser>) -> Plan {
    let jitter_ms = o.jitter_ms;
    Plan {
        input_device: "card_in.monitor".into(),
        output_device: "card_out".into(),
        device_sample_rate: RATE,
        janus_url: janus.url().into(),
        transport: o.transport,
        ice_addresses: vec![ICE_ADDRESS.into()],
        jitter_buffer_ms: jitter_ms,
        groups: rooms.iter().map(|room| group(room)).collect(),
        users,
        aes67: Default::default(),
    }
}

fn receiving(status: &Status, groups: usize) -> bool {
    status.participants.len() == groups
        && status.participants.iter().all(|p| p.state == BranchState::Joined && p.packets_received > 50)
}

/// Applies `plan` and waits until each of its groups' participants is joined and receiving.
async fn apply(proxy: &BridgeProxy<'_>, plan: &Plan, what: &str) {
    let generation = proxy.apply(plan).await.unwrap_or_else(|e| panic!("Apply ({what}): {e:?}"));
    wait_status(proxy, WAIT, what, |s| s.generation == generation && receiving(s, plan.groups.len())).await;
}

fn start_bridged(binary: &std::path::Path, bus: &Bus, card: &PipeWireServer, extra: &[(&str, &str)]) -> Bridged {
    let mut env = vec![("RUST_LOG", "warn"), MALLOC_ARENAS];
    env.extend_from_slice(extra);
    Bridged::start_binary_on_card(binary, bus, card, &env)
}

/// The crew member in room `room`: another bridged on `crew_in`/`crew_out` (input 0, output 0).
struct Crew {
    _bridged: Bridged,
    _bus: Bus,
}

impl Crew {
    async fn join(o: &Options, card: &PipeWireServer, janus: &Janus, room: &str) -> Crew {
        let bus = Bus::start();
        let bridged = start_bridged(&o.bridged, &bus, card, &[]);
        let proxy = bus.bridge().await;
        let plan = crew_member(room, plan(janus, o, &[], vec![]));
        apply(&proxy, &plan, "the crew member joined").await;
        Crew { _bridged: bridged, _bus: bus }
    }
}

/// Ticks on channel `channel` of `device` for `secs` while `recording` runs; returns the
/// recording (every port it holds), once the last tick had 0.5 s to come through.
async fn ticks_into(card: &PipeWireServer, recording: Recording, device: &str, channel: usize, secs: f64) -> Vec<f32> {
    recording.wait_until(0.5).await;
    let ticks = Tone::source(card, device, &[channel], TICKS);
    tokio::time::sleep(Duration::from_secs_f64(secs)).await; // the measurement's length
    drop(ticks);
    let until = recording.seconds() + 0.5;
    recording.finish_after(until).await
}

/// What bridged and the sound server say, when a measurement heard nothing.
async fn diagnose(card: &PipeWireServer, proxy: &BridgeProxy<'_>, bridged: &Bridged) {
    eprintln!("bench_matrix: Status: {:#?}", proxy.status().await);
    for what in ["sink-inputs", "source-outputs"] {
        let output = card.pactl(&["list", "short", what]);
        eprintln!("bench_matrix: pactl list short {what}:\n{}", String::from_utf8_lossy(&output.stdout));
    }
    eprintln!("bench_matrix: bridged's log:\n{}", bridged.log());
}

/// The latencies (ms) of the ticks heard, and how many of how many were.
fn heard(latencies: &[Option<f64>]) -> (Vec<f64>, String) {
    let found: Vec<f64> = latencies.iter().flatten().copied().collect();
    let steps = found.windows(2).filter(|w| (w[1] - w[0]).abs() >= 3.0).count();
    let what = format!(
        "{} of {} ticks heard, {steps} step(s) of ≥ 3 ms between consecutive ticks",
        found.len(),
        latencies.len()
    );
    (found, what)
}

/// [`heard`] over several recordings (the crew member's joins): the latencies of all, and
/// the counts summed (steps only within a recording).
fn heard_over(recordings: &[Vec<Option<f64>>]) -> (Vec<f64>, String) {
    let (mut found, mut ticks, mut steps) = (Vec::new(), 0, 0);
    for latencies in recordings {
        let (heard, _) = heard(latencies);
        steps += heard.windows(2).filter(|w| (w[1] - w[0]).abs() >= 3.0).count();
        ticks += latencies.len();
        found.extend(heard);
    }
    let what = format!("{} of {ticks} ticks heard, {steps} step(s) of ≥ 3 ms between consecutive ticks", found.len());
    (found, what)
}

/// From the sample `from` on, the first 1 ms window of channel 0 of `samples` (8 channels) over
/// -30 dBFS, in seconds.
fn onset_after(samples: &[f32], from: f64) -> Option<f64> {
    let ch = channel(samples, 0);
    let window = (RATE / 1000) as usize;
    let first = (from * f64::from(RATE)) as usize;
    ch.get(first..)?
        .chunks_exact(window)
        .position(|w| rms_db(w) > -30.0)
        .map(|i| (first + i * window) as f64 / f64::from(RATE))
}

/// Stage figures from the `latency` tracer's records in a GStreamer debug log: per source →
/// sink pair ("pipeline" records) and per element (numbers stripped from unnamed elements).
fn trace_stages(log: &str) -> (BTreeMap<String, Vec<f64>>, BTreeMap<String, Vec<f64>>) {
    let field = |line: &str, key: &str| -> Option<String> {
        let start = line.find(key)? + key.len();
        let rest = &line[start..];
        Some(rest[..rest.find([',', ';']).unwrap_or(rest.len())].trim().to_owned())
    };
    let bare = |name: String| name.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned();
    let (mut paths, mut elements) = (BTreeMap::<String, Vec<f64>>::new(), BTreeMap::<String, Vec<f64>>::new());
    for line in log.lines() {
        let Some(ns) = field(line, "time=(guint64)").and_then(|t| t.parse::<f64>().ok()) else { continue };
        let ms = ns / 1e6;
        if line.contains(" element-latency,") {
            if let Some(element) = field(line, " element=(string)") {
                elements.entry(bare(element)).or_default().push(ms);
            }
        } else if line.contains(" latency,")
            && let (Some(src), Some(sink)) = (field(line, "src-element=(string)"), field(line, "sink-element=(string)"))
        {
            paths.entry(format!("{} → {}", bare(src), bare(sink))).or_default().push(ms);
        }
    }
    (paths, elements)
}

/// One table row per stage whose median reaches `least` ms.
fn stage_rows(stages: &BTreeMap<String, Vec<f64>>, least: f64) -> String {
    stages
        .iter()
        .map(|(name, values)| (name, spread(values)))
        .filter(|(_, s)| s.median >= least)
        .map(|(name, s)| format!("| {name} | {:.3} | {:.3} | {:.3} | {} |\n", s.median, s.p95, s.max, s.n))
        .collect()
}

/// The first UDP port of the bare decoders (the benchmark's namespace is its own).
const BARE_PORT: usize = 47_000;

/// The bare Opus work of `groups` participants, measured in a process of its own: per group, a
/// 440 Hz tone at the card's rate through bridged's encoder settings in its 20 ms frames,
/// payloaded, and the decoding of what Janus sends each of bridged's participants (RTP over
/// loopback, depayloaded and decoded). What Janus sends is made by [`janus_like_mixes`], in
/// another process: AudioBridge encodes each participant's mix in Opus's VOIP mode, which
/// decodes at about twice the cost of bridged's own `restricted-lowdelay` frames, so decoding
/// bridged's own stream would not be the same work.
fn bare_opus(card: &PipeWireServer, groups: usize, bitrate_kbps: u32) -> std::process::Child {
    let encoders = format!(
        "audiotestsrc is-live=true freq=440 samplesperbuffer={} ! audio/x-raw,format=S16LE,rate={RATE},channels=1 \
         ! opusenc bitrate={} frame-size=20 audio-type=restricted-lowdelay ! rtpopuspay ! fakesink sync=false",
        RATE / 50,
        bitrate_kbps * 1000
    );
    let decoder = |port: usize| {
        format!(
            "udpsrc address=127.0.0.1 port={port} caps=application/x-rtp,media=audio,encoding-name=OPUS,clock-rate=48000,payload=111 \
             ! rtpopusdepay ! opusdec plc=true ! fakesink sync=false"
        )
    };
    let branches: Vec<String> = (0..groups).flat_map(|k| [encoders.clone(), decoder(BARE_PORT + k)]).collect();
    gst_launch(card, &branches.join(" "))
}

/// What Janus sends each card participant in the eight-group case (rooms without crew: the
/// room's silence, AudioBridge's encoder: VOIP mode at the participant's bitrate, 20 ms
/// frames), one stream per group to [`bare_opus`]'s decoders.
fn janus_like_mixes(card: &PipeWireServer, groups: usize, bitrate_kbps: u32) -> std::process::Child {
    let stream = |port: usize| {
        format!(
            "audiotestsrc is-live=true wave=silence samplesperbuffer={} ! audio/x-raw,format=S16LE,rate={RATE},channels=1 \
             ! opusenc bitrate={} frame-size=20 audio-type=voice ! rtpopuspay pt=111 ! udpsink host=127.0.0.1 port={port} sync=false",
            RATE / 50,
            bitrate_kbps * 1000
        )
    };
    let streams: Vec<String> = (0..groups).map(|k| stream(BARE_PORT + k)).collect();
    gst_launch(card, &streams.join(" "))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let o = options();
    require_namespace();
    let started_load = machine_line();
    let card = PipeWireServer::start();
    card.force_quantum(QUANTUM);
    for sink in ["card_in", "card_out", "crew_in", "crew_out"] {
        card.add_card(sink, RATE);
    }
    let groups: Vec<String> = (0..8).map(|k| format!("g{k}")).collect();
    let mut rooms: Vec<&str> = groups.iter().map(String::as_str).collect();
    rooms.push("x");
    let prebuffer = prebuffer_packets(o.jitter_ms);
    let janus = Janus::builder().ice_iface(ICE_IFACE).start();
    for room in &rooms {
        janus.add_token(&format!("tok-{room}")).await;
        janus.add_token(&format!("crew-{room}")).await;
        janus.create_room(room, prebuffer).await;
    }
    let bus = Bus::start();
    let bridged = start_bridged(&o.bridged, &bus, &card, &[]);
    let proxy = bus.bridge().await;
    let mut missed = Vec::new();

    // 1. Latencies: A (input 0, no output) and B (input 1, output 1) in group x, the crew
    //    member in room x; P (input 3, output 3) has an IFB interrupted by x (its program,
    //    input 2, silent): a talker on x reaches P's earpiece.
    let (a, b) = (user("a", "x", 0, None), user("b", "x", 1, Some(1)));
    let ifb = PlanIfb {
        program_channel: Some(2),
        program_room: String::new(),
        interrupt_room: "x".into(),
        dim_db: Some(-20),
    };
    let presenter = PlanUser { ifb: Some(ifb), ..user("p", "x", 3, Some(3)) };
    let base = plan(&janus, &o, &["x"], vec![a.clone(), b.clone(), presenter.clone()]);
    apply(&proxy, &base, "x's participant joined").await;
    // The paths through Janus depend on where the crew member's join falls against Janus's
    // tick (its packets wait up to a tick more or less, and its start leaves Janus's queue for
    // it 0–3 packets deep): the crew member joins JOINS times, each join measured for an equal
    // share of SECS, and the figures are over all of them. The floor counts the wait for Janus's
    // tick at its average, so the figure must be over many phases: five joins' medians of the
    // crew → card path read 67–84 ms between runs, the joins themselves 56–90.
    let secs = o.secs / o.joins as f64;
    let (mut local, mut to_crew, mut from_crew) = (Vec::new(), Vec::new(), Vec::new());
    let (mut local_ifb, mut from_crew_ifb) = (Vec::new(), Vec::new());
    let mut joins = Vec::new();
    let mut queues = BTreeMap::new();
    for join in 1..=o.joins {
        let crew = Crew::join(&o, &card, &janus, "x").await;
        tokio::time::sleep(SETTLE).await;
        eprintln!(
            "bench_matrix: join {join} of {}: ticks card_in 0 → card_out 1 (local) and crew_out 0 (through Janus), {secs:.0} s",
            o.joins
        );
        let recording = card.record_ports(&[("card_in", 0), ("card_out", 1), ("crew_out", 0), ("card_out", 3)]);
        let samples = ticks_into(&card, recording, "card_in", 0, secs).await;
        let local_join = tick_latencies(&channel(&samples, 0), &channel(&samples, 1));
        let to_crew_join = tick_latencies(&channel(&samples, 0), &channel(&samples, 2));
        local_ifb.push(tick_latencies(&channel(&samples, 0), &channel(&samples, 3)));
        eprintln!(
            "bench_matrix: join {join} of {}: ticks crew_in 0 → card_out 1 (through Janus), {secs:.0} s",
            o.joins
        );
        let recording = card.record_ports(&[("crew_in", 0), ("card_out", 1), ("card_out", 3)]);
        let samples = ticks_into(&card, recording, "crew_in", 0, secs).await;
        let from_crew_join = tick_latencies(&channel(&samples, 0), &channel(&samples, 1));
        from_crew_ifb.push(tick_latencies(&channel(&samples, 0), &channel(&samples, 2)));
        queues = janus_queues(&janus, QUEUE_SAMPLES).await;
        let median_of = |latencies: &[Option<f64>]| {
            median(&latencies.iter().flatten().copied().collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let crew_queue = queues.get("crew member").copied();
        joins.push((median_of(&to_crew_join), median_of(&from_crew_join), crew_queue));
        local.push(local_join);
        to_crew.push(to_crew_join);
        from_crew.push(from_crew_join);
        drop(crew);
    }
    let ((local, local_note), (to_crew, to_crew_note), (from_crew, from_crew_note)) =
        (heard_over(&local), heard_over(&to_crew), heard_over(&from_crew));
    let ((local_ifb, local_ifb_note), (from_crew_ifb, from_crew_ifb_note)) =
        (heard_over(&local_ifb), heard_over(&from_crew_ifb));
    if local.is_empty() || to_crew.is_empty() || from_crew.is_empty() {
        eprintln!("bench_matrix: a path heard no tick");
        diagnose(&card, &proxy, &bridged).await;
    }
    let latency_load = load_average();

    // 2. Config change → audio on the new user's output: a steady tone on A's input, C (input
    //    2, output 2) added to x; from just before Apply is sent to the tone's first 1 ms on
    //    output 2. The recording's clock is the card's; "just before Apply" is how much it had
    //    written then, which trails the card by parecord's latency (10 ms): the figure is at
    //    most that much too long.
    eprintln!("bench_matrix: {} config changes", o.changes);
    let tone = Tone::play(&card, "card_in", 0, 1000);
    let with_c = plan(&janus, &o, &["x"], vec![a.clone(), b.clone(), presenter, user("c", "x", 2, Some(2))]);
    let recording = card.record_ports(&[("card_out", 2)]);
    recording.wait_until(0.5).await;
    let mut change_ms = Vec::new();
    let mut answer_ms = Vec::new();
    let mut change_missed = 0;
    for _ in 0..o.changes {
        let at = recording.seconds();
        let sent = Instant::now();
        proxy.apply(&with_c).await.expect("Apply (C added)");
        answer_ms.push(sent.elapsed().as_secs_f64() * 1000.0);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let samples = recording.samples();
            if let Some(onset) = onset_after(&samples, at) {
                change_ms.push((onset - at) * 1000.0);
                break;
            }
            if Instant::now() > deadline {
                let tail = channel(&samples[samples.len().saturating_sub(RATE as usize * 8)..], 0);
                eprintln!(
                    "bench_matrix: no tone on C's output 5 s after Apply (sent at {at:.3} s of the recording, now {:.3} s; its last second {:.1} dBFS)",
                    recording.seconds(),
                    rms_db(&tail),
                );
                diagnose(&card, &proxy, &bridged).await;
                change_missed += 1;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        proxy.apply(&base).await.expect("Apply (C removed)");
        // Until C's output has been silent for 100 ms.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let samples = recording.samples();
            let tail = &samples[samples.len().saturating_sub(RATE as usize / 10 * 8)..];
            if rms_db(&channel(tail, 0)) < -60.0 {
                break;
            }
            assert!(Instant::now() < deadline, "C's output still plays 5 s after C was removed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    drop(recording);
    drop(tone);

    // 3. CPU and RSS: eight users (a tone on every input) in one group, then in eight groups;
    //    then the bare Opus work of eight participants alone.
    let tones = Tone::source(&card, "card_in", &[0, 1, 2, 3, 4, 5, 6, 7], "audiotestsrc freq=440 is-live=true");
    let pid = bridged.pid();
    let one_group = plan(&janus, &o, &["x"], (0..8u8).map(|k| user(&format!("u{k}"), "x", k, Some(k))).collect());
    apply(&proxy, &one_group, "eight users in one group").await;
    tokio::time::sleep(SETTLE).await;
    // CPU_ROUNDS windows, the verdict on their median: one window read 4.6–5.2 % for the same
    // binary over five runs, the machine's other work coming and going.
    let mut one_windows = Vec::new();
    for round in 1..=CPU_ROUNDS {
        eprintln!("bench_matrix: CPU, 8 users in one group, {:.0} s (window {round} of {CPU_ROUNDS})", o.cpu_secs);
        one_windows.push(cpu_by_thread(pid, o.cpu_secs).await);
    }
    let one_cpu = spread(&one_windows.iter().map(|(cpu, _, _)| *cpu).collect::<Vec<_>>()).median;
    let one_by_thread = one_windows.last().map(|(_, _, by_thread)| by_thread.clone()).unwrap_or_default();
    let one_windows: Vec<String> =
        one_windows.iter().map(|(cpu, busy, _)| format!("{cpu:.1} (machine {busy:.0} %)")).collect();
    let (one_rss, one_threads) = {
        let size = process_size(pid);
        (size.rss_kib, size.threads)
    };
    let group_names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let eight_groups = plan(
        &janus,
        &o,
        &group_names,
        (0..8u8).map(|k| user(&format!("u{k}"), group_names[usize::from(k)], k, Some(k))).collect(),
    );
    // Bridged in eight groups and the bare work alternate, CPU_ROUNDS times: the machine's
    // speed drifts by more than the difference being measured (the bare alone read 6.3–9.7 %
    // in four runs), and each round's ratio compares two neighbouring measurements.
    let mut rounds = Vec::new();
    let (mut eight_by_thread, mut eight_rss, mut eight_threads, mut hwm) = (Vec::new(), 0, 0, 0);
    for round in 1..=CPU_ROUNDS {
        apply(&proxy, &eight_groups, "eight users in eight groups").await;
        tokio::time::sleep(SETTLE).await;
        eprintln!("bench_matrix: CPU, 8 users in 8 groups, {:.0} s (round {round} of {CPU_ROUNDS})", o.cpu_secs);
        let (eight_cpu, eight_busy, by_thread) = cpu_by_thread(pid, o.cpu_secs).await;
        (eight_by_thread, eight_rss, eight_threads, hwm) = {
            let size = process_size(pid);
            (by_thread, size.rss_kib, size.threads, size.peak_rss_kib)
        };
        apply(&proxy, &plan(&janus, &o, &["x"], vec![a.clone(), b.clone()]), "back to A, B").await;
        let mut bare = bare_opus(&card, 8, 64);
        let mut mixes = janus_like_mixes(&card, 8, 64);
        tokio::time::sleep(SETTLE).await;
        eprintln!(
            "bench_matrix: CPU, bare Opus work of 8 participants, {:.0} s (round {round} of {CPU_ROUNDS})",
            o.cpu_secs
        );
        let (bare_cpu, bare_busy) = cpu_percent(bare.id(), o.cpu_secs).await;
        for process in [&mut bare, &mut mixes] {
            let _ = process.kill();
            let _ = process.wait();
        }
        rounds.push(CpuRound { eight_cpu, eight_busy, bare_cpu, bare_busy });
    }
    drop(tones);
    drop(bridged);

    // The same card through GStreamer's elements alone, for comparison: one bare gst-launch loop
    // from input 0 to output 0 with no queue or mix between, once through pipewire-pulse
    // (pulsesrc → pulsesink with bridged's PulseAudio sizes: capture 10/5 ms, playback 20/5 ms,
    // unsynced) and once through GStreamer's PipeWire elements (pipewiresrc → pipewiresink at
    // bridged's node latency; bridged itself opens this card with streams of its own:
    // bridged/src/pipewire_card.rs). Channel 0 is front-left in every order, so neither loop
    // needs a channel reorder.
    let card_caps = format!("audio/x-raw,format=F32LE,rate={RATE},channels=8,channel-mask=(bitmask)0xc3f");
    let node_latency = format!("node.latency=(string){QUANTUM}/{RATE}");
    let loops = [
        (
            "pulsesrc → pulsesink",
            format!(
                "pulsesrc device=card_in.monitor buffer-time=10000 latency-time=5000 ! {card_caps} \
                 ! pulsesink device=card_out buffer-time=20000 latency-time=5000 sync=false"
            ),
        ),
        (
            "pipewiresrc → pipewiresink",
            format!(
                "pipewiresrc target-object=card_in always-copy=true stream-properties=props,stream.capture.sink=(string)true,{node_latency} \
                 ! {card_caps} ! pipewiresink target-object=card_out sync=false stream-properties=props,{node_latency}"
            ),
        ),
    ];
    let mut server_loops = Vec::new();
    for (name, pipeline) in loops {
        eprintln!("bench_matrix: ticks through a bare {name} loop card_in 0 → card_out 0, {:.0} s", o.secs);
        let recording = card.record_ports(&[("card_in", 0), ("card_out", 0)]);
        let mut bare_loop = gst_launch(&card, &pipeline);
        let samples = ticks_into(&card, recording, "card_in", 0, o.secs).await;
        let _ = bare_loop.kill();
        let _ = bare_loop.wait();
        let (latencies, note) = heard(&tick_latencies(&channel(&samples, 0), &channel(&samples, 1)));
        server_loops.push((name, latencies, note));
    }

    // 4. The tracer's stages, on a bridged of its own: A → B locally and the crew member in the
    //    room, ticks both ways.
    let trace_dir = tempfile::tempdir().expect("dir");
    let trace_path = o.trace.clone().unwrap_or_else(|| trace_dir.path().join("trace.log"));
    let trace_file = trace_path.to_str().expect("a UTF-8 path");
    let traced = start_bridged(
        &o.bridged,
        &bus,
        &card,
        &[
            ("GST_TRACERS", "latency(flags=pipeline+element)"),
            ("GST_DEBUG", "GST_TRACER:7"),
            ("GST_DEBUG_FILE", trace_file),
            ("GST_DEBUG_NO_COLOR", "1"),
        ],
    );
    let proxy = bus.bridge().await;
    apply(&proxy, &base, "x's participant joined (traced)").await;
    let crew = Crew::join(&o, &card, &janus, "x").await;
    tokio::time::sleep(SETTLE).await;
    eprintln!("bench_matrix: tracing {:.0} s", o.trace_secs);
    let ticks = Tone::source(&card, "card_in", &[0], TICKS);
    let crew_ticks = Tone::source(&card, "crew_in", &[0], TICKS);
    tokio::time::sleep(Duration::from_secs_f64(o.trace_secs)).await; // the trace's length
    drop((ticks, crew_ticks, crew, traced));
    let (paths, elements) = trace_stages(&std::fs::read_to_string(&trace_path).unwrap_or_default());
    if let Some(path) = &o.sound_log {
        std::fs::write(path, card.logs()).expect("--sound-log");
    }

    // The floor of the paths through Janus: the encoder waits for a whole frame (its first
    // sample 20 ms), Janus holds `prebuffer` frames of each participant before mixing, and mixes
    // on its 20 ms tick (a frame waits 0–20 ms for it, 10 on average).
    let floor = FRAME_MS + f64::from(prebuffer) * FRAME_MS + FRAME_MS / 2.0;
    let (local_s, to_crew_s, from_crew_s) = (spread(&local), spread(&to_crew), spread(&from_crew));
    let mut verdict = |what: &str, met: bool| {
        if met {
            "met".to_owned()
        } else {
            missed.push(what.to_owned());
            "**missed**".to_owned()
        }
    };
    let local_verdict = verdict("card → card", local_s.median <= LOCAL_GOAL_MS && local_s.p95 <= LOCAL_GOAL_MS);
    let to_crew_verdict = verdict("card → crew", to_crew_s.median - floor <= OVER_FLOOR_GOAL_MS);
    let from_crew_verdict = verdict("crew → card", from_crew_s.median - floor <= OVER_FLOOR_GOAL_MS);
    // An IFB output is the same block of the same matrix as any other output: it adds nothing.
    let (local_ifb_s, from_crew_ifb_s) = (spread(&local_ifb), spread(&from_crew_ifb));
    let local_ifb_verdict =
        verdict("card → IFB", local_ifb_s.median <= local_s.median + IFB_OVER_OUTPUT_GOAL_MS && !local_ifb.is_empty());
    let from_crew_ifb_verdict = verdict(
        "crew → IFB",
        from_crew_ifb_s.median <= from_crew_s.median + IFB_OVER_OUTPUT_GOAL_MS && !from_crew_ifb.is_empty(),
    );
    let one_verdict = verdict("one group CPU", one_cpu <= ONE_GROUP_CPU_GOAL);
    let ratios: Vec<f64> = rounds.iter().map(|r| r.eight_cpu / r.bare_cpu).collect();
    let ratio = spread(&ratios).median;
    let eight_verdict = verdict("eight groups CPU", ratio <= EIGHT_GROUPS_RATIO_GOAL);

    println!("## Matrix (`bench/matrix`)\n");
    println!("{started_load}");
    println!(
        "Test card: PipeWire null sinks, quantum {QUANTUM} at {RATE} Hz ({:.2} ms); the card's participants over {:?} (the crew member over WebRTC, its webrtcbin latency {} ms); bridge.jitterBufferMs {} (Janus prebuffering {prebuffer} frames); Opus 64 kb/s, 20 ms frames.\n",
        f64::from(QUANTUM) * 1000.0 / f64::from(RATE),
        o.transport,
        o.jitter_ms,
        o.jitter_ms
    );
    println!("| path | figure (ms) | goal | verdict |\n|---|---|---|---|");
    println!("| card → card, same group (local) | {local_s} | median and p95 ≤ {LOCAL_GOAL_MS} | {local_verdict} |");
    println!(
        "| card → Janus → crew peer | {to_crew_s} | median ≤ floor {floor:.0} + {OVER_FLOOR_GOAL_MS} | {to_crew_verdict} ({:+.1} over the floor) |",
        to_crew_s.median - floor
    );
    println!(
        "| crew peer → Janus → card | {from_crew_s} | median ≤ floor {floor:.0} + {OVER_FLOOR_GOAL_MS} | {from_crew_verdict} ({:+.1} over the floor) |",
        from_crew_s.median - floor
    );
    println!(
        "| card talker (a card input of the interrupt group) → IFB output | {local_ifb_s} | median ≤ card → card's + {IFB_OVER_OUTPUT_GOAL_MS} | {local_ifb_verdict} |"
    );
    println!(
        "| crew peer talking on the interrupt group → Janus → IFB output | {from_crew_ifb_s} | median ≤ crew → card's + {IFB_OVER_OUTPUT_GOAL_MS} | {from_crew_ifb_verdict} |"
    );
    for (name, latencies, _) in &server_loops {
        println!(
            "| the same card through a bare {name} loop with bridged's buffer sizes (GStreamer's elements alone, for comparison) | {} | — | — |",
            spread(latencies)
        );
    }
    println!(
        "| config change (user added to a joined group) → audio on its output | {}; {change_missed} of {} never heard within 5 s | — | — |",
        spread(&change_ms),
        o.changes
    );
    println!();
    let loop_notes: Vec<String> =
        server_loops.iter().map(|(name, _, note)| format!("bare {name} loop {note}")).collect();
    println!(
        "- ticks: local {local_note}; to the crew {to_crew_note}; from the crew {from_crew_note}; card → IFB {local_ifb_note}; crew → IFB {from_crew_ifb_note}; {}; load average after the paths of bridged: {latency_load}",
        loop_notes.join("; ")
    );
    println!(
        "- floor through Janus: {FRAME_MS:.0} ms (the encoder's frame) + {prebuffer} × {FRAME_MS:.0} ms (Janus's prebuffering) + {:.0} ms (half of Janus's 20 ms tick, on average) = {floor:.0} ms; the crew peer's own receive side (its jitter buffer, queues and card) is on top of it, as a browser's would be",
        FRAME_MS / 2.0
    );
    let per_join: Vec<String> = joins
        .iter()
        .map(|(to, from, queue)| match queue {
            Some((min, median, max)) => format!("{to:.0} / {from:.0} (queue {median:.0}, {min:.0}–{max:.0})"),
            None => format!("{to:.0} / {from:.0}"),
        })
        .collect();
    println!(
        "- by join of the crew member ({} joins, {:.0} s each way), card → crew / crew → card median ms (the crew member's Janus queue, packets): {}",
        o.joins,
        o.secs / o.joins as f64,
        per_join.join("; ")
    );
    let queues: Vec<String> =
        queues.iter().map(|(who, (min, median, max))| format!("{who} {median:.0} ({min:.0}–{max:.0})")).collect();
    println!(
        "- Janus's incoming queue per participant of x after the last join's paths (`queue-in` of `handle_info`, packets, median (min–max) of {QUEUE_SAMPLES} samples): {}",
        if queues.is_empty() { "not reported".to_owned() } else { queues.join(", ") }
    );
    println!("- Apply answered in {} ms", spread(&answer_ms));
    println!(
        "- CPU of bridged (percent of one core, over {:.0} s; the machine's CPUs busy meanwhile): 8 users in one group {one_cpu:.1} % (median of {CPU_ROUNDS} windows: {}; goal ≤ {ONE_GROUP_CPU_GOAL} %: {one_verdict}); \
         in 8 groups against the bare Opus work of 8 participants (gst-launch: 8 × opusenc of a tone, 8 × opusdec of VOIP-mode streams as Janus sends), {CPU_ROUNDS} rounds, each bridged then bare: {}; median ratio {ratio:.2} (goal ≤ {EIGHT_GROUPS_RATIO_GOAL}: {eight_verdict})",
        o.cpu_secs,
        one_windows.join(", "),
        rounds.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    );
    println!(
        "- CPU of bridged by kind of thread (percent of one core): one group (its last window) {}; 8 groups (the last round) {}",
        by_kind(&one_by_thread),
        by_kind(&eight_by_thread)
    );
    println!(
        "- RSS of bridged: one group {} MiB ({one_threads} threads), eight groups {} MiB ({eight_threads} threads), peak {} MiB",
        mib(one_rss),
        mib(eight_rss),
        mib(hwm)
    );
    println!(
        "\nbridged's own share per stage (GStreamer `latency` tracer, {:.0} s, one group with the crew member in its room; ms):\n",
        o.trace_secs
    );
    if paths.is_empty() {
        // bridged's card is PipeWire streams of its own and its codec chains are pushed by its
        // own threads: no GStreamer source or sink, so no path records, only elements.
        println!("No GStreamer source → sink path in bridged: the stages are its elements.");
    } else {
        println!("| source → sink | median | p95 | max | n |\n|---|---|---|---|---|");
        print!("{}", stage_rows(&paths, 0.0));
    }
    println!("\nEach element's own time (elements with a median under {ELEMENT_LEAST_MS} ms left out; ms):\n");
    println!("| element | median | p95 | max | n |\n|---|---|---|---|---|");
    print!("{}", stage_rows(&elements, ELEMENT_LEAST_MS));
    if missed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("bench_matrix: goals missed: {}", missed.join(", "));
        ExitCode::FAILURE
    }
}
