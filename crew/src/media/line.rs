//! A peer connection: a str0m `Rtc` and its UDP socket (and a TURN [`Relay`] when the token
//! answer names one), offered before the join, completed by the media server's answer and then
//! driven by one tokio task (its `peer`). It carries one line (Janus: a peer connection per line)
//! or all of a panel's lines bundled (partyline's own rooms); [`LineMedia`] is the handle on one
//! line of it.

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
use super::peer::{Command, Peer, PeerLine};
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

/// A peer connection's offer, made before the join and completed by the server's answer.
#[derive(Debug)]
pub struct Offer {
    pub sdp: String,
    rtc: Rtc,
    pending: SdpPendingOffer,
    socket: UdpSocket,
    relay: Option<Relay>,
    /// One audio m-line per line, in the order offered.
    mids: Vec<Mid>,
}

/// The direction a panel offers for a line: sendrecv, or one way for a talk-only (sendonly) or
/// listen-only (recvonly) line.
pub fn direction(talk: bool, listen: bool) -> Direction {
    match (talk, listen) {
        (true, true) => Direction::SendRecv,
        (true, false) => Direction::SendOnly,
        _ => Direction::RecvOnly,
    }
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
}

impl Offer {
    /// An offer on a new UDP socket on `address` (and `relay`'s address, as a browser offers
    /// its relayed candidate beside its host one): one audio m-line per line, each in its
    /// [`direction`], bundled.
    pub async fn new(address: IpAddr, lines: &[Direction], relay: Option<Relay>) -> Result<Offer, MediaError> {
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
        let mut change = rtc.sdp_api();
        let mids = lines
            .iter()
            .map(|&direction| {
                change.add_media(MediaKind::Audio, direction, Some("crew".into()), Some("voice".into()), None)
            })
            .collect();
        let (offer, pending) = change.apply().ok_or_else(|| MediaError::Sdp("nothing to offer".into()))?;
        Ok(Offer { sdp: offer.to_sdp_string(), rtc, pending, socket, relay, mids })
    }

    /// Applies the server's answer and starts the peer's task: `setups` are its lines in the
    /// order offered, all on one simulated `link`.
    pub fn start(mut self, answer: &str, link: Link, setups: Vec<LineSetup>) -> Result<Vec<LineMedia>, MediaError> {
        let answer = SdpAnswer::from_sdp_string(answer).map_err(|e| MediaError::Sdp(e.to_string()))?;
        self.rtc.sdp_api().accept_answer(self.pending, answer)?;
        let onsets = setups.first().map(|setup| setup.onsets.clone()).unwrap_or_default();
        let name = setups.iter().map(|setup| setup.room.as_str()).collect::<Vec<_>>().join("+");
        let mut lines = Vec::new();
        let mut sending = Vec::new();
        for (setup, mid) in setups.into_iter().zip(self.mids) {
            let ear = match setup.listen_tone {
                Some(tone) => Some(Ear::new(&setup.room, tone, setup.onsets.clone(), setup.jitter_buffer)?),
                None => None,
            };
            let (sending_tx, sending_rx) = watch::channel(false);
            sending.push(sending_rx);
            lines.push(PeerLine {
                mid,
                room: setup.room,
                voice: setup.voice,
                ear,
                position: 0,
                rtp_time: 0,
                talk_wanted: false,
                opens_spurt: false,
                sent_late: 0,
                sending: sending_tx,
            });
        }
        let (commands, receiver) = mpsc::unbounded_channel();
        let (connected_tx, connected) = watch::channel(false);
        let local = self.socket.local_addr().map_err(|e| MediaError::Socket(IpAddr::from([0, 0, 0, 0]), e))?;
        let seed = next_seed();
        let peer = Peer {
            up: Impairment::new(link.up, seed),
            down: Impairment::new(link.down, seed + 1),
            rtc: self.rtc,
            socket: self.socket,
            relay: self.relay,
            local,
            name,
            lines,
            onsets,
            started: Instant::now(),
            relayed_datagrams: 0,
            connected: connected_tx,
        };
        let task = Arc::new(Task(tokio::spawn(peer.run(receiver))));
        Ok(sending
            .into_iter()
            .enumerate()
            .map(|(index, sending)| LineMedia {
                index,
                commands: commands.clone(),
                connected: connected.clone(),
                sending,
                _task: task.clone(),
            })
            .collect())
    }
}

/// The handle on one line of a running peer connection.
#[derive(Debug)]
pub struct LineMedia {
    /// The line's place in its peer connection.
    index: usize,
    commands: mpsc::UnboundedSender<Command>,
    connected: watch::Receiver<bool>,
    sending: watch::Receiver<bool>,
    /// The peer's task, ended when the last of its lines' handles goes.
    _task: Arc<Task>,
}

/// A peer's task, aborted when dropped.
#[derive(Debug)]
struct Task(JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
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
        if self.commands.send(Command::Talk(self.index, on)).is_ok() {
            let _ = self.sending.wait_for(|sending| *sending == on).await;
        }
    }

    /// Whether ICE and DTLS are up now.
    pub fn is_connected(&self) -> bool {
        *self.connected.borrow()
    }

    /// Closes the whole peer connection as a tab does (DTLS close_notify sent), every line of it.
    pub async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.commands.send(Command::Close(done)).is_ok() {
            let _ = closed.await;
        }
    }

    /// What the line heard since the last call.
    pub async fn heard(&self) -> Heard {
        let (reply, answer) = oneshot::channel();
        if self.commands.send(Command::Heard(self.index, reply)).is_err() {
            return Heard::default();
        }
        answer.await.unwrap_or_default()
    }
}

/// Seeds for the simulated links, in the order lines start: a run repeats its losses.
fn next_seed() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(2, std::sync::atomic::Ordering::Relaxed)
}
