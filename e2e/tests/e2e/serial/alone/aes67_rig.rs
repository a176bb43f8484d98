//! partyline beside a console on the tests' AES67 network, as every AES67 suite starts it.

use std::time::Duration;

use partyline_testkit::aes67::{Aes67Net, Console, ConsoleBuilder, Grandmaster};
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::require_namespace;
use partyline_testkit::stack::Stack;
use reqwest::StatusCode;

use crate::serial::alone::aes67_media::settings;

/// PTP acquisition (a grandmaster is master ~6 s after it starts), joins and media with debug
/// builds on a busy machine.
const SLOW: Duration = Duration::from_secs(30);

/// The network with its grandmaster and console, and partyline on it (bridged, control, Janus),
/// dropped partyline first, bridged before the Janus whose rooms it leaves.
pub(crate) struct Rig {
    pub bridged: Bridged,
    pub stack: Stack,
    pub _bus: Bus,
    pub console: Console,
    pub grandmaster: Grandmaster,
    pub net: Aes67Net,
}

/// The grandmaster `grandmaster` starts on a new network master and the console `console` synced
/// to it and sending while, at the same time (PTP takes seconds to lock), partyline starts with
/// `groups` in its config and bridged with `bridged_env`; then partyline is put on the network
/// (its settings, no stream chosen yet).
pub(crate) async fn on_the_network(
    grandmaster: impl FnOnce(&Aes67Net) -> Grandmaster,
    console: ConsoleBuilder,
    groups: &str,
    bridged_env: &[(&str, &str)],
) -> Rig {
    require_namespace();
    let net = Aes67Net::create();
    let grandmaster = grandmaster(&net);
    let network = tokio::spawn(async move {
        grandmaster.wait_master(SLOW).await;
        let console = console.start(&net);
        console.wait_synced(SLOW).await;
        console.wait_sending(SLOW).await;
        (net, grandmaster, console)
    });
    let bus = Bus::start();
    let stack = Stack::start_media(groups, &bus).await;
    let bridged = Bridged::start(&bus, bridged_env);
    stack.bridge_becomes("bridged seen by control", SLOW, |b| b["state"] == "idle").await;
    let (net, grandmaster, console) = network.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let (status, body) = stack.control.put_json("/admin/config/aes67", settings(None)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    Rig { bridged, stack, _bus: bus, console, grandmaster, net }
}
