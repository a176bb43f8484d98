//! A panel as a browser is to partyline's own rooms: a str0m `Rtc` with full ICE (not lite) on
//! a UDP socket of its own, offering one sendrecv Opus m-line per line, sending 20 ms packets and
//! keeping what it hears, which [`level_dbfs`] decodes and measures.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc, RtcConfig};

/// A packet the panel heard: its line (m-line index), sequence number and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    pub line: usize,
    pub seq: u64,
    pub payload: Vec<u8>,
}

#[derive(Debug)]
pub struct Panel {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    mids: Vec<Mid>,
    pending: Option<SdpPendingOffer>,
    next_timeout: Instant,
    pub connected: bool,
    pub heard: Vec<Heard>,
    rtp_time: u64,
    nonblocking: bool,
}

impl Panel {
    /// A panel on a socket of `ip` and its offer of `lines` sendrecv audio m-lines.
    pub fn offer(ip: &str, lines: usize) -> (Panel, String) {
        let socket = UdpSocket::bind((ip, 0)).expect("a socket");
        let local = socket.local_addr().expect("its address");
        let now = Instant::now();
        let mut rtc = RtcConfig::new()
            .set_crypto_provider(Arc::new(str0m::crypto::from_feature_flags()))
            .clear_codecs()
            .enable_opus(true, false)
            .set_reordering_size_audio(0)
            .build(now);
        rtc.add_local_candidate(Candidate::host(local, "udp").expect("a host candidate"));
        let mut change = rtc.sdp_api();
        let mids =
            (0..lines).map(|_| change.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None)).collect();
        let (offer, pending) = change.apply().expect("something to offer");
        let panel = Panel {
            rtc,
            socket,
            local,
            mids,
            pending: Some(pending),
            next_timeout: now,
            connected: false,
            heard: Vec::new(),
            rtp_time: 0,
            nonblocking: false,
        };
        (panel, offer.to_sdp_string())
    }

    /// A new offer: `add` more sendrecv lines, and the lines `to_sendrecv` back to sendrecv (a
    /// line whose answer was one way is one way in the panel's next offer).
    pub fn reoffer(&mut self, add: usize, to_sendrecv: &[usize]) -> String {
        let mut change = self.rtc.sdp_api();
        for line in to_sendrecv {
            change.set_direction(self.mids[*line], Direction::SendRecv);
        }
        for _ in 0..add {
            self.mids.push(change.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None));
        }
        let (offer, pending) = change.apply().expect("something to offer");
        self.pending = Some(pending);
        offer.to_sdp_string()
    }

    /// A new offer restarting ICE (new credentials, the same candidate).
    pub fn ice_restart(&mut self) -> String {
        let mut change = self.rtc.sdp_api();
        change.ice_restart(true);
        let (offer, pending) = change.apply().expect("something to offer");
        self.pending = Some(pending);
        offer.to_sdp_string()
    }

    pub fn address(&self) -> SocketAddr {
        self.local
    }

    pub fn accept(&mut self, answer: &str) {
        let answer = SdpAnswer::from_sdp_string(answer).expect("the answer parses");
        let pending = self.pending.take().expect("an offer pending");
        self.rtc.sdp_api().accept_answer(pending, answer).expect("the answer is accepted");
    }

    /// Takes what arrives within `wait` (returning at the first datagram; zero: only what has
    /// arrived), runs due timers and sends what str0m has.
    pub fn drive(&mut self, wait: Duration) {
        let mut buffer = [0u8; 2048];
        self.wait_at_most(wait);
        while let Ok((length, source)) = self.socket.recv_from(&mut buffer) {
            let Ok(contents) = buffer[..length].try_into() else { continue };
            let receive = Receive { proto: Protocol::Udp, source, destination: self.local, contents };
            let _ = self.rtc.handle_input(Input::Receive(Instant::now(), receive));
            self.drain();
            // The rest of what already arrived, without waiting.
            self.wait_at_most(Duration::ZERO);
        }
        if self.next_timeout <= Instant::now() {
            let _ = self.rtc.handle_input(Input::Timeout(Instant::now()));
        }
        self.drain();
    }

    /// The socket's next receive waits at most `wait` (zero: not at all).
    fn wait_at_most(&mut self, wait: Duration) {
        if wait.is_zero() != self.nonblocking {
            self.nonblocking = wait.is_zero();
            self.socket.set_nonblocking(self.nonblocking).expect("the socket's mode");
        }
        if !wait.is_zero() {
            self.socket.set_read_timeout(Some(wait)).expect("a read timeout");
        }
    }

    fn drain(&mut self) {
        while let Ok(output) = self.rtc.poll_output() {
            match output {
                Output::Timeout(at) => {
                    self.next_timeout = at;
                    return;
                }
                Output::Transmit(transmit) => {
                    let _ = self.socket.send_to(&transmit.contents, transmit.destination);
                }
                Output::Event(Event::Connected) => self.connected = true,
                Output::Event(Event::MediaData(data)) => {
                    let line = self.mids.iter().position(|mid| *mid == data.mid).expect("a mid of ours");
                    self.heard.push(Heard { line, seq: **data.seq_range.end(), payload: data.data.to_vec() });
                }
                Output::Event(_) => {}
            }
        }
    }

    /// Sends one 20 ms packet on `line` (nothing once the connection is closed, as a tab's).
    pub fn send(&mut self, line: usize, payload: &[u8]) {
        if !self.is_alive() {
            return;
        }
        let writer = self.rtc.writer(self.mids[line]).expect("a writer");
        let pt = writer.payload_params().find(|p| p.spec().codec == Codec::Opus).map(|p| p.pt()).expect("Opus");
        let time = MediaTime::new(self.rtp_time, Frequency::FORTY_EIGHT_KHZ);
        writer.write(pt, Instant::now(), time, payload.to_vec()).expect("written");
        self.rtp_time += 960;
        self.drain();
    }

    /// Whether the PeerConnection is open: neither side closed it.
    pub fn is_alive(&self) -> bool {
        self.rtc.is_alive()
    }

    /// Closes the PeerConnection as a tab would (DTLS close_notify).
    pub fn close(&mut self) {
        self.rtc.close().expect("closing");
        self.drain();
    }

    /// The level (dBFS, RMS) of what the panel heard on `line` in its last `frames` packets.
    pub fn level_dbfs(&self, line: usize, frames: usize) -> f32 {
        let packets: Vec<&[u8]> = self.heard.iter().filter(|h| h.line == line).map(|h| &h.payload[..]).collect();
        level_dbfs(&packets, frames)
    }
}

/// Real Opus packets: 20 ms each of a tone at `hz`, at −12 dBFS.
pub fn opus_packets(hz: f32, count: usize) -> Vec<Vec<u8>> {
    use audiopus::coder::Encoder;
    use audiopus::{Application, Channels, SampleRate};
    let encoder = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip).expect("an encoder");
    let mut output = [0u8; 400];
    (0..count)
        .map(|frame| {
            let samples: Vec<i16> = (0..960)
                .map(|i| {
                    let t = (frame * 960 + i) as f32 / 48_000.0;
                    ((t * hz * std::f32::consts::TAU).sin() * 8_000.0) as i16
                })
                .collect();
            let length = encoder.encode(&samples, &mut output).expect("encoded");
            output[..length].to_vec()
        })
        .collect()
}

/// The level (dBFS, RMS) of the last `frames` of a stream of 20 ms Opus packets, decoded in
/// order by one decoder (as a listener's).
pub fn level_dbfs(packets: &[&[u8]], frames: usize) -> f32 {
    use audiopus::coder::Decoder;
    use audiopus::{Channels, SampleRate};
    let mut decoder = Decoder::new(SampleRate::Hz48000, Channels::Mono).expect("a decoder");
    let mut samples = Vec::new();
    let mut frame = [0f32; 960];
    for packet in packets {
        let decoded = decoder.decode_float(Some(*packet), &mut frame[..], false).expect("decoded");
        samples.extend_from_slice(&frame[..decoded]);
    }
    let last = &samples[samples.len().saturating_sub(frames * 960)..];
    let mean_square = last.iter().map(|s| s * s).sum::<f32>() / last.len().max(1) as f32;
    10.0 * mean_square.max(1e-12).log10()
}
