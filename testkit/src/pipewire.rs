//! A private PipeWire for one test, as Debian 12's desktop runs it: `pipewire`, the WirePlumber
//! session manager (it links streams to devices and picks the defaults) and `pipewire-pulse`
//! (PipeWire's PulseAudio server, which pactl, pulsesrc/pulsesink and control's device listing
//! talk to). Everything lives in the test's own runtime directory, with a private D-Bus session
//! bus for WirePlumber, so tests can run in parallel. Devices are added like PulseAudio's,
//! `pactl load-module module-null-sink …`: PipeWire makes each a null audio sink driven by a
//! timer.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::dbus::Bus;

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

    /// The address to put in `PULSE_SERVER` (or pass to `pactl --server`).
    pub fn server_address(&self) -> String {
        self.address.clone()
    }

    /// `pactl ARGS` on PipeWire's PulseAudio server.
    pub fn pactl(&self, args: &[&str]) -> Output {
        crate::pulse::pactl(&self.address, args)
    }

    /// `pactl load-module NAME ARGS`; returns the module index. Panics with pactl's stderr.
    pub fn load_module(&self, name: &str, args: &str) -> u32 {
        crate::pulse::load_module(&self.address, name, args)
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

impl Drop for PipeWireServer {
    fn drop(&mut self) {
        // Already gone is fine: kill fails only when the process has exited.
        for (_, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
