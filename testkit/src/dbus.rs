//! A private D-Bus bus, and the real `partyline-bridged` on it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::sound_server::SoundServer;
use partyline_shared::bridge::{BridgeProxy, Status};

/// A `dbus-daemon --session` of the test's own; killed on drop.
#[derive(Debug)]
pub struct Bus {
    child: Child,
    pub address: String,
}

impl Bus {
    pub fn start() -> Bus {
        // Its socket in the test's temp dir (the run's, under scripts/netns-run), not the
        // session config's /tmp, where a killed daemon leaves it behind.
        let listen = format!("--address=unix:tmpdir={}", std::env::temp_dir().display());
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1", &listen])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run dbus-daemon (is dbus-daemon installed?)");
        let stdout = child.stdout.take().expect("stdout");
        let mut address = String::new();
        BufReader::new(stdout).read_line(&mut address).expect("address line");
        assert!(!address.trim().is_empty(), "dbus-daemon printed no address");
        Bus { child, address: address.trim().to_owned() }
    }

    /// A connection of the test's own to this bus.
    pub async fn connect(&self) -> zbus::Connection {
        zbus::connection::Builder::address(self.address.as_str())
            .expect("address")
            .build()
            .await
            .expect("connect to the bus")
    }

    /// A proxy of bridged on this bus, without a property cache (every read asks bridged).
    pub async fn bridge(&self) -> BridgeProxy<'static> {
        BridgeProxy::builder(&self.connect().await)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .expect("Bridge1 proxy")
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real partyline-bridged on a bus: started with `--bus-address`, ready once it printed its
/// ready line (the name is owned by then); stderr goes to `bridged.log` in a temp dir. SIGTERM
/// on drop (SIGKILL when it does not exit within 5 s).
#[derive(Debug)]
pub struct Bridged {
    child: Child,
    binary: PathBuf,
    bus_address: String,
    env: Vec<(String, String)>,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Bridged {
    /// The workspace's debug (or, from a release example, release) binary, with `env`.
    pub fn start(bus: &Bus, env: &[(&str, &str)]) -> Bridged {
        Bridged::start_binary(&crate::binary("partyline-bridged"), bus, env)
    }

    /// The workspace's binary on `bus` with the sound server `card` ([`SoundServer::client_env`])
    /// and `env`.
    pub fn on_card(bus: &Bus, card: &dyn SoundServer, env: &[(&str, &str)]) -> Bridged {
        Bridged::start_binary_on_card(&crate::binary("partyline-bridged"), bus, card, env)
    }

    /// `binary` on `bus` with the sound server `card` and `env`.
    pub fn start_binary_on_card(binary: &Path, bus: &Bus, card: &dyn SoundServer, env: &[(&str, &str)]) -> Bridged {
        let mut all = card.client_env();
        all.extend(env.iter().map(|(k, v)| (*k, (*v).to_owned())));
        let all: Vec<(&str, &str)> = all.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Bridged::start_binary(binary, bus, &all)
    }

    /// `binary` on `bus` with `env` (the benchmark passes a release build).
    pub fn start_binary(binary: &Path, bus: &Bus, env: &[(&str, &str)]) -> Bridged {
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Bridged::spawn(binary.to_owned(), bus.address.clone(), env)
    }

    fn spawn(binary: PathBuf, bus_address: String, env: Vec<(String, String)>) -> Bridged {
        let dir = tempfile::tempdir().expect("dir");
        let stderr = dir.path().join("bridged.log");
        let mut child = Command::new(&binary)
            .arg("--bus-address")
            .arg(&bus_address)
            .env("RUST_LOG", "info")
            .env_remove("PARTYLINE_BUS")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("log file"))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read the ready line");
        let bridged = Bridged { child, binary, bus_address, env, stderr, _dir: dir };
        assert!(line.starts_with("partyline-bridged ready"), "no ready line ({line:?}); log:\n{}", bridged.log());
        bridged
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The file its stderr goes to.
    pub fn log_path(&self) -> &Path {
        &self.stderr
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crash would; waits until it is gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A new process on the same bus with the same environment (after [`Bridged::kill`], as a
    /// service manager would restart it).
    pub fn restart(&mut self) {
        self.kill();
        *self = Bridged::spawn(self.binary.clone(), self.bus_address.clone(), self.env.clone());
    }

    /// SIGTERM; the exit status, or `None` when it did not exit within `within`.
    fn stop(&mut self, within: Duration) -> Option<ExitStatus> {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM and the exit status; panics when it does not exit within 10 s.
    pub fn terminate(&mut self) -> ExitStatus {
        let status = self.stop(Duration::from_secs(10));
        status.unwrap_or_else(|| panic!("bridged did not exit within 10 s of SIGTERM:\n{}", self.log()))
    }
}

impl Drop for Bridged {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() && self.stop(Duration::from_secs(5)).is_none() {
            self.kill();
        }
    }
}

/// Polls `Status()` until `done` holds (or panics after `within`, showing the last status).
pub async fn wait_status(
    proxy: &BridgeProxy<'_>,
    within: Duration,
    what: &str,
    done: impl Fn(&Status) -> bool,
) -> Status {
    let deadline = Instant::now() + within;
    loop {
        let status = proxy.status().await.expect("Status()");
        if done(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "waited {within:?} for {what}; last status: {status:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
