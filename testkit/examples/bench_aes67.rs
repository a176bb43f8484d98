//! AES67 as the card against the PipeWire test card (`bench/aes67`, BENCHMARKS.md "AES67"): a
//! release bridged driven over D-Bus (`Apply`, as control drives it; no control, no Janus: the
//! groups' participants retry meanwhile and the local matrix runs without them), 8 server audio
//! users in one group, user k on input k and output k, so output 2 plays input 1 among the
//! others (card → card through the matrix).
//!
//! 1. AES67 (`testkit::aes67`'s network: a `ptp4l` grandmaster, the tests' console): the console
//!    sends bursts of tone on its channel 1, each starting on a whole 500 ms of PTP time, and
//!    times each onset that comes back on its channel 2: console → partyline → console. Then
//!    bridged's CPU for CPU_SECS, 8 AES67 channels each way.
//! 2. PipeWire (`testkit::card`'s test card, as `bench/matrix`): ticks from input 1 to output 2
//!    (both ports in one recording), then bridged's CPU for CPU_SECS, 8 channels each way.
//! 3. Each way between the card and a crew member, on each card: release control, Janus and
//!    bridged, server user Card on Stage (input 1, output 2), and a crew member of
//!    partyline-crew's, in this process, that listens for SECS, then talks for SECS ([`RUNS`]
//!    runs, each on a fresh stack). Every burst is timed on `CLOCK_REALTIME`, which is PTP time here: on the
//!    card's ports (the console's PTP times; the PipeWire card's ports by [`StampedRecording`])
//!    and at the crew member's ear and mouth (`partyline_crew::media`).
//!
//!   bench_aes67 [--secs N] [--cpu-secs N]
//!
//! Needs root inside `scripts/netns-run`. Prints a markdown block.

use std::time::{Duration, Instant};

use partyline_shared::bridge::{BridgeProxy, Plan, PlanAes67, PlanGroup, PlanUser};
use partyline_testkit::aes67::{Aes67Net, Console, Grandmaster, PARTYLINE_IFACE};
use partyline_testkit::audio::{RATE, TICKS, Tone, channel, now_ns, tick_latencies};
use partyline_testkit::bench::{cpu_ticks, janus_for_control, median, quantile};
use partyline_testkit::card::{CardKind, CardServer};
use partyline_testkit::control::Control;
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::janus::Janus;
use partyline_testkit::pipewire::StampedRecording;
use partyline_testkit::{ICE_ADDRESS, ReservedPort, SoundServer, wait_for};
use serde_json::json;

const SLOW: Duration = Duration::from_secs(30);
/// The tone's frequency and level on the console's channel 1.
const TONE_HZ: f64 = 450.0;
const TONE_DBFS: f64 = -20.0;
/// The console's bursts on the PipeWire card's input 1: 400 ms of the same tone every 500 ms,
/// about the same level.
const BURSTS: &str =
    "audiotestsrc wave=ticks freq=450 sine-periods-per-tick=180 tick-interval=500000000 volume=0.14 is-live=true";
/// The quiet before an onset on a card's port (a crew member's bursts leave 100 ms between).
const CREW_QUIET_MS: usize = 50;
/// From a crew member's join to its first judged burst.
const SETTLE: Duration = Duration::from_secs(3);
/// Runs of the crew paths per card, each on a fresh control, Janus and bridged: where the card's
/// and the crew's 20 ms sends fall against Janus's mixing tick sets how long their packets wait
/// there (up to a frame), which one run draws once (the crew members of one run, all on one send
/// tick, draw the same).
const RUNS: usize = 5;

/// The plan: the card on `input`/`output`, group `x` with 8 users (k on input k, output k).
fn plan(input: &str, output: &str, aes67: PlanAes67) -> Plan {
    let group = PlanGroup {
        room: "x".into(),
        identity: "card:x".into(),
        token: "bench".into(),
        display: "bench".into(),
        bitrate_kbps: 64,
        muted: false,
    };
    let users = (0..8)
        .map(|k| PlanUser {
            name: format!("u{k}"),
            room: "x".into(),
            input_channel: k,
            output_channel: Some(k),
            ifb: None,
        })
        .collect();
    Plan {
        input_device: input.into(),
        output_device: output.into(),
        device_sample_rate: RATE,
        janus_url: "http://127.0.0.1:9/janus".into(),
        jitter_buffer_ms: 40,
        groups: vec![group],
        users,
        aes67,
        ..Plan::default()
    }
}

async fn apply(bus: &Bus, plan: &Plan) {
    let connection = zbus::connection::Builder::address(bus.address.as_str())
        .expect("the bus address")
        .build()
        .await
        .expect("the bus");
    let proxy = BridgeProxy::new(&connection).await.expect("bridged's proxy");
    partyline_testkit::wait_for("bridged applies the plan", SLOW, async || proxy.apply(plan).await.ok()).await;
}

/// Ticks played into input 1 of the PipeWire card for `secs`: each one's latency to output 2
/// (ms), both ports in one recording (`record_ports`: the same graph cycles, as `bench/matrix`).
async fn ticks_through(card: &CardServer, secs: u64) -> Vec<f64> {
    let CardServer::PipeWire(pipewire) = card else { unreachable!("a PipeWire card") };
    let recording = pipewire.record_ports(&[("card_in", 0), ("card_out", 1)]);
    recording.wait_until(0.5).await;
    let ticks = Tone::source(card, "card_in", &[0], TICKS);
    tokio::time::sleep(Duration::from_secs(secs)).await; // the measurement's length
    drop(ticks);
    let until = recording.seconds() + 0.5;
    let samples = recording.finish_after(until).await;
    tick_latencies(&channel(&samples, 0), &channel(&samples, 1)).into_iter().flatten().collect()
}

/// The AES67 network with a `ptp4l` grandmaster and the console on it, synced and sending its
/// bursts on channel 1 and listening for partyline's stream; the console's SDP.
async fn console_on_its_network() -> (Aes67Net, Grandmaster, Console, String) {
    let net = Aes67Net::create();
    let grandmaster = Grandmaster::start(&net, 1, 128);
    grandmaster.wait_master(SLOW).await;
    let console = Console::builder().tone(1, TONE_HZ, TONE_DBFS).bursts().listen_sap("partyline").start(&net);
    console.wait_synced(SLOW).await;
    let sdp = console.wait_sending(SLOW).await;
    (net, grandmaster, console, sdp)
}

/// bridged's CPU (percent of one core) over `secs`.
async fn cpu(pid: u32, secs: u64) -> f64 {
    let (t0, c0) = (Instant::now(), cpu_ticks(pid));
    tokio::time::sleep(Duration::from_secs(secs)).await;
    (cpu_ticks(pid) - c0) as f64 / t0.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (mut secs, mut cpu_secs) = (20u64, 20u64);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--secs" => secs = value.parse().expect("--secs N"),
            "--cpu-secs" => cpu_secs = value.parse().expect("--cpu-secs N"),
            other => panic!("unknown option {other} (--secs, --cpu-secs)"),
        }
    }
    partyline_testkit::require_namespace();

    // AES67.
    let (net, grandmaster, console, console_sdp) = console_on_its_network().await;
    let bus = Bus::start();
    let bridged = Bridged::start(&bus, &[]);
    let aes67 = PlanAes67 {
        interface: PARTYLINE_IFACE.into(),
        receive_sdp: console_sdp,
        receive_latency_ms: 2,
        send_name: "partyline".into(),
        send_range: "239.69.0.0/16".into(),
        send_port: 5004,
        send_channels: 8,
        send_ttl: 16,
        ..PlanAes67::default()
    };
    apply(&bus, &plan("aes67", "aes67", aes67)).await;
    console.wait_receiving(SLOW).await;
    let heard_before = console.onsets(2).len();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let aes67_latencies: Vec<f64> = console.onsets(2)[heard_before..].to_vec();
    let aes67_cpu = cpu(bridged.pid(), cpu_secs).await;
    let lateness = console.next_lateness(8, SLOW).await;
    let lateness_p99 = median(&lateness.iter().filter_map(|l| l.host.map(|h| h.p99_us)).collect::<Vec<_>>());
    drop(bridged);
    drop(console);
    drop(grandmaster);
    drop(net);

    // PipeWire.
    let card = CardServer::start(CardKind::PipeWire);
    for name in ["card_in", "card_out"] {
        card.add_card(name, RATE);
    }
    let bus = Bus::start();
    let bridged = Bridged::on_card(&bus, &card, &[]);
    apply(&bus, &plan("card_in.monitor", "card_out", PlanAes67::default())).await;
    tokio::time::sleep(Duration::from_secs(4)).await; // the card's first seconds (bench_matrix's CARD_SETTLE)
    let pipewire_latencies = ticks_through(&card, secs).await;
    let pipewire_cpu = cpu(bridged.pid(), cpu_secs).await;

    drop(bridged);
    drop(card);

    // The crew paths through Janus, on each card.
    let aes67_crew = crew_paths_aes67(secs).await;
    let pipewire_crew = crew_paths_pipewire(secs).await;

    let ms = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1} ms"));
    println!("#### AES67 against the PipeWire test card: 8 server audio users in one group\n");
    println!("| | AES67 (both ways) | PipeWire test card | ratio |");
    println!("|---|---|---|---|");
    let (a, p) = (median(&aes67_latencies), median(&pipewire_latencies));
    let ratio = |a: Option<f64>, p: Option<f64>| match (a, p) {
        (Some(a), Some(p)) if p > 0.0 => format!("{:.2}", a / p),
        _ => "–".to_owned(),
    };
    println!(
        "| card → card (input 1 → output 2), median | {} ({} onsets) | {} ({} ticks) | {} |",
        ms(a),
        aes67_latencies.len(),
        ms(p),
        pipewire_latencies.len(),
        ratio(a, p)
    );
    println!(
        "| card → card, p95 | {} | {} | |",
        ms(quantile(&aes67_latencies, 0.95)),
        ms(quantile(&pipewire_latencies, 0.95))
    );
    for (what, aes67, pipewire) in [
        ("console → crew (card input 1 → the crew's ear)", &aes67_crew.to_crew, &pipewire_crew.to_crew),
        ("crew → console (the crew's mouth → card output 2)", &aes67_crew.from_crew, &pipewire_crew.from_crew),
    ] {
        let (a, p) = (median(aes67), median(pipewire));
        println!(
            "| {what}, median | {} ({} bursts) | {} ({} bursts) | {} |",
            ms(a),
            aes67.len(),
            ms(p),
            pipewire.len(),
            ratio(a, p)
        );
    }
    println!(
        "| bridged's CPU (% of one core, {cpu_secs} s) | {aes67_cpu:.1} % | {pipewire_cpu:.1} % | {:.2} |",
        aes67_cpu / pipewire_cpu.max(0.01)
    );
    println!(
        "\nAES67: the console's bursts on its channel 1 (whole 500 ms of PTP time) timed as they come back on its channel 2, \
         receive latency 2 ms; partyline's packets left {} after their RTP time (p99 per 250 ms window, median of 8). \
         PipeWire: ticks input 1 → output 2 on the test card's ports (both in one recording), quantum 256.",
        lateness_p99.map_or("–".to_owned(), |us| format!("{us:.0} µs"))
    );
    println!(
        "\nCrew paths: {RUNS} runs per card, {secs} s listening and {secs} s talking each; the medians of all their bursts above. \
         Each run's medians, to the crew / from the crew (ms): AES67 {}; PipeWire {}.",
        aes67_crew.runs.join(", "),
        pipewire_crew.runs.join(", ")
    );
}

/// Each way between the card and a crew member, ms: card → crew (what the crew heard of the
/// card's bursts) and crew → card (what the card's output carried of the crew's).
#[derive(Debug, Default)]
struct CrewPaths {
    to_crew: Vec<f64>,
    from_crew: Vec<f64>,
    /// Each run's medians, to the crew and from it, as text ("40.5 / 100.7").
    runs: Vec<String>,
}

impl CrewPaths {
    /// Adds a run's figures.
    fn add(&mut self, once: CrewPaths) {
        let said = |v: &[f64]| median(v).map_or("–".into(), |m| format!("{m:.1}"));
        self.runs.push(format!("{} / {}", said(&once.to_crew), said(&once.from_crew)));
        self.to_crew.extend(once.to_crew);
        self.from_crew.extend(once.from_crew);
    }
}

/// control, Janus and bridged on `bus` (bridged on `card`, or with no sound server for AES67),
/// group Stage; what must outlive the run.
struct CrewStack {
    control: Control,
    _bridged: Bridged,
    _janus: Janus,
    _events: ReservedPort,
}

impl CrewStack {
    async fn start(bus: &Bus, card: Option<&CardServer>) -> CrewStack {
        let (janus, server, events) = janus_for_control(false);
        let config = format!(
            "{server}bridge:\n  iceAddresses: [{ICE_ADDRESS}]\nlogging:\n  level: warn\ngroups:\n  - name: Stage\n"
        );
        let control = Control::builder().config(Some(&config)).env("PARTYLINE_BUS", &bus.address).start().await;
        let bridged = match card {
            Some(card) => Bridged::on_card(bus, card, &[]),
            None => Bridged::start(bus, &[]),
        };
        wait_for("control sees Janus and bridged", SLOW, async || {
            let (_, stats) = control.get_json("/admin/stats").await;
            (stats["janus"]["state"] == "up" && stats["bridge"]["state"] == "idle").then_some(())
        })
        .await;
        CrewStack { control, _bridged: bridged, _janus: janus, _events: events }
    }

    /// The card on `input`/`output`, and server user Card on Stage from its input 1 to its output 2.
    async fn card(&self, input: &str, output: &str) {
        let device = json!({ "inputDeviceId": input, "outputDeviceId": output, "sampleRate": RATE });
        let (status, body) = self.control.post_json("/admin/audio/device", device).await;
        assert!(status.is_success(), "POST /admin/audio/device: {status} {body}");
        let user = json!({ "name": "Card", "group": "stage", "inputChannel": 0, "outputChannel": 1 });
        let (status, body) = self.control.post_json("/admin/server-users", user).await;
        assert!(status.is_success(), "POST /admin/server-users: {status} {body}");
        wait_for("the card's user joined", SLOW, async || {
            let (_, stats) = self.control.get_json("/admin/stats").await;
            let branches = stats["bridge"]["branches"].as_array().cloned().unwrap_or_default();
            branches.iter().any(|b| b["name"] == "Card" && b["state"] == "joined").then_some(())
        })
        .await;
    }
}

/// `CLOCK_REALTIME` (ns since the epoch) of `at`.
fn realtime(at: Instant) -> i128 {
    let (now, now_rt) = (Instant::now(), now_ns());
    now_rt - now.saturating_duration_since(at).as_nanos() as i128 + at.saturating_duration_since(now).as_nanos() as i128
}

/// Each of `heard` (ns) less the latest of `spoken` (ns) before it, if within 500 ms (a burst's
/// cycle), in ms.
fn matched(spoken: &[i128], heard: &[i128]) -> Vec<f64> {
    heard
        .iter()
        .filter_map(|h| {
            let s = spoken.iter().filter(|s| *s <= h && h - *s < 500_000_000).max()?;
            Some((h - s) as f64 / 1e6)
        })
        .collect()
}

/// A crew member (partyline-crew in this process, listening and talking on Stage) hears the
/// card's bursts for `secs`, then talks for `secs`, then leaves: each burst's way is timed on
/// `CLOCK_REALTIME`, from `sent` (when the card's input carried a burst) to the crew's ear (its
/// onset as its packet arrived: up to the crew's own jitter buffer and playback, the same on any
/// card), and from the crew's mouth to `returned` (when the card's output carried it).
async fn crew_path_once(
    control: &Control,
    secs: u64,
    sent: &dyn Fn() -> Vec<i128>,
    returned: &dyn Fn() -> Vec<i128>,
) -> CrewPaths {
    let options = partyline_crew::Options {
        server: control.origin.clone(),
        tls: partyline_crew::TlsCheck::Insecure,
        lines: partyline_crew::Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] },
        pin: None,
        name_prefix: "crew".into(),
        media_address: ICE_ADDRESS.parse().expect("an address"),
        jitter_buffer: Duration::from_millis(60),
        // One turn: the member holds its talk key for the whole second half.
        turn: Duration::from_secs(secs + 10),
        link: partyline_crew::Link::default(),
        fec_percent: 0,
        relay: None,
    };
    let mut crew = partyline_crew::Crew::new(options).expect("a crew");
    assert_eq!(crew.add(1, Duration::ZERO).await, 1, "the crew member joined: {:?}", crew.joins);
    tokio::time::sleep(SETTLE).await;
    let _ = crew.heard().await; // its join's first seconds
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let heard = crew.heard().await;
    let (_, room, line) = heard[0].lines.first().expect("the crew member's line");
    let heard_at: Vec<i128> = line.onsets_heard.iter().map(|at| realtime(*at)).collect();
    let to_crew = matched(&sent(), &heard_at);

    let (room, onsets, from) = (room.clone(), crew.onsets().clone(), now_ns());
    let mut spoken = std::collections::BTreeSet::new();
    {
        let talking = crew.talk_for(Duration::from_secs(secs));
        tokio::pin!(talking);
        // The crew's onsets are kept 8 s: read every second while it talks.
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                () = &mut talking => break,
                _ = every.tick() => spoken.extend(onsets.spoken_in(&room)),
            }
        }
    }
    crew.silence().await;
    tokio::time::sleep(Duration::from_secs(1)).await; // its last bursts through
    spoken.extend(onsets.spoken_in(&room));
    let spoken: Vec<i128> = spoken.into_iter().map(realtime).collect();
    let back: Vec<i128> = returned().into_iter().filter(|at| *at > from).collect();
    crew.leave(1).await;
    CrewPaths { to_crew, from_crew: matched(&spoken, &back), runs: Vec::new() }
}

/// The crew paths on AES67: the console's bursts on its channel 1 (each on a whole 500 ms of
/// PTP time, which is `CLOCK_REALTIME` here) to the crew, and the crew to the console's receive
/// of partyline's stream, channel 2 (its onsets on PTP time).
async fn crew_paths_aes67(secs: u64) -> CrewPaths {
    let (_net, _grandmaster, console, sdp) = console_on_its_network().await;
    let mut all = CrewPaths::default();
    for _ in 0..RUNS {
        let bus = Bus::start();
        let stack = CrewStack::start(&bus, None).await;
        let settings = json!({ "interface": PARTYLINE_IFACE, "ptpDomain": 0, "receiveSdp": sdp, "receiveLatencyMs": 2,
                               "send": { "name": "partyline", "port": 5004, "channels": 8 } });
        let (status, body) = stack.control.put_json("/admin/config/aes67", settings).await;
        assert!(status.is_success(), "PUT /admin/config/aes67: {status} {body}");
        stack.card("aes67", "aes67").await;
        wait_for("the console receives partyline's stream", SLOW, async || {
            let report = console.next_lateness(1, SLOW).await;
            report.first().is_some_and(|l| l.packets > 0).then_some(())
        })
        .await;
        // The console's bursts: every whole 500 ms from now on.
        let since = now_ns() - now_ns().rem_euclid(500_000_000);
        let sent = || (since..now_ns()).step_by(500_000_000).collect();
        let returned = || console.onset_times(2).into_iter().map(i128::from).collect();
        all.add(crew_path_once(&stack.control, secs, &sent, &returned).await);
    }
    all
}

/// The crew paths on the PipeWire test card: bursts played into its input 1, timed on
/// `CLOCK_REALTIME` on the input's port ([`StampedRecording`]), and the crew's timed on its
/// output 2's port.
async fn crew_paths_pipewire(secs: u64) -> CrewPaths {
    let mut all = CrewPaths::default();
    for _ in 0..RUNS {
        let card = CardServer::start(CardKind::PipeWire);
        for name in ["card_in", "card_out"] {
            card.add_card(name, RATE);
        }
        let CardServer::PipeWire(pipewire) = &card else { unreachable!("a PipeWire card") };
        // Before bridged reads the monitors: a new reader re-times a null sink.
        let (input, output) =
            (StampedRecording::start(pipewire, "card_in"), StampedRecording::start(pipewire, "card_out"));
        let bus = Bus::start();
        let stack = CrewStack::start(&bus, Some(&card)).await;
        stack.card("card_in.monitor", "card_out").await;
        let _bursts = Tone::source(&card, "card_in", &[0], BURSTS);
        let sent = || input.onset_times(0, CREW_QUIET_MS);
        let returned = || output.onset_times(1, CREW_QUIET_MS);
        all.add(crew_path_once(&stack.control, secs, &sent, &returned).await);
    }
    all
}
