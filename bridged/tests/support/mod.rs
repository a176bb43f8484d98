//! Test harness: a private D-Bus bus, the real `partyline-bridged` binary on it, a private
//! PulseAudio (`pulse.rs`) and a private Janus (`scripts/janus-instance`).

#![allow(dead_code)]

pub mod pulse;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use partyline_shared::bridge::{BridgeProxy, Status};

/// A `dbus-daemon --session` of the test's own; killed on drop.
#[derive(Debug)]
pub struct Bus {
    pub address: String,
    pid: i32,
}

impl Bus {
    pub fn start() -> Bus {
        let output = Command::new("dbus-daemon")
            .args(["--session", "--fork", "--print-address=1", "--print-pid=1"])
            .stdin(Stdio::null())
            .output()
            .expect("run dbus-daemon (is dbus-daemon installed?)");
        assert!(output.status.success(), "dbus-daemon failed: {}", String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut lines = stdout.lines();
        let address = lines.next().expect("address line").trim().to_owned();
        let pid = lines.next().expect("pid line").trim().parse().expect("pid");
        Bus { address, pid }
    }

    pub async fn connect(&self) -> zbus::Connection {
        zbus::connection::Builder::address(self.address.as_str())
            .expect("address")
            .build()
            .await
            .expect("connect to the bus")
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
    }
}

/// The real binary, started on `bus`; SIGTERM (and wait) on drop.
#[derive(Debug)]
pub struct Bridged {
    child: Child,
    stderr: PathBuf,
    _dir: tempfile::TempDir,
}

impl Bridged {
    pub fn start(bus: &Bus, env: &[(&str, String)]) -> Bridged {
        let dir = tempfile::tempdir().expect("dir");
        let stderr = dir.path().join("bridged.log");
        let mut command = Command::new(env!("CARGO_BIN_EXE_partyline-bridged"));
        command
            .arg("--bus-address")
            .arg(&bus.address)
            .env("RUST_LOG", "info")
            .env_remove("PARTYLINE_BUS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("log file"));
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("start partyline-bridged");
        // Ready when it prints its line (the name is owned by then).
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("read the ready line");
        assert!(
            line.starts_with("partyline-bridged ready"),
            "no ready line ({line:?}); log:\n{}",
            std::fs::read_to_string(&stderr).unwrap_or_default()
        );
        Bridged { child, stderr, _dir: dir }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// SIGTERM and the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "bridged did not exit within 10 s of SIGTERM:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Bridged {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.terminate();
        }
    }
}

/// Polls `status()` until `done` holds (or panics after `within`, showing the last status).
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
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A private Janus (`scripts/janus-instance`), stopped on drop.
#[derive(Debug)]
pub struct Janus {
    dir: tempfile::TempDir,
    values: HashMap<String, String>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/janus-instance")
}

impl Janus {
    pub fn start(ice_iface: &str) -> Janus {
        let dir = tempfile::tempdir().expect("dir");
        let output = Command::new(script())
            .arg("start")
            .arg(dir.path())
            .args(["--ice-iface", ice_iface])
            .output()
            .expect("run janus-instance");
        assert!(output.status.success(), "janus-instance start failed:\n{}", String::from_utf8_lossy(&output.stderr));
        let env = std::fs::read_to_string(dir.path().join("instance.env")).expect("instance.env");
        let values = env
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
            .collect();
        Janus { dir, values }
    }

    pub fn value(&self, key: &str) -> &str {
        self.values.get(key).unwrap_or_else(|| panic!("{key} in instance.env"))
    }

    pub fn url(&self) -> &str {
        self.value("JANUS_URL")
    }
}

impl Drop for Janus {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.dir.path()).output();
    }
}
