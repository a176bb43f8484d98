//! A network namespace of its own for one Janus node of a pool, as on a host of its own: linked
//! to the test's namespace (`scripts/netns-run`'s, where control and the crew are) by a veth
//! pair with private addresses, the node `10.78.N.2` on its `eth0`, the test's side `10.78.N.1`
//! on `plnN`. The test's namespace forwards between the links, so nodes reach each other
//! (their trunk legs) only through it, and the crew (on [`crate::ICE_ADDRESS`]) reaches each node.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The address prefix of the nodes' links: what a node's APIs admit besides loopback.
pub const NODE_PREFIX: &str = "10.78.";

/// The node's side of its link, where its Janus gathers ICE candidates.
pub const NODE_IFACE: &str = "eth0";

#[derive(Debug)]
pub struct NodeNet {
    /// The namespace's name (`ip netns`).
    pub name: String,
    /// The node's address.
    pub address: String,
}

impl NodeNet {
    /// A new namespace and its link; needs root inside `scripts/netns-run`'s namespace.
    pub fn create() -> NodeNet {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < 255, "at most 254 node namespaces per test process");
        // Named after the test's namespace, whose end (`scripts/netns-run`) removes it too.
        let identify = Command::new("ip").args(["netns", "identify"]).output().expect("ip netns identify");
        let parent = String::from_utf8_lossy(&identify.stdout).trim().to_owned();
        let parent = if parent.is_empty() { format!("pl-{}", std::process::id()) } else { parent };
        let name = format!("{parent}-node{n}");
        let (ours, theirs) = (format!("10.78.{n}.1"), format!("10.78.{n}.2"));
        let link = format!("pln{n}");
        run(&["ip", "netns", "add", &name]);
        let net = NodeNet { name, address: theirs };
        run(&["ip", "link", "add", &link, "type", "veth", "peer", "name", NODE_IFACE, "netns", &net.name]);
        run(&["ip", "addr", "add", &format!("{ours}/24"), "dev", &link]);
        run(&["ip", "link", "set", &link, "up"]);
        let inside = |args: &[&str]| run(&[&["ip", "netns", "exec", &net.name], args].concat());
        inside(&["ip", "link", "set", "lo", "up"]);
        inside(&["ip", "addr", "add", &format!("{}/24", net.address), "dev", NODE_IFACE]);
        inside(&["ip", "link", "set", NODE_IFACE, "up"]);
        inside(&["ip", "route", "add", "default", "via", &ours]);
        run(&["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        net
    }
}

impl Drop for NodeNet {
    fn drop(&mut self) {
        // The veth pair goes with the namespace.
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

fn run(args: &[&str]) {
    let output = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(output.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}
