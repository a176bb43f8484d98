//! The rooms' WebRTC side: one UDP socket, many panel sessions, str0m driven sans-IO.
//!
//! **One PeerConnection per panel session**, bundled: every line of the panel is one audio m-line
//! of it (Opus only), so a four-line panel costs one ICE check and one DTLS handshake, not four.
//!
//! **ICE-lite on one socket.** The server has a reachable address (the LAN's, or a public one),
//! so it need not discover paths: it offers one host candidate, the socket's own address, and
//! only answers the panel's connectivity checks (RFC 8445's lite agent). No STUN or TURN server,
//! no candidate gathering, no checks of its own, and every session shares one port, which is one
//! firewall rule and one socket for the mixing thread to drain.
//!
//! **Routing a datagram.** A source address ICE validated for a session routes straight to it
//! (str0m's `accepts` confirms: the address is the session's nominated or viable pair). From an
//! unknown source only a STUN request is taken: its USERNAME begins with the server's ufrag, which
//! names the session, and str0m then checks its MESSAGE-INTEGRITY with the session's password;
//! the source is remembered once that passed. Anything else from an unknown source, and anything
//! that is neither STUN, DTLS, RTP nor RTCP, is dropped and counted ([`EndpointStats`]).
//!
//! **Directions.** The server decides each line's rights ([`LineRights`]); the answer's
//! direction of each m-line is those rights within what the panel offered (talk: the server
//! receives; listen: it sends). str0m's state holds the same directions, so a listen-only line
//! cannot send by construction: str0m refuses to write on a media that does not send and drops
//! RTP on one that does not receive. The endpoint also counts such RTP (`refused_rtp`), dropping
//! it before decryption once its stream is known.
//!
//! **Driving.** Sans-IO inside, one owner outside: a real-time thread that ticks every 20 ms
//! calls [`Endpoint::receive_until`] with the tick's deadline (it drains the socket and runs
//! str0m's timers until then), takes the events with [`Endpoint::poll_event`], mixes, then calls
//! [`Endpoint::send_frame`] for every listener's line (each session's stream has its own SSRC,
//! sequence numbers and SRTP; one encoded payload is shared, not copied, between listeners).
//! [`Endpoint::handle_datagram`], [`Endpoint::handle_timeouts`] and [`Endpoint::next_timeout`]
//! are the same steps for a driver that reads the socket itself (a fuzzer, a test).
//!
//! ```no_run
//! # use std::time::{Duration, Instant};
//! # use partyline_rooms::endpoint::{Endpoint, EndpointConfig, EndpointEvent};
//! # fn mixing_thread(mut endpoint: Endpoint) -> std::io::Result<()> {
//! let frame = Duration::from_millis(20);
//! let mut tick = Instant::now() + frame;
//! let mut rtp_time = 0u64;
//! loop {
//!     endpoint.receive_until(tick)?;
//!     while let Some(event) = endpoint.poll_event() {
//!         match event {
//!             EndpointEvent::Audio { session, line, seq, payload, .. } => { /* a talker's jitter buffer */ }
//!             EndpointEvent::Connected(session) | EndpointEvent::Disconnected(session, _) => { /* the rooms */ }
//!         }
//!     }
//!     // Mix, encode each distinct mix once, then for every listener's line:
//!     // endpoint.send_frame(session, line, mix.clone(), rtp_time, Instant::now())
//!     rtp_time += 960;
//!     tick += frame;
//! }
//! # }
//! ```
//!
//! **Renegotiation.** [`Endpoint::renegotiate`] takes a panel's new offer on a running session
//! with the rights of every m-line (JSEP keeps m-lines in place: a line added is appended, a
//! stopped one stays at port 0 and is inactive), and goes through the same checks and rewrite;
//! an ICE restart's new ufrag routes the panel's checks from then on.
//!
//! **Limits.** At most [`EndpointConfig::max_sessions`] sessions; each session a datagram budget
//! ([`EndpointConfig::datagrams_per_second`]), checked before str0m's work; everything dropped
//! is counted ([`EndpointStats`]).
//!
//! Not yet: a flood from unknown sources is dropped cheaply (no session's work) but not limited
//! per source.

mod config;
mod error;
mod event;
mod limit;
mod negotiate;
mod offer;
mod session;
mod socket;
mod timers;
mod wire;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use str0m::config::{CryptoProvider, DtlsCert};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Input, Rtc, RtcConfig};

pub use config::EndpointConfig;
pub use error::{EndpointError, SendError};
pub use event::{EndReason, EndpointEvent, EndpointStats, SessionId};
use negotiate::negotiate;
pub use offer::{LineRights, OfferError};
use session::{Session, Sink};
use socket::Socket;
use timers::Timers;

/// How many source addresses a session may be reached from (a panel's ICE tries a few).
const SOURCES_PER_SESSION: usize = 8;
/// Larger than any datagram WebRTC sends (str0m's MTU is 1150).
const DATAGRAM_BUFFER: usize = 2048;

/// The WebRTC endpoint: its socket and its sessions.
#[derive(Debug)]
pub struct Endpoint {
    config: EndpointConfig,
    socket: Socket,
    candidate: Candidate,
    crypto: Arc<CryptoProvider>,
    /// One certificate for every session: making one per session costs a key generation per join.
    certificate: DtlsCert,
    sessions: HashMap<SessionId, Session>,
    by_source: HashMap<SocketAddr, SessionId>,
    by_ufrag: HashMap<String, SessionId>,
    timers: Timers,
    /// The timers due now (kept: no allocation per call).
    due: Vec<(Instant, SessionId)>,
    events: VecDeque<EndpointEvent>,
    stats: EndpointStats,
    next_session: u64,
    buffer: Vec<u8>,
}

impl Endpoint {
    /// Binds the socket on `config.address` (port 0: any free one).
    pub fn bind(config: EndpointConfig) -> Result<Endpoint, EndpointError> {
        let socket = Socket::bind(config.address)?;
        let local = socket.local();
        let candidate = Candidate::host(local, "udp").map_err(|_| EndpointError::UnspecifiedAddress(local))?;
        let crypto = Arc::new(str0m::crypto::from_feature_flags());
        let certificate = crypto.dtls_provider.generate_certificate().ok_or(EndpointError::Certificate)?;
        tracing::info!(%local, "WebRTC endpoint bound");
        Ok(Endpoint {
            config,
            socket,
            candidate,
            crypto,
            certificate,
            sessions: HashMap::new(),
            by_source: HashMap::new(),
            by_ufrag: HashMap::new(),
            timers: Timers::default(),
            due: Vec::new(),
            events: VecDeque::new(),
            stats: EndpointStats::default(),
            next_session: 1,
            buffer: vec![0; DATAGRAM_BUFFER],
        })
    }

    /// The socket's address: the one candidate of every answer.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local()
    }

    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// A new session for a panel's `offer`, one audio m-line per entry of `lines` (in order);
    /// returns its id and the answer.
    pub fn accept(
        &mut self,
        offer: &str,
        lines: &[LineRights],
        now: Instant,
    ) -> Result<(SessionId, String), EndpointError> {
        let accepted = self.try_accept(offer, lines, now);
        if let Err(error) = &accepted {
            tracing::info!(%error, "an offer refused");
        }
        accepted
    }

    fn try_accept(
        &mut self,
        offer: &str,
        rights: &[LineRights],
        now: Instant,
    ) -> Result<(SessionId, String), EndpointError> {
        if self.sessions.len() >= self.config.max_sessions {
            self.stats.refused_full += 1;
            return Err(EndpointError::Full { max: self.config.max_sessions });
        }
        let mut rtc = self.new_rtc(now);
        let (lines, answer) = negotiate(&mut rtc, offer, rights, self.config.answer_ptime)?;
        let ufrag = rtc.direct_api().local_ice_credentials().ufrag;
        let id = SessionId(self.next_session);
        self.next_session += 1;
        let directions: Vec<_> = lines.iter().map(|line| line.direction).collect();
        tracing::info!(session = %id, ?directions, "session accepted");
        self.by_ufrag.insert(ufrag.clone(), id);
        self.sessions.insert(id, Session::new(id, rtc, lines, ufrag, now, &self.config));
        self.reschedule(id);
        Ok((id, answer))
    }

    /// A new offer on `session` (lines added or stopped, rights changed, an ICE restart), with
    /// the rights of every m-line in order: the answer. Refused, the session goes on as it was
    /// as far as str0m's offer handling allows.
    pub fn renegotiate(
        &mut self,
        session: SessionId,
        offer: &str,
        lines: &[LineRights],
        now: Instant,
    ) -> Result<String, EndpointError> {
        let target = self.sessions.get_mut(&session).ok_or(EndpointError::UnknownSession(session))?;
        let ufrag = target.ufrag.clone();
        let mut sink = Sink { socket: &self.socket, events: &mut self.events, stats: &mut self.stats };
        let answer = target.renegotiate(offer, lines, self.config.answer_ptime, now, &mut sink);
        if target.ufrag != ufrag {
            // An ICE restart: the panel's checks name the new ufrag.
            self.by_ufrag.remove(&ufrag);
            self.by_ufrag.insert(target.ufrag.clone(), session);
        }
        match &answer {
            Ok(_) => tracing::info!(%session, "session renegotiated"),
            Err(error) => tracing::info!(%session, %error, "a new offer refused"),
        }
        self.reschedule(session);
        answer
    }

    fn new_rtc(&self, now: Instant) -> Rtc {
        let mut rtc = RtcConfig::new()
            .set_crypto_provider(self.crypto.clone())
            .set_dtls_cert(self.certificate.clone())
            .set_ice_lite(true)
            .clear_codecs()
            .enable_opus(true, false)
            // Each packet as it arrives: the rooms' jitter buffer orders and waits.
            .set_reordering_size_audio(0)
            .build(now);
        rtc.add_local_candidate(self.candidate.clone());
        rtc
    }

    /// Ends `session` (DTLS close_notify sent); no event of it follows, queued ones are dropped.
    /// Returns whether it was open.
    pub fn close(&mut self, session: SessionId, now: Instant) -> bool {
        let Some(mut closed) = self.remove(session) else { return false };
        let mut sink = Sink { socket: &self.socket, events: &mut self.events, stats: &mut self.stats };
        closed.close(now, &mut sink);
        self.events.retain(|event| event.session() != session);
        tracing::info!(%session, "session closed");
        true
    }

    fn remove(&mut self, session: SessionId) -> Option<Session> {
        let removed = self.sessions.remove(&session)?;
        for source in &removed.sources {
            // A newer session may have been reached from the same address since.
            if self.by_source.get(source) == Some(&session) {
                self.by_source.remove(source);
            }
        }
        self.by_ufrag.remove(&removed.ufrag);
        Some(removed)
    }

    fn end(&mut self, session: SessionId, reason: EndReason) {
        if self.remove(session).is_some() {
            tracing::info!(%session, ?reason, "session ended");
            self.events.push_back(EndpointEvent::Disconnected(session, reason));
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        self.events.pop_front()
    }

    /// One datagram that arrived on the socket from `from`.
    pub fn handle_datagram(&mut self, from: SocketAddr, datagram: &[u8], now: Instant) {
        let Ok(contents) = datagram.try_into() else {
            self.stats.garbage += 1;
            return;
        };
        let input = Input::Receive(
            now,
            Receive { proto: Protocol::Udp, source: from, destination: self.socket.local(), contents },
        );
        let Some(id) = self.route(from, datagram, &input) else {
            self.stats.unknown_source += 1;
            return;
        };
        let Some(session) = self.sessions.get_mut(&id) else { return };
        if !session.limit.take(now) {
            self.stats.rate_limited += 1;
            return;
        }
        if !session.sources.contains(&from) && session.sources.len() < SOURCES_PER_SESSION {
            // Only a STUN request that passed the integrity check routes from a new source.
            session.sources.push(from);
            self.by_source.insert(from, id);
        }
        let mut sink = Sink { socket: &self.socket, events: &mut self.events, stats: &mut self.stats };
        match session.receive(input, datagram, now, &mut sink) {
            Ok(()) => self.reschedule(id),
            Err(reason) => self.end(id, reason),
        }
    }

    fn route(&self, from: SocketAddr, datagram: &[u8], input: &Input<'_>) -> Option<SessionId> {
        if let Some(&id) = self.by_source.get(&from)
            && self.sessions.get(&id).is_some_and(|session| session.accepts(input))
        {
            return Some(id);
        }
        let ufrag = wire::stun_target_ufrag(datagram)?;
        let id = *self.by_ufrag.get(ufrag)?;
        self.sessions.get(&id)?.accepts(input).then_some(id)
    }

    /// Runs the timers of the sessions that are due.
    pub fn handle_timeouts(&mut self, now: Instant) {
        let mut due = std::mem::take(&mut self.due);
        self.timers.take_due(now, &mut due);
        for &(at, id) in &due {
            let Some(session) = self.sessions.get_mut(&id) else { continue };
            if session.scheduled == Some(at) {
                session.scheduled = None;
            }
            if session.next_timeout <= now {
                let mut sink = Sink { socket: &self.socket, events: &mut self.events, stats: &mut self.stats };
                if let Err(reason) = session.timeout(now, &mut sink) {
                    self.end(id, reason);
                    continue;
                }
            }
            self.reschedule(id);
        }
        self.due = due;
    }

    /// Puts `session`'s next timeout in the timers.
    fn reschedule(&mut self, session: SessionId) {
        if let Some(session) = self.sessions.get_mut(&session) {
            self.timers.schedule(session.id, session.next_timeout, &mut session.scheduled);
        }
    }

    /// When [`handle_timeouts`](Self::handle_timeouts) is next due (`None`: no session).
    pub fn next_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Sends one Opus frame on `line` of `session`; `rtp_time` is the driver's 48 kHz sample
    /// clock (str0m keeps each stream's sequence numbers).
    pub fn send_frame(
        &mut self,
        session: SessionId,
        line: usize,
        payload: Arc<[u8]>,
        rtp_time: u64,
        now: Instant,
    ) -> Result<(), SendError> {
        let target = self.sessions.get_mut(&session).ok_or(SendError::UnknownSession(session))?;
        let mut sink = Sink { socket: &self.socket, events: &mut self.events, stats: &mut self.stats };
        target.send(line, payload, rtp_time, now, &mut sink)?;
        self.reschedule(session);
        Ok(())
    }

    /// Drains the socket and runs the sessions' timers until `deadline` (the mixing thread's next
    /// tick); events wait in [`poll_event`](Self::poll_event). Errors are the socket's.
    pub fn receive_until(&mut self, deadline: Instant) -> io::Result<()> {
        let mut buffer = std::mem::take(&mut self.buffer);
        let received = self.receive_into(&mut buffer, deadline);
        self.buffer = buffer;
        received
    }

    fn receive_into(&mut self, buffer: &mut [u8], deadline: Instant) -> io::Result<()> {
        loop {
            let now = Instant::now();
            self.handle_timeouts(now);
            if now >= deadline {
                return Ok(());
            }
            let wake = self.next_timeout().map_or(deadline, |timeout| timeout.min(deadline));
            if let Some((length, from)) = self.socket.receive(buffer, wake.saturating_duration_since(now))? {
                self.handle_datagram(from, &buffer[..length], Instant::now());
            }
        }
    }
}
