//! The lossy-link benchmark (run by `bench/lossy`, inside `scripts/netns-run`): what a listener
//! hears of a talker when both are on a bad link, with the voice's protection off and on.
//!
//!   bench_lossy --control BIN [--seconds 60]
//!
//! Each case is a fresh stack: a private Janus (ICE on `pl0`, events to control) and the release
//! `partyline-control` with one group, and two simulated panels of `partyline-crew` on it, a
//! talker holding its key for the judged seconds and a listener. Both panels' lines are on the
//! same simulated link, each way (`partyline_crew::media::link`: this platform's kernel has no
//! netem), so the talker's packets cross it to Janus and the room's mix crosses it back to the
//! listener. Protection off: rooms without FEC (`audio.expectedLossPercent: 0`) and a talker
//! without it; on: control's default (10 %) and a talker encoding FEC for its link's loss, as a
//! browser that measured it does; on the way in AudioBridge rebuilds a lost packet from the
//! next one's FEC when the gap is shorter than the talker's prebuffering, and the listener (as a
//! browser) when the next packet has come within its jitter buffer.
//!
//! Prints a markdown section on stdout; exits non-zero when a goal is missed: at 5 % random loss
//! both ways no gap ≥ 40 ms heard with protection on; at 30 ms jitter no gap heard and
//! mouth-to-ear at most 40 ms over the clean link's.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use partyline_crew::media::{Heard, Link, Loss, Path};
use partyline_crew::{Crew, Lines, Options, Summary, TlsCheck};
use partyline_testkit::bench::{janus_for_control, machine_line};
use partyline_testkit::control::Control;
use partyline_testkit::dbus::Bus;
use partyline_testkit::{ICE_ADDRESS, require_namespace, wait_for};
use serde_json::Value;

/// The listener's jitter buffer: how late a packet may come before it is concealed (a browser's
/// adapts; about this on a jittery Wi-Fi).
const LISTENER_BUFFER: Duration = Duration::from_millis(60);
/// The goals.
const MAX_GAP_AT_5_PERCENT_MS: u64 = 40;
const MAX_JITTER_LATENCY_MS: f64 = 40.0;

struct BenchOptions {
    control: PathBuf,
    seconds: u64,
}

fn options() -> BenchOptions {
    let mut o = BenchOptions { control: PathBuf::new(), seconds: 60 };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_default();
        match flag.as_str() {
            "--control" => o.control = value.into(),
            "--seconds" => o.seconds = value.parse().expect("--seconds takes a number"),
            other => panic!("unknown argument {other} (--control BIN --seconds S)"),
        }
    }
    assert!(o.control.exists(), "--control: the release binary");
    o
}

/// One link profile, the same both ways.
struct Profile {
    name: &'static str,
    path: Path,
    /// The loss a browser would have measured on it and encodes FEC for (%).
    loss_percent: u8,
}

fn profiles() -> Vec<Profile> {
    let random = |p: f64| Path { loss: Loss::Random(p / 100.0), jitter: Duration::ZERO };
    vec![
        Profile { name: "clean", path: Path::CLEAN, loss_percent: 0 },
        Profile { name: "2 % random loss", path: random(2.0), loss_percent: 2 },
        Profile { name: "5 % random loss", path: random(5.0), loss_percent: 5 },
        Profile { name: "10 % random loss", path: random(10.0), loss_percent: 10 },
        Profile {
            name: "3 % bursty loss (bursts of 3)",
            path: Path { loss: Loss::bursty(3.0, 3.0), jitter: Duration::ZERO },
            loss_percent: 3,
        },
        Profile {
            name: "30 ms jitter",
            path: Path { loss: Loss::None, jitter: Duration::from_millis(30) },
            loss_percent: 0,
        },
    ]
}

/// What the listener heard in one case.
struct Case {
    profile: &'static str,
    protected: bool,
    heard: Option<Heard>,
    seconds: f64,
}

impl Case {
    fn gaps_of(&self, at_least_ms: u64) -> Option<usize> {
        Some(self.heard.as_ref()?.gap_times.iter().filter(|(_, ms)| *ms >= at_least_ms).count())
    }

    fn mouth_to_ear(&self) -> Option<Summary> {
        Summary::of(self.heard.as_ref()?.mouth_to_ear_ms.iter().copied())
    }
}

/// A fresh stack, the talker talking for `seconds` on `link`, what the listener heard.
async fn case(o: &BenchOptions, profile: &Profile, protected: bool) -> Case {
    let bus = Bus::start();
    let (janus, server, _events_port) = janus_for_control(true);
    let expected_loss = if protected { "" } else { "  expectedLossPercent: 0\n" };
    let config = format!(
        "{server}logging:\n  level: warn\naudio:\n  jitterBufferMs: 40\n{expected_loss}groups:\n  - name: Talk\n"
    );
    let control = Control::builder()
        .binary(&o.control)
        .config(Some(&config))
        .env("PARTYLINE_BUS", &bus.address)
        .env("MALLOC_ARENA_MAX", "2")
        .start()
        .await;
    let http = reqwest::Client::builder().no_proxy().danger_accept_invalid_certs(true).build().expect("client");
    wait_for("control in step with Janus", Duration::from_secs(30), async || {
        let response = http.get(control.url("/admin/stats")).bearer_auth(&control.token).send().await.ok()?;
        let stats: Value = response.json().await.ok()?;
        (stats["janus"]["state"] == "up").then_some(())
    })
    .await;
    let options = Options {
        server: control.origin.clone(),
        tls: TlsCheck::Insecure,
        lines: Lines::Groups { listen: vec!["talk".into()], talk: vec!["talk".into()] },
        pin: None,
        name_prefix: "lossy".into(),
        media_address: ICE_ADDRESS.parse().expect("an address"),
        jitter_buffer: LISTENER_BUFFER,
        turn: Duration::from_secs(o.seconds + 10),
        link: Link { up: profile.path, down: profile.path },
        fec_percent: if protected { profile.loss_percent } else { 0 },
        relay: None,
    };
    let mut crew = Crew::new(options).expect("a crew");
    let joined = crew.add(2, Duration::ZERO).await;
    if joined < 2 {
        eprintln!("bench_lossy: {}: the crew did not join: {:?}", profile.name, crew.joins);
        return Case { profile: profile.name, protected, heard: None, seconds: 0.0 };
    }
    let talk: HashSet<String> = ["talk".to_owned()].into();
    let started = std::time::Instant::now();
    crew.people[0].talk_only(&talk).await.expect("the talk key");
    // The first bursts aside (the talker's queue primes, the listener's buffer settles).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = crew.heard().await;
    let judged = std::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(o.seconds)).await;
    let heard = crew.heard().await;
    let seconds = judged.elapsed().as_secs_f64();
    eprintln!(
        "bench_lossy: {} ({}): {:.0} s",
        profile.name,
        if protected { "on" } else { "off" },
        started.elapsed().as_secs_f64()
    );
    crew.leave(2).await;
    drop(janus);
    let listener = heard.into_iter().nth(1).and_then(|p| p.lines.into_iter().next()).map(|(_, _, h)| h);
    Case { profile: profile.name, protected, heard: listener, seconds }
}

fn row(case: &Case, clean_m2e: Option<f64>) -> String {
    let Some(h) = &case.heard else {
        return format!(
            "| {} | {} | the crew could not join (see stderr) | | | | | | | |",
            case.profile,
            on_off(case.protected)
        );
    };
    let m2e = case.mouth_to_ear();
    let m2e_text = m2e.map_or_else(|| "-".to_owned(), |s| format!("{:.0} / {:.0}", s.median, s.p95));
    let over = match (m2e, clean_m2e) {
        (Some(s), Some(clean)) => format!("{:+.0}", s.median - clean),
        _ => "-".to_owned(),
    };
    let expected = h.packets + h.lost;
    format!(
        "| {} | {} | {} | {} | {} | {} of {} ({:.1} %) | {} | {} | {} | {m2e_text} ({over}) | {:.1} |",
        case.profile,
        on_off(case.protected),
        case.gaps_of(20).unwrap_or(0),
        case.gaps_of(40).unwrap_or(0),
        h.longest_gap_ms,
        h.lost,
        expected,
        100.0 * h.lost as f64 / expected.max(1) as f64,
        h.fec_recovered,
        h.concealed_ms,
        h.late,
        h.payload_bytes as f64 * 8.0 / 1000.0 / case.seconds.max(1.0),
    )
}

fn on_off(protected: bool) -> &'static str {
    if protected { "on" } else { "off" }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    require_namespace();
    partyline_shared::crypto::install_provider();
    let o = options();
    let machine = machine_line();
    let mut cases = Vec::new();
    for profile in profiles() {
        for protected in [false, true] {
            cases.push(case(&o, &profile, protected).await);
        }
    }
    let clean_m2e = |protected: bool| {
        cases
            .iter()
            .find(|c| c.profile == "clean" && c.protected == protected)
            .and_then(Case::mouth_to_ear)
            .map(|s| s.median)
    };

    println!("## Lossy links (`bench/lossy`): a talker and a listener on a bad link, protection off and on\n");
    println!("{machine}\n");
    println!(
        "Each case a fresh stack (Janus, the release control, one group at `jitterBufferMs: 40`) and two simulated \
         panels (`partyline-crew`), a talker holding its key and a listener, both on the same simulated link, each \
         way: the talker's voice crosses it to Janus, the room's mix crosses it back. {} s judged per case, after 2 s \
         of settling. Protection off: no FEC in the mixes (`audio.expectedLossPercent: 0`) nor from the talker; on: \
         the rooms' FEC at control's default (10 %), the talker's for its link's loss, as a browser that measured it. \
         The listener plays packets in order through a {} ms jitter buffer, rebuilds a lost packet from the next \
         one's FEC when that has come and carries it, and conceals the rest. A gap: a run of concealed or silent \
         audio inside a burst of the talker's tone. Mouth-to-ear: each burst's onset heard (at its packet's \
         arrival, the listener's buffer aside) against when it was spoken; in brackets, against the clean link \
         with the same protection. Mix kbit/s: the Opus payloads the listener received.\n",
        o.seconds,
        LISTENER_BUFFER.as_millis()
    );
    println!(
        "| link (both ways) | protection | gaps ≥ 20 ms | gaps ≥ 40 ms | longest gap ms | packets lost to the listener | rebuilt from FEC | concealed ms | late | mouth-to-ear ms median / p95 (vs clean) | mix kbit/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for case in &cases {
        println!("{}", row(case, clean_m2e(case.protected)));
    }
    println!();

    let find = |profile: &str| cases.iter().find(|c| c.profile == profile && c.protected);
    let five = find("5 % random loss").and_then(|c| c.gaps_of(MAX_GAP_AT_5_PERCENT_MS));
    let jitter = find("30 ms jitter");
    let jitter_gaps = jitter.and_then(|c| c.heard.as_ref()).map(|h| h.gaps);
    let jitter_over = jitter.and_then(Case::mouth_to_ear).zip(clean_m2e(true)).map(|(s, clean)| s.median - clean);
    let five_met = five == Some(0);
    let jitter_met = jitter_gaps == Some(0) && jitter_over.is_some_and(|over| over <= MAX_JITTER_LATENCY_MS);
    println!(
        "Goal, 5 % random loss both ways, protection on: no gap ≥ {MAX_GAP_AT_5_PERCENT_MS} ms in {} s: {} ({}).",
        o.seconds,
        if five_met { "**met**" } else { "**missed**" },
        five.map_or_else(|| "not measured".to_owned(), |n| format!("{n} such gaps"))
    );
    println!(
        "Goal, 30 ms jitter both ways, protection on: no gap heard and mouth-to-ear at most {MAX_JITTER_LATENCY_MS:.0} ms \
         over the clean link's: {} ({} gaps, {}).",
        if jitter_met { "**met**" } else { "**missed**" },
        jitter_gaps.map_or_else(|| "-".to_owned(), |g| g.to_string()),
        jitter_over.map_or_else(|| "mouth-to-ear not measured".to_owned(), |o| format!("{o:+.0} ms"))
    );
    std::process::exit(i32::from(!(five_met && jitter_met)));
}
