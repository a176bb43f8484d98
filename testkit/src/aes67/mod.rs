//! An AES67 network of the tests' own around partyline: a Linux bridge [`PARTYLINE_IFACE`] in the
//! test's namespace (`scripts/netns-run`'s), where partyline runs, and hosts in namespaces of
//! their own on it, as devices on a LAN: two PTP grandmasters (linuxptp's `ptp4l`, or the
//! `ptp-grandmaster` binary of this crate for a clock off the host's: [`Grandmaster`]) and a
//! console ([`Console`], the `aes67-console` binary of this crate, which
//! sends a tone, announces it by SAP, and reports the levels, timing and SAP packets it hears).
//!
//! Why it is built so (measured on the 2-core test VMs):
//! - GStreamer's PTP clock never syncs in `ptp4l`'s own namespace (`ptp4l` turns multicast
//!   loopback off), so each grandmaster has a namespace of its own, and partyline follows them
//!   over the bridge.
//! - The bridge has multicast snooping off, so it floods every group (PTP's, SAP's, the
//!   streams') to every port as a plain switch does, whatever IGMP says; every namespace routes
//!   `224.0.0.0/4` to its link.
//! - The grandmasters are `masterOnly` and `free_running` with software timestamps: they never
//!   steer the host's clock (a `ptp4l` follower would), so PTP time here is the host's
//!   `CLOCK_REALTIME` within microseconds, in every namespace. Being `masterOnly`, a grandmaster
//!   ignores the other's announcements: both send, and followers choose by BMCA (the lower
//!   `priority1` wins). A follower may sync to the worse one first, before it has heard the
//!   better one's announcements twice ([`Console::wait_grandmaster`] waits for a given one); it
//!   turns to the other about 6 s after the one it follows falls silent (three announce
//!   intervals), with no gap in the console's stream.
//! - GStreamer's PTP clock follows the grandmaster to within 20 to 400 µs here (software
//!   timestamps, taken after its helper process relayed the packets), so the console reports
//!   lateness both on its PTP clock and on `CLOCK_REALTIME` ([`Lateness::host`]): the latter is
//!   the sender's timing as it is, the console's own clock error aside.
//! - The namespaces are named `<test's namespace>-node-aes-…`, so that `scripts/netns-run`'s end
//!   removes them (with what still runs in them) after a crash, as it does [`crate::netns`]'s.
//!
//! One [`Aes67Net`] exists at a time in a test process (their bridge and addresses are fixed):
//! [`Aes67Net::create`] waits for an earlier one's drop.

mod builder;
mod console;
mod grandmaster;
mod reports;

pub use builder::ConsoleBuilder;
pub use console::Console;
pub use grandmaster::{Grandmaster, OwnClock};
pub use reports::{Lateness, Levels, Sap, Spread};

use std::process::Command;
use std::sync::{Condvar, Mutex, PoisonError};

/// The bridge in the test's namespace: partyline's AES67 interface.
pub const PARTYLINE_IFACE: &str = "aes0";
/// partyline's address on it (/24).
pub const PARTYLINE_ADDRESS: &str = "10.79.0.1";
/// Each host's side of its link, in its namespace.
pub const HOST_IFACE: &str = "eth0";
/// The multicast group of the console's stream unless told otherwise.
pub const CONSOLE_GROUP: &str = "239.69.20.1";
/// The stream name the console announces unless told otherwise.
pub const CONSOLE_NAME: &str = "console";
/// The SCHED_FIFO priority of a sending console (below bridged's real-time threads, 10).
const SEND_PRIORITY: &str = "5";

/// A host of the AES67 network: a namespace of its own, linked to the bridge.
#[derive(Debug)]
pub struct Host {
    /// The namespace's name (`ip netns`).
    pub namespace: String,
    /// Its address on [`HOST_IFACE`] (/24).
    pub address: String,
    /// Its link's other end, a port of the bridge in the test's namespace.
    pub port: String,
}

/// The bridge and its hosts; removed on drop.
#[derive(Debug)]
pub struct Aes67Net {
    /// [`PARTYLINE_IFACE`].
    pub bridge: String,
    /// [`PARTYLINE_ADDRESS`].
    pub address: String,
    /// Grandmaster 1 (`10.79.0.11`) and 2 (`10.79.0.12`): see [`Grandmaster::start`].
    pub grandmasters: [Host; 2],
    /// The console (`10.79.0.20`).
    pub console: Host,
    /// A host that sends what it likes (`10.79.0.66`: [`crate::intruder::Intruder`]).
    pub intruder: Host,
    _turn: Turn,
}

impl Aes67Net {
    /// The bridge, partyline's address and route on it, and the hosts' namespaces and links.
    /// Needs root inside `scripts/netns-run`'s namespace ([`crate::require_namespace`]).
    pub fn create() -> Aes67Net {
        crate::require_namespace();
        let turn = Turn::take();
        let identify = Command::new("ip").args(["netns", "identify"]).output().expect("ip netns identify");
        let parent = String::from_utf8_lossy(&identify.stdout).trim().to_owned();
        assert!(!parent.is_empty(), "the test's namespace has no name: run it with `scripts/netns-run`");
        let host = |name: &str, address: &str| Host {
            namespace: format!("{parent}-node-aes-{name}"),
            address: address.to_owned(),
            port: format!("aes-{name}"),
        };
        let net = Aes67Net {
            bridge: PARTYLINE_IFACE.to_owned(),
            address: PARTYLINE_ADDRESS.to_owned(),
            grandmasters: [host("gm1", "10.79.0.11"), host("gm2", "10.79.0.12")],
            console: host("console", "10.79.0.20"),
            intruder: host("intruder", "10.79.0.66"),
            _turn: turn,
        };
        // What a test process killed before its drop left in this namespace.
        net.remove();
        let bridge = net.bridge.as_str();
        run(&["ip", "link", "add", bridge, "type", "bridge", "mcast_snooping", "0"]);
        run(&["ip", "addr", "add", &format!("{}/24", net.address), "dev", bridge]);
        run(&["ip", "link", "set", bridge, "up"]);
        run(&["ip", "route", "add", "224.0.0.0/4", "dev", bridge]);
        for host in net.hosts() {
            let ns = host.namespace.as_str();
            run(&["ip", "netns", "add", ns]);
            run(&["ip", "link", "add", &host.port, "type", "veth", "peer", "name", HOST_IFACE, "netns", ns]);
            run(&["ip", "link", "set", &host.port, "master", bridge, "up"]);
            let inside = |args: &[&str]| run(&[&["ip", "netns", "exec", ns], args].concat());
            inside(&["ip", "link", "set", "lo", "up"]);
            inside(&["ip", "addr", "add", &format!("{}/24", host.address), "dev", HOST_IFACE]);
            inside(&["ip", "link", "set", HOST_IFACE, "up"]);
            inside(&["ip", "route", "add", "224.0.0.0/4", "dev", HOST_IFACE]);
        }
        net
    }

    /// Grandmaster `which` (1 or 2).
    pub fn grandmaster(&self, which: u8) -> &Host {
        assert!(matches!(which, 1 | 2), "grandmaster {which}: there are 1 and 2");
        &self.grandmasters[usize::from(which - 1)]
    }

    /// Plugs `host`'s cable in or pulls it out (its bridge port up or down).
    pub fn set_link(&self, host: &Host, up: bool) {
        run(&["ip", "link", "set", &host.port, if up { "up" } else { "down" }]);
    }

    fn hosts(&self) -> impl Iterator<Item = &Host> {
        self.grandmasters.iter().chain([&self.console, &self.intruder])
    }

    /// The namespaces (with their links, and what still runs in them) and the bridge.
    fn remove(&self) {
        for host in self.hosts() {
            if let Ok(output) = Command::new("ip").args(["netns", "pids", &host.namespace]).output() {
                let pids: Vec<String> =
                    String::from_utf8_lossy(&output.stdout).split_whitespace().map(str::to_owned).collect();
                if !pids.is_empty() {
                    let _ = Command::new("kill").arg("-KILL").args(&pids).status();
                }
            }
            // Deleting the port takes its peer with it at once; a namespace's own links go only
            // when its last process has exited, which a KILL does not wait for, and the next
            // test's `ip link add` of the same name would find it still there.
            let _ = Command::new("ip").args(["link", "del", &host.port]).output();
            let _ = Command::new("ip").args(["netns", "del", &host.namespace]).output();
        }
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).output();
    }
}

impl Drop for Aes67Net {
    fn drop(&mut self) {
        // The turn goes after (fields drop after `drop`).
        self.remove();
    }
}

/// The process's one [`Aes67Net`] at a time.
#[derive(Debug)]
struct Turn;

static BUSY: Mutex<bool> = Mutex::new(false);
static FREED: Condvar = Condvar::new();

impl Turn {
    fn take() -> Turn {
        let mut busy = BUSY.lock().unwrap_or_else(PoisonError::into_inner);
        while *busy {
            busy = FREED.wait(busy).unwrap_or_else(PoisonError::into_inner);
        }
        *busy = true;
        Turn
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        *BUSY.lock().unwrap_or_else(PoisonError::into_inner) = false;
        FREED.notify_one();
    }
}

fn run(args: &[&str]) {
    let output = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(output.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}
