//! One line's peer connection: a str0m `Rtc` and its UDP socket (and a TURN [`Relay`] when the
//! token answer names one), offered before the join, completed by Janus's answer and then driven
//! by one tokio task (its `peer`); [`LineMedia`] is the handle on it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::media::{Direction, MediaKind, Mid};
use str0m::{Candidate, Rtc, RtcConfig};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::ear::Ear;
use super::heard::{Heard, Onsets};
use super::link::{Impairment, Link};
use super::peer::{Command, Peer};
use super::relay::Relay;
use super::voice::Voice;

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("UDP socket on {0}: {1}")]
    Socket(IpAddr, std::io::Error),
    #[error("WebRTC: {0}")]
    Rtc(#[from] str0m::RtcError),
    #[error("SDP: {0}")]
    Sdp(String),
    #[error("Opus: {0}")]
    Opus(#[from] audiopus::Error),
}

/// A line's offer, made before the join and completed by Janus's answer.
#[derive(Debug)]
pub struct Offer {
    pub sdp: String,
    rtc: Rtc,
    pending: SdpPendingOffer,
    socket: UdpSocket,
    relay: Option<Relay>,
    mid: Mid,
}

/// What a line sends and hears.
#[derive(Debug)]
pub struct LineSetup {
    pub room: String,
    /// The talker's voice (a line with a talk key).
    pub voice: Option<Arc<Voice>>,
    /// The tone this line's talkers speak (a line that listens).
    pub listen_tone: Option<f32>,
    pub onsets: Onsets,
    pub jitter_buffer: Duration,
    /// The simulated network between the line and the server.
    pub link: Link,
}

impl Offer {
    /// An offer on a new UDP socket on `address` (and `relay`'s address, as a browser offers
    /// its relayed candidate beside its host one): sendrecv, or one way for a talk-only
    /// (sendonly) or listen-only (recvonly) line, as the panel offers.
    pub async fn new(address: IpAddr, send: bool, receive: bool, relay: Option<Relay>) -> Result<Offer, MediaError> {
        let socket = UdpSocket::bind(SocketAddr::new(address, 0)).await.map_err(|e| MediaError::Socket(address, e))?;
        let local = socket.local_addr().map_err(|e| MediaError::Socket(address, e))?;
        let mut rtc = RtcConfig::new()
            .set_crypto_provider(Arc::new(str0m::crypto::from_feature_flags()))
            .clear_codecs()
            .enable_opus(true, false)
            // Each packet as it comes: a listener judges arrival, not str0m's reordering.
            .set_reordering_size_audio(0)
            .build(Instant::now());
        let candidate = Candidate::host(local, "udp").map_err(|e| MediaError::Sdp(e.to_string()))?;
        rtc.add_local_candidate(candidate);
        if let Some(relay) = &relay {
            let relayed =
                Candidate::relayed(relay.relayed, relay.local, "udp").map_err(|e| MediaError::Sdp(e.to_string()))?;
            rtc.add_local_candidate(relayed);
        }
        let direction = match (send, receive) {
            (true, true) => Direction::SendRecv,
            (true, false) => Direction::SendOnly,
            _ => Direction::RecvOnly,
        };
        let mut change = rtc.sdp_api();
        let mid = change.add_media(MediaKind::Audio, direction, Some("crew".into()), Some("voice".into()), None);
        let (offer, pending) = change.apply().ok_or_else(|| MediaError::Sdp("nothing to offer".into()))?;
        Ok(Offer { sdp: offer.to_sdp_string(), rtc, pending, socket, relay, mid })
    }

    /// Applies Janus's answer and starts the line's task.
    pub fn start(mut self, answer: &str, setup: LineSetup) -> Result<LineMedia, MediaError> {
        let answer = SdpAnswer::from_sdp_string(answer).map_err(|e| MediaError::Sdp(e.to_string()))?;
        self.rtc.sdp_api().accept_answer(self.pending, answer)?;
        let ear = match setup.listen_tone {
            Some(tone) => Some(Ear::new(&setup.room, tone, setup.onsets.clone(), setup.jitter_buffer)?),
            None => None,
        };
        let (commands, receiver) = mpsc::unbounded_channel();
        let (connected_tx, connected) = watch::channel(false);
        let (sending_tx, sending) = watch::channel(false);
        let local = self.socket.local_addr().map_err(|e| MediaError::Socket(IpAddr::from([0, 0, 0, 0]), e))?;
        let seed = next_seed();
        let peer = Peer {
            up: Impairment::new(setup.link.up, seed),
            down: Impairment::new(setup.link.down, seed + 1),
            rtc: self.rtc,
            socket: self.socket,
            relay: self.relay,
            local,
            mid: self.mid,
            room: setup.room,
            voice: setup.voice,
            onsets: setup.onsets,
            ear,
            started: Instant::now(),
            position: 0,
            rtp_time: 0,
            talk_wanted: false,
            opens_spurt: false,
            sent_late: 0,
            relayed_datagrams: 0,
            connected: connected_tx,
            sending: sending_tx,
        };
        let task = tokio::spawn(peer.run(receiver));
        Ok(LineMedia { commands, connected, sending, task })
    }
}

/// The handle on a running line's media.
#[derive(Debug)]
pub struct LineMedia {
    commands: mpsc::UnboundedSender<Command>,
    connected: watch::Receiver<bool>,
    sending: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl LineMedia {
    /// Waits until ICE and DTLS are up (`Connected`), at most `within`.
    pub async fn connected(&mut self, within: Duration) -> bool {
        let up = self.connected.wait_for(|up| *up);
        matches!(tokio::time::timeout(within, up).await, Ok(Ok(_)))
    }

    /// Starts or stops the tone; returns once the line sends accordingly (on: at the next frame;
    /// off: at the burst's end, at most 500 ms away), or at once if the task ended.
    pub async fn talk(&mut self, on: bool) {
        if self.commands.send(Command::Talk(on)).is_ok() {
            let _ = self.sending.wait_for(|sending| *sending == on).await;
        }
    }

    /// What the line heard since the last call.
    pub async fn heard(&self) -> Heard {
        let (reply, answer) = oneshot::channel();
        if self.commands.send(Command::Heard(reply)).is_err() {
            return Heard::default();
        }
        answer.await.unwrap_or_default()
    }
}

impl Drop for LineMedia {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Seeds for the simulated links, in the order lines start: a run repeats its losses.
fn next_seed() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(2, std::sync::atomic::Ordering::Relaxed)
}
