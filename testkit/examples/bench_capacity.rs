//! The capacity benchmark, the ceiling of one box (run by `bench/capacity`, inside
//! `scripts/netns-run`): a private Janus (ICE on `pl0`, events to control) and the release
//! `partyline-control` with four groups and a position `Crew` on all four (listen and talk), and
//! the release `partyline-crew` ramping simulated four-line members against them until a
//! listener hears a gap. Janus has CPU 1 to itself (every thread, `taskset -a -p`); control, the
//! crew and this driver share CPU 0. Prints a markdown section on stdout; exits non-zero when a
//! run failed or the target (≥ 30 four-line users per core of Janus, clean) was missed.
//!
//!   bench_capacity --control BIN --crew BIN [--users 10] [--step 10] [--max-users 200]
//!                  [--step-seconds 60] [--ramp 10] [--runs 3] [--bridged BIN]
//!
//! Each run is a fresh stack and one `partyline-crew --step … --json` ramp: per step, the
//! crew's judgement (gaps ≥ 10 ms heard by any listener, mouth-to-ear), and the CPU and RSS of
//! Janus, control and the crew over the step's judged seconds, as the crew measures them. The
//! crew's ramp stops at the first degraded step. Per run, the last clean step gives the users a
//! core of Janus carries clean (its users over Janus's share of its core); the summary is the
//! median over the runs.
//!
//! `--bridged BIN`: the members' media on partyline's own rooms in that `partyline-bridged`
//! (`media.engine: bridged`, one bundled peer connection per member), bridged on the measured
//! core in Janus's place (target ≥ 150 four-line users per core).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use partyline_testkit::bench::{
    all_process_ticks, cpu_ticks, crew_output, janus_built_for_control, machine_line, median, mib, pin, process_size,
};
use partyline_testkit::control::Control;
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::janus::{EVENT_USER, Janus};
use partyline_testkit::{ICE_ADDRESS, ReservedPort, require_namespace, wait_for};
use serde_json::Value;

/// The target: four-line users per core of Janus, clean.
const TARGET_PER_CORE: f64 = 30.0;
/// The target on partyline's own rooms (`--bridged`): four-line users per core of bridged.
const TARGET_PER_CORE_ROOMS: f64 = 150.0;
/// A share of one core from which a process (or thread) counts as having filled it.
const FULL: f64 = 90.0;
/// The media server's CPU; control, the crew and this driver take the other.
const MEDIA_CPU: u32 = 1;
const CREW_CPU: u32 = 0;

const GROUPS: &str = "groups:\n  - name: Load 1\n  - name: Load 2\n  - name: Load 3\n  - name: Load 4\n";
const POSITION: &str = "positions:\n  - name: Crew\n    listen: [load-1, load-2, load-3, load-4]\n    talk: [load-1, load-2, load-3, load-4]\n";
/// The whole crew joins from one address within seconds: no token limit may get in its way.
const CREW: &str = "crew:\n  tokensPerMinute: 100000\n  maxPendingTokens: 5000\n  maxPendingPerAddress: 5000\n";

#[derive(Debug, Clone)]
struct Options {
    control: PathBuf,
    crew: PathBuf,
    users: u64,
    step: u64,
    max_users: u64,
    step_seconds: u64,
    ramp: u64,
    runs: u64,
    /// More of control's `audio:` section (YAML lines), the room settings under test.
    audio: Vec<String>,
    /// A/B: room settings (`KEY=VALUE,…` each) measured one after the other at `users`.
    ab: Vec<String>,
    /// Janus's `event_loops` (a setting's `janusEventLoops=N`); none: a thread per handle.
    janus_event_loops: Option<u32>,
    /// Janus's threads under SCHED_FIFO (a setting's `janusRealtime=PRIORITY`): a woken
    /// encoder thread no longer preempts the room's mixer between its two passes.
    janus_realtime: Option<u32>,
    /// Control under a crowd of this many one-line members instead of the ramp.
    crowd: Option<u64>,
    /// Profile Janus inside the judged seconds of a one-step ramp.
    profile: bool,
    /// The members' media on partyline's own rooms in this bridged (`media.engine: bridged`)
    /// instead of Janus's.
    bridged: Option<PathBuf>,
}

impl Options {
    /// The media server measured, as the report names it.
    fn server(&self) -> &'static str {
        if self.bridged.is_some() { "bridged" } else { "Janus" }
    }

    /// The target of four-line users per core of the media server, clean.
    fn target(&self) -> f64 {
        if self.bridged.is_some() { TARGET_PER_CORE_ROOMS } else { TARGET_PER_CORE }
    }
}

fn options() -> Options {
    let mut o = Options {
        control: PathBuf::new(),
        crew: PathBuf::new(),
        users: 10,
        step: 10,
        max_users: 200,
        step_seconds: 60,
        ramp: 10,
        runs: 3,
        audio: Vec::new(),
        ab: Vec::new(),
        janus_event_loops: None,
        janus_realtime: None,
        crowd: None,
        profile: false,
        bridged: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--profile" {
            o.profile = true;
            continue;
        }
        let value = args.next().unwrap_or_default();
        let number = || value.parse::<u64>().unwrap_or_else(|_| panic!("{flag} takes a number"));
        match flag.as_str() {
            "--control" => o.control = value.clone().into(),
            "--crew" => o.crew = value.clone().into(),
            "--users" => o.users = number(),
            "--step" => o.step = number(),
            "--max-users" => o.max_users = number(),
            "--step-seconds" => o.step_seconds = number(),
            "--ramp" => o.ramp = number(),
            "--runs" => o.runs = number(),
            // KEY=VALUE,…: e.g. opusComplexity=1,sampleRate=16000.
            "--audio" => o.audio = audio_lines(&value),
            // SETTING;SETTING;…, each KEY=VALUE,… (empty: control's defaults).
            "--ab" => o.ab = value.split(';').map(str::to_owned).collect(),
            "--crowd" => o.crowd = Some(number()),
            "--bridged" => o.bridged = Some(value.clone().into()),
            other => panic!(
                "unknown argument {other} (--control BIN --crew BIN --users N --step N --max-users N \
                 --step-seconds S --ramp S --runs N --audio KEY=VALUE,… --ab SETTING;… --crowd N --profile --bridged BIN)"
            ),
        }
    }
    assert!(o.control.exists() && o.crew.exists(), "--control and --crew: the release binaries");
    assert!(o.users > 0 && o.step > 0 && o.runs > 0, "--users, --step and --runs must be at least 1");
    assert!(!o.profile || o.users >= o.max_users, "--profile samples one step: --users N --max-users N");
    o
}

/// `KEY=VALUE,…` as lines of control's `audio:` section.
fn audio_lines(setting: &str) -> Vec<String> {
    setting
        .split(',')
        .filter(|kv| !kv.is_empty() && !kv.starts_with(JANUS_EVENT_LOOPS) && !kv.starts_with(JANUS_REALTIME))
        .map(|kv| format!("  {}\n", kv.replacen('=', ": ", 1)))
        .collect()
}

/// The setting that is Janus's, not control's: `janusEventLoops=N`.
const JANUS_EVENT_LOOPS: &str = "janusEventLoops=";

/// A setting's `janusEventLoops=N`, if any.
fn janus_event_loops(setting: &str) -> Option<u32> {
    setting.split(',').find_map(|kv| kv.strip_prefix(JANUS_EVENT_LOOPS)).map(|n| n.parse().expect("janusEventLoops=N"))
}

/// The setting that runs Janus's threads under SCHED_FIFO at a priority: `janusRealtime=N`.
const JANUS_REALTIME: &str = "janusRealtime=";

/// A setting's `janusRealtime=N`, if any.
fn janus_realtime(setting: &str) -> Option<u32> {
    setting.split(',').find_map(|kv| kv.strip_prefix(JANUS_REALTIME)).map(|n| n.parse().expect("janusRealtime=N"))
}

/// Every thread of `pid` under SCHED_FIFO at `priority`; threads they start later inherit it
/// (glibc's threads inherit their creator's policy).
fn realtime(pid: u32, priority: u32) {
    let status = Command::new("chrt")
        .args(["-a", "-f", "-p", &priority.to_string(), &pid.to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("chrt (util-linux)");
    assert!(status.success(), "chrt -a -f -p {priority} {pid} failed");
}

/// The CPU, in % of one core over `seconds`, of every process but `excluded` between two
/// readings of [`all_process_ticks`] (not `/proc/stat`'s per-CPU lines: in this VM they are
/// sampled at the tick and miss most of a load of many short wake-ups such as Janus's; they
/// showed its CPU busy at half of what Janus's own, exact, figures say) (a process that started meanwhile counts from 0).
fn others_percent(before: &HashMap<u32, u64>, after: &HashMap<u32, u64>, excluded: &[u32], seconds: f64) -> f64 {
    let used: u64 = after
        .iter()
        .filter(|(pid, _)| !excluded.contains(pid))
        .map(|(pid, now)| now.saturating_sub(before.get(pid).copied().unwrap_or(0)))
        .sum();
    used as f64 / seconds.max(1e-3)
}

/// One step of the crew's ramp, from its JSON.
#[derive(Debug, Clone)]
struct Step {
    users: u64,
    lines: u64,
    gaps: u64,
    listeners_with_gaps: u64,
    /// Talk spurts heard (per listener) and the gaps in their opening bursts (part of `gaps`).
    spurts: u64,
    onset_gaps: u64,
    m2e: Option<(f64, f64)>,
    crew_cpu: f64,
    crew_per_line: f64,
    /// The media server: Janus, or bridged with partyline's own rooms.
    media: Proc,
    control: Proc,
    degraded: Option<String>,
    /// The worst line's everything-but-its-tone against its tone, dB (what the codec adds).
    noise_db: Option<f64>,
    /// Packets that never came, and that came after the listeners' jitter buffer, all lines.
    lost: u64,
    late: u64,
    /// What the talkers heard of their own voice, all lines (ms): the mix should leave it out.
    own_voice_ms: u64,
    /// The crew's talking frames sent 10 ms or more late, all lines (its own lateness).
    sent_late: u64,
}

/// A watched process's figures over a step.
#[derive(Debug, Clone, Default)]
struct Proc {
    cpu: f64,
    thread: String,
    thread_cpu: f64,
    rss_mib: f64,
}

fn step_of(v: &Value) -> Step {
    let number = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let process = |name: &str| {
        let p = v["processes"].as_array().and_then(|ps| ps.iter().find(|p| p["name"] == name));
        p.map_or_else(Proc::default, |p| Proc {
            cpu: number(&p["cpu_percent"]),
            thread: p["busiest_thread"].as_str().unwrap_or("?").to_owned(),
            thread_cpu: number(&p["busiest_thread_percent"]),
            rss_mib: number(&p["rss_mib"]),
        })
    };
    let m2e = &v["mouth_to_ear_ms"];
    Step {
        users: v["users"].as_u64().unwrap_or(0),
        lines: v["lines"].as_u64().unwrap_or(0),
        gaps: v["gaps"].as_u64().unwrap_or(0),
        listeners_with_gaps: v["listeners_with_gaps"].as_u64().unwrap_or(0),
        spurts: v["spurts"].as_u64().unwrap_or(0),
        onset_gaps: v["onset_gaps"].as_u64().unwrap_or(0),
        m2e: m2e.is_object().then(|| (number(&m2e["median"]), number(&m2e["p95"]))),
        crew_cpu: number(&v["crew_cpu_percent"]),
        crew_per_line: number(&v["crew_cpu_per_line_percent"]),
        media: process("media"),
        control: process("control"),
        degraded: v["degraded"].as_str().map(str::to_owned),
        noise_db: v["per_line"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| Some(l["other_db"].as_f64()? - l["tone_db"].as_f64()?))
            .max_by(f64::total_cmp),
        lost: v["per_line"].as_array().into_iter().flatten().filter_map(|l| l["lost"].as_u64()).sum(),
        late: v["per_line"].as_array().into_iter().flatten().filter_map(|l| l["late"].as_u64()).sum(),
        own_voice_ms: v["per_line"].as_array().into_iter().flatten().filter_map(|l| l["own_voice_ms"].as_u64()).sum(),
        sent_late: v["per_line"].as_array().into_iter().flatten().filter_map(|l| l["sent_late"].as_u64()).sum(),
    }
}

/// What one run found.
#[derive(Debug)]
struct RunResult {
    steps: Vec<Step>,
    /// Whether the crew ran to its end and its JSON was read.
    ok: bool,
    /// The crew's exit status when it was not a success (it fails when a join failed).
    exit: Option<String>,
    seconds: f64,
    /// Janus's CPU over the crew's run, in % of one core.
    media_busy: f64,
    /// Every other process's (not Janus, control, the crew or this driver), anywhere on the
    /// machine, in % of one core.
    others_busy: f64,
    /// Where Janus's CPU went (`--profile`): (thread kind, library, share of its samples).
    profile: Vec<(String, String, f64)>,
}

impl RunResult {
    fn last_clean(&self) -> Option<&Step> {
        self.steps.iter().take_while(|s| s.degraded.is_none()).last()
    }

    fn first_degraded(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.degraded.is_some())
    }

    /// Janus's CPU per four-line user and the users per core of Janus, at the last clean step.
    fn per_user(&self) -> Option<(u64, f64, f64)> {
        let s = self.last_clean()?;
        (s.users > 0 && s.media.cpu > 0.0)
            .then(|| (s.users, s.media.cpu / s.users as f64, s.users as f64 / (s.media.cpu / 100.0)))
    }

    /// The media server's CPU per user added, from the first step to the last clean one (its own idle
    /// work left out), when there are two.
    fn marginal(&self) -> Option<f64> {
        let (first, last) = (self.steps.first()?, self.last_clean()?);
        (last.users > first.users).then(|| (last.media.cpu - first.media.cpu) / (last.users - first.users) as f64)
    }

    /// What stopped the ramp.
    fn limit(&self, max_users: u64, server: &str) -> String {
        let Some(d) = self.first_degraded() else {
            return match self.steps.last() {
                Some(s) => format!(
                    "not reached: the ramp ended clean at {} users (its maximum, {max_users}), with {server} at {:.0} % of its core",
                    s.users, s.media.cpu
                ),
                None => "no step was measured".into(),
            };
        };
        let reason = d.degraded.as_deref().unwrap_or_default();
        let at = format!("at {} users ({reason})", d.users);
        if d.media.cpu >= FULL {
            format!("{server}'s core: {:.0} % of CPU {MEDIA_CPU} {at}", d.media.cpu)
        } else if d.media.thread_cpu >= FULL {
            format!("{server}'s busiest thread, `{}`, at {:.0} % of a core {at}", d.media.thread, d.media.thread_cpu)
        } else if d.crew_cpu + d.control.cpu >= FULL {
            format!(
                "the crew's core: the crew {:.0} % and control {:.0} % of CPU {CREW_CPU} {at}; {server} was at {:.0} %",
                d.crew_cpu, d.control.cpu, d.media.cpu
            )
        } else {
            format!(
                "no core full {at}: {server} {:.0} % (busiest thread {:.0} %), the crew {:.0} %, control {:.0} %",
                d.media.cpu, d.media.thread_cpu, d.crew_cpu, d.control.cpu
            )
        }
    }
}

/// Janus, control and their bus, started as a box runs them, Janus alone on its core.
struct Stack {
    // Dropped in this order: control before Janus before the bus.
    control: Control,
    _janus: Janus,
    /// partyline's own rooms (`--bridged`), dropped before the bus.
    _bridged: Option<Bridged>,
    _bus: Bus,
    _events_port: ReservedPort,
    media_pid: u32,
    /// A client that takes control's self-signed certificate, as a box's is out of the box.
    http: reqwest::Client,
}

impl Stack {
    async fn start(o: &Options) -> Stack {
        let bus = Bus::start();
        let builder = o.janus_event_loops.into_iter().fold(Janus::builder(), |b, n| b.event_loops(n));
        let (janus, server, events_port) = janus_built_for_control(builder, true);
        // One node that takes every member (named as Janus posts its events): the bench measures
        // Janus to its knee and control under a crowd, not the pool's placement limit (a node's
        // capacity, 64 by default).
        let pool = format!(
            "janus:\n  adminSecret: {}\n  roomAdminKey: {}\n  nodes:\n{}",
            janus.admin_secret(),
            janus.room_admin_key(),
            janus.node_yaml(EVENT_USER, 100_000)
        );
        // The node names its own event password, which may not also be the pool's.
        let server: String = server
            .replace(&janus.config_yaml(), &pool)
            .lines()
            .filter(|line| !line.starts_with("  eventSecret:"))
            .map(|line| format!("{line}\n"))
            .collect();
        let media = if o.bridged.is_some() { "media:\n  engine: bridged\n" } else { "" };
        let config = format!(
            "{server}logging:\n  level: warn\naudio:\n{}{GROUPS}{POSITION}{CREW}{media}",
            if o.audio.is_empty() { "  jitterBufferMs: 40\n".to_owned() } else { o.audio.concat() },
        );
        // The rooms on the namespace's address, as Janus's ICE is; bridged without a card.
        let rooms_address = format!("{ICE_ADDRESS}:0");
        let bridged = o
            .bridged
            .as_ref()
            .map(|binary| Bridged::start_binary(binary, &bus, &[("PARTYLINE_ROOMS_ADDRESS", &rooms_address)]));
        // The malloc setting of the packaged unit (packaging/systemd), as the other benchmarks run it.
        let control = Control::builder()
            .binary(&o.control)
            .config(Some(&config))
            .env("PARTYLINE_BUS", &bus.address)
            .env("MALLOC_ARENA_MAX", "2")
            .start()
            .await;
        // Rooms exist once control's first reconciliation is through: joins before that fail.
        // control's certificate is its own self-signed one, as a box's is out of the box.
        partyline_shared::crypto::install_provider();
        let http = reqwest::Client::builder().no_proxy().danger_accept_invalid_certs(true).build().expect("client");
        wait_for("control in step with Janus", Duration::from_secs(30), async || {
            let response = http.get(control.url("/admin/stats")).bearer_auth(&control.token).send().await.ok()?;
            let stats: Value = response.json().await.ok()?;
            (stats["janus"]["state"] == "up").then_some(())
        })
        .await;
        let janus_pid: u32 =
            std::fs::read_to_string(janus.value("JANUS_PID_FILE")).expect("janus.pid").trim().parse().expect("a pid");
        // The media server has its core to itself; on partyline's own rooms Janus idles beside
        // control.
        let media_pid = bridged.as_ref().map_or(janus_pid, Bridged::pid);
        pin(media_pid, MEDIA_CPU);
        if bridged.is_some() {
            pin(janus_pid, CREW_CPU);
        }
        if let Some(priority) = o.janus_realtime {
            realtime(janus_pid, priority);
        }
        pin(control.pid(), CREW_CPU);

        Stack { control, _janus: janus, _bridged: bridged, _bus: bus, _events_port: events_port, media_pid, http }
    }
}

/// Runs `partyline-crew` with `args` on the crew's CPU; its stdout (its progress goes to stderr).
async fn crew(o: &Options, args: &[String]) -> std::process::Output {
    crew_output(tokio::process::Command::new("taskset").args(["-c", &CREW_CPU.to_string()]).arg(&o.crew).args(args))
        .await
}

/// Where `pid`'s CPU goes over `span`: `perf record` of its every thread (cpu-clock samples, no
/// call graphs: they cost the sampled process more), as (thread kind, library, % of samples),
/// the largest first.
async fn profile(pid: u32, span: Duration) -> Vec<(String, String, f64)> {
    let data = std::env::temp_dir().join(format!("bench-capacity-{pid}.perf"));
    let recorded = tokio::process::Command::new("perf")
        .args(["record", "-q", "-F", "199", "-e", "cpu-clock", "-p", &pid.to_string(), "-o"])
        .arg(&data)
        .args(["--", "sleep", &span.as_secs().to_string()])
        .stdout(Stdio::null())
        .status()
        .await;
    assert!(recorded.is_ok_and(|s| s.success()), "perf record (linux-perf, scripts/deps --bench) failed");
    let report = Command::new("perf")
        .args(["report", "--no-children", "--sort", "comm,dso", "--stdio", "-g", "none", "--field-separator=,", "-i"])
        .arg(&data)
        .stderr(Stdio::null())
        .output()
        .expect("perf report");
    let _ = std::fs::remove_file(&data);
    let mut shares: HashMap<(String, String), f64> = HashMap::new();
    for line in String::from_utf8_lossy(&report.stdout).lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [percent, thread, library] = fields[..] else { continue };
        let Ok(percent) = percent.trim_end_matches('%').parse::<f64>() else { continue };
        *shares.entry((thread_kind(thread).to_owned(), library.to_owned())).or_default() += percent;
    }
    let mut shares: Vec<(String, String, f64)> = shares.into_iter().map(|((k, l), p)| (k, l, p)).collect();
    shares.sort_by(|a, b| b.2.total_cmp(&a.2));
    shares
}

/// A Janus thread's kind, from its name (`mixer ROOM NAME`, `mixer ROOM`, `hloop …`).
fn thread_kind(name: &str) -> &'static str {
    match name.split(' ').collect::<Vec<_>>()[..] {
        ["mixer", _, _, ..] => "a participant's thread (encodes its mix)",
        ["mixer", _] => "a room's mixer",
        ["hloop", ..] => "a handle's loop (ICE, DTLS-SRTP, decoding)",
        _ => "the rest",
    }
}

/// A fresh stack, the crew's ramp against it, its steps.
async fn run(o: &Options, k: u64) -> RunResult {
    let stack = Stack::start(o).await;
    let (control, media_pid) = (&stack.control, stack.media_pid);
    let args: Vec<String> = [
        "--server",
        &control.origin,
        "--position",
        "crew",
        "--users",
        &o.users.to_string(),
        "--step",
        &o.step.to_string(),
        "--max-users",
        &o.max_users.to_string(),
        "--step-seconds",
        &o.step_seconds.to_string(),
        "--ramp",
        &o.ramp.to_string(),
        "--insecure",
        "--media-address",
        ICE_ADDRESS,
        "--watch",
        &format!("media={media_pid}"),
        "--watch",
        &format!("control={}", control.pid()),
        "--json",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    eprintln!("bench_capacity: run {k}: {} {}", o.crew.display(), args.join(" "));
    let (media_ticks, others) = (cpu_ticks(media_pid), all_process_ticks());
    let started = Instant::now();
    let (output, profile) = if o.profile {
        // Sampled inside the judged seconds of the one step: after the joins and the settling.
        let profiling = async {
            tokio::time::sleep(Duration::from_secs(o.ramp + 10 + 5)).await;
            profile(media_pid, Duration::from_secs(o.step_seconds.saturating_sub(10).max(5))).await
        };
        tokio::join!(crew(o, &args), profiling)
    } else {
        (crew(o, &args).await, Vec::new())
    };
    let seconds = started.elapsed().as_secs_f64();
    // Ticks are 1/100 s: ticks per second are % of one core. This driver reaped the crew: its
    // children's ticks are the crew's.
    let media_busy = cpu_ticks(media_pid).saturating_sub(media_ticks) as f64 / seconds;
    let excluded = [media_pid, control.pid(), std::process::id()];
    let others_busy = others_percent(&others, &all_process_ticks(), &excluded, seconds);
    let parsed: Option<Vec<Value>> = serde_json::from_slice(&output.stdout).ok();
    // The crew exits non-zero when a join failed, which ends a ramp as a degraded step: the run
    // counts as done when its JSON came.
    let ok = parsed.is_some();
    let exit = (!output.status.success()).then(|| output.status.to_string());
    if !ok || exit.is_some() {
        let tail = |text: String| {
            text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
        };
        eprintln!(
            "bench_capacity: run {k}: partyline-crew {}; its stdout (end):\n{}\ncontrol's log (end):\n{}",
            output.status,
            tail(String::from_utf8_lossy(&output.stdout).into_owned()),
            tail(control.log_text())
        );
    }
    let steps: Vec<Step> = parsed.unwrap_or_default().iter().map(step_of).collect();
    drop(stack);
    RunResult { steps, ok, exit, seconds, media_busy, others_busy, profile }
}

/// The admin's `userJoined`/`userLeft` events, as (event, identity, group), read from its
/// event stream until it ends.
async fn admin_events(mut response: reqwest::Response, seen: Arc<Mutex<Vec<(String, String, String)>>>) {
    let mut buffer = String::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let field = |key: &str| block.lines().find_map(|l| l.strip_prefix(key)).map(str::trim);
            let (Some(name @ ("userJoined" | "userLeft")), Some(data)) = (field("event:"), field("data:")) else {
                continue;
            };
            let data: Value = serde_json::from_str(data).unwrap_or_default();
            let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            let event = (name.to_owned(), text(&data["identity"]), text(&data["groupId"]));
            seen.lock().unwrap_or_else(PoisonError::into_inner).push(event);
        }
    }
}

/// The crew members in the admin's users list: (identity, state).
async fn listed_crew(stack: &Stack) -> Option<Vec<(String, String)>> {
    let control = &stack.control;
    let request = stack.http.get(control.url("/admin/users?state=all")).bearer_auth(&control.token);
    let body: Value = request.send().await.ok()?.json().await.ok()?;
    let users = body["users"].as_array()?;
    Some(
        users
            .iter()
            .filter(|u| u["kind"] == "crew")
            .map(|u| (u["identity"].as_str().unwrap_or("").to_owned(), u["state"].as_str().unwrap_or("").to_owned()))
            .collect(),
    )
}

/// How many times `name` came for each (identity, group): the keys seen, and the most times
/// one came.
fn tally(events: &[(String, String, String)], name: &str) -> (usize, usize) {
    let mut count: HashMap<(&str, &str), usize> = HashMap::new();
    for (_, identity, group) in events.iter().filter(|(n, _, _)| n == name) {
        *count.entry((identity, group)).or_default() += 1;
    }
    (count.len(), count.values().copied().max().unwrap_or(0))
}

/// Control under a crowd: `n` one-line members (listen and talk on Load 1) joining within
/// `--ramp` seconds, as panels do (token, event stream, `/janus`, state reports), held 10 s and
/// left. Prints its section; true when every join was answered and the admin saw each member
/// join and leave exactly once.
async fn crowd(o: &Options, n: u64, machine: &str) -> bool {
    let stack = Stack::start(o).await;
    let (control, media_pid) = (&stack.control, stack.media_pid);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = reqwest::Client::builder().no_proxy().danger_accept_invalid_certs(true).build().expect("client");
    let events = client.get(control.url("/admin/events")).bearer_auth(&control.token).send().await;
    let reader = tokio::spawn(admin_events(events.expect("the admin's event stream"), seen.clone()));
    let args: Vec<String> = [
        "--server",
        &control.origin,
        "--listen",
        "load-1",
        "--talk",
        "load-1",
        "--users",
        &n.to_string(),
        "--ramp",
        &o.ramp.to_string(),
        "--duration",
        "10",
        "--insecure",
        "--media-address",
        ICE_ADDRESS,
        "--json",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    eprintln!("bench_capacity: crowd: {} {}", o.crew.display(), args.join(" "));
    let (control_ticks, media_ticks) = (cpu_ticks(control.pid()), cpu_ticks(media_pid));
    let started = Instant::now();
    let run = crew(o, &args);
    tokio::pin!(run);
    let mut poll = tokio::time::interval(Duration::from_millis(500));
    let (mut most_connected, mut all_listed, mut listed_twice, mut joined_ticks) = (0, None, 0, None);
    let mut scrapes = None;
    let output = loop {
        tokio::select! {
            output = &mut run => break output,
            _ = poll.tick() => {
                let Some(listed) = listed_crew(&stack).await else { continue };
                let connected = listed.iter().filter(|(_, state)| state == "connected").count();
                let unique: std::collections::HashSet<&String> = listed.iter().map(|(identity, _)| identity).collect();
                listed_twice = listed_twice.max(listed.len() - unique.len());
                most_connected = most_connected.max(connected);
                if connected as u64 == n && all_listed.is_none() {
                    all_listed = Some(started.elapsed());
                    joined_ticks = Some(cpu_ticks(control.pid()));
                    scrapes = Some(tokio::spawn(scrape_cost(client.clone(), control.origin.clone(), control.token.clone(), control.pid())));
                }
            }
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let control_busy = cpu_ticks(control.pid()).saturating_sub(control_ticks) as f64 / seconds;
    let media_busy = cpu_ticks(media_pid).saturating_sub(media_ticks) as f64 / seconds;
    let joins_busy =
        joined_ticks.zip(all_listed).map(|(ticks, at)| ticks.saturating_sub(control_ticks) as f64 / at.as_secs_f64());
    let rss_peak = process_size(control.pid()).peak_rss_kib;
    let scrape = match scrapes {
        Some(task) => task.await.ok().flatten(),
        None => None,
    };
    // The crew has left: every member's leaving reaches the admin too.
    let left = tokio::time::timeout(Duration::from_secs(30), async {
        while tally(&seen.lock().unwrap_or_else(PoisonError::into_inner), "userLeft").0 < n as usize {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    reader.abort();
    let events = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let (joined, most_joins) = tally(&events, "userJoined");
    let (departed, most_leaves) = tally(&events, "userLeft");
    let report: Option<Value> = serde_json::from_slice(&output.stdout).ok();
    if report.is_none() || !output.status.success() {
        eprintln!(
            "bench_capacity: crowd: partyline-crew {}; control's log (end):\n{}",
            output.status,
            control.log_text()
        );
    }
    let report = report.unwrap_or_default();
    let joins_failed = report["joins_failed"].as_u64();
    let summary = |key: &str| {
        let s = &report[key];
        if s.is_object() {
            format!(
                "{:.0} / {:.0} / {:.0} / {:.0}",
                s["median"].as_f64().unwrap_or(f64::NAN),
                s["p95"].as_f64().unwrap_or(f64::NAN),
                s["p99"].as_f64().unwrap_or(f64::NAN),
                s["max"].as_f64().unwrap_or(f64::NAN)
            )
        } else {
            "-".to_owned()
        }
    };
    let ok = joins_failed == Some(0)
        && output.status.success()
        && most_connected as u64 == n
        && listed_twice == 0
        && (joined, most_joins) == (n as usize, 1)
        && (departed, most_leaves) == (n as usize, 1)
        && left.is_ok();

    let server = o.server();
    let join = if o.bridged.is_some() {
        "one peer connection offered through `/api/session/media` on partyline's own rooms"
    } else {
        "a Janus session through `/janus`, the join with the token and a WebRTC offer"
    };
    let join_route = if o.bridged.is_some() { "`POST /api/session/media`" } else { "through `/janus`" };
    println!("## Control under a crowd (`bench/capacity --crowd`): {n} members joining within {} s\n", o.ramp);
    println!("{machine}\n");
    println!(
        "The stack as above ({server} on CPU {MEDIA_CPU}; control and the crew on CPU {CREW_CPU}). {n} one-line members \
         (listen and talk on Load 1) join within {} s as panels do: `POST /api/token`, the session's event stream kept \
         open, {join}, media, a state report; \
         then 10 s of talk in turns, then each leaves. Meanwhile the admin's event stream is read and its users list \
         polled every 500 ms. Times in ms: median / p95 / p99 / max.\n",
        o.ramp
    );
    println!("| figure | measured |");
    println!("|---|---|");
    println!(
        "| joins failed | {} |",
        joins_failed.map_or_else(|| "the crew failed (see stderr)".to_owned(), |f| f.to_string())
    );
    println!("| `POST /api/token` ms | {} |", summary("token_ms"));
    println!("| join's round trip {join_route} ms | {} |", summary("join_ms"));
    println!("| token to media connected ms | {} |", summary("connected_ms"));
    println!(
        "| all {n} listed connected after | {} |",
        all_listed
            .map_or_else(|| format!("never (at most {most_connected})"), |at| format!("{:.1} s", at.as_secs_f64()))
    );
    println!(
        "| control CPU over the joins (% of one core) | {} |",
        joins_busy.map_or_else(|| "-".to_owned(), |b| format!("{b:.0}"))
    );
    println!("| control CPU over the whole run / its peak RSS | {control_busy:.0} % / {} MiB |", mib(rss_peak));
    println!(
        "| `/metrics` with all {n} on: CPU per scrape ms (scraped every second: % of one core), size | {} |",
        scrape.map_or_else(
            || "-".to_owned(),
            |s| format!("{:.2} ({:.2} %), {} KiB", s.cpu_ms, s.cpu_ms / 10.0, s.bytes / 1024)
        )
    );
    println!("| {server} CPU over the whole run (% of its core) | {media_busy:.0} |");
    println!("| admin's list: members listed twice (any poll) | {listed_twice} |");
    println!("| admin's events: members with `userJoined` / most for one | {joined} / {most_joins} |");
    println!("| admin's events: members with `userLeft` / most for one | {departed} / {most_leaves} |");
    println!();
    println!(
        "Verdict: {}.",
        if ok { "every join answered, nothing dropped or duplicated" } else { "**failed** (see above and stderr)" }
    );
    ok
}

/// What a `/metrics` scrape costs control.
struct ScrapeCost {
    /// CPU time per scrape, ms (the whole request: TLS, HTTP, the figures read and encoded).
    cpu_ms: f64,
    bytes: usize,
}

/// Control's CPU for `SCRAPES` scrapes of `/metrics` back to back, less what it spent in as long
/// a time just before (the crowd's own load), per scrape.
async fn scrape_cost(client: reqwest::Client, origin: String, token: String, pid: u32) -> Option<ScrapeCost> {
    const SCRAPES: u32 = 100;
    let scrape = async || {
        let response = client.get(format!("{origin}/metrics")).bearer_auth(&token).send().await.ok()?;
        response.status().is_success().then_some(())?;
        Some(response.bytes().await.ok()?.len())
    };
    let bytes = scrape().await?;
    let (baseline_start, ticks) = (Instant::now(), cpu_ticks(pid));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = cpu_ticks(pid).saturating_sub(ticks) as f64 / baseline_start.elapsed().as_secs_f64();
    let (start, ticks) = (Instant::now(), cpu_ticks(pid));
    for _ in 0..SCRAPES {
        scrape().await?;
    }
    let busy = cpu_ticks(pid).saturating_sub(ticks) as f64 - baseline * start.elapsed().as_secs_f64();
    // Ticks are 10 ms.
    Some(ScrapeCost { cpu_ms: (busy * 10.0 / f64::from(SCRAPES)).max(0.0), bytes })
}

fn print_run(o: &Options, k: u64, r: &RunResult) {
    let server = o.server();
    println!("### Run {k}\n");
    println!(
        "| users (lines) | {server} CPU % (busiest thread %) | {server} RSS MiB | crew CPU % (per line) | control CPU % / RSS MiB | gaps ≥ 10 ms (listeners) | holes at onsets / spurts heard | mouth-to-ear ms median / p95 | |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for s in &r.steps {
        let m2e = s.m2e.map_or_else(|| "-".to_owned(), |(median, p95)| format!("{median:.0} / {p95:.0}"));
        println!(
            "| {} ({}) | {:.1} (`{}` {:.1}) | {:.1} | {:.1} ({:.2}) | {:.1} / {:.1} | {} ({}; packets lost {}, late {}; own voice {} ms; crew frames sent late {}) | {} / {} | {m2e} | {} |",
            s.users,
            s.lines,
            s.media.cpu,
            s.media.thread,
            s.media.thread_cpu,
            s.media.rss_mib,
            s.crew_cpu,
            s.crew_per_line,
            s.control.cpu,
            s.control.rss_mib,
            s.gaps,
            s.listeners_with_gaps,
            s.lost,
            s.late,
            s.own_voice_ms,
            s.sent_late,
            s.onset_gaps,
            s.spurts,
            s.degraded.as_deref().map_or_else(|| "clean".to_owned(), |d| format!("degraded: {d}"))
        );
    }
    println!();
    if !r.ok {
        println!("**The crew failed** (see the log on stderr); the steps above are what it reported.\n");
    } else if let Some(exit) = &r.exit {
        println!("partyline-crew ended with {exit}: a join failed (see the log on stderr).\n");
    }
    match r.per_user() {
        Some((users, per_user, per_core)) => println!(
            "Last clean step: **{users} users**; {server} {per_user:.2} % of its core per four-line user, \
             **{per_core:.0} four-line users per core of {server}**."
        ),
        None => println!("No clean step."),
    }
    if let Some(marginal) = r.marginal() {
        println!(
            "{server}'s CPU per user added, from the first step to the last clean one: {marginal:.2} % of its core."
        );
    }
    println!("Limit: {}.", r.limit(o.max_users, o.server()));
    println!(
        "Over the run ({:.0} s, joins included): {server} {:.0} % of its core; every other process on the machine \
         (not {server}, control or the crew) {:.0} % of one core.\n",
        r.seconds, r.media_busy, r.others_busy
    );
    if !r.profile.is_empty() {
        println!(
            "Where {server}'s CPU went (`perf record -F 199 -e cpu-clock` of its threads inside the judged seconds; \
             the sampling itself disturbs {server}, so this run's gaps are not a capacity figure): share of its samples \
             by thread kind and library, down to 1 %.\n"
        );
        println!("| thread | library | share % |");
        println!("|---|---|---|");
        for (kind, library, share) in r.profile.iter().filter(|p| p.2 >= 1.0) {
            println!("| {kind} | `{library}` | {share:.1} |");
        }
        println!();
    }
}

/// The A/B of room settings: one step at `--users` per setting, one after the other.
async fn ab(o: &Options, machine: &str) {
    let mut rows = Vec::new();
    for (k, setting) in (1..).zip(&o.ab) {
        let one = Options {
            audio: audio_lines(setting),
            janus_event_loops: janus_event_loops(setting),
            janus_realtime: janus_realtime(setting),
            max_users: o.users,
            step: 1,
            ..o.clone()
        };
        rows.push((setting, run(&one, k).await));
    }
    let server = o.server();
    println!("## Room settings A/B (`bench/capacity --ab`): {} four-line members, {server} on one core\n", o.users);
    println!("{machine}\n");
    println!(
        "Each setting on a fresh stack (control's `audio:` keys; `janusEventLoops=N`: Janus's `event_loops`, \
         N shared loop threads instead of one per handle), one after the other in this run: {} members \
         joining over {} s, 10 s of settling, {} s judged. Users per core: the members over {server}'s share of its \
         core (an extrapolation to 100 %). Codec noise: the worst line's everything-but-its-tone against its tone.\n",
        o.users, o.ramp, o.step_seconds
    );
    println!(
        "| setting | {server} CPU % | per four-line user | users per core | crew CPU % per line | gaps ≥ 10 ms (listeners) | holes at onsets / spurts heard | packets lost / late | own voice ms | crew frames sent late | mouth-to-ear ms median / p95 | codec noise dB | |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (setting, r) in rows {
        let Some(s) = r.steps.first() else {
            println!("| `{setting}` | the crew failed (see stderr) | | | | | | | | | | | |");
            continue;
        };
        let m2e = s.m2e.map_or_else(|| "-".to_owned(), |(median, p95)| format!("{median:.0} / {p95:.0}"));
        let noise = s.noise_db.map_or_else(|| "-".to_owned(), |n| format!("{n:.1}"));
        let shown = if setting.is_empty() { "defaults" } else { setting.as_str() };
        println!(
            "| `{shown}` | {:.1} | {:.2} | {:.0} | {:.2} | {} ({}) | {} / {} | {} / {} | {} | {} | {m2e} | {noise} | {} |",
            s.media.cpu,
            s.media.cpu / s.users as f64,
            s.users as f64 / (s.media.cpu / 100.0),
            s.crew_per_line,
            s.gaps,
            s.listeners_with_gaps,
            s.onset_gaps,
            s.spurts,
            s.lost,
            s.late,
            s.own_voice_ms,
            s.sent_late,
            s.degraded.as_deref().map_or("clean", |_| "degraded")
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    require_namespace();
    let o = options();
    let machine = machine_line();
    // This driver mostly waits; it stays off Janus's CPU all the same.
    pin(std::process::id(), CREW_CPU);
    if !o.ab.is_empty() {
        ab(&o, &machine).await;
        return;
    }
    if let Some(n) = o.crowd {
        let ok = crowd(&o, n, &machine).await;
        std::process::exit(i32::from(!ok));
    }
    let mut results = Vec::new();
    for k in 1..=o.runs {
        results.push(run(&o, k).await);
    }

    let server = o.server();
    let how = if o.bridged.is_some() {
        "one peer connection for its four lines on partyline's own rooms, offered through control's `/api/session/media`"
    } else {
        "one AudioBridge participant per line through control's `/janus` proxy"
    };
    println!("## Capacity (`bench/capacity`): four-line crew members against {server} on one core\n");
    println!("{machine}\n");
    println!(
        "{server} (every thread) on CPU {MEDIA_CPU}; control, `partyline-crew` and this driver on CPU {CREW_CPU}. \
         Each member: the position `Crew`, four lines (listen and talk on Load 1–4), {how}, talking in turns. A ramp from {} users, {} more per step up to {}: \
         {} s of joins, 10 s of settling and {} s judged per step; it stops at the first degraded step. {} run(s), \
         each a fresh stack. CPU is % of one core over a step's judged seconds.\n",
        o.users, o.step, o.max_users, o.ramp, o.step_seconds, o.runs
    );
    for (k, r) in (1..).zip(&results) {
        print_run(&o, k, r);
    }
    if o.profile {
        // A profile, not a capacity figure: no summary, and done when one was taken.
        std::process::exit(i32::from(results.iter().any(|r| r.profile.is_empty())));
    }

    let clean: Vec<(u64, f64, f64)> = results.iter().filter_map(RunResult::per_user).collect();
    let users = median(&clean.iter().map(|c| c.0 as f64).collect::<Vec<_>>());
    let per_user = median(&clean.iter().map(|c| c.1).collect::<Vec<_>>());
    let per_core = median(&clean.iter().map(|c| c.2).collect::<Vec<_>>());
    let all_ok = results.iter().all(|r| r.ok);
    let met = per_core.is_some_and(|p| p >= o.target());
    let show = |v: Option<f64>, digits: usize| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"));
    println!("### Summary: the median of {} run(s)\n", results.len());
    println!("| figure | target | measured | verdict |");
    println!("|---|---|---|---|");
    println!("| users at the last clean step | — | {} | — |", show(users, 0));
    println!("| {server} CPU per four-line user (% of its core) | — | {} | — |", show(per_user, 2));
    println!(
        "| four-line users per core of {server}, clean (no gap ≥ 10 ms for any listener) | ≥ {:.0} | {} | {} |",
        o.target(),
        show(per_core, 0),
        if met { "met" } else { "**missed**" }
    );
    println!();
    for (k, r) in (1..).zip(&results) {
        println!("- run {k}: limit: {}.", r.limit(o.max_users, o.server()));
    }
    if results.iter().any(|r| r.first_degraded().is_none() && r.ok) {
        println!(
            "\nA run that ended clean did not find the ceiling: its users per core are {server}'s share at its last step, \
             extrapolated."
        );
    }
    std::process::exit(if all_ok && met { 0 } else { 1 });
}
