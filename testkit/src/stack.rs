//! Janus plus a control wired to it, as control's integration tests and the whole-stack tests
//! (`e2e/`) start them, and what they ask of the pair. The Janus harness itself is [`crate::janus`].

use std::time::{Duration, Instant};

use partyline_crew::control_api::Lines;
use partyline_crew::media::Link;
use partyline_crew::{Options, TlsCheck};
use serde_json::Value;

use crate::control::Control;
use crate::janus::{Janus, Probe};
use crate::{ReservedPort, wait_for};

/// Janus plus a control wired to it (rooms, tokens, the event handler's posts).
#[derive(Debug)]
pub struct Stack {
    pub janus: Janus,
    pub control: Control,
    /// control's events port, which Janus was told before control listened (and again if
    /// control restarts).
    _events_port: ReservedPort,
}

impl Stack {
    /// Starts Janus (posting events to control) and control, with `groups` as the config's
    /// `groups:` section (YAML list items).
    pub async fn start(groups: &str) -> Stack {
        Stack::start_with_env(groups, &[]).await
    }

    /// [`Stack::start`] with extra environment for control.
    pub async fn start_with_env(groups: &str, env: &[(&str, &str)]) -> Stack {
        Stack::start_custom(Janus::builder(), groups, "", env).await
    }

    /// The stack of the media tests: Janus with ICE on `pl0`, control's bridge on `bus` and
    /// `pl0`'s address (bridged is the test's to start).
    pub async fn start_media(groups: &str, bus: &crate::dbus::Bus) -> Stack {
        use crate::{ICE_ADDRESS, ICE_IFACE};
        let bridge = format!("bridge:\n  iceAddresses: [{ICE_ADDRESS}]\n");
        Stack::start_custom(Janus::builder().ice_iface(ICE_IFACE), groups, &bridge, &[("PARTYLINE_BUS", &bus.address)])
            .await
    }

    /// [`Stack::start_with_env`] with Janus built from `janus` (e.g. ICE on `pl0`) and `extra`
    /// appended to control's config (top-level YAML sections such as `bridge:`).
    pub async fn start_custom(janus: crate::janus::Builder, groups: &str, extra: &str, env: &[(&str, &str)]) -> Stack {
        let events_reserved = ReservedPort::loopback();
        let events_port = events_reserved.port();
        let event_pass = "test-event-secret";
        let janus =
            janus.events(&format!("http://127.0.0.1:{events_port}/api/internal/janus-events"), event_pass).start();
        let config = format!(
            "server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:{events_port}\n  tls: false\n{}  eventSecret: {event_pass}\naudio:\n  jitterBufferMs: 40\ngroups:\n{groups}{extra}",
            janus.config_yaml()
        );
        let builder = env.iter().fold(Control::builder(), |b, (k, v)| b.env(k, v));
        let control = builder.config(Some(&config)).start().await;
        // Rooms exist once control's first reconciliation is through: joins before that fail.
        wait_for("control in step with Janus", Duration::from_secs(10), async || {
            let (_, stats) = control.get_json("/admin/stats").await;
            (stats["janus"]["state"] == "up").then_some(())
        })
        .await;
        Stack { janus, control, _events_port: events_reserved }
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
