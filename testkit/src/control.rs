//! The real `partyline-control`, started on 127.0.0.1:0 in a temp directory, and a client for
//! its API.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// A sound server address where none listens (a test's `.env("PULSE_SERVER", …)` replaces it).
pub const NO_SOUND_SERVER: &str = "unix:/nonexistent/partyline-no-sound-server";

/// The head of every test config: loopback, any free port, plain HTTP.
pub const LOOPBACK_PLAIN: &str = "server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:0\n  tls: false\n";

#[derive(Debug, Default)]
pub struct Builder {
    config: Option<String>,
    env: Vec<(String, Option<String>)>,
    dir: Option<Arc<tempfile::TempDir>>,
    binary: Option<PathBuf>,
    user: Option<(u32, u32)>,
    open_files: Option<u64>,
}

impl Builder {
    /// The config file's initial text (default: [`LOOPBACK_PLAIN`]); `None` leaves no file.
    pub fn config(mut self, text: Option<&str>) -> Self {
        self.config = text.map(str::to_owned);
        self
    }

    /// The binary to run (default: the workspace's `partyline-control` next to the test).
    pub fn binary(mut self, path: &Path) -> Self {
        self.binary = Some(path.to_owned());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), Some(value.to_owned())));
        self
    }

    /// Starts the binary without the variable `key` (the test's own, or one set before).
    pub fn env_remove(mut self, key: &str) -> Self {
        self.env.push((key.to_owned(), None));
        self
    }

    /// Runs the binary as user `uid`, group `gid` (the test runs as root): its directory is
    /// handed over to that user.
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.user = Some((uid, gid));
        self
    }

    /// Runs the binary with at most `limit` open files (soft and hard `RLIMIT_NOFILE`, through
    /// util-linux's `prlimit`), as a systemd unit's `LimitNOFILE` does.
    pub fn open_files(mut self, limit: u64) -> Self {
        self.open_files = Some(limit);
        self
    }

    /// Starts the binary and waits until it listens.
    pub async fn start(self) -> Control {
        let dir = self.dir.unwrap_or_else(|| {
            // Another user cannot reach into the test's $TMPDIR (scripts/netns-run's is 0700).
            let dir = if self.user.is_some() { tempfile::tempdir_in("/tmp") } else { tempfile::tempdir() };
            Arc::new(dir.expect("temp dir"))
        });
        let config_path = dir.path().join("partyline.yaml");
        if let Some(text) = self.config.filter(|_| !config_path.exists()) {
            std::fs::write(&config_path, text).expect("write config");
        }
        if let Some((uid, gid)) = self.user {
            for path in [dir.path(), config_path.as_path()].into_iter().filter(|path| path.exists()) {
                std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("hand the directory over");
            }
        }
        let binary = self.binary.unwrap_or_else(|| crate::binary("partyline-control"));
        let launch = Launch { env: self.env, user: self.user, open_files: self.open_files };
        Control::spawn(binary, dir, config_path, launch).await
    }
}

/// How a control process is started, again on a respawn.
#[derive(Debug, Clone)]
struct Launch {
    /// Its environment (`None`: removed).
    env: Vec<(String, Option<String>)>,
    /// The user and group it runs as.
    user: Option<(u32, u32)>,
    /// Its `RLIMIT_NOFILE`.
    open_files: Option<u64>,
}

/// A running control process; killed on drop.
#[derive(Debug)]
pub struct Control {
    child: Child,
    binary: PathBuf,
    dir: Arc<tempfile::TempDir>,
    config_path: PathBuf,
    env: Launch,
    pub origin: String,
    /// The loopback events listener (`http://127.0.0.1:PORT`).
    pub events_origin: String,
    pub token: String,
    client: reqwest::Client,
}

impl Control {
    pub fn builder() -> Builder {
        // No sound server unless a test gives one: `pactl` would otherwise look for the
        // machine's (or spawn one as this user, leaving its runtime link behind in $HOME).
        Builder::default().config(Some(LOOPBACK_PLAIN)).env("PULSE_SERVER", NO_SOUND_SERVER)
    }

    /// A control with the default test config.
    pub async fn start() -> Control {
        Control::builder().start().await
    }

    async fn spawn(binary: PathBuf, dir: Arc<tempfile::TempDir>, config_path: PathBuf, env: Launch) -> Control {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("control.log"))
            .expect("log file");
        let mut command = match env.open_files {
            Some(limit) => {
                let mut prlimit = Command::new("prlimit");
                prlimit.arg(format!("--nofile={limit}:{limit}")).arg("--").arg(&binary);
                prlimit
            }
            None => Command::new(&binary),
        };
        command
            .arg("--config")
            .arg(&config_path)
            .env_remove("PARTYLINE_ADMIN_TOKEN")
            .env_remove("PARTYLINE_CONFIG")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(log);
        for (key, value) in &env.env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        if let Some((uid, gid)) = env.user {
            std::os::unix::process::CommandExt::uid(&mut command, uid);
            std::os::unix::process::CommandExt::gid(&mut command, gid);
        }
        let mut child = command.spawn().expect("spawn partyline-control");
        let stdout = child.stdout.take().expect("stdout");
        // The ready line carries the origins; read it off the blocking pipe on a thread.
        let ready = tokio::task::spawn_blocking(move || {
            let line = BufReader::new(stdout).lines().next()?.ok()?;
            let rest = line.strip_prefix("partyline-control listening on ")?;
            let origin = rest.split_whitespace().next()?.to_owned();
            let events = rest.split("events ").nth(1)?.trim_end_matches(')').to_owned();
            Some((origin, events))
        });
        let ready = tokio::time::timeout(Duration::from_secs(20), ready).await;
        let Ok(Ok(Some((origin, events_origin)))) = ready else {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.path().join("control.log")).unwrap_or_default();
            panic!("partyline-control did not start:\n{log}");
        };
        let token = env
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PARTYLINE_ADMIN_TOKEN")
            .and_then(|(_, v)| v.clone())
            .unwrap_or_else(|| {
                std::fs::read_to_string(dir.path().join("admin-token")).unwrap_or_default().trim().to_owned()
            });
        // Listening on every address: reached on loopback, which its certificate names.
        let origin = origin.replacen("//0.0.0.0:", "//127.0.0.1:", 1);
        let client = match std::fs::read(dir.path().join("tls-cert.pem")) {
            Ok(pem) if origin.starts_with("https:") => crate::http_trusting(&pem),
            _ => crate::http(),
        };
        Control { child, binary, dir, config_path, env, origin, events_origin, token, client }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// The config file's text now.
    pub fn config_text(&self) -> String {
        std::fs::read_to_string(&self.config_path).expect("read config")
    }

    /// What the process wrote to stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The file its stderr goes to.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("control.log")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (e.g. "KILL", "HUP") to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status().expect("kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Kills the process with SIGKILL and waits until it is gone, so the files it had open are
    /// as the crash left them. [`Control::restart`] may follow.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the process with SIGKILL and starts a new one on the same directory.
    pub async fn restart(mut self) -> Control {
        self.respawn().await;
        self
    }

    /// [`Control::restart`] in place, for a control held in a struct: SIGKILL (a no-op after
    /// [`Control::kill`]), then a new process on the same config file and state dir, returning
    /// once it listens.
    pub async fn respawn(&mut self) {
        self.kill();
        let (binary, dir) = (self.binary.clone(), Arc::clone(&self.dir));
        let (config_path, env) = (self.config_path.clone(), self.env.clone());
        *self = Control::spawn(binary, dir, config_path, env).await;
    }

    /// A URL on the events listener.
    pub fn events_url(&self, path: &str) -> String {
        format!("{}{path}", self.events_origin)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/api{path}", self.origin)
    }

    /// A request to `{origin}/api{path}` with the admin token.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, self.url(path)).bearer_auth(&self.token)
    }

    /// Sends a request (JSON body if given) and returns the status and the JSON body.
    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        crate::read(request.send().await.expect("request sent")).await
    }

    pub async fn get_json(&self, path: &str) -> (StatusCode, Value) {
        self.send(Method::GET, path, None).await
    }

    pub async fn post_json(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn put_json(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.send(Method::DELETE, path, None).await
    }

    /// The group ids the API lists.
    pub async fn group_ids(&self) -> Vec<String> {
        let (status, body) = self.get_json("/admin/groups").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["groups"].as_array().expect("groups").iter().map(|g| g["id"].as_str().expect("id").to_owned()).collect()
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
