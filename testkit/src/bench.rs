//! The whole stack the benchmarks drive (`examples/bench_audio.rs`, `examples/bench_stack.rs`):
//! a private PulseAudio card (`card_in`, `card_out`), a private bus, Janus on [`ICE_IFACE`]
//! posting its events to control, the given control and bridged binaries, and the card chosen
//! through control's API. Inside a network namespace ([`require_namespace`]).

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::audio::RATE;
use crate::control::Control;
use crate::dbus::{Bridged, Bus};
use crate::janus::Janus;
use crate::pulse::PulseServer;
use crate::sound_server::SoundServer;
use crate::{ICE_ADDRESS, ICE_IFACE, ReservedPort, require_namespace, wait_for};

const EVENT_SECRET: &str = "bench-event-secret";

/// The malloc setting of the packaged units (packaging/systemd): the bench measures what is deployed.
const MALLOC_ARENAS: (&str, &str) = ("MALLOC_ARENA_MAX", "2");

/// Everything of one benchmark run; dropped (stopped) field by field, control first.
#[derive(Debug)]
pub struct BenchStack {
    pub control: Control,
    pub bridged: Bridged,
    pub janus: Janus,
    pub pulse: PulseServer,
    pub bus: Bus,
    _events_port: ReservedPort,
}

impl BenchStack {
    /// Starts it all; `sections` is appended to control's config (e.g. `audio:` and `groups:`),
    /// `bridge_jitter_ms` is `bridge.jitterBufferMs`, `bridged_log` is bridged's `RUST_LOG`.
    pub async fn start(
        control: &Path,
        bridged: &Path,
        sections: &str,
        bridge_jitter_ms: u32,
        bridged_log: &str,
    ) -> BenchStack {
        require_namespace();
        let pulse = PulseServer::start();
        for card in ["card_in", "card_out"] {
            pulse.add_card(card, RATE);
        }
        let bus = Bus::start();
        let (janus, server, events_port) = janus_for_control(false);
        let config = format!(
            "{server}bridge:\n  iceAddresses: [{ICE_ADDRESS}]\n  jitterBufferMs: {bridge_jitter_ms}\nlogging:\n  level: warn\n{sections}"
        );
        let (arenas, count) = MALLOC_ARENAS;
        let control = Control::builder().binary(control).config(Some(&config)).env("PARTYLINE_BUS", &bus.address);
        let control = control.env(arenas, count).start().await;
        let pulse_address = pulse.server_address();
        let bridged = Bridged::start_binary(
            bridged,
            &bus,
            &[("PULSE_SERVER", &pulse_address), ("RUST_LOG", bridged_log), MALLOC_ARENAS],
        );
        wait_for("control sees Janus and bridged", Duration::from_secs(30), async || {
            let (_, stats) = control.get_json("/admin/stats").await;
            (stats["janus"]["state"] == "up" && stats["bridge"]["state"] == "idle").then_some(())
        })
        .await;
        let device = json!({ "inputDeviceId": "card_in.monitor", "outputDeviceId": "card_out", "sampleRate": RATE });
        let (status, body) = control.send(Method::POST, "/admin/audio/device", Some(device)).await;
        assert!(status.is_success(), "POST /admin/audio/device: {status} {body}");
        BenchStack { control, bridged, janus, pulse, bus, _events_port: events_port }
    }
}

/// A private Janus on [`ICE_IFACE`] posting its events to control, and control's `server:` and
/// `janus:` sections that go with it (loopback, HTTPS when `tls`), and the events port they
/// name, to be kept while control runs.
pub fn janus_for_control(tls: bool) -> (Janus, String, ReservedPort) {
    janus_built_for_control(Janus::builder(), tls)
}

/// [`janus_for_control`] with Janus from `builder` (its event loops, …).
pub fn janus_built_for_control(builder: crate::janus::Builder, tls: bool) -> (Janus, String, ReservedPort) {
    let events_reserved = ReservedPort::loopback();
    let events_port = events_reserved.port();
    let janus = builder
        .ice_iface(ICE_IFACE)
        .events(&format!("http://127.0.0.1:{events_port}/api/internal/janus-events"), EVENT_SECRET)
        .start();
    let sections = format!(
        "server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:{events_port}\n  tls: {tls}\n{}  eventSecret: {EVENT_SECRET}\n",
        janus.config_yaml(),
    );
    (janus, sections, events_reserved)
}

/// A field of `/proc/PID/status` in its unit (kB for `VmRSS:`, `VmHWM:`), 0 when absent.
pub fn status_field(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

/// utime + stime of `pid` in clock ticks (100 per second on Linux).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<u64> = after.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
    fields[11] + fields[12]
}

/// utime + stime of each of `pid`'s threads in clock ticks, summed by thread name with its
/// digits left out (GStreamer's `udpsrc3:src` and `udpsrc5:src` are one kind of thread).
pub fn thread_ticks(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut by_kind = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return by_kind };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let kind: String = stat[open + 1..close].chars().filter(|c| !c.is_ascii_digit()).collect();
        let fields: Vec<u64> = stat[close + 2..].split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
        *by_kind.entry(kind).or_default() += fields[11] + fields[12];
    }
    by_kind
}

/// Busy and total jiffies of the whole machine (`/proc/stat`'s first line; its first 8 fields:
/// guest time is already counted in user time).
pub fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> =
        stat.lines().next().unwrap_or_default().split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// The machine's CPU model and count, and its load average now, as a markdown sentence.
pub fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu.lines().find_map(|l| l.strip_prefix("model name")?.split(':').nth(1)).unwrap_or("?").trim();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "Machine: {} vCPUs ({model}); load average at the start: {}.",
        std::thread::available_parallelism().map_or(0, usize::from),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    )
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// Runs `command` (a `partyline-crew`) to its end: its stdout (the report), its progress left
/// on stderr; killed should the caller give up on it.
pub async fn crew_output(command: &mut tokio::process::Command) -> std::process::Output {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("run partyline-crew")
        .wait_with_output() // (not `output()`, which would capture its progress on stderr too)
        .await
        .expect("partyline-crew's output")
}
