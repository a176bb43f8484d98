//! A private PipeWire for one test, as Debian 12's desktop runs it: `pipewire`, the WirePlumber
//! session manager (it links streams to devices and picks the defaults) and `pipewire-pulse`
//! (PipeWire's PulseAudio server, which pactl, pulsesrc/pulsesink and control's device listing
//! talk to). Everything lives in the test's own runtime directory, with a private D-Bus session
//! bus for WirePlumber, so tests can run in parallel. Devices are added like PulseAudio's,
//! `pactl load-module module-null-sink …`: PipeWire makes each a null audio sink driven by a
//! timer.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::audio::{CHANNELS, RATE, Recording, channel, now_ns, onsets_after_quiet};
use crate::dbus::Bus;
use crate::sound_server::SoundServer;

/// PipeWire's names of the card's channel positions ([`crate::sound_server::CARD_MAP`]), in card order:
/// a null sink's ports are `NAME:playback_FL`, …, its monitor's `NAME:monitor_FL`, ….
pub(crate) const POSITIONS: [&str; 8] = ["FL", "FR", "FC", "LFE", "RL", "RR", "SL", "SR"];

/// How long each part may take to come up.
const START_DEADLINE: Duration = Duration::from_secs(10);
/// Pause between two readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// The three daemons; dropping it stops them and removes the directory.
#[derive(Debug)]
pub struct PipeWireServer {
    // Stopped in reverse order of start (see `Drop`).
    children: Vec<(&'static str, Child)>,
    address: String,
    dir: TempDir,
    // Dropped after the daemons.
    _bus: Bus,
}

impl PipeWireServer {
    /// Starts PipeWire, WirePlumber and pipewire-pulse, and waits until the PulseAudio side
    /// answers. Panics (with the logs) when a daemon exits or does not come up in time.
    pub fn start() -> PipeWireServer {
        // Under /tmp, not $TMPDIR: a unix socket path must stay under 108 bytes.
        let dir = tempfile::Builder::new()
            .prefix("partyline-pipewire-")
            .tempdir_in("/tmp")
            .expect("create the PipeWire directory");
        for sub in ["run", "home"] {
            std::fs::create_dir(dir.path().join(sub)).expect("create a PipeWire directory");
        }
        let address = format!("unix:{}", dir.path().join("run/pulse/native").display());
        let bus = Bus::start();
        let mut server = PipeWireServer { children: Vec::new(), address, dir, _bus: bus };
        server.spawn("pipewire");
        let socket = server.dir.path().join("run/pipewire-0");
        server.wait_until("pipewire's socket", |_| socket.exists());
        server.spawn("wireplumber");
        server.spawn("pipewire-pulse");
        server.wait_until("pipewire-pulse answering pactl", |server| server.pactl(&["info"]).status.success());
        server
    }

    /// Forces the graph's quantum to `frames` (at its 48 kHz), whatever the streams ask for:
    /// every cycle of every driver is then `frames` long, so a latency through the card is the
    /// same number of cycles from run to run.
    pub fn force_quantum(&self, frames: u32) {
        let quantum = frames.to_string();
        self.tool("pw-metadata", &["-n", "settings", "0", "clock.force-quantum", &quantum]);
    }

    /// A recording of the ports `(device, channel)` (the monitor of null sink `device`, card
    /// channel `channel`) in one stream, channel i of the recording being `ports[i]`: they are
    /// linked into a null sink of their own, so every sample of the recording comes from the
    /// same graph cycle on every port (no offset between two recorders to account for).
    pub fn record_ports(&self, ports: &[(&str, usize)]) -> Recording {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static PROBES: AtomicUsize = AtomicUsize::new(0);
        assert!(ports.len() <= POSITIONS.len(), "at most {} ports in one recording", POSITIONS.len());
        let probe = format!("probe{}", PROBES.fetch_add(1, Ordering::Relaxed));
        self.add_card(&probe, RATE);
        for (i, (device, channel)) in ports.iter().enumerate() {
            let (from, to) =
                (format!("{device}:monitor_{}", POSITIONS[*channel]), format!("{probe}:playback_{}", POSITIONS[i]));
            // pipewire-pulse creates a module's node a moment after answering.
            let deadline = Instant::now() + START_DEADLINE;
            loop {
                let output = self.command("pw-link").args([&from, &to]).output().expect("run pw-link");
                if output.status.success() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "pw-link {from} {to}: {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                );
                std::thread::sleep(POLL_INTERVAL);
            }
        }
        Recording::start(self, &format!("{probe}.monitor"))
    }

    /// Waits until WirePlumber has made `sink` the default sink (it picks defaults a moment
    /// after a device appears).
    pub fn wait_for_default_sink(&mut self, sink: &str) {
        self.wait_until(&format!("{sink} as the default sink"), |server| {
            let info = server.pactl(&["info"]);
            String::from_utf8_lossy(&info.stdout).lines().any(|line| line == format!("Default Sink: {sink}"))
        });
    }

    /// Every daemon's log.
    pub fn logs(&self) -> String {
        self.children
            .iter()
            .map(|(name, _)| {
                let log = std::fs::read_to_string(self.log_path(name)).unwrap_or_default();
                format!("--- {name}:\n{log}")
            })
            .collect()
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    /// `NAME` (a PipeWire tool) on this server's socket, with the daemons' environment.
    fn command(&self, name: &str) -> Command {
        daemon(name, self.dir.path(), &self._bus.address)
    }

    /// Runs the tool `name ARGS`; panics with its stderr when it fails.
    fn tool(&self, name: &str, args: &[&str]) {
        let output = self.command(name).args(args).output().unwrap_or_else(|e| panic!("run {name}: {e}"));
        assert!(
            output.status.success(),
            "{name} {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }

    fn spawn(&mut self, name: &'static str) {
        let log = File::create(self.log_path(name)).expect("create a PipeWire log");
        let child = daemon(name, self.dir.path(), &self._bus.address)
            .stdout(log.try_clone().expect("clone the log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("run {name} (are pipewire, pipewire-pulse and wireplumber installed?): {e}"));
        self.children.push((name, child));
    }

    /// Polls `ready` until it holds; panics when a daemon exits or the deadline passes.
    fn wait_until(&mut self, what: &str, ready: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + START_DEADLINE;
        while !ready(self) {
            let exited = self.children.iter_mut().find_map(|(name, child)| {
                child.try_wait().expect("poll a PipeWire daemon").map(|status| (*name, status))
            });
            if let Some((name, status)) = exited {
                panic!("{name} exited ({status}) before {what}:\n{}", self.logs());
            }
            assert!(Instant::now() < deadline, "no {what} within {START_DEADLINE:?}:\n{}", self.logs());
            std::thread::sleep(POLL_INTERVAL);
        }
    }
}

/// The command of daemon `name` with every path it uses inside `dir` and the private bus.
fn daemon(name: &str, dir: &Path, bus: &str) -> Command {
    let home = dir.join("home");
    let mut command = Command::new(name);
    command
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("DBUS_SESSION_BUS_ADDRESS", bus)
        // Keep the test's own sound servers out of this one.
        .env_remove("PULSE_SERVER")
        .env_remove("PIPEWIRE_REMOTE")
        .env_remove("PIPEWIRE_RUNTIME_DIR")
        .stdin(Stdio::null());
    command
}

/// A recording of every channel of the PipeWire sink `sink`'s monitor (`pw-record`: PipeWire's
/// own client, one read per graph cycle, no PulseAudio layer between; 8 channels in the card's
/// order) that dates its samples on the host's `CLOCK_REALTIME`, the clock the AES67 network's PTP
/// time is here ([`crate::aes67`]): a thread reads pw-record's output as it comes and notes when
/// each read ended. A sample can be no later than the read that delivered it, so a sample's time
/// is the smallest (arrival − its place in the stream) over all reads, plus its place: a sample is
/// dated as if the card had captured it the moment the graph cycle carrying it ran (as
/// [`TickRecorder`] has an input and an output of one cycle at the same time). The card's clock
/// and `CLOCK_REALTIME` must keep the same rate over the recording (a null sink's timer is
/// `CLOCK_MONOTONIC`'s).
#[derive(Debug)]
pub struct StampedRecording {
    child: Child,
    stamped: std::sync::Arc<std::sync::Mutex<Stamped>>,
}

#[derive(Debug, Default)]
struct Stamped {
    samples: Vec<f32>,
    /// The smallest (arrival − place), ns since the epoch: when the stream's sample 0 was.
    start_ns: Option<i128>,
}

impl StampedRecording {
    pub fn start(card: &PipeWireServer, sink: &str) -> StampedRecording {
        let mut child = Command::new("pw-record")
            .envs(card.client_env())
            .args(["--target", sink, "-P", "{ stream.capture.sink = true }", "--latency", "256"])
            .args(["--format", "f32", "--channels", "8", "--channel-map", &POSITIONS.join(",")])
            .arg(format!("--rate={RATE}"))
            .arg("-")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("pw-record (pipewire-bin)");
        let mut output = child.stdout.take().expect("pw-record's output");
        let stamped = std::sync::Arc::new(std::sync::Mutex::new(Stamped::default()));
        let into = stamped.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let (mut buffer, mut pending) = (vec![0u8; 64 * 1024], Vec::new());
            while let Ok(read) = output.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                let arrived = now_ns();
                pending.extend_from_slice(&buffer[..read]);
                let whole = pending.len() / 4 * 4;
                let mut stamped = into.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let samples = pending[..whole].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                stamped.samples.extend(samples);
                pending.drain(..whole);
                let frames = (stamped.samples.len() / CHANNELS) as i128;
                let start = arrived - frames * 1_000_000_000 / i128::from(RATE);
                stamped.start_ns = Some(stamped.start_ns.map_or(start, |s| s.min(start)));
            }
        });
        StampedRecording { child, stamped }
    }

    /// The interleaved samples so far, and the `CLOCK_REALTIME` time (ns since the epoch) of the
    /// first (None before any).
    pub fn samples(&self) -> (Vec<f32>, Option<i128>) {
        let stamped = self.stamped.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (stamped.samples.clone(), stamped.start_ns)
    }

    /// The `CLOCK_REALTIME` times (ns since the epoch) of the onsets on channel `k`: a 1 ms window
    /// over -30 dBFS after ≥ `quiet_ms` of quiet ([`onsets_after_quiet`]).
    pub fn onset_times(&self, k: usize, quiet_ms: usize) -> Vec<i128> {
        let (samples, start) = self.samples();
        let Some(start) = start else { return Vec::new() };
        onsets_after_quiet(&channel(&samples, k), quiet_ms).into_iter().map(|s| start + (s * 1e9) as i128).collect()
    }
}

impl Drop for StampedRecording {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SoundServer for PipeWireServer {
    fn server_address(&self) -> String {
        self.address.clone()
    }

    fn client_env(&self) -> Vec<(&'static str, String)> {
        let runtime = self.dir.path().join("run").display().to_string();
        vec![("PULSE_SERVER", self.server_address()), ("PIPEWIRE_RUNTIME_DIR", runtime)]
    }
}

impl Drop for PipeWireServer {
    fn drop(&mut self) {
        // Already gone is fine: kill fails only when the process has exited.
        for (_, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
