//! The whole stack for the browser suites and the browser benches (`web/tests/harness.mjs`), as
//! the Rust tests start it ([`partyline_testkit::stack`]): Janus (or a pool of nodes), control
//! wired to it and, on request, the sound card side. Started from one JSON argument, it prints one
//! JSON line saying where everything is, and stops all it started when its stdin closes (its
//! parent gone) or on SIGTERM or SIGINT.
//!
//! ```text
//! partyline-stack '{"groups": ["Stage"], "card": true}'
//! {"origin":"http://127.0.0.1:40123","adminToken":"…","dir":"/tmp/…","control":{"pid":…},…}
//! ```
//!
//! The daemons are `PARTYLINE_CONTROL_BIN` and `PARTYLINE_BRIDGED_BIN` when set, else the
//! workspace's next to this binary. Inside a network namespace holding `pl0`
//! (`scripts/netns-run`): Janus offers no loopback ICE candidate.

use std::net::IpAddr;
use std::path::PathBuf;

use partyline_testkit::janus::Janus;
use partyline_testkit::stack::{Node, Stack};
use partyline_testkit::{ICE_IFACE, SoundServer};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};

/// What to start (every field optional but `groups`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    /// The config's groups, by name.
    groups: Vec<String>,
    /// The sound card side: a private bus and PulseAudio card, bridged on them.
    #[serde(default)]
    card: bool,
    /// The panels' media on partyline's own rooms (the card side comes with them).
    #[serde(default)]
    rooms: bool,
    /// control on HTTPS with the certificate it generates (`tls-cert.pem` in `dir`).
    #[serde(default)]
    tls: bool,
    /// control's `server.listen` (default loopback).
    listen: Option<String>,
    /// The interface Janus gathers ICE candidates on (default `pl0`).
    ice_iface: Option<String>,
    /// The rooms' address, with `rooms` (default `10.77.0.1`, `pl0`'s): that of `ice_iface`.
    rooms_address: Option<IpAddr>,
    /// More lines of the config (top-level sections: `crew:`…).
    #[serde(default)]
    config: Vec<String>,
    /// A pool of Janus nodes instead of one.
    #[serde(default)]
    nodes: Vec<Node>,
}

#[tokio::main]
async fn main() {
    let argument = std::env::args().nth(1).unwrap_or_else(|| usage("no options given"));
    let options: Options = serde_json::from_str(&argument).unwrap_or_else(|e| usage(&e.to_string()));
    let stack = start(options).await;
    println!("{}", describe(&stack));
    until_told_to_stop().await;
    // Dropped field by field: bridged, Janus, control, the card's sound server and bus.
    drop(stack);
}

fn usage(why: &str) -> ! {
    eprintln!("partyline-stack: {why}\nusage: partyline-stack '{{\"groups\": [\"Stage\"], \"card\": true}}'");
    std::process::exit(2)
}

async fn start(options: Options) -> Stack {
    let groups: String = options.groups.iter().map(|name| format!("  - name: {}\n", json!(name))).collect();
    let config: String = options.config.iter().map(|line| format!("{line}\n")).collect();
    let janus = Janus::builder().ice_iface(options.ice_iface.as_deref().unwrap_or(ICE_IFACE));
    let mut builder = Stack::builder().janus(janus).nodes(options.nodes).groups(&groups).config(&config);
    builder = builder.card(options.card).rooms(options.rooms).tls(options.tls);
    if let Some(ip) = options.rooms_address {
        builder = builder.rooms_ip(ip);
    }
    if let Some(listen) = &options.listen {
        builder = builder.listen(listen);
    }
    if let Some(path) = std::env::var_os("PARTYLINE_CONTROL_BIN") {
        builder = builder.control_binary(PathBuf::from(path));
    }
    if let Some(path) = std::env::var_os("PARTYLINE_BRIDGED_BIN") {
        builder = builder.bridged_binary(PathBuf::from(path));
    }
    builder.start().await
}

/// Where everything is: origins, the admin token, directories, process ids and logs, each
/// Janus's URLs and secrets, the card's bus and sound server.
fn describe(stack: &Stack) -> Value {
    let control = &stack.control;
    let nodes: Vec<Value> = std::iter::once(&stack.janus).chain(&stack.other_nodes).map(describe_janus).collect();
    let card = stack.card.as_ref().map(|card| {
        json!({
            "busAddress": card.bus.address,
            "pulseAddress": card.pulse.server_address(),
            "bridged": { "pid": card.bridged.pid(), "log": card.bridged.log_path() },
        })
    });
    json!({
        "origin": control.origin,
        "eventsOrigin": control.events_origin,
        "adminToken": control.token,
        "dir": control.dir(),
        "control": { "pid": control.pid(), "log": control.log_path() },
        "nodes": nodes,
        "card": card,
    })
}

fn describe_janus(janus: &Janus) -> Value {
    json!({
        "url": janus.url(),
        "adminUrl": janus.admin_url(),
        "wsUrl": janus.ws_url(),
        "adminSecret": janus.admin_secret(),
        "roomAdminKey": janus.room_admin_key(),
        "dir": janus.dir(),
    })
}

/// Until stdin reaches its end (the parent closed it, or is gone) or SIGTERM or SIGINT comes.
async fn until_told_to_stop() {
    let (mut term, mut int) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()));
    let (term, int) = (term.as_mut().expect("SIGTERM handler"), int.as_mut().expect("SIGINT handler"));
    // A thread of its own, not the runtime's blocking pool, which waits for its reads at exit.
    let (ended, end_of_input) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        let _ = ended.send(());
    });
    tokio::select! {
        _ = end_of_input => {}
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
