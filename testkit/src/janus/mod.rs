//! A private, real Janus instance (`scripts/janus-instance`) in a temp dir, on free ports,
//! configured from `packaging/janus/`, and a raw JSON client of its APIs ([`Probe`]).
//!
//! This client is independent of the daemons' (`partyline_shared::janus::client`) on purpose,
//! and must stay so: the tests use it as an oracle, to see what Janus really holds after control
//! or bridged acted (rooms, participants, tokens, whether a join is admitted). An oracle sharing
//! the code it checks would share its mistakes (a request shaped wrongly, an answer misread) and
//! agree with it. So it speaks raw JSON, as a browser's janus.js does, and imports no message
//! type from `partyline_shared::janus`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::netns::{NODE_IFACE, NODE_PREFIX, NodeNet};

mod probe;

pub use probe::{Answer, Probe};

/// Basic-auth user of the event handler's posts, unless a node's name is given
/// ([`Builder::node_events`]): the first node's other name, as the package's Janus posts.
pub const EVENT_USER: &str = "janus";

fn script() -> PathBuf {
    crate::repo_path("scripts/janus-instance")
}

/// A unique transaction id or token suffix.
fn unique() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// How a [`Janus`] is started.
#[derive(Debug, Default, Clone)]
pub struct Builder {
    event_url: Option<String>,
    event_user: String,
    event_pass: String,
    ice_iface: Option<String>,
    own_namespace: bool,
    event_loops: Option<u32>,
}

impl Builder {
    /// Janus posts its events to `url` with basic auth ([`EVENT_USER`], `pass`).
    pub fn events(self, url: &str, pass: &str) -> Builder {
        self.node_events(url, EVENT_USER, pass)
    }

    /// Janus posts its events to `url` as pool node `name` with its own password `pass` (what
    /// its `janus.nodes` entry's `eventSecret` is: [`Janus::node_yaml`]).
    pub fn node_events(mut self, url: &str, name: &str, pass: &str) -> Builder {
        self.event_url = Some(url.to_owned());
        name.clone_into(&mut self.event_user);
        pass.clone_into(&mut self.event_pass);
        self
    }

    /// ICE only on `iface` (`nat: ice_enforce_list`): [`crate::ICE_IFACE`] for media tests.
    pub fn ice_iface(mut self, iface: &str) -> Builder {
        self.ice_iface = Some(iface.to_owned());
        self
    }

    /// Janus's `event_loops`: `n` shared loop threads for the handles' media instead of one
    /// thread per handle (the capacity bench's A/B).
    pub fn event_loops(mut self, n: u32) -> Builder {
        self.event_loops = Some(n);
        self
    }

    /// In a network namespace of its own ([`NodeNet`]), as a node of a pool on a host of its
    /// own: its APIs, ICE and plain RTP on its link's address.
    pub fn own_namespace(mut self) -> Builder {
        self.own_namespace = true;
        self
    }

    /// Starts it with secrets of its own.
    pub fn start(self) -> Janus {
        let net = self.own_namespace.then(NodeNet::create);
        let mut janus = Janus { dir: tempfile::tempdir().expect("dir"), options: self, values: HashMap::new(), net };
        janus.run_start(&[]);
        janus
    }
}

/// A running Janus; stopped on drop.
#[derive(Debug)]
pub struct Janus {
    dir: tempfile::TempDir,
    options: Builder,
    values: HashMap<String, String>,
    /// Its namespace, when it has one: removed after Janus stopped (fields drop after `drop`).
    net: Option<NodeNet>,
}

impl Janus {
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts Janus without an event handler.
    pub fn start() -> Janus {
        Janus::builder().start()
    }

    /// Starts Janus posting its events to `event_url` with basic auth ([`EVENT_USER`], `event_pass`).
    pub fn start_with_events(event_url: &str, event_pass: &str) -> Janus {
        Janus::builder().events(event_url, event_pass).start()
    }

    fn run_start(&mut self, fixed: &[(&str, String)]) {
        let mut command = Command::new(script());
        command.arg("start").arg(self.dir.path());
        for (flag, value) in fixed {
            command.arg(flag).arg(value);
        }
        if let Some(url) = &self.options.event_url {
            let (user, pass) = (&self.options.event_user, &self.options.event_pass);
            command.args(["--event-url", url, "--event-user", user, "--event-pass", pass]);
        }
        if let Some(net) = &self.net {
            command.args(["--netns", &net.name, "--bind", &net.address, "--allow", NODE_PREFIX]);
            command.args(["--ice-iface", NODE_IFACE]);
        } else if let Some(iface) = &self.options.ice_iface {
            command.args(["--ice-iface", iface]);
        }
        if let Some(loops) = self.options.event_loops {
            command.args(["--event-loops", &loops.to_string()]);
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

    /// Its instance directory (`janus.pid`, `janus.log`, `instance.env`).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A value of the instance's `instance.env` (`JANUS_HTTP_PORT`, …).
    pub fn value(&self, key: &str) -> &str {
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

    /// The event handler's password (what control's `janus.eventSecret` must be).
    pub fn event_pass(&self) -> &str {
        &self.options.event_pass
    }

    /// One entry of `janus.nodes` for this instance, named `name`, carrying `capacity`
    /// participants, with its own secrets (YAML list item, indented for `janus:`), its event
    /// password among them when it posts events.
    pub fn node_yaml(&self, name: &str, capacity: u32) -> String {
        let event_secret = match &self.options.event_url {
            Some(_) => format!("      eventSecret: {}\n", self.options.event_pass),
            None => String::new(),
        };
        format!(
            "    - name: {name}\n      url: {}\n      adminUrl: {}\n      wsUrl: {}\n      capacity: {capacity}\n      \
             adminSecret: {}\n      roomAdminKey: {}\n{event_secret}",
            self.url(),
            self.admin_url(),
            self.ws_url(),
            self.admin_secret(),
            self.room_admin_key()
        )
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

    /// Kills Janus with SIGKILL, as a crash would (no `shutdown` event, no session closed), and
    /// waits until it is gone. [`Janus::restart`] may follow.
    pub fn kill(&self) {
        let pid = std::fs::read_to_string(self.dir.path().join("janus.pid")).expect("janus.pid");
        let pid = pid.trim();
        let status = Command::new("kill").arg("-KILL").arg(pid).status().expect("kill");
        assert!(status.success(), "kill -KILL {pid} failed");
        // Not our child: gone once /proc shows no process, or only a zombie nobody reaped yet.
        let pid: i32 = pid.parse().expect("a process id");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let state = procfs::process::Process::new(pid).and_then(|p| p.stat()).map(|stat| stat.state);
            if state.is_err() || state.is_ok_and(|s| s == 'Z' || s == 'X') {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "Janus (pid {pid}) still running 10 s after SIGKILL");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Sends Janus `signal` (`STOP`, `CONT`): a stopped Janus keeps its connections, rooms and
    /// tokens but answers nothing until continued, as a hung or unreachable one.
    pub fn signal(&self, signal: &str) {
        let pid = std::fs::read_to_string(self.dir.path().join("janus.pid")).expect("janus.pid");
        let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.trim()).status().expect("kill");
        assert!(status.success(), "kill -{signal} of Janus failed");
    }

    /// Starts Janus again on the same ports and secrets, with the same events and ICE settings
    /// (rooms and tokens are gone: they live in Janus's memory only).
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

    /// A request to the admin API (`admin_secret` and `transaction` added).
    pub async fn admin(&self, mut body: Value) -> Value {
        body["transaction"] = json!(unique());
        body["admin_secret"] = json!(self.admin_secret());
        let response = crate::http().post(self.admin_url()).json(&body).send().await.expect("Janus admin API");
        response.json().await.expect("JSON from the admin API")
    }

    /// Each AudioBridge participant's incoming queue, by display name: `queue-in` of the admin
    /// API's `handle_info` (its packets waiting to be mixed), sampled `samples` times `every`
    /// apart. AudioBridge (1.1.2) leaves `queue-in` out while the queue is empty: that is a 0.
    pub async fn incoming_queues(&self, samples: usize, every: std::time::Duration) -> BTreeMap<String, Vec<u64>> {
        let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for _ in 0..samples {
            for (display, plugin) in self.participants().await {
                seen.entry(display).or_default().push(plugin["queue-in"].as_u64().unwrap_or(0));
            }
            tokio::time::sleep(every).await;
        }
        seen
    }

    /// Every AudioBridge participant as the admin API's `handle_info` shows it (its
    /// `plugin_specific`: prebuffering, queue, FEC, expected loss, …), by display name.
    pub async fn participants(&self) -> BTreeMap<String, Value> {
        let mut seen = BTreeMap::new();
        let sessions = self.admin(json!({"janus": "list_sessions"})).await;
        for session in sessions["sessions"].as_array().into_iter().flatten() {
            let handles = self.admin(json!({"janus": "list_handles", "session_id": session})).await;
            for handle in handles["handles"].as_array().into_iter().flatten() {
                let mut info =
                    self.admin(json!({"janus": "handle_info", "session_id": session, "handle_id": handle})).await;
                let plugin = info["info"]["plugin_specific"].take();
                if let Some(display) = plugin["display"].as_str() {
                    seen.insert(display.to_owned(), plugin);
                }
            }
        }
        seen
    }

    /// Registers `token` for the AudioBridge (stored-token auth).
    pub async fn add_token(&self, token: &str) {
        let answer =
            self.admin(json!({"janus": "add_token", "token": token, "plugins": ["janus.plugin.audiobridge"]})).await;
        assert_eq!(answer["janus"], "success", "add_token: {answer}");
    }

    /// Creates AudioBridge room `room` at 48 kHz with `prebuffering` packets (what control
    /// makes of `audio.jitterBufferMs`: 40 ms → 2), admitting plain-RTP participants as control's
    /// rooms do, through a probe of the test's own.
    pub async fn create_room(&self, room: &str, prebuffering: u32) {
        let probe = Probe::admin(self).await;
        let created = probe
            .audiobridge(json!({"request": "create", "admin_key": self.room_admin_key(), "room": room,
                                "sampling_rate": 48000, "default_prebuffering": prebuffering,
                                "secret": "room-secret", "permanent": false, "allow_rtp_participants": true}))
            .await
            .unwrap_or_else(|code| panic!("create room {room}: Janus error {code}"));
        assert_eq!(created["audiobridge"], "created", "{created}");
        let _ = probe.destroy().await;
    }
}

impl Drop for Janus {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.dir.path()).output();
    }
}
