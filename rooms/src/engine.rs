//! The rooms running: the endpoint's sessions joined to the rooms' members, one 20 ms tick at a
//! time, on the thread that owns the [`Engine`].
//!
//! A panel session is one PeerConnection ([`Endpoint`]); each of its lines is one member of
//! the line's [`Room`] (rooms are made on the first member and kept). A tick:
//! 1. [`Endpoint::receive_until`] drains the socket up to the tick's deadline;
//! 2. the endpoint's events go where they belong: a talker's packet into its member's jitter
//!    buffer (or dropped there, before decoding, when it is not talking), a session gone takes
//!    its members out of their rooms; a session whose packets stopped for [`QUIET_AFTER`], or
//!    started again, is reported (a WHIP source that sends nothing is ended by control);
//! 3. every room mixes and encodes ([`Room::tick`]);
//! 4. every listener's packet goes out on its line ([`Endpoint::send_frame`]): the shared mix's
//!    bytes are one allocation per room and tick, handed to every listener on it, each of whom
//!    gets its own SRTP, sequence numbers and timestamps from its session.
//!
//! A room may also have a [`LocalLine`], a line on this host that meets it without a codec
//! (bridged's card, one per group): before the room mixes, the line's 20 ms of PCM go into the
//! sum; after, the line gets the sum without itself.
//!
//! The RTP clock of what the rooms send is the engine's own (48 kHz samples since it started),
//! the same for every line: one frame more per tick.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::endpoint::{Endpoint, EndpointError, EndpointEvent, LineRights, SessionId};
use crate::jitter::FRAME_SAMPLES;
use crate::mixer::{Delivery, MemberId, MixConfig, Rights, Room, RoomError, Stream};

/// A line of a session, by its index in the rights given at [`Engine::join`].
type SessionLine = (SessionId, usize);

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    #[error(transparent)]
    Room(#[from] RoomError),
    #[error("{0} is not open")]
    UnknownSession(SessionId),
    #[error("{session} has no line {line}")]
    UnknownLine { session: SessionId, line: usize },
}

/// A connected session that has sent no audio packet for this long is reported not receiving
/// (as Janus's `media` event after a second without media).
pub const QUIET_AFTER: Duration = Duration::from_secs(1);

/// What happened to the sessions during a tick, for the engine's owner to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    Connected(SessionId),
    Disconnected(SessionId),
    /// The rooms receive the session's audio again (true), or have received none of it for
    /// [`QUIET_AFTER`] (false, also when it never sent any: a listener only). Said on a change.
    Receiving(SessionId, bool),
}

/// A connected session's audio coming in: its last packet (or its connection), and what was
/// last said of it.
#[derive(Debug, Clone, Copy)]
struct Inflow {
    last: Instant,
    receiving: Option<bool>,
}

/// A line on this host that meets a room as PCM, without a codec (bridged's card for a group).
/// Called on the engine's thread once per tick each way: it must not block.
pub trait LocalLine: Send + Sync + std::fmt::Debug {
    /// Fills `frame` (20 ms, 48 kHz, mono) with the line's send for this tick; false when it
    /// has none this time (the room mixes without it).
    fn send(&self, frame: &mut [f32]) -> bool;
    /// The room's mix of this tick without the line's own send.
    fn hear(&self, frame: &[f32]);
}

/// Where a member is.
#[derive(Debug, Clone)]
struct Membership {
    room: String,
    member: MemberId,
    rights: Rights,
}

/// The endpoint, the rooms, and which line of which session is which member.
#[derive(Debug)]
pub struct Engine {
    endpoint: Endpoint,
    mix: MixConfig,
    rooms: HashMap<String, Room>,
    /// Each room's local line, by room.
    locals: HashMap<String, Arc<dyn LocalLine>>,
    /// A local line's send, reused every tick.
    local_frame: Vec<f32>,
    members: HashMap<SessionLine, Membership>,
    lines: HashMap<MemberId, SessionLine>,
    sessions: HashMap<SessionId, usize>,
    connected: HashSet<SessionId>,
    /// Each connected session's inflow.
    inflows: HashMap<SessionId, Inflow>,
    next_member: u64,
    rtp_time: u64,
    /// Send failures since the start (a session gone between its event and the send, a full
    /// socket buffer): the endpoint's own counters say which.
    send_failures: u64,
}

impl Engine {
    pub fn new(endpoint: Endpoint, mix: MixConfig) -> Engine {
        Engine {
            endpoint,
            mix,
            rooms: HashMap::new(),
            locals: HashMap::new(),
            local_frame: vec![0.0; FRAME_SAMPLES],
            members: HashMap::new(),
            lines: HashMap::new(),
            sessions: HashMap::new(),
            connected: HashSet::new(),
            inflows: HashMap::new(),
            next_member: 0,
            rtp_time: 0,
            send_failures: 0,
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn room(&self, line: &str) -> Option<&Room> {
        self.rooms.get(line)
    }

    pub fn send_failures(&self) -> u64 {
        self.send_failures
    }

    /// Answers a panel's offer: one member per line, in its line's room, with the server's
    /// rights. Nothing is joined when the offer is refused.
    pub fn join(
        &mut self,
        offer: &str,
        lines: &[LineRights],
        now: Instant,
    ) -> Result<(SessionId, String), EngineError> {
        let (session, answer) = self.endpoint.accept(offer, lines, now)?;
        // A stopped m-line (neither talk nor listen) is in no room.
        for (index, line) in lines.iter().enumerate().filter(|(_, line)| line.talk || line.listen) {
            if let Err(error) = self.add_member(session, index, line) {
                self.leave(session, now);
                return Err(error.into());
            }
        }
        self.sessions.insert(session, lines.len());
        Ok((session, answer))
    }

    fn room_made(&mut self, name: &str) -> Result<&mut Room, RoomError> {
        Ok(match self.rooms.entry(name.to_owned()) {
            std::collections::hash_map::Entry::Occupied(room) => room.into_mut(),
            std::collections::hash_map::Entry::Vacant(vacant) => vacant.insert(Room::new(self.mix)?),
        })
    }

    /// Gives `room` its local line (made if it does not exist), in place of any it had.
    pub fn attach_local(&mut self, room: &str, line: Arc<dyn LocalLine>) -> Result<(), RoomError> {
        self.room_made(room)?.set_local(true);
        self.locals.insert(room.to_owned(), line);
        Ok(())
    }

    /// Takes `room`'s local line away; false when it had none.
    pub fn detach_local(&mut self, room: &str) -> bool {
        if let Some(room) = self.rooms.get_mut(room) {
            room.set_local(false);
        }
        self.locals.remove(room).is_some()
    }

    fn add_member(&mut self, session: SessionId, index: usize, line: &LineRights) -> Result<(), RoomError> {
        let member = MemberId(self.next_member);
        self.next_member += 1;
        let room = self.room_made(&line.line)?;
        let rights = Rights { talk: line.talk, listen: line.listen };
        room.join(member, rights)?;
        self.members.insert((session, index), Membership { room: line.line.clone(), member, rights });
        self.lines.insert(member, (session, index));
        Ok(())
    }

    /// A new offer on a running session (a line added, one stopped, an ICE restart), with the
    /// rights of every m-line in order (a stopped line: neither talk nor listen): the answer. A
    /// line whose room and rights stay keeps its member (its key, its jitter buffer); a changed
    /// one is a new member; a stopped one leaves its room. Refused, the memberships stay.
    pub fn renegotiate(
        &mut self,
        session: SessionId,
        offer: &str,
        lines: &[LineRights],
        now: Instant,
    ) -> Result<String, EngineError> {
        let Some(&before) = self.sessions.get(&session) else { return Err(EngineError::UnknownSession(session)) };
        let answer = self.endpoint.renegotiate(session, offer, lines, now)?;
        for index in 0..before.max(lines.len()) {
            let wanted = lines.get(index).filter(|line| line.talk || line.listen);
            let kept = self.members.get(&(session, index)).is_some_and(|membership| {
                wanted.is_some_and(|line| {
                    membership.room == line.line && membership.rights == Rights { talk: line.talk, listen: line.listen }
                })
            });
            if kept {
                continue;
            }
            self.drop_line(session, index);
            if let Some(line) = wanted {
                self.add_member(session, index, line)?;
            }
        }
        self.sessions.insert(session, lines.len());
        Ok(answer)
    }

    /// The talk key of a session's line: its packets are mixed from the next one on.
    pub fn set_talking(&mut self, session: SessionId, line: usize, talking: bool) -> Result<(), EngineError> {
        let Some(membership) = self.members.get(&(session, line)) else { return Err(self.unknown(session, line)) };
        // A member's room is kept while it is there.
        let Some(room) = self.rooms.get_mut(&membership.room) else {
            return Err(EngineError::UnknownLine { session, line });
        };
        room.set_talking(membership.member, talking)?;
        Ok(())
    }

    fn unknown(&self, session: SessionId, line: usize) -> EngineError {
        if self.sessions.contains_key(&session) {
            EngineError::UnknownLine { session, line }
        } else {
            EngineError::UnknownSession(session)
        }
    }

    /// Ends a session: its members leave their rooms, its PeerConnection closes.
    pub fn leave(&mut self, session: SessionId, now: Instant) -> bool {
        self.endpoint.close(session, now);
        self.forget(session)
    }

    /// Ends every session but `keep`; returns how many ended.
    pub fn keep_only(&mut self, keep: &[SessionId], now: Instant) -> usize {
        let ending: Vec<SessionId> = self.sessions.keys().filter(|session| !keep.contains(session)).copied().collect();
        ending.into_iter().filter(|&session| self.leave(session, now)).count()
    }

    /// Takes one line of a session out of its room: nothing more is mixed from it or sent to
    /// it (its m-line stays, silent). False when the session has no such line (any more).
    pub fn drop_line(&mut self, session: SessionId, line: usize) -> bool {
        let Some(membership) = self.members.remove(&(session, line)) else { return false };
        self.lines.remove(&membership.member);
        if let Some(room) = self.rooms.get_mut(&membership.room) {
            // Its member was made with the room: it is there.
            let _ = room.leave(membership.member);
        }
        true
    }

    fn forget(&mut self, session: SessionId) -> bool {
        self.connected.remove(&session);
        self.inflows.remove(&session);
        let Some(lines) = self.sessions.remove(&session) else { return false };
        for line in 0..lines {
            self.drop_line(session, line);
        }
        true
    }

    /// One tick: the socket drained until `deadline`, the events routed, every room mixed at
    /// `deadline` and every listener's frame sent. The sessions that connected, went, or whose
    /// audio stopped or started.
    pub fn run_tick(&mut self, deadline: Instant) -> io::Result<Vec<SessionEvent>> {
        self.endpoint.receive_until(deadline)?;
        let mut events = self.route_events(deadline);
        self.report_quiet(deadline, &mut events);
        self.mix_and_send(deadline);
        Ok(events)
    }

    fn route_events(&mut self, now: Instant) -> Vec<SessionEvent> {
        let mut happened = Vec::new();
        while let Some(event) = self.endpoint.poll_event() {
            match event {
                EndpointEvent::Connected(session) => {
                    self.connected.insert(session);
                    self.inflows.insert(session, Inflow { last: now, receiving: None });
                    happened.push(SessionEvent::Connected(session));
                }
                EndpointEvent::Audio { session, line, seq, rtp_timestamp, arrival, payload } => {
                    if let Some(inflow) = self.inflows.get_mut(&session) {
                        inflow.last = arrival;
                        if inflow.receiving != Some(true) {
                            inflow.receiving = Some(true);
                            happened.push(SessionEvent::Receiving(session, true));
                        }
                    }
                    let Some(membership) = self.members.get(&(session, line)) else { continue };
                    let Some(room) = self.rooms.get_mut(&membership.room) else { continue };
                    // A member not talking has its packet dropped and counted by its room.
                    let _ = room.receive(membership.member, seq, rtp_timestamp, &payload, arrival);
                }
                EndpointEvent::Disconnected(session, _) => {
                    if self.forget(session) {
                        happened.push(SessionEvent::Disconnected(session));
                    }
                }
            }
        }
        happened
    }

    /// The sessions that have sent nothing for [`QUIET_AFTER`] since their last packet (or their
    /// connection), said once.
    fn report_quiet(&mut self, now: Instant, events: &mut Vec<SessionEvent>) {
        for (&session, inflow) in &mut self.inflows {
            if inflow.receiving != Some(false) && now.saturating_duration_since(inflow.last) >= QUIET_AFTER {
                inflow.receiving = Some(false);
                events.push(SessionEvent::Receiving(session, false));
            }
        }
    }

    fn mix_and_send(&mut self, now: Instant) {
        let rtp_time = self.rtp_time;
        self.rtp_time += FRAME_SAMPLES as u64;
        for (name, room) in &mut self.rooms {
            let local = self.locals.get(name);
            if let Some(local) = local
                && local.send(&mut self.local_frame)
            {
                room.mix_local(&self.local_frame);
            }
            if let Err(error) = room.tick(now) {
                tracing::warn!(room = name, %error, "a room could not mix this tick");
                continue;
            }
            if let Some(local) = local {
                local.hear(room.local_hears());
            }
            let mut shared: Option<Arc<[u8]>> = None;
            for Delivery { member, stream, packet } in room.deliveries() {
                let Some(&(session, line)) = self.lines.get(&member) else { continue };
                if !self.connected.contains(&session) {
                    continue;
                }
                let payload = match stream {
                    Stream::Shared => shared.get_or_insert_with(|| Arc::from(packet)).clone(),
                    Stream::Own => Arc::from(packet),
                };
                if self.endpoint.send_frame(session, line, payload, rtp_time, now).is_err() {
                    self.send_failures += 1;
                }
            }
        }
    }
}
