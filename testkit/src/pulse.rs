//! A private PulseAudio server for one test: its own runtime directory and socket, so tests can
//! run in parallel, each with the sound card it builds from `module-null-sink` devices.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::sound_server::SoundServer;

/// How long the server may take to answer its first `pactl info`.
const START_DEADLINE: Duration = Duration::from_secs(10);
/// Pause between two readiness probes (each probe is a `pactl` run of a few milliseconds).
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A running `pulseaudio` with no devices until [`SoundServer::load_module`] adds some.
/// Dropping it kills the server and removes its directory.
#[derive(Debug)]
pub struct PulseServer {
    child: Child,
    address: String,
    // Dropped after `child` is killed (see `Drop`): it holds the socket and the log.
    dir: TempDir,
}

impl PulseServer {
    /// Starts the server and waits until it answers. Panics (with the server's log) when it
    /// exits or does not answer within the deadline.
    pub fn start() -> PulseServer {
        // Under /tmp, not $TMPDIR: a unix socket path must stay under 108 bytes.
        let dir = tempfile::Builder::new()
            .prefix("partyline-pulse-")
            .tempdir_in("/tmp")
            .expect("create the PulseAudio directory");
        let socket = dir.path().join("native");
        let address = format!("unix:{}", socket.display());
        let mut server = PulseServer { child: spawn(dir.path(), &socket), address, dir };
        server.wait_until_ready();
        server
    }

    fn wait_until_ready(&mut self) {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if self.pactl(&["info"]).status.success() {
                return;
            }
            if let Some(status) = self.child.try_wait().expect("poll pulseaudio") {
                panic!("pulseaudio exited ({status}) before answering:\n{}", self.log());
            }
            if Instant::now() >= deadline {
                panic!("pulseaudio did not answer within {START_DEADLINE:?}:\n{}", self.log());
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pulseaudio.log")).unwrap_or_default()
    }
}

impl SoundServer for PulseServer {
    fn server_address(&self) -> String {
        self.address.clone()
    }
}

/// Starts `pulseaudio` with every path it uses inside `dir`: no user config, no shared memory
/// (nothing to clean up), anonymous access on `socket`, and no idle exit.
fn spawn(dir: &Path, socket: &Path) -> Child {
    let home = dir.join("home");
    let runtime = dir.join("run");
    for path in [&home, &runtime] {
        std::fs::create_dir(path).expect("create a PulseAudio directory");
    }
    let log = File::create(dir.join("pulseaudio.log")).expect("create the PulseAudio log");
    Command::new("pulseaudio")
        .args(["--daemonize=no", "-n", "--exit-idle-time=-1", "--disable-shm=yes"])
        .arg(format!("--load=module-native-protocol-unix auth-anonymous=1 socket={}", socket.display()))
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("PULSE_RUNTIME_PATH", &runtime)
        // Keep the test's own sound server and session bus out of this one.
        .env_remove("PULSE_SERVER")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone the log file"))
        .stderr(log)
        .spawn()
        .expect("run pulseaudio (is pulseaudio installed?)")
}

impl Drop for PulseServer {
    fn drop(&mut self) {
        // Already gone is fine: kill fails only when the process has exited.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
