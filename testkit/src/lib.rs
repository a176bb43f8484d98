//! partyline's test harnesses, one copy for every crate's tests (and `bench/audio`): the test
//! sound card, null sinks on a private sound server ([`card`]): PipeWire with its PulseAudio
//! server ([`pipewire`]) or PulseAudio ([`pulse`]), ALSA devices of a test's own ([`alsa`]), a private D-Bus bus and the real
//! `partyline-bridged` on it ([`dbus`]), a private Janus ([`janus`]), the real
//! `partyline-control` ([`control`]), tones and their measurement ([`audio`]), a WebRTC panel for
//! partyline's own rooms ([`webrtc_panel`]), and the small helpers below.

pub mod aes67;
pub mod alsa;
pub mod audio;
pub mod bench;
pub mod card;
pub mod control;
pub mod dbus;
pub mod events;
pub mod intruder;
pub mod janus;
pub mod janus_proxy;
pub mod netns;
pub mod pipewire;
pub mod plan;
pub mod pulse;
pub mod sound_server;
pub mod stack;
pub mod webrtc_panel;

pub use sound_server::SoundServer;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

/// The non-loopback interface of the network namespace media tests run in.
pub const ICE_IFACE: &str = "pl0";
/// Its address, given to bridged's ICE agent (`bridge.iceAddresses`).
pub const ICE_ADDRESS: &str = "10.77.0.1";

/// Fails, naming the way out, unless this runs inside a network namespace holding
/// [`ICE_IFACE`] (`scripts/netns-run`): Janus offers no loopback ICE candidate, so media needs it.
pub fn require_namespace() {
    assert!(
        Path::new("/sys/class/net").join(ICE_IFACE).exists(),
        "interface {ICE_IFACE} is missing: media tests run inside a network namespace holding {ICE_IFACE} \
         ({ICE_ADDRESS}/24); run them with `scripts/netns-run cargo test …`"
    );
}

/// Lets this process hold `limit` files open, or as many as its hard limit allows (the soft
/// `RLIMIT_NOFILE` raised through util-linux's `prlimit` on itself): for tests that hold
/// connections by the thousand, whatever soft limit they were started with. Never lowers it.
pub fn raise_open_files(limit: u64) {
    use procfs::process::LimitValue;
    let Ok(limits) = procfs::process::Process::myself().and_then(|me| me.limits()) else { return };
    let value = |limit: LimitValue| match limit {
        LimitValue::Value(value) => value,
        LimitValue::Unlimited => u64::MAX,
    };
    let (soft, hard) = (value(limits.max_open_files.soft_limit), value(limits.max_open_files.hard_limit));
    let wanted = limit.min(hard);
    if soft < wanted {
        let pid = std::process::id().to_string();
        let status =
            std::process::Command::new("prlimit").args(["--pid", &pid, &format!("--nofile={wanted}:")]).status();
        assert!(status.is_ok_and(|s| s.success()), "cannot raise the open-file limit to {wanted} (prlimit)");
    }
}

/// Polls `check` every 20 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn wait_for<T>(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A TCP port on `ip` kept for a listener that must be known before it starts: Janus is told
/// control's events address before control listens on it. A port merely found free may be
/// taken in between by any of the tests running beside (a listener on port 0, or the local end
/// of an outgoing connection). This one is held by a socket bound with `SO_REUSEADDR` and never
/// listening: the kernel gives the port to nobody else while it is held, yet the daemon's own
/// listener, which sets `SO_REUSEADDR` too (tokio's does), binds and listens on it. Keep it
/// as long as the daemon may start again on the same port.
#[derive(Debug)]
pub struct ReservedPort {
    port: u16,
    _hold: socket2::Socket,
}

impl ReservedPort {
    pub fn on(ip: std::net::IpAddr) -> ReservedPort {
        use socket2::{Domain, Socket, Type};
        let hold = Socket::new(Domain::for_address((ip, 0).into()), Type::STREAM, None).expect("a socket");
        hold.set_reuse_address(true).expect("SO_REUSEADDR");
        hold.bind(&std::net::SocketAddr::from((ip, 0)).into()).expect("bind to port 0");
        let port = hold.local_addr().ok().and_then(|a| a.as_socket()).expect("its address").port();
        ReservedPort { port, _hold: hold }
    }

    pub fn loopback() -> ReservedPort {
        ReservedPort::on(std::net::Ipv4Addr::LOCALHOST.into())
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

/// An HTTP client for tests. reqwest is built without a bundled crypto provider, so the
/// process's is installed first (the daemons' own function: which provider a test process uses
/// is no part of what the tests check, since the daemons run as processes of their own). No
/// proxy: everything tests talk to is local. Pooled connections are let go after 5 s idle:
/// control closes one idle for 10 s, and a request sent on it at that moment fails
/// (`IncompleteMessage`) instead of reaching control.
pub fn http() -> reqwest::Client {
    http_builder().build().expect("client")
}

/// [`http`] trusting the certificate `pem` (a control's own, self-signed) and no other.
pub fn http_trusting(pem: &[u8]) -> reqwest::Client {
    let certificate = reqwest::Certificate::from_pem(pem).expect("a PEM certificate");
    http_builder().tls_certs_only([certificate]).build().expect("client")
}

fn http_builder() -> reqwest::ClientBuilder {
    partyline_shared::crypto::install_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).pool_idle_timeout(POOL_IDLE);
    client.no_proxy()
}

/// Below control's idle timeout (`linger::IDLE_TIMEOUT`, 10 s).
const POOL_IDLE: Duration = Duration::from_secs(5);

/// The status and JSON body of a response (`Value::Null` for an empty body; panics on non-JSON).
pub async fn read(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.expect("body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("non-JSON body ({e}) with {status}: {text}"))
    };
    (status, body)
}

/// A binary of this workspace next to the running test or example (`target/PROFILE/NAME`: the
/// test binaries live in `target/PROFILE/deps`, examples in `target/PROFILE/examples`).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the running executable");
    let mut dir = exe.parent().expect("its folder").to_path_buf();
    if dir.ends_with("deps") || dir.ends_with("examples") {
        dir.pop();
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build it (`cargo build --workspace --all-features --bins`, as scripts/test does)",
        path.display()
    );
    path
}

/// A file of the repository (`scripts/janus-instance`, …).
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative)
}
