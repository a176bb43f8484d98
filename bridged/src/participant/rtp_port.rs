//! The loopback socket every plain-RTP participant shares, and the thread that receives on it.
//!
//! Each AudioBridge plain-RTP participant has a socket of Janus's, bound to a port of its own
//! and connected to the address the participant's join gave: Janus sends the participant's mix
//! from that port and takes packets only from that address. So every participant can give the
//! same address (this socket's), send from it to its own Janus port, and be told apart by the
//! port its mix comes from. By the port only: Janus's answer names the address it announces
//! (which may be the host's network address), while over loopback its packets come from
//! 127.0.0.1; the socket is bound to loopback, so only this host reaches it. One thread receives every room's mix and pushes each packet into
//! its participant's decoder chain (`pads.rs`): no socket, thread or `udpsrc` per participant.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context as _;
use partyline_shared::sync::lock;

use crate::realtime;

/// What a route does with a packet from its Janus port, and when it arrived.
type Deliver = dyn Fn(&[u8], Instant) + Send + Sync;
type Routes = Mutex<HashMap<u16, Arc<Deliver>>>;

/// The largest datagram taken: far above an Opus packet (20 ms at 64 kb/s: 172 bytes).
const PACKET_LIMIT: usize = 4096;

/// The shared socket and its receiving thread; stopped and joined when dropped.
pub struct RtpPort {
    socket: Arc<UdpSocket>,
    address: SocketAddr,
    routes: Arc<Routes>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// A route in force: packets from its Janus address go to its delivery until this is dropped.
pub struct Route {
    routes: Arc<Routes>,
    from: u16,
    deliver: Arc<Deliver>,
}

impl std::fmt::Debug for RtpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RtpPort").field("address", &self.address).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route").field("from", &self.from).finish_non_exhaustive()
    }
}

impl RtpPort {
    /// Binds a loopback port of the system's choosing and starts receiving on it.
    pub fn open() -> anyhow::Result<RtpPort> {
        let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot bind a loopback UDP socket for RTP")?;
        let address = socket.local_addr().context("the RTP socket has no local address")?;
        let socket = Arc::new(socket);
        let routes = Arc::new(Routes::default());
        let stopping = Arc::new(AtomicBool::new(false));
        let thread = {
            let (socket, routes, stopping) = (socket.clone(), routes.clone(), stopping.clone());
            std::thread::Builder::new()
                .name("rtp-receive".into())
                .spawn(move || {
                    // Each packet's arrival stamps Janus's tick for the send's placement, and
                    // the room's mix must reach the card's queue in time: ahead of ordinary
                    // threads, as the card's and the encoders' are.
                    realtime::promote("the RTP receiver");
                    receive(&socket, &routes, &stopping);
                })
                .context("cannot start the RTP receiving thread")?
        };
        Ok(RtpPort { socket, address, routes, stopping, thread: Some(thread) })
    }

    /// Where every participant receives (its join gives it to Janus).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// From now on, packets from port `from` (a participant's Janus port) go to `deliver`, in
    /// the receiving thread: it must not block.
    pub fn route(&self, from: u16, deliver: impl Fn(&[u8], Instant) + Send + Sync + 'static) -> Route {
        let deliver: Arc<Deliver> = Arc::new(deliver);
        lock(&self.routes).insert(from, deliver.clone());
        Route { routes: self.routes.clone(), from, deliver }
    }

    /// Sends `packet` to `to` from the shared address (the only one Janus takes packets from).
    pub fn send(&self, packet: &[u8], to: SocketAddr) -> std::io::Result<usize> {
        self.socket.send_to(packet, to)
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        let mut routes = lock(&self.routes);
        // Only this route's: a later join may have been given the same Janus port.
        if routes.get(&self.from).is_some_and(|deliver| Arc::ptr_eq(deliver, &self.deliver)) {
            routes.remove(&self.from);
        }
    }
}

impl Drop for RtpPort {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Release);
        // An empty datagram to itself ends the thread's wait.
        let _ = self.socket.send_to(&[], self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn receive(socket: &UdpSocket, routes: &Routes, stopping: &AtomicBool) {
    let mut packet = vec![0; PACKET_LIMIT];
    let mut unknown_seen = false;
    loop {
        let received = socket.recv_from(&mut packet);
        if stopping.load(Ordering::Acquire) {
            return;
        }
        let (length, from) = match received {
            Ok(received) => received,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::error!("the RTP socket failed, no room's mix is received any more: {error}");
                return;
            }
        };
        let now = Instant::now();
        let deliver = lock(routes).get(&from.port()).cloned();
        match deliver {
            Some(deliver) => deliver(&packet[..length], now),
            // A participant that just left (its last packets), or a stranger: dropped.
            None if !unknown_seen => {
                unknown_seen = true;
                tracing::debug!("RTP from {from}, which no participant's Janus port is: dropped");
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Two "Janus ports" sending to the shared address: each packet reaches its own route, a
    /// stranger's reaches none, and a dropped route takes nothing more.
    #[test]
    fn packets_go_to_the_route_of_the_port_they_come_from() {
        let port = RtpPort::open().expect("open");
        let janus_a = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let janus_b = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let stranger = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let (tx, rx) = mpsc::channel();
        let route = |name: &'static str| {
            let tx = tx.clone();
            move |packet: &[u8], _: Instant| tx.send((name, packet.to_vec())).expect("send")
        };
        let route_a = port.route(janus_a.local_addr().expect("addr").port(), route("a"));
        let _route_b = port.route(janus_b.local_addr().expect("addr").port(), route("b"));
        let wait = || rx.recv_timeout(Duration::from_secs(2)).expect("a packet delivered");

        stranger.send_to(b"x", port.address()).expect("send");
        janus_b.send_to(b"to b", port.address()).expect("send");
        assert_eq!(wait(), ("b", b"to b".to_vec()), "the stranger's packet went nowhere, b's to b");
        janus_a.send_to(b"to a", port.address()).expect("send");
        assert_eq!(wait(), ("a", b"to a".to_vec()));

        drop(route_a);
        janus_a.send_to(b"late", port.address()).expect("send");
        janus_b.send_to(b"b again", port.address()).expect("send");
        assert_eq!(wait(), ("b", b"b again".to_vec()), "a's route is gone");

        // And what a participant sends leaves from the shared address.
        port.send(b"from us", janus_a.local_addr().expect("addr")).expect("send");
        let mut buf = [0; 16];
        let (n, from) = janus_a.recv_from(&mut buf).expect("recv");
        assert_eq!((&buf[..n], from), (&b"from us"[..], port.address()));
    }
}
