//! Test harness: a private, real Janus instance (`scripts/janus-instance`) in a temp dir, on
//! free ports, configured from `packaging/janus/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Basic-auth user and password of the event handler's posts in tests.
pub const EVENT_USER: &str = "janus";

#[derive(Debug)]
pub struct Janus {
    dir: tempfile::TempDir,
    event_url: Option<String>,
    pub event_pass: String,
    values: HashMap<String, String>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/janus-instance")
}

impl Janus {
    /// Starts Janus without an event handler.
    pub fn start() -> Janus {
        Janus::launch(tempfile::tempdir().expect("dir"), None, "unused".into())
    }

    /// Starts Janus posting its events to `event_url` with basic auth (`EVENT_USER`, `event_pass`).
    pub fn start_with_events(event_url: &str, event_pass: &str) -> Janus {
        Janus::launch(tempfile::tempdir().expect("dir"), Some(event_url.to_owned()), event_pass.to_owned())
    }

    fn launch(dir: tempfile::TempDir, event_url: Option<String>, event_pass: String) -> Janus {
        let mut janus = Janus { dir, event_url, event_pass, values: HashMap::new() };
        janus.run_start(&[]);
        janus
    }

    fn run_start(&mut self, fixed: &[(&str, String)]) {
        let mut command = Command::new(script());
        command.arg("start").arg(self.dir.path());
        for (flag, value) in fixed {
            command.arg(flag).arg(value);
        }
        if let Some(url) = &self.event_url {
            command.args(["--event-url", url, "--event-user", EVENT_USER, "--event-pass", &self.event_pass]);
        }
        let output = command.output().expect("run janus-instance");
        assert!(output.status.success(), "janus-instance start failed:\n{}", String::from_utf8_lossy(&output.stderr));
        let env = std::fs::read_to_string(self.dir.path().join("instance.env")).expect("instance.env");
        self.values = env
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
            .collect();
    }

    fn value(&self, key: &str) -> &str {
        self.values.get(key).unwrap_or_else(|| panic!("{key} in instance.env"))
    }

    pub fn url(&self) -> &str {
        self.value("JANUS_URL")
    }

    pub fn admin_url(&self) -> &str {
        self.value("JANUS_ADMIN_URL")
    }

    pub fn ws_url(&self) -> &str {
        self.value("JANUS_WS_URL")
    }

    pub fn admin_secret(&self) -> &str {
        self.value("JANUS_ADMIN_SECRET")
    }

    pub fn room_admin_key(&self) -> &str {
        self.value("JANUS_ROOM_ADMIN_KEY")
    }

    /// The `janus:` section of a control config pointing at this instance.
    pub fn config_yaml(&self) -> String {
        format!(
            "janus:\n  url: {}\n  adminUrl: {}\n  wsUrl: {}\n  adminSecret: {}\n  roomAdminKey: {}\n",
            self.url(),
            self.admin_url(),
            self.ws_url(),
            self.admin_secret(),
            self.room_admin_key()
        )
    }

    /// Stops Janus (SIGTERM, waits for it to exit).
    pub fn stop(&self) {
        let output = Command::new(script()).arg("stop").arg(self.dir.path()).output().expect("run janus-instance");
        assert!(output.status.success(), "janus-instance stop failed:\n{}", String::from_utf8_lossy(&output.stderr));
    }

    /// Starts Janus again on the same ports and secrets (rooms and tokens are gone: they live
    /// in Janus's memory only).
    pub fn restart(&mut self) {
        self.stop();
        let fixed = [
            ("--http-port", self.value("JANUS_HTTP_PORT").to_owned()),
            ("--admin-port", self.value("JANUS_ADMIN_PORT").to_owned()),
            ("--ws-port", self.value("JANUS_WS_PORT").to_owned()),
            ("--admin-secret", self.admin_secret().to_owned()),
            ("--room-admin-key", self.room_admin_key().to_owned()),
        ];
        self.run_start(&fixed);
    }

    /// Janus's own log, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("janus.log")).unwrap_or_default()
    }
}

impl Drop for Janus {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.dir.path()).output();
    }
}
