//! Test harness: a private D-Bus daemon, and the real `partyline-bridged` on it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A private bus (`dbus-daemon --session`), killed on drop.
#[derive(Debug)]
pub struct Bus {
    child: Child,
    pub address: String,
}

impl Bus {
    pub fn start() -> Bus {
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("dbus-daemon (package dbus-daemon)");
        let stdout = child.stdout.take().expect("stdout");
        let mut address = String::new();
        BufReader::new(stdout).read_line(&mut address).expect("address line");
        assert!(!address.trim().is_empty(), "dbus-daemon printed no address");
        Bus { child, address: address.trim().to_owned() }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bridged binary of this workspace (built by `cargo test --workspace`).
fn bridged_binary() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/debug/partyline-bridged");
    assert!(path.exists(), "{} is missing: run `cargo build -p partyline-bridged`", path.display());
    path
}

/// The real partyline-bridged on `bus`, killed on drop; its stderr goes to `bridged.log` in a
/// temp dir (kept while it runs, for a look when a test hangs).
#[derive(Debug)]
pub struct Bridged {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Bridged {
    pub fn start(bus: &Bus, env: &[(&str, &str)]) -> Bridged {
        let dir = tempfile::tempdir().expect("dir");
        let log = dir.path().join("bridged.log");
        let child = Command::new(bridged_binary())
            .args(["--bus-address", &bus.address])
            .envs(env.iter().copied())
            .stderr(std::fs::File::create(&log).expect("log"))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn partyline-bridged");
        Bridged { child, _dir: dir }
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Bridged {
    fn drop(&mut self) {
        self.kill();
    }
}
