//! One panel session: its str0m `Rtc`, its lines and their granted directions, and the draining
//! of its output (str0m's rule: every input or write is followed by polling its output up to the
//! next timeout).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use str0m::format::Codec;
use str0m::media::{Direction, Frequency, MediaData, MediaTime};
use str0m::rtp::Ssrc;
use str0m::{Event, IceConnectionState, Input, Output, Rtc};

use super::config::EndpointConfig;
use super::error::{EndpointError, SendError};
use super::event::{EndReason, EndpointEvent, EndpointStats, SessionId};
use super::limit::RateLimit;
use super::negotiate::{Line, negotiate};
use super::offer::LineRights;
use super::socket::Socket;
use super::wire;

/// How many times draining answers str0m's "wake me now" at once before leaving it to the
/// driver's next timeout (str0m's pacer asks after a write).
const IMMEDIATE_ROUNDS: usize = 4;

/// Where a session's output goes: datagrams to the socket, events to the driver, counts.
#[derive(Debug)]
pub(super) struct Sink<'a> {
    pub(super) socket: &'a Socket,
    pub(super) events: &'a mut VecDeque<EndpointEvent>,
    pub(super) stats: &'a mut EndpointStats,
}

#[derive(Debug)]
pub(super) struct Session {
    pub(super) id: SessionId,
    rtc: Rtc,
    lines: Vec<Line>,
    /// The server's ICE ufrag for it: a panel's STUN names it.
    pub(super) ufrag: String,
    /// The addresses its datagrams came from (ICE validated), for routing.
    pub(super) sources: Vec<SocketAddr>,
    connected: bool,
    connect_by: Instant,
    pub(super) next_timeout: Instant,
    /// Its earliest entry in the endpoint's timers.
    pub(super) scheduled: Option<Instant>,
    /// Its datagram budget.
    pub(super) limit: RateLimit,
}

impl Session {
    pub(super) fn new(
        id: SessionId,
        rtc: Rtc,
        lines: Vec<Line>,
        ufrag: String,
        now: Instant,
        config: &EndpointConfig,
    ) -> Self {
        let connect_by = now + config.connect_within;
        Session {
            id,
            rtc,
            lines,
            ufrag,
            sources: Vec::new(),
            connected: false,
            connect_by,
            next_timeout: now,
            scheduled: None,
            limit: RateLimit::new(config.datagrams_per_second, now),
        }
    }

    /// A new offer of the panel's (lines added, stopped or given other rights; an ICE restart):
    /// the answer. The lines are the offer's, in its order.
    pub(super) fn renegotiate(
        &mut self,
        offer: &str,
        rights: &[LineRights],
        ptime: Option<u16>,
        now: Instant,
        sink: &mut Sink<'_>,
    ) -> Result<String, EndpointError> {
        let (lines, answer) = negotiate(&mut self.rtc, offer, rights, ptime)?;
        self.lines = lines;
        self.ufrag = self.rtc.direct_api().local_ice_credentials().ufrag;
        // The session's end, if any, shows at its next timeout.
        let _ = self.drain(now, sink);
        Ok(answer)
    }

    /// Whether str0m takes `input` as this session's (a STUN request's integrity, or a source ICE
    /// validated).
    pub(super) fn accepts(&self, input: &Input<'_>) -> bool {
        self.rtc.accepts(input)
    }

    /// A datagram of this session's. RTP on a line the panel may not talk on is counted and
    /// dropped: before decryption when its stream is known, else after str0m (which mapped it by
    /// its mid and drops it, the media not receiving).
    pub(super) fn receive(
        &mut self,
        input: Input<'_>,
        datagram: &[u8],
        now: Instant,
        sink: &mut Sink<'_>,
    ) -> Result<(), EndReason> {
        let ssrc = wire::rtp_ssrc(datagram).map(Ssrc::from);
        let known_before = ssrc.and_then(|ssrc| self.stream_direction(ssrc));
        if known_before.is_some_and(|direction| !direction.is_receiving()) {
            sink.stats.refused_rtp += 1;
            return Ok(());
        }
        if let Err(error) = self.rtc.handle_input(input) {
            tracing::debug!(session = %self.id, %error, "a datagram str0m refused");
        }
        if known_before.is_none()
            && ssrc.and_then(|ssrc| self.stream_direction(ssrc)).is_some_and(|d| !d.is_receiving())
        {
            sink.stats.refused_rtp += 1;
        }
        self.drain(now, sink)
    }

    /// The direction of the line an incoming stream belongs to, if str0m has mapped it.
    fn stream_direction(&mut self, ssrc: Ssrc) -> Option<Direction> {
        let mid = self.rtc.direct_api().stream_rx(&ssrc)?.mid();
        self.lines.iter().find(|line| line.mid == mid).map(|line| line.direction)
    }

    /// str0m's timers (ICE consent, DTLS retransmits, RTCP) and the connect deadline.
    pub(super) fn timeout(&mut self, now: Instant, sink: &mut Sink<'_>) -> Result<(), EndReason> {
        if !self.connected && now >= self.connect_by {
            return Err(EndReason::NeverConnected);
        }
        if let Err(error) = self.rtc.handle_input(Input::Timeout(now)) {
            tracing::debug!(session = %self.id, %error, "str0m's timeout");
        }
        self.drain(now, sink)
    }

    /// One Opus frame on `line`, at `rtp_time` (48 kHz samples of the driver's clock); str0m gives
    /// it this session's SSRC, sequence number and SRTP.
    pub(super) fn send(
        &mut self,
        line: usize,
        payload: Arc<[u8]>,
        rtp_time: u64,
        now: Instant,
        sink: &mut Sink<'_>,
    ) -> Result<(), SendError> {
        let session = self.id;
        let target = self.lines.get(line).ok_or(SendError::UnknownLine { session, line })?;
        if !target.direction.is_sending() {
            return Err(SendError::NotListening { session, line });
        }
        if !self.connected {
            return Err(SendError::NotConnected(session));
        }
        let writer = self.rtc.writer(target.mid).ok_or(SendError::UnknownSession(session))?;
        let pt = writer.payload_params().find(|params| params.spec().codec == Codec::Opus).map(|params| params.pt());
        let pt = pt.ok_or(SendError::NoOpus { session, line })?;
        writer.write(pt, now, MediaTime::new(rtp_time, Frequency::FORTY_EIGHT_KHZ), payload)?;
        // An ended session shows at its next timeout, where the driver learns of it.
        let _ = self.drain(now, sink);
        Ok(())
    }

    /// Starts DTLS's close (close_notify, RTCP BYE) and sends what that makes.
    pub(super) fn close(&mut self, now: Instant, sink: &mut Sink<'_>) {
        if let Err(error) = self.rtc.close() {
            tracing::debug!(session = %self.id, %error, "closing");
        }
        let _ = self.drain(now, sink);
        self.rtc.disconnect();
    }

    /// Polls str0m's output to its next timeout: datagrams sent, events translated.
    fn drain(&mut self, now: Instant, sink: &mut Sink<'_>) -> Result<(), EndReason> {
        for _ in 0..IMMEDIATE_ROUNDS {
            let at = self.drain_once(sink)?;
            self.next_timeout = if self.connected { at } else { at.min(self.connect_by) };
            if at > now {
                break;
            }
            if let Err(error) = self.rtc.handle_input(Input::Timeout(now)) {
                tracing::debug!(session = %self.id, %error, "str0m's timeout");
            }
        }
        if self.rtc.is_alive() { Ok(()) } else { Err(EndReason::Closed) }
    }

    fn drain_once(&mut self, sink: &mut Sink<'_>) -> Result<Instant, EndReason> {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(at)) => return Ok(at),
                Ok(Output::Transmit(transmit)) => {
                    if !sink.socket.send(&transmit.contents, transmit.destination) {
                        sink.stats.send_failed += 1;
                    }
                }
                Ok(Output::Event(event)) => self.event(event, sink)?,
                Err(error) => {
                    tracing::debug!(session = %self.id, %error, "str0m ended the session");
                    return Err(EndReason::Closed);
                }
            }
        }
    }

    fn event(&mut self, event: Event, sink: &mut Sink<'_>) -> Result<(), EndReason> {
        match event {
            Event::Connected => {
                self.connected = true;
                tracing::info!(session = %self.id, "session connected");
                sink.events.push_back(EndpointEvent::Connected(self.id));
            }
            Event::IceConnectionStateChange(IceConnectionState::Disconnected) => return Err(EndReason::IceLost),
            Event::MediaData(data) => self.audio(data, sink),
            _ => {}
        }
        Ok(())
    }

    fn audio(&self, data: MediaData, sink: &mut Sink<'_>) {
        let Some(line) = self.lines.iter().position(|line| line.mid == data.mid) else { return };
        // str0m delivers nothing on a media that does not receive; this holds if that changes.
        if !self.lines[line].direction.is_receiving() {
            sink.stats.refused_rtp += 1;
            return;
        }
        // The reordering buffer is off (the rooms' jitter buffer orders): one packet each.
        let seq = **data.seq_range.end() as u16;
        let rtp_timestamp = data.time.numer() as u32;
        let arrival = data.network_time;
        sink.events.push_back(EndpointEvent::Audio {
            session: self.id,
            line,
            seq,
            rtp_timestamp,
            arrival,
            payload: data.data,
        });
    }
}
