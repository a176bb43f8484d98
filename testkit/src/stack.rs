//! The stack as control's integration tests, the whole-stack tests (`e2e/`) and the browser
//! suites (through the `partyline-stack` binary) start it: Janus, or a pool of Janus nodes, plus
//! a control wired to it and, on request, the sound card side (bridged on a private bus and
//! PulseAudio); and what tests ask of it. The Janus harness itself is [`crate::janus`].

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use partyline_crew::control_api::Lines;
use partyline_crew::media::Link;
use partyline_crew::{Options, TlsCheck};
use partyline_shared::config::DEFAULT_NODE_CAPACITY;
use serde_json::{Value, json};

use crate::audio::RATE;
use crate::control::Control;
use crate::dbus::{Bridged, Bus};
use crate::janus::{Janus, Probe};
use crate::pulse::PulseServer;
use crate::sound_server::SoundServer;
use crate::{ICE_ADDRESS, ICE_IFACE, ReservedPort, wait_for};

/// Janus (one node, or a pool of them) plus a control wired to it (rooms, tokens, the event
/// handler's posts), and the sound card side when asked for ([`Builder::card`]).
#[derive(Debug)]
pub struct Stack {
    /// First, so that it stops first: bridged leaves its Janus rooms on SIGTERM.
    pub card: Option<CardSide>,
    /// The one node, or the pool's first.
    pub janus: Janus,
    /// The pool's other nodes, in the config's order ([`Builder::nodes`]).
    pub other_nodes: Vec<Janus>,
    pub control: Control,
    /// control's events port, which Janus was told before control listened (and again if
    /// control restarts).
    _events_port: ReservedPort,
}

/// The sound card side of a [`Stack`]: the real bridged on a private bus, its card two 8-channel
/// null sinks on a private PulseAudio (`card_in`, whose monitor is the card's input, and
/// `card_out`, its output), chosen through control's API.
#[derive(Debug)]
pub struct CardSide {
    /// First, so that it stops before its bus and sound server.
    pub bridged: Bridged,
    pub pulse: PulseServer,
    pub bus: Bus,
}

/// A node of a Janus pool ([`Builder::nodes`]; `partyline-stack` reads it from its options).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Its name in the config (its event handler posts under it).
    pub name: String,
    pub site: Option<String>,
    /// Participants it carries ([`DEFAULT_NODE_CAPACITY`] when `None`).
    pub capacity: Option<u32>,
}

/// How a [`Stack`] is started.
#[derive(Debug, Default)]
pub struct Builder {
    janus: crate::janus::Builder,
    nodes: Vec<Node>,
    groups: String,
    extra: String,
    env: Vec<(String, String)>,
    bridge: String,
    bridged_env: Vec<(String, String)>,
    listen: Option<String>,
    tls: bool,
    card: bool,
    rooms: bool,
    rooms_ip: Option<IpAddr>,
    control_binary: Option<PathBuf>,
    bridged_binary: Option<PathBuf>,
}

impl Builder {
    /// Each Janus built from `janus` (its ICE interface, event loops…).
    pub fn janus(mut self, janus: crate::janus::Builder) -> Self {
        self.janus = janus;
        self
    }

    /// A pool of these nodes instead of one Janus, each with secrets and an event password of its
    /// own (the pool's secrets are the first's).
    pub fn nodes(mut self, nodes: Vec<Node>) -> Self {
        self.nodes = nodes;
        self
    }

    /// The config's `groups:` section (YAML list items, and what may follow them: positions…).
    pub fn groups(mut self, groups: &str) -> Self {
        groups.clone_into(&mut self.groups);
        self
    }

    /// Appended to control's config: top-level YAML sections (`crew:`, `media:`…).
    pub fn config(mut self, extra: &str) -> Self {
        extra.clone_into(&mut self.extra);
        self
    }

    /// Environment for control.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// More of the config's `bridge:` section with the card (indented keys: `  jitterBufferMs: 20`).
    pub fn bridge(mut self, keys: &str) -> Self {
        keys.clone_into(&mut self.bridge);
        self
    }

    /// Environment for bridged (with the card).
    pub fn bridged_env(mut self, key: &str, value: &str) -> Self {
        self.bridged_env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// control's listener (`server.listen`; default `127.0.0.1:0`).
    pub fn listen(mut self, address: &str) -> Self {
        self.listen = Some(address.to_owned());
        self
    }

    /// control speaks HTTPS with the certificate it generates (its client trusts that one).
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// With the sound card side ([`CardSide`]); bridged's ICE on [`ICE_ADDRESS`].
    pub fn card(mut self, on: bool) -> Self {
        self.card = on;
        self
    }

    /// The panels' media on partyline's own rooms (`media.engine: bridged`, bridged's rooms on
    /// [`ICE_ADDRESS`]); the card side comes with them.
    pub fn rooms(mut self, on: bool) -> Self {
        self.rooms = on;
        self
    }

    /// The rooms' address instead of [`ICE_ADDRESS`]: the one a Janus of
    /// [`crate::janus::Builder::ice_iface`] gathers on, where a test's network reaches the media.
    pub fn rooms_ip(mut self, ip: IpAddr) -> Self {
        self.rooms_ip = Some(ip);
        self
    }

    /// The control binary to run (default: the workspace's next to the running program).
    pub fn control_binary(mut self, path: PathBuf) -> Self {
        self.control_binary = Some(path);
        self
    }

    /// The bridged binary to run (default: the workspace's next to the running program).
    pub fn bridged_binary(mut self, path: PathBuf) -> Self {
        self.bridged_binary = Some(path);
        self
    }

    /// Starts Janus (posting its events to control), then control, then (with the card) bridged;
    /// returns once control is in step with every node and, with the card, has chosen it.
    pub async fn start(self) -> Stack {
        let with_card = self.card || self.rooms;
        let events_port = ReservedPort::loopback();
        let events_url = format!("http://127.0.0.1:{}/api/internal/janus-events", events_port.port());
        let (mut nodes, janus_yaml) = start_nodes(&self.janus, &self.nodes, &events_url);
        let card = with_card.then(|| {
            let pulse = PulseServer::start();
            for name in ["card_in", "card_out"] {
                pulse.add_card(name, RATE);
            }
            (Bus::start(), pulse)
        });
        let listen = self.listen.as_deref().unwrap_or("127.0.0.1:0");
        let mut config = format!(
            "server:\n  listen: {listen}\n  eventsListen: 127.0.0.1:{}\n  tls: {}\n{janus_yaml}audio:\n  jitterBufferMs: 40\ngroups:\n{}",
            events_port.port(),
            self.tls,
            self.groups,
        );
        if with_card {
            config.push_str(&format!("bridge:\n  iceAddresses: [{ICE_ADDRESS}]\n{}", self.bridge));
        }
        if self.rooms {
            config.push_str("media:\n  engine: bridged\n");
        }
        config.push_str(&self.extra);
        let mut builder = self.env.iter().fold(Control::builder(), |b, (k, v)| b.env(k, v));
        if let Some(path) = &self.control_binary {
            builder = builder.binary(path);
        }
        if let Some((bus, pulse)) = &card {
            builder = builder.env("PARTYLINE_BUS", &bus.address).env("PULSE_SERVER", &pulse.server_address());
        }
        let control = builder.config(Some(&config)).start().await;
        let count = nodes.len();
        // Rooms exist once control's first reconciliation is through: joins before that fail.
        wait_for("control in step with Janus", Duration::from_secs(10), async || {
            let (_, stats) = control.get_json("/admin/stats").await;
            let janus = &stats["janus"];
            let up =
                janus["nodes"].as_array().is_some_and(|n| n.len() == count && n.iter().all(|n| n["state"] == "up"));
            (janus["state"] == "up" && (up || self.nodes.is_empty())).then_some(())
        })
        .await;
        let janus = nodes.remove(0);
        let mut stack = Stack { card: None, janus, other_nodes: nodes, control, _events_port: events_port };
        if let Some((bus, pulse)) = card {
            let mut env: Vec<(&str, &str)> = self.bridged_env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let rooms =
                SocketAddr::new(self.rooms_ip.unwrap_or(ICE_ADDRESS.parse().expect("an address")), 0).to_string();
            if self.rooms {
                env.push(("PARTYLINE_ROOMS_ADDRESS", &rooms));
            }
            let binary = self.bridged_binary.clone().unwrap_or_else(|| crate::binary("partyline-bridged"));
            let bridged = Bridged::start_binary_on_card(&binary, &bus, &pulse, &env);
            stack.card = Some(CardSide { bridged, pulse, bus });
            stack.choose_card().await;
        }
        stack
    }
}

/// Janus, or each node of the pool, posting its events to `events_url`, and control's `janus:`
/// section for them.
fn start_nodes(janus: &crate::janus::Builder, nodes: &[Node], events_url: &str) -> (Vec<Janus>, String) {
    if nodes.is_empty() {
        let janus = janus.clone().events(events_url, EVENT_SECRET).start();
        let yaml = format!("{}  eventSecret: {EVENT_SECRET}\n", janus.config_yaml());
        return (vec![janus], yaml);
    }
    let started: Vec<Janus> = nodes
        .iter()
        .map(|node| janus.clone().node_events(events_url, &node.name, &format!("{EVENT_SECRET}-{}", node.name)).start())
        .collect();
    let entries: String = nodes
        .iter()
        .zip(&started)
        .map(|(node, janus)| {
            let entry = janus.node_yaml(&node.name, node.capacity.unwrap_or(DEFAULT_NODE_CAPACITY));
            let site = node.site.as_ref().map(|site| format!("      site: {site}\n")).unwrap_or_default();
            entry + &site
        })
        .collect();
    let first = &started[0];
    let yaml = format!(
        "janus:\n  adminSecret: {}\n  roomAdminKey: {}\n  eventSecret: {EVENT_SECRET}\n  nodes:\n{entries}",
        first.admin_secret(),
        first.room_admin_key()
    );
    (started, yaml)
}

/// The event handler's password of a single Janus (a pool node's is this and its name).
const EVENT_SECRET: &str = "test-event-secret";

impl Stack {
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Starts Janus (posting events to control) and control, with `groups` as the config's
    /// `groups:` section (YAML list items).
    pub async fn start(groups: &str) -> Stack {
        Stack::builder().groups(groups).start().await
    }

    /// [`Stack::start`] with extra environment for control.
    pub async fn start_with_env(groups: &str, env: &[(&str, &str)]) -> Stack {
        env.iter().fold(Stack::builder().groups(groups), |b, (k, v)| b.env(k, v)).start().await
    }

    /// The stack of the media tests: Janus with ICE on `pl0`, control's bridge on `bus` and
    /// `pl0`'s address (bridged is the test's to start).
    pub async fn start_media(groups: &str, bus: &Bus) -> Stack {
        let bridge = format!("bridge:\n  iceAddresses: [{ICE_ADDRESS}]\n");
        let janus = Janus::builder().ice_iface(ICE_IFACE);
        Stack::start_custom(janus, groups, &bridge, &[("PARTYLINE_BUS", &bus.address)]).await
    }

    /// [`Stack::start_with_env`] with Janus built from `janus` (e.g. ICE on `pl0`) and `extra`
    /// appended to control's config (top-level YAML sections such as `bridge:`).
    pub async fn start_custom(janus: crate::janus::Builder, groups: &str, extra: &str, env: &[(&str, &str)]) -> Stack {
        let builder = Stack::builder().janus(janus).groups(groups).config(extra);
        env.iter().fold(builder, |b, (k, v)| b.env(k, v)).start().await
    }

    /// The card side; panics when the stack was started without it.
    pub fn card_side(&self) -> &CardSide {
        self.card.as_ref().expect("a stack started with the card side (Builder::card)")
    }

    /// Waits until control sees bridged, then chooses the test card (`card_in.monitor` in,
    /// `card_out` out).
    async fn choose_card(&self) {
        self.bridge_becomes("bridged seen by control", Duration::from_secs(15), |b| b["state"] == "idle").await;
        let device = json!({ "inputDeviceId": "card_in.monitor", "outputDeviceId": "card_out", "sampleRate": RATE });
        let (status, body) = self.control.post_json("/admin/audio/device", device).await;
        assert!(status.is_success(), "POST /admin/audio/device: {status} {body}");
    }
}

impl Stack {
    /// bridged's status as control shows it (`bridge` of `/admin/stats`).
    pub async fn bridge(&self) -> Value {
        self.control.get_json("/admin/stats").await.1["bridge"].clone()
    }

    /// Waits (at most `within`) until bridged's status, through control, satisfies `check`;
    /// panics with the last status and control's log otherwise.
    pub async fn bridge_becomes(&self, what: &str, within: Duration, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let bridge = self.bridge().await;
            if check(&bridge) {
                return bridge;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {within:?} waiting for {what}; bridge: {bridge}\ncontrol's log:\n{}",
                self.control.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Waits until Janus refuses `token`. control revokes a token just after it drops its user from
/// the list, so a user gone from the list may still hold a valid token for a moment.
pub async fn becomes_revoked(janus: &Janus, whose: &str, token: &str) {
    wait_for(&format!("{whose} token revoked"), Duration::from_secs(10), async || {
        (Probe::open(janus, token).await.err() == Some(403)).then_some(())
    })
    .await;
}

/// The state (`pending`, `connected`) of the user `identity` in `GET /admin/users`, if listed.
pub async fn user_state(control: &Control, identity: &str) -> Option<String> {
    let (_, body) = control.get_json("/admin/users?state=all").await;
    body["users"]
        .as_array()?
        .iter()
        .find(|u| u["identity"] == identity)
        .map(|u| u["state"].as_str().unwrap_or_default().to_owned())
}

/// The branch called `name` in bridged's status as control shows it.
pub fn branch<'a>(bridge: &'a Value, name: &str) -> Option<&'a Value> {
    bridge["branches"].as_array()?.iter().find(|b| b["name"] == name)
}

/// Every branch of `names` joined (and no other branch).
pub fn joined(bridge: &Value, names: &[&str]) -> bool {
    let count = bridge["branches"].as_array().map_or(0, Vec::len);
    count == names.len() && names.iter().all(|n| branch(bridge, n).is_some_and(|b| b["state"] == "joined"))
}

/// A crew's options against `control`, its members on `lines`.
pub fn crew_options(control: &Control, lines: Lines) -> Options {
    Options {
        server: control.origin.clone(),
        tls: TlsCheck::Insecure,
        lines,
        pin: None,
        name_prefix: "crew".into(),
        media_address: crate::ICE_ADDRESS.parse().expect("an address"),
        jitter_buffer: Duration::from_millis(60),
        turn: Duration::from_secs(3),
        link: Link::default(),
        fec_percent: 0,
        relay: None,
    }
}
