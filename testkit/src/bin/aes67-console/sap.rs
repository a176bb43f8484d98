//! SAP: the console's announcement of its stream ([`Announcer`]), and its listener, which prints
//! every packet heard and passes announcements and deletions on.

use std::net::{SocketAddrV4, UdpSocket};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use partyline_shared::aes67::sap::SapPacket;
use partyline_shared::aes67::{Aes67Stream, SAP_GROUP, SAP_PORT};
use serde_json::json;

use super::{Args, Message, emit, session_name};

/// Announces the stream by SAP every `--sap-interval-ms`, until withdrawn.
pub(crate) struct Announcer {
    socket: UdpSocket,
    packet: SapPacket,
    /// Set by the withdrawal, under the lock that sends: no announcement follows it.
    withdrawn: Mutex<bool>,
}

impl Announcer {
    pub(crate) fn start(args: &Args, stream: &Aes67Stream) -> Result<Arc<Announcer>, String> {
        let socket = UdpSocket::bind(SocketAddrV4::new(args.address, 0)).map_err(|e| format!("SAP socket: {e}"))?;
        let socket2 = socket2::SockRef::from(&socket);
        socket2.set_multicast_if_v4(&args.address).map_err(|e| format!("SAP socket: {e}"))?;
        socket.set_multicast_ttl_v4(u32::from(stream.ttl)).map_err(|e| format!("SAP socket: {e}"))?;
        // A message id hash of the session (never 0, which RFC 2974 sets aside).
        let hash = (stream.session_id as u16) | 1;
        let packet = SapPacket { deletion: false, origin: args.address, hash, sdp: stream.to_sdp() };
        let announcer = Arc::new(Announcer { socket, packet, withdrawn: Mutex::new(false) });
        let interval = Duration::from_millis(args.sap_interval_ms);
        let repeat = Arc::clone(&announcer);
        std::thread::spawn(move || {
            while repeat.send(false) {
                std::thread::sleep(interval);
            }
        });
        Ok(announcer)
    }

    /// Sends the announcement (or its deletion); false once withdrawn.
    fn send(&self, deletion: bool) -> bool {
        let mut withdrawn = self.withdrawn.lock().unwrap_or_else(PoisonError::into_inner);
        if *withdrawn {
            return false;
        }
        let packet = SapPacket { deletion, ..self.packet.clone() };
        if let Err(error) = self.socket.send_to(&packet.encode(), SocketAddrV4::new(SAP_GROUP, SAP_PORT)) {
            eprintln!("aes67-console: SAP: {error}");
        }
        *withdrawn = deletion;
        true
    }

    pub(crate) fn withdraw(&self) {
        self.send(true);
    }
}

/// Listens to SAP on `--iface`: prints every packet, and passes announcements and deletions on.
pub(crate) fn listen_sap(args: &Args, messages: mpsc::Sender<Message>) -> Result<(), String> {
    use socket2::{Domain, Protocol, Socket, Type};
    let fail = |e: std::io::Error| format!("SAP listener: {e}");
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(fail)?;
    // Beside partyline's own listener when both run in one namespace.
    socket.set_reuse_address(true).map_err(fail)?;
    // Bound to the group: only SAP's packets, not other groups' on the same port.
    socket.bind(&SocketAddrV4::new(SAP_GROUP, SAP_PORT).into()).map_err(fail)?;
    socket.join_multicast_v4(&SAP_GROUP, &args.address).map_err(fail)?;
    let socket: UdpSocket = socket.into();
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; 65_536];
        loop {
            let size = match socket.recv(&mut buffer) {
                Ok(size) => size,
                Err(error) => {
                    eprintln!("aes67-console: SAP listener: {error}");
                    return;
                }
            };
            let packet = match SapPacket::decode(&buffer[..size]) {
                Ok(packet) => packet,
                Err(error) => {
                    emit(&json!({"event": "sap-invalid", "error": error.to_string(), "bytes": size}));
                    continue;
                }
            };
            emit(&json!({
                "event": "sap",
                "deletion": packet.deletion,
                "origin": packet.origin,
                "hash": packet.hash,
                "name": session_name(&packet.sdp),
                "sdp": packet.sdp,
                "sdp_error": Aes67Stream::parse(&packet.sdp).err().map(|e| e.to_string()),
            }));
            if messages.send(Message::Sap(packet)).is_err() {
                return;
            }
        }
    });
    Ok(())
}
