//! A panel as a browser is to the endpoint: a str0m `Rtc` with full ICE (not lite) and its own
//! UDP socket on loopback, offering one sendrecv audio m-line per line.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use partyline_rooms::endpoint::{Endpoint, EndpointEvent};
use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc, RtcConfig};

/// A packet the client heard: its line (m-line index), sequence number and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    pub line: usize,
    pub seq: u64,
    pub payload: Vec<u8>,
}

#[derive(Debug)]
pub struct Client {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    mids: Vec<Mid>,
    pending: Option<SdpPendingOffer>,
    next_timeout: Instant,
    pub connected: bool,
    pub heard: Vec<Heard>,
    rtp_time: u64,
}

impl Client {
    /// A client and its offer of `lines` sendrecv audio m-lines.
    pub fn offer(lines: usize) -> (Client, String) {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a loopback socket");
        socket.set_nonblocking(true).expect("non-blocking");
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
        let client = Client {
            rtc,
            socket,
            local,
            mids,
            pending: Some(pending),
            next_timeout: now,
            connected: false,
            heard: Vec::new(),
            rtp_time: 0,
        };
        (client, offer.to_sdp_string())
    }

    /// A new offer: `add` more sendrecv lines, and the lines `to_sendrecv` back to sendrecv (a
    /// line whose answer was one way is one way in the client's next offer).
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

    pub fn accept(&mut self, answer: &str) {
        let answer = SdpAnswer::from_sdp_string(answer).expect("the answer parses");
        let pending = self.pending.take().expect("an offer pending");
        self.rtc.sdp_api().accept_answer(pending, answer).expect("the answer is accepted");
    }

    /// Takes what arrived, runs due timers and sends what str0m has.
    pub fn drive(&mut self) {
        let mut buffer = [0u8; 2048];
        while let Ok((length, source)) = self.socket.recv_from(&mut buffer) {
            let Ok(contents) = buffer[..length].try_into() else { continue };
            let receive = Receive { proto: Protocol::Udp, source, destination: self.local, contents };
            let _ = self.rtc.handle_input(Input::Receive(Instant::now(), receive));
            self.drain();
        }
        if self.next_timeout <= Instant::now() {
            let _ = self.rtc.handle_input(Input::Timeout(Instant::now()));
        }
        self.drain();
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

    /// Sends one 20 ms packet on `line`.
    pub fn send(&mut self, line: usize, payload: &[u8]) {
        let writer = self.rtc.writer(self.mids[line]).expect("a writer");
        let pt = writer.payload_params().find(|p| p.spec().codec == Codec::Opus).map(|p| p.pt()).expect("Opus");
        let time = MediaTime::new(self.rtp_time, Frequency::FORTY_EIGHT_KHZ);
        writer.write(pt, Instant::now(), time, payload.to_vec()).expect("written");
        self.rtp_time += 960;
        self.drain();
    }

    /// Closes the PeerConnection as a tab would (DTLS close_notify).
    pub fn close(&mut self) {
        self.rtc.close().expect("closing");
        self.drain();
    }

    pub fn address(&self) -> SocketAddr {
        self.local
    }
}

/// Drives the endpoint and the clients until `done` says so (on what the endpoint reported so
/// far), at most `within`: the endpoint waits on its socket at most 2 ms at a time, then each
/// client takes what arrived. Returns the endpoint's events.
pub fn drive_until(
    endpoint: &mut Endpoint,
    clients: &mut [&mut Client],
    within: Duration,
    mut done: impl FnMut(&[EndpointEvent], &Endpoint, &[&mut Client]) -> bool,
) -> Vec<EndpointEvent> {
    let deadline = Instant::now() + within;
    let mut events = Vec::new();
    loop {
        if done(&events, endpoint, clients) {
            return events;
        }
        assert!(Instant::now() < deadline, "not done within {within:?}; events so far: {events:?}");
        endpoint.receive_until(Instant::now() + Duration::from_millis(2)).expect("the endpoint's socket");
        while let Some(event) = endpoint.poll_event() {
            events.push(event);
        }
        for client in clients.iter_mut() {
            client.drive();
        }
    }
}

/// Real Opus packets (20 ms of a tone at `hz`), distinct per `hz`.
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
