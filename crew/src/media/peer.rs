//! A running peer connection's tokio task ([`Peer`]): its str0m `Rtc`, UDP socket and relay, the
//! simulated link each way, the 20 ms send tick and the panel's commands, for one line (a Janus
//! panel has a peer connection per line) or several bundled (partyline's own rooms: one per panel).
//!
//! The task follows str0m's rule (every change to the `Rtc` is followed by draining its
//! output to a timeout) and waits on six things: a datagram, one through the relay, str0m's
//! next timeout, the next 20 ms frame to send, a datagram its simulated [`Link`](super::Link) held back
//! falling due, and a command from the panel (talk key, what was heard, stop). A talk
//! key going on starts a burst with the next frame, as a person speaks as they press (the talk
//! onset is where a media server may drop frames); going off, it waits for the burst's end, so
//! no burst is ever cut short (a listener would take the cut for a dropout).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::format::Codec;
use str0m::media::{MediaTime, Mid};
use str0m::net::{Protocol, Receive, Transmit};
use str0m::{Event, IceConnectionState, Input, Output, Rtc};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot, watch};

use super::ear::Ear;
use super::heard::{Heard, Onsets};
use super::link::Impairment;
use super::relay::Relay;
use super::voice::{CYCLE_FRAMES, FRAME, Voice};

/// What the panel tells a running peer's task about one of its lines (by index).
pub(super) enum Command {
    Talk(usize, bool),
    Heard(usize, oneshot::Sender<Heard>),
    /// Close as a tab does (DTLS close_notify), then end; answered once sent.
    Close(oneshot::Sender<()>),
}

/// A frame's duration: the send tick.
const FRAME_PERIOD: Duration = Duration::from_millis(20);
/// A talker's frame sent this late is the generator's fault, not the server's: AudioBridge mixes
/// a talker's queue of two packets (40 ms) as it stands at each tick.
const LATE_SEND: Duration = Duration::from_millis(10);

/// The next send tick of the process: every line sends on the same 20 ms ticks (from one
/// epoch), so the runtime wakes once per tick for all of them, not once per line.
fn next_frame_tick() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    let elapsed = epoch.elapsed().as_nanos();
    let period = FRAME_PERIOD.as_nanos();
    let ticks = u32::try_from(elapsed / period + 1).unwrap_or(u32::MAX);
    epoch + FRAME_PERIOD * ticks
}

/// The next datagram through the relay, if the line has one (never, if not).
async fn relayed(relay: &mut Option<Relay>) -> Option<(SocketAddr, Vec<u8>)> {
    match relay {
        Some(relay) => relay.recv().await,
        None => std::future::pending().await,
    }
}

/// One line of a peer connection: its m-line, what it says and what it heard.
pub(super) struct PeerLine {
    pub(super) mid: Mid,
    pub(super) room: String,
    pub(super) voice: Option<Arc<Voice>>,
    pub(super) ear: Option<Ear>,
    /// The frame of the voice's loop sent next.
    pub(super) position: usize,
    pub(super) rtp_time: u64,
    pub(super) talk_wanted: bool,
    /// The next burst sent opens a talk spurt (the key went on since the last one).
    pub(super) opens_spurt: bool,
    /// Talking frames sent [`LATE_SEND`] or more after their tick since the last report.
    pub(super) sent_late: u64,
    pub(super) sending: watch::Sender<bool>,
}

/// The task's state.
pub(super) struct Peer {
    /// The simulated link's two directions: what str0m sends, what the socket receives.
    pub(super) up: Impairment,
    pub(super) down: Impairment,
    pub(super) rtc: Rtc,
    pub(super) socket: UdpSocket,
    pub(super) relay: Option<Relay>,
    pub(super) local: SocketAddr,
    /// Its rooms, for the logs.
    pub(super) name: String,
    pub(super) lines: Vec<PeerLine>,
    pub(super) onsets: Onsets,
    pub(super) started: Instant,
    /// Datagrams received through the relay since the last report (told to the first line
    /// asked).
    pub(super) relayed_datagrams: u64,
    pub(super) connected: watch::Sender<bool>,
}

impl Peer {
    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut datagram = vec![0u8; 2000];
        let mut frames = tokio::time::interval_at(next_frame_tick().into(), FRAME_PERIOD);
        // A late tick sends its frame at once and the next on time, as a microphone's
        // buffered frames would.
        frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let sends = self.lines.iter().any(|line| line.voice.is_some());
        loop {
            let deadline = match self.drain() {
                Ok(deadline) => deadline,
                Err(error) => {
                    tracing::warn!(rooms = %self.name, %error, "a peer connection ended");
                    let _ = self.connected.send(false);
                    return;
                }
            };
            // str0m asks to be woken at once after most changes (a packet written or read):
            // done here, not through the timer, which would cost a wake-up each time.
            let now = Instant::now();
            if deadline <= now {
                if let Err(error) = self.rtc.handle_input(Input::Timeout(now)) {
                    tracing::debug!(rooms = %self.name, %error, "str0m's timeout");
                }
                continue;
            }
            let held = [self.up.next_due(), self.down.next_due()].into_iter().flatten().min();
            let input = tokio::select! {
                received = self.socket.recv_from(&mut datagram) => match received {
                    Ok((length, source)) if self.down.is_clean() => self.receive(source, &datagram[..length]),
                    Ok((length, source)) => {
                        self.down.offer(Instant::now(), source, &datagram[..length]);
                        None
                    }
                    Err(_) => None,
                },
                relayed = relayed(&mut self.relay) => {
                    match relayed {
                        Some((source, contents)) => self.receive_relayed(source, &contents),
                        None => {
                            tracing::warn!(rooms = %self.name, "the relay's connection ended");
                            self.relay = None;
                        }
                    }
                    None
                }
                () = tokio::time::sleep_until(held.unwrap_or(deadline).into()), if held.is_some() => {
                    self.deliver_held();
                    None
                }
                () = tokio::time::sleep_until(deadline.into()) => Some(Input::Timeout(Instant::now())),
                tick = frames.tick(), if sends => {
                    for index in 0..self.lines.len() {
                        self.send_frame(index, tick.into_std());
                    }
                    None
                }
                command = commands.recv() => {
                    match command {
                        Some(Command::Talk(index, on)) => {
                            if let Some(line) = self.lines.get_mut(index) {
                                line.talk_wanted = on;
                            }
                        }
                        Some(Command::Heard(index, reply)) => {
                            let _ = reply.send(self.heard(index));
                        }
                        Some(Command::Close(done)) => {
                            if let Err(error) = self.rtc.close() {
                                tracing::debug!(rooms = %self.name, %error, "str0m's close");
                            }
                            let _ = self.drain();
                            let _ = self.connected.send(false);
                            let _ = done.send(());
                            return;
                        }
                        None => return,
                    }
                    None
                }
            };
            if let Some(input) = input
                && let Err(error) = self.rtc.handle_input(input)
            {
                tracing::debug!(rooms = %self.name, %error, "a datagram str0m refused");
            }
        }
    }

    /// What line `index` heard since the last report.
    fn heard(&mut self, index: usize) -> Heard {
        let Some(line) = self.lines.get_mut(index) else { return Heard::default() };
        let mut heard = line.ear.as_mut().map(Ear::take).unwrap_or_default();
        heard.sent_late = std::mem::take(&mut line.sent_late);
        heard.relayed_datagrams = std::mem::take(&mut self.relayed_datagrams);
        heard
    }

    fn receive<'a>(&self, source: SocketAddr, contents: &'a [u8]) -> Option<Input<'a>> {
        let contents = contents.try_into().ok()?;
        Some(Input::Receive(
            Instant::now(),
            Receive { proto: Protocol::Udp, source, destination: self.local, contents },
        ))
    }

    /// A datagram str0m sends: through the relay from the relayed candidate, else on the socket
    /// (through the simulated link when it impairs).
    fn transmit(&mut self, transmit: &Transmit) {
        match &self.relay {
            Some(relay) if relay.relayed == transmit.source => relay.send(transmit.destination, &transmit.contents),
            // A full socket buffer drops the datagram, as a congested network would.
            _ if self.up.is_clean() => {
                let _ = self.socket.try_send_to(&transmit.contents, transmit.destination);
            }
            _ => self.up.offer(Instant::now(), transmit.destination, &transmit.contents),
        }
    }

    /// A datagram a peer sent through the relay (the simulated link is the UDP path's only).
    fn receive_relayed(&mut self, source: SocketAddr, contents: &[u8]) {
        let Some(destination) = self.relay.as_ref().map(|relay| relay.relayed) else { return };
        self.relayed_datagrams += 1;
        let Ok(contents) = contents.try_into() else { return };
        let input = Input::Receive(Instant::now(), Receive { proto: Protocol::Udp, source, destination, contents });
        if let Err(error) = self.rtc.handle_input(input) {
            tracing::debug!(rooms = %self.name, %error, "a relayed datagram str0m refused");
        }
    }

    /// Sends and receives what the simulated link held back and is due now.
    fn deliver_held(&mut self) {
        let now = Instant::now();
        while let Some(held) = self.up.pop_due(now) {
            let _ = self.socket.try_send_to(&held.contents, held.peer);
        }
        while let Some(held) = self.down.pop_due(now) {
            if let Some(input) = self.receive(held.peer, &held.contents)
                && let Err(error) = self.rtc.handle_input(input)
            {
                tracing::debug!(rooms = %self.name, %error, "a datagram str0m refused");
            }
        }
    }

    /// Drains str0m's output up to its next timeout.
    fn drain(&mut self) -> Result<Instant, str0m::RtcError> {
        loop {
            match self.rtc.poll_output()? {
                Output::Timeout(at) => return Ok(at),
                Output::Transmit(transmit) => self.transmit(&transmit),
                Output::Event(Event::MediaData(data)) => {
                    let line = self.lines.iter_mut().find(|line| line.mid == data.mid);
                    if let Some(ear) = line.and_then(|line| line.ear.as_mut()) {
                        let seq = **data.seq_range.end();
                        ear.packet(seq, data.time.numer(), data.network_time, self.started, &data.data);
                    }
                }
                Output::Event(Event::Connected) => {
                    let _ = self.connected.send(true);
                }
                Output::Event(Event::IceConnectionStateChange(IceConnectionState::Disconnected)) => {
                    let _ = self.connected.send(false);
                }
                Output::Event(_) => {}
            }
        }
    }

    /// Line `index`'s next 20 ms: the loop's frame while talking, silence otherwise (a muted
    /// talk key still sends, as a browser's disabled track does).
    fn send_frame(&mut self, index: usize, tick: Instant) {
        let line = &mut self.lines[index];
        let Some(voice) = line.voice.clone() else { return };
        let switch = *line.sending.borrow() != line.talk_wanted;
        if switch && line.talk_wanted {
            // The next cycle's burst, from this frame.
            line.position = line.position.next_multiple_of(CYCLE_FRAMES) % voice.frames.len();
        }
        if switch && line.position.is_multiple_of(CYCLE_FRAMES) {
            let _ = line.sending.send(line.talk_wanted);
            line.opens_spurt = line.talk_wanted;
            if let Some(ear) = &mut line.ear {
                ear.talking(line.talk_wanted, Instant::now());
            }
        }
        let talking = *line.sending.borrow();
        let frame = if talking { &voice.frames[line.position] } else { &voice.silence };
        line.position = (line.position + 1) % voice.frames.len();
        let now = Instant::now();
        if talking && now.duration_since(tick) >= LATE_SEND {
            line.sent_late += 1;
        }
        if let Some(onset) = frame.onset {
            // The frame's samples were "spoken" over the 20 ms before it is sent.
            let spoken = now - Duration::from_millis(20) + Duration::from_micros(onset as u64 * 1_000_000 / 48_000);
            self.onsets.spoken(&line.room, spoken, std::mem::take(&mut line.opens_spurt));
        }
        let rtp_time = MediaTime::new(line.rtp_time, str0m::media::Frequency::FORTY_EIGHT_KHZ);
        line.rtp_time += FRAME as u64;
        let Some(writer) = self.rtc.writer(line.mid) else { return };
        let Some(pt) = writer.payload_params().find(|p| p.spec().codec == Codec::Opus).map(|p| p.pt()) else { return };
        let voice_activity = frame.level != super::voice::SILENCE_LEVEL;
        if let Err(error) =
            writer.audio_level(frame.level, voice_activity).write(pt, now, rtp_time, frame.payload.clone())
        {
            tracing::debug!(room = %line.room, %error, "a frame str0m refused");
        }
    }
}
