//! Test harness: a private, real Janus instance (`scripts/janus-instance`) in a temp dir, on
//! free ports, configured from `packaging/janus/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

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
}

impl Drop for Janus {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.dir.path()).output();
    }
}

/// A port nobody listens on now (for a listener that must be known before it starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Janus plus a control wired to it (rooms, tokens, the event handler's posts).
#[derive(Debug)]
pub struct Stack {
    pub janus: Janus,
    pub control: crate::support::Control,
}

impl Stack {
    /// Starts Janus (posting events to control) and control, with `groups` as the config's
    /// `groups:` section (YAML list items).
    pub async fn start(groups: &str) -> Stack {
        Stack::start_with_env(groups, &[]).await
    }

    /// [`Stack::start`] with extra environment for control.
    pub async fn start_with_env(groups: &str, env: &[(&str, &str)]) -> Stack {
        let events_port = free_port();
        let event_pass = "test-event-secret";
        let janus =
            Janus::start_with_events(&format!("http://127.0.0.1:{events_port}/api/internal/janus-events"), event_pass);
        let config = format!(
            "server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:{events_port}\n  tls: false\n{}  eventSecret: {event_pass}\naudio:\n  jitterBufferMs: 40\ngroups:\n{groups}",
            janus.config_yaml()
        );
        let builder = env.iter().fold(crate::support::Control::builder(), |b, (k, v)| b.env(k, v));
        let control = builder.config(Some(&config)).start().await;
        // Rooms exist once control's first reconciliation is through: joins before that fail.
        crate::support::wait_for("control in step with Janus", std::time::Duration::from_secs(10), async || {
            let (_, stats) = control.get_json("/admin/stats").await;
            (stats["janus"]["state"] == "up").then_some(())
        })
        .await;
        Stack { janus, control }
    }
}

/// A Janus API client of the test's own, speaking raw JSON (what a browser's janus.js sends).
#[derive(Debug)]
pub struct Probe {
    http: reqwest::Client,
    url: String,
    token: String,
    session: u64,
    handle: u64,
}

/// What a Janus request answered: the whole JSON, or Janus's error code.
pub type Answer = Result<Value, i64>;

impl Probe {
    /// A session with a handle on the AudioBridge, using `token`.
    pub async fn open(janus: &Janus, token: &str) -> Result<Probe, i64> {
        let http = crate::support::http();
        let mut probe = Probe { http, url: janus.url().to_owned(), token: token.to_owned(), session: 0, handle: 0 };
        probe.session = probe.call("", json!({"janus": "create"})).await?["data"]["id"].as_u64().expect("id");
        let attach = json!({"janus": "attach", "plugin": "janus.plugin.audiobridge"});
        probe.handle = probe.call(&format!("/{}", probe.session), attach).await?["data"]["id"].as_u64().expect("id");
        Ok(probe)
    }

    /// A probe with a fresh token added through the admin API (the test's own, like control's).
    pub async fn admin(janus: &Janus) -> Probe {
        let token = format!("probe-{}", free_port());
        let add = json!({"janus": "add_token", "transaction": "p", "admin_secret": janus.admin_secret(),
                         "token": token, "plugins": ["janus.plugin.audiobridge"]});
        let answer: Value = crate::support::http()
            .post(janus.admin_url())
            .json(&add)
            .send()
            .await
            .expect("sent")
            .json()
            .await
            .expect("json");
        assert_eq!(answer["janus"], "success", "{answer}");
        Probe::open(janus, &token).await.expect("probe session")
    }

    async fn call(&self, path: &str, mut body: Value) -> Answer {
        body["transaction"] = json!(format!("t{}", free_port()));
        body["token"] = json!(self.token);
        let answer: Value = self
            .http
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .expect("Janus reachable")
            .json()
            .await
            .expect("json");
        match answer["janus"].as_str() {
            Some("error") => Err(answer["error"]["code"].as_i64().unwrap_or(-1)),
            _ => Ok(answer),
        }
    }

    /// An AudioBridge request; plugin errors are `Err(error_code)`.
    pub async fn audiobridge(&self, body: Value) -> Answer {
        let answer =
            self.call(&format!("/{}/{}", self.session, self.handle), json!({"janus": "message", "body": body})).await?;
        let data = answer["plugindata"]["data"].clone();
        match data["error_code"].as_i64() {
            Some(code) => Err(code),
            None => Ok(data),
        }
    }

    /// The room ids Janus has.
    pub async fn rooms(&self) -> Vec<String> {
        let list = self.audiobridge(json!({"request": "list"})).await.expect("list");
        let mut rooms: Vec<String> = list["list"]
            .as_array()
            .expect("list")
            .iter()
            .map(|r| r["room"].as_str().expect("room").to_owned())
            .collect();
        rooms.sort();
        rooms
    }

    /// The participant ids of `room` (`Err` with 485 for no such room).
    pub async fn participants(&self, room: &str) -> Result<Vec<String>, i64> {
        let answer = self.audiobridge(json!({"request": "listparticipants", "room": room})).await?;
        Ok(answer["participants"]
            .as_array()
            .expect("participants")
            .iter()
            .map(|p| p["id"].as_str().expect("id").to_owned())
            .collect())
    }

    /// Joins `room` as `id` (signalling only: no PeerConnection). Janus answers `ack`; the
    /// participant is in the room once `listparticipants` shows it.
    pub async fn join(&self, room: &str, id: &str, display: &str) -> Answer {
        let body = json!({"request": "join", "room": room, "id": id, "display": display, "muted": true});
        self.call(&format!("/{}/{}", self.session, self.handle), json!({"janus": "message", "body": body})).await
    }

    /// Ends the session (the participant leaves its room).
    pub async fn destroy(&self) -> Answer {
        self.call(&format!("/{}", self.session), json!({"janus": "destroy"})).await
    }
}
