//! A room's mixer: per 20 ms tick, the talkers' frames summed, the full mix encoded **once**
//! for every listener who is not talking, and one mix-minus per talker who listens.
//!
//! - **Decode only talkers.** Each member who may talk has a [`JitterBuffer`]; packets of a
//!   member who is not talking (muted, or listen-only) are dropped in [`Room::receive`] before
//!   they reach it, and a talker whose spurt ended is not decoded (see [`crate::jitter`]).
//! - **Mix.** Frames are `f32` and summed; each encoder's input goes through libopus's soft
//!   clipper, so a sum over full scale is bent back under it and never wraps.
//! - **Encode once.** One shared encoder (20 ms, voice, mono 48 kHz, FEC on) whenever the room
//!   has a listener; one own encoder per talker who listens, fed the sum without that talker's
//!   frame. Encodes per tick = 1 + talkers who listen (plus, briefly, a released talker's
//!   hangover). No listener: no encode. Optionally
//!   ([`EncoderConfig::idle_after_silent_frames`]) an encoder whose input has been digital
//!   silence for 10 frames idles and its last packet is sent again: a room nobody talks in
//!   then encodes nothing. [`Room::deliveries`] hands each listener the shared
//!   packet or its own, borrowed from buffers reused every tick (no allocation per tick).
//! - **No click at the switch** (see [`switch`]): an own encoder is primed with the last
//!   100 ms of the full mix and runs alongside the shared one until the talker's voice is in
//!   the mix; at the release it stays on it for a hangover of 5 ticks while the shared
//!   encoder forgets the talker's voice.
//!   Measured (the test `a_listener_who_starts_and_stops_talking_hears_no_click`, a voice-like
//!   signal at 32 kbit/s): the high-frequency peak around the switch, as a multiple of the
//!   decoded voice's own steady peak, is 0.97 at the press and 1.11 at the release; a fresh
//!   encoder heard at once gives 4.6 at the press (its cold first frames). Without the
//!   hangover the talker hears its own last (faded) frame at the release.
//! - **A local line, without a codec.** A room may have one line on this host (bridged's card
//!   for the group): its 20 ms of PCM ([`Room::mix_local`]) is summed like a talker's frame,
//!   and it hears the sum without itself ([`Room::local_hears`]), never encoded or decoded.
//! - **Talk key edges.** A spurt's first frame is faded in over 5 ms and a released talker's
//!   last frame is faded out ([`JitterBuffer::release`]): a key pressed or released mid-word
//!   does not cut the waveform.

mod encoder;
mod history;
mod switch;

use std::collections::HashMap;
use std::time::Instant;

pub use encoder::EncoderConfig;
pub use switch::{HANGOVER_TICKS, SwitchMethod};

use crate::jitter::{FRAME_SAMPLES, JitterBuffer, JitterStats};
use encoder::MixEncoder;
use history::MixHistory;
use switch::OwnMix;

/// A member of a room, as the caller names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberId(pub u64);

/// What a member may do in a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rights {
    pub talk: bool,
    pub listen: bool,
}

/// How a room mixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MixConfig {
    pub encoder: EncoderConfig,
    pub switch: SwitchMethod,
}

#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    #[error("{0:?} is not a member of the room")]
    UnknownMember(MemberId),
    #[error("{0:?} is already a member of the room")]
    AlreadyMember(MemberId),
    #[error("{0:?} may not talk in the room")]
    MayNotTalk(MemberId),
    #[error("Opus: {0}")]
    Opus(#[from] audiopus::Error),
}

/// What became of a packet given to [`Room::receive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Queued in the member's jitter buffer.
    Queued,
    /// Dropped before decoding: the member is not talking (muted, or may not talk).
    NotTalking,
}

/// Which encoder a listener's packet comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The full mix, the same bytes for every listener on it.
    Shared,
    /// The member's own mix-minus.
    Own,
}

/// One listener's packet of the last tick.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub member: MemberId,
    pub stream: Stream,
    pub packet: &'a [u8],
}

/// What a room did since it was created.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RoomStats {
    pub ticks: u64,
    /// Mixes encoded (shared and own), priming not included.
    pub encodes: u64,
    /// Encodes of the last tick.
    pub last_tick_encodes: u32,
    /// Frames encoded and discarded to prime own encoders.
    pub priming_encodes: u64,
    /// Talker frames mixed (decoded, rebuilt or concealed).
    pub frames_mixed: u64,
    /// Packets dropped before decoding because their member was not talking.
    pub dropped_not_talking: u64,
}

#[derive(Debug)]
struct Member {
    id: MemberId,
    rights: Rights,
    talking: bool,
    /// Exists while the member may talk.
    jitter: Option<JitterBuffer>,
    /// Whether the member's frame is in this tick's mix.
    voiced: bool,
    /// Exists while the member talks and listens, and during its hangover.
    own: Option<OwnMix>,
}

/// One room's members, their jitter buffers and the room's encoders.
#[derive(Debug)]
pub struct Room {
    config: MixConfig,
    members: Vec<Member>,
    index: HashMap<MemberId, usize>,
    shared: MixEncoder,
    /// Whether the shared encoder encoded this tick (the room had a listener).
    shared_fresh: bool,
    history: MixHistory,
    sum: Vec<f32>,
    scratch: Vec<f32>,
    /// The local line, while the room has one.
    local: Option<LocalLine>,
    stats: RoomStats,
}

/// The room's line on this host (see the module's doc): buffers kept for its life.
#[derive(Debug)]
struct LocalLine {
    send: Vec<f32>,
    /// Whether `send` holds this tick's frame.
    voiced: bool,
    hears: Vec<f32>,
}

impl Room {
    pub fn new(config: MixConfig) -> Result<Room, RoomError> {
        let history_frames = match config.switch {
            SwitchMethod::Primed { history_frames, .. } => history_frames,
            SwitchMethod::Fresh => 1,
        };
        Ok(Room {
            config,
            members: Vec::new(),
            index: HashMap::new(),
            shared: MixEncoder::new(config.encoder)?,
            shared_fresh: false,
            history: MixHistory::new(history_frames),
            sum: vec![0.0; FRAME_SAMPLES],
            scratch: vec![0.0; FRAME_SAMPLES],
            local: None,
            stats: RoomStats::default(),
        })
    }

    /// Gives the room its local line, or takes it away.
    pub fn set_local(&mut self, on: bool) {
        self.local =
            on.then(|| LocalLine { send: vec![0.0; FRAME_SAMPLES], voiced: false, hears: vec![0.0; FRAME_SAMPLES] });
    }

    pub fn has_local(&self) -> bool {
        self.local.is_some()
    }

    /// The local line's send for the next tick: 20 ms at 48 kHz (a shorter frame is padded
    /// with silence). Without a call before a tick, the line sends nothing in it.
    pub fn mix_local(&mut self, frame: &[f32]) {
        let Some(local) = self.local.as_mut() else { return };
        let n = frame.len().min(FRAME_SAMPLES);
        local.send[..n].copy_from_slice(&frame[..n]);
        local.send[n..].fill(0.0);
        local.voiced = true;
    }

    /// What the local line hears of the last tick: the room's sum without its own send, as
    /// PCM (silence without a local line).
    pub fn local_hears(&self) -> &[f32] {
        self.local.as_ref().map_or(&[], |local| &local.hears)
    }

    pub fn join(&mut self, id: MemberId, rights: Rights) -> Result<(), RoomError> {
        if self.index.contains_key(&id) {
            return Err(RoomError::AlreadyMember(id));
        }
        let jitter = rights.talk.then(JitterBuffer::new).transpose()?;
        self.index.insert(id, self.members.len());
        self.members.push(Member { id, rights, talking: false, jitter, voiced: false, own: None });
        Ok(())
    }

    pub fn leave(&mut self, id: MemberId) -> Result<(), RoomError> {
        let position = self.index.remove(&id).ok_or(RoomError::UnknownMember(id))?;
        self.members.swap_remove(position);
        if let Some(moved) = self.members.get(position) {
            self.index.insert(moved.id, position);
        }
        Ok(())
    }

    /// Changes a member's rights: losing talk stops its talking and frees its jitter buffer;
    /// losing listen frees its own encoder.
    pub fn set_rights(&mut self, id: MemberId, rights: Rights) -> Result<(), RoomError> {
        let member = self.member_mut(id)?;
        member.rights = rights;
        if !rights.talk {
            member.talking = false;
            member.jitter = None;
        } else if member.jitter.is_none() {
            member.jitter = Some(JitterBuffer::new()?);
        }
        if !rights.listen {
            member.own = None;
        }
        Ok(())
    }

    /// Starts or stops a member's talking (its talk key). A talker who listens gets its own
    /// mix-minus encoder, primed as the room's [`SwitchMethod`] says.
    pub fn set_talking(&mut self, id: MemberId, talking: bool) -> Result<(), RoomError> {
        let (config, history) = (self.config, &self.history);
        let position = *self.index.get(&id).ok_or(RoomError::UnknownMember(id))?;
        let member = &mut self.members[position];
        if talking && !member.rights.talk {
            return Err(RoomError::MayNotTalk(id));
        }
        if member.talking == talking {
            return Ok(());
        }
        member.talking = talking;
        if let Some(jitter) = member.jitter.as_mut() {
            if talking { jitter.cancel_release() } else { jitter.release() }
        }
        if talking && member.rights.listen && member.own.is_none() {
            let (own, primed) = OwnMix::start(config.encoder, config.switch, history)?;
            member.own = Some(own);
            self.stats.priming_encodes += primed;
        }
        Ok(())
    }

    /// Takes one of a member's RTP packets (an Opus frame of 20 ms). A member not talking has
    /// it dropped here, before any decoding.
    pub fn receive(
        &mut self,
        id: MemberId,
        seq: u16,
        timestamp: u32,
        payload: &[u8],
        arrival: Instant,
    ) -> Result<Received, RoomError> {
        let member = self.member_mut(id)?;
        match (member.talking, member.jitter.as_mut()) {
            (true, Some(jitter)) => {
                jitter.receive(seq, timestamp, payload, arrival);
                Ok(Received::Queued)
            }
            _ => {
                self.stats.dropped_not_talking += 1;
                Ok(Received::NotTalking)
            }
        }
    }

    /// Mixes and encodes one 20 ms frame at the tick `now`; the packets are then in
    /// [`deliveries`](Self::deliveries) until the next tick.
    pub fn tick(&mut self, now: Instant) -> Result<(), RoomError> {
        self.stats.ticks += 1;
        self.mix_talkers(now);
        self.mix_local_line();
        let has_listener = self.members.iter().any(|m| m.rights.listen);
        self.shared_fresh = has_listener;
        if !has_listener {
            self.stats.last_tick_encodes = 0;
            return Ok(());
        }
        let mut encodes = u32::from(self.shared.encode(&self.sum)?);
        self.history.push(self.shared.input());
        for member in &mut self.members {
            let Some(own) = member.own.as_mut() else { continue };
            self.scratch.copy_from_slice(&self.sum);
            if let (true, Some(jitter)) = (member.voiced, member.jitter.as_ref()) {
                for (sample, own_sample) in self.scratch.iter_mut().zip(jitter.last_frame()) {
                    *sample -= own_sample;
                }
            }
            encodes += u32::from(own.encode(&self.scratch)?);
            if !own.route(self.config.switch, member.talking, member.voiced) {
                member.own = None;
            }
        }
        self.stats.last_tick_encodes = encodes;
        self.stats.encodes += u64::from(encodes);
        Ok(())
    }

    /// Sums the frames of the talkers whose jitter buffers have one for this tick.
    fn mix_talkers(&mut self, now: Instant) {
        self.sum.fill(0.0);
        for member in &mut self.members {
            member.voiced = false;
            let Some(jitter) = member.jitter.as_mut() else { continue };
            if !member.talking && !jitter.is_releasing() {
                continue;
            }
            let Some(frame) = jitter.tick(now) else { continue };
            for (sum, sample) in self.sum.iter_mut().zip(frame) {
                *sum += sample;
            }
            member.voiced = true;
            self.stats.frames_mixed += 1;
        }
    }

    /// Adds the local line's frame to the sum, and keeps the sum without it for the line.
    fn mix_local_line(&mut self) {
        let Some(local) = self.local.as_mut() else { return };
        local.hears.copy_from_slice(&self.sum);
        if std::mem::take(&mut local.voiced) {
            for (sum, sample) in self.sum.iter_mut().zip(&local.send) {
                *sum += sample;
            }
        }
    }

    /// Each listener's packet of the last tick: the shared one, or its own mix-minus.
    pub fn deliveries(&self) -> impl Iterator<Item = Delivery<'_>> {
        let shared = self.shared_fresh.then(|| self.shared.packet());
        self.members.iter().filter(|m| m.rights.listen).filter_map(move |member| {
            let own = member.own.as_ref().filter(|own| own.is_routed());
            let (stream, packet) = match own {
                Some(own) => (Stream::Own, own.packet()),
                None => (Stream::Shared, shared?),
            };
            Some(Delivery { member: member.id, stream, packet })
        })
    }

    /// The last tick's full mix, limited, without any codec: for card outputs, AES67 and
    /// recordings (valid when the room had a listener that tick).
    pub fn full_mix(&self) -> &[f32] {
        self.shared.input()
    }

    pub fn stats(&self) -> RoomStats {
        self.stats
    }

    /// A member's jitter buffer counters (`None` if it may not talk).
    pub fn jitter_stats(&self, id: MemberId) -> Option<JitterStats> {
        let position = *self.index.get(&id)?;
        self.members[position].jitter.as_ref().map(JitterBuffer::stats)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn member_mut(&mut self, id: MemberId) -> Result<&mut Member, RoomError> {
        let position = *self.index.get(&id).ok_or(RoomError::UnknownMember(id))?;
        Ok(&mut self.members[position])
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::jitter::test_signal::{decode_all, packets, rms, tone};

    const TALKER: MemberId = MemberId(1);
    const OTHER_TALKER: MemberId = MemberId(2);
    const LISTENER: MemberId = MemberId(10);
    const SWITCHER: MemberId = MemberId(20);

    const TALK: Rights = Rights { talk: true, listen: false };
    const LISTEN: Rights = Rights { talk: false, listen: true };
    const BOTH: Rights = Rights { talk: true, listen: true };

    /// A member's packets: sent one per tick from `from` (5 ms after the tick before).
    struct Feed {
        member: MemberId,
        from: usize,
        payloads: Vec<Vec<u8>>,
    }

    /// Each listener's packets and streams per tick, and each tick's full mix.
    #[derive(Default)]
    struct Heard {
        packets: HashMap<MemberId, Vec<Vec<u8>>>,
        streams: HashMap<MemberId, Vec<Stream>>,
        full_mix: Vec<f32>,
    }

    impl Heard {
        fn decoded(&self, member: MemberId) -> Vec<f32> {
            decode_all(self.packets[&member].iter().map(Vec::as_slice))
        }
    }

    /// Runs `ticks` ticks of `room` with `feeds`, calling `before_tick(room, tick)` first.
    fn run(room: &mut Room, feeds: &[Feed], ticks: usize, mut before_tick: impl FnMut(&mut Room, usize)) -> Heard {
        let start = Instant::now();
        let mut heard = Heard::default();
        for tick in 0..ticks {
            before_tick(room, tick);
            let now = start + Duration::from_millis(20 * tick as u64 + 7);
            for feed in feeds {
                let Some(index) = tick.checked_sub(feed.from) else { continue };
                let Some(payload) = feed.payloads.get(index) else { continue };
                let arrival = now - Duration::from_millis(2);
                let ts = 960 * index as u32;
                room.receive(feed.member, index as u16, ts, payload, arrival).expect("member");
            }
            room.tick(now).expect("tick");
            heard.full_mix.extend_from_slice(room.full_mix());
            for delivery in room.deliveries() {
                heard.packets.entry(delivery.member).or_default().push(delivery.packet.to_vec());
                heard.streams.entry(delivery.member).or_default().push(delivery.stream);
            }
        }
        heard
    }

    fn room_with(members: &[(MemberId, Rights)], switch: SwitchMethod) -> Room {
        let config = MixConfig { switch, ..MixConfig::default() };
        let mut room = Room::new(config).expect("room");
        for (id, rights) in members {
            room.join(*id, *rights).expect("join");
        }
        room
    }

    /// The amplitude of `frequency`'s sine in `samples` (a whole number of its periods).
    fn amplitude(samples: &[f32], frequency: f32) -> f32 {
        let (mut re, mut im) = (0f32, 0f32);
        for (n, s) in samples.iter().enumerate() {
            let phase = std::f32::consts::TAU * frequency * n as f32 / 48_000.0;
            re += s * phase.cos();
            im += s * phase.sin();
        }
        2.0 * (re * re + im * im).sqrt() / samples.len() as f32
    }

    #[test]
    fn a_listener_hears_the_talker_at_its_level() {
        let mut room = room_with(&[(TALKER, TALK), (LISTENER, LISTEN)], SwitchMethod::default());
        room.set_talking(TALKER, true).expect("talk");
        let feed = Feed { member: TALKER, from: 0, payloads: packets(&tone(450.0, 0.25, 100), true) };
        let heard = run(&mut room, &[feed], 100, |_, _| {});
        let decoded = heard.decoded(LISTENER);
        let level = rms(&decoded[960 * 20..960 * 90]);
        assert!((level - 0.25 / 2f32.sqrt()).abs() < 0.03, "level {level}");
        assert!(heard.streams[&LISTENER].iter().all(|s| *s == Stream::Shared));
    }

    #[test]
    fn a_talker_hears_the_other_talker_but_never_itself() {
        let members = [(TALKER, BOTH), (OTHER_TALKER, BOTH), (LISTENER, LISTEN)];
        let mut room = room_with(&members, SwitchMethod::default());
        room.set_talking(TALKER, true).expect("talk");
        room.set_talking(OTHER_TALKER, true).expect("talk");
        let feeds = [
            Feed { member: TALKER, from: 0, payloads: packets(&tone(450.0, 0.25, 100), true) },
            Feed { member: OTHER_TALKER, from: 0, payloads: packets(&tone(850.0, 0.25, 100), true) },
        ];
        let heard = run(&mut room, &feeds, 100, |_, _| {});
        let steady = 960 * 30..960 * 90;
        let talker = heard.decoded(TALKER);
        let (own, other) = (amplitude(&talker[steady.clone()], 450.0), amplitude(&talker[steady.clone()], 850.0));
        assert!(other > 0.2 && own < 0.0025, "the talker hears 850 Hz at {other}, itself at {own}");
        let other_talker = heard.decoded(OTHER_TALKER);
        let (own, other) =
            (amplitude(&other_talker[steady.clone()], 850.0), amplitude(&other_talker[steady.clone()], 450.0));
        assert!(other > 0.2 && own < 0.0025, "the other hears 450 Hz at {other}, itself at {own}");
        let listener = heard.decoded(LISTENER);
        let both = (amplitude(&listener[steady.clone()], 450.0), amplitude(&listener[steady], 850.0));
        assert!(both.0 > 0.2 && both.1 > 0.2, "the listener hears both: {both:?}");
        assert_eq!(heard.streams[&TALKER][50], Stream::Own);
        assert_eq!(heard.streams[&LISTENER][50], Stream::Shared);
    }

    #[test]
    fn the_local_line_is_heard_by_all_and_hears_all_but_itself_without_a_codec() {
        let mut room = room_with(&[(TALKER, BOTH), (LISTENER, LISTEN)], SwitchMethod::default());
        room.set_local(true);
        room.set_talking(TALKER, true).expect("talk");
        let feeds = [Feed { member: TALKER, from: 0, payloads: packets(&tone(450.0, 0.25, 100), true) }];
        let card = tone(850.0, 0.25, 100);
        let mut local_heard = Vec::new();
        let mut encodes = Vec::new();
        let heard = run(&mut room, &feeds, 100, |room, tick| {
            local_heard.extend_from_slice(room.local_hears());
            encodes.push(room.stats().last_tick_encodes);
            room.mix_local(&card[tick]);
        });
        let steady = 960 * 30..960 * 90;
        // The tick's before_tick reads the previous tick's: one frame behind `heard`.
        let local = &local_heard[steady.start + 960..steady.end + 960];
        let (talker, own) = (amplitude(local, 450.0), amplitude(local, 850.0));
        assert!(talker > 0.2 && own < 0.001, "the local line hears the talker at {talker}, itself at {own}");
        let listener = heard.decoded(LISTENER);
        let both = (amplitude(&listener[steady.clone()], 450.0), amplitude(&listener[steady.clone()], 850.0));
        assert!(both.0 > 0.2 && both.1 > 0.2, "the listener hears the talker and the local line: {both:?}");
        let talker = heard.decoded(TALKER);
        let (local, own) = (amplitude(&talker[steady.clone()], 850.0), amplitude(&talker[steady], 450.0));
        assert!(local > 0.2 && own < 0.0025, "the talker hears the local line at {local}, itself at {own}");
        // The local line costs no encode: the shared mix and the talker's own, as without it.
        assert_eq!(encodes[50], 2, "{encodes:?}");
        // Taken away, the room mixes as before and the line hears nothing.
        room.set_local(false);
        room.mix_local(&card[0]);
        room.tick(Instant::now()).expect("tick");
        assert!(room.local_hears().is_empty() && !room.has_local());
    }

    #[test]
    fn encodes_per_tick_are_one_plus_the_talkers_who_listen() {
        let mut members: Vec<(MemberId, Rights)> = (100..110).map(|id| (MemberId(id), LISTEN)).collect();
        members.extend([(TALKER, BOTH), (OTHER_TALKER, TALK), (SWITCHER, BOTH)]);
        let mut room = room_with(&members, SwitchMethod::default());
        room.tick(Instant::now()).expect("tick");
        assert_eq!(room.stats().last_tick_encodes, 1, "nobody talks: the shared mix only");
        assert_eq!(room.deliveries().count(), 12, "every listener, the shared packet");
        room.set_talking(TALKER, true).expect("talk");
        room.set_talking(OTHER_TALKER, true).expect("talk");
        room.tick(Instant::now()).expect("tick");
        assert_eq!(room.stats().last_tick_encodes, 2, "shared + the talker who listens");
        room.set_talking(SWITCHER, true).expect("talk");
        room.tick(Instant::now()).expect("tick");
        assert_eq!(room.stats().last_tick_encodes, 3);
        let shared: Vec<&[u8]> = room.deliveries().filter(|d| d.stream == Stream::Shared).map(|d| d.packet).collect();
        assert_eq!(shared.len(), 12);
        assert!(shared.windows(2).all(|pair| std::ptr::eq(pair[0], pair[1])), "the same bytes, not copies");
    }

    #[test]
    fn packets_of_a_member_who_does_not_talk_are_never_decoded() {
        let members = [(TALKER, TALK), (LISTENER, LISTEN), (OTHER_TALKER, TALK)];
        let mut room = room_with(&members, SwitchMethod::default());
        let payloads = packets(&tone(450.0, 0.25, 50), true);
        let feeds = [
            Feed { member: LISTENER, from: 0, payloads: payloads.clone() },
            Feed { member: OTHER_TALKER, from: 0, payloads }, // may talk, muted
        ];
        let heard = run(&mut room, &feeds, 50, |_, _| {});
        assert_eq!(room.stats().dropped_not_talking, 100);
        assert_eq!(room.stats().frames_mixed, 0);
        assert_eq!(room.jitter_stats(LISTENER), None, "a listen-only member has no decoder");
        assert_eq!(room.jitter_stats(OTHER_TALKER).map(|s| s.played), Some(0));
        assert!(heard.decoded(LISTENER).iter().all(|s| s.abs() < 1e-3), "silence");
    }

    #[test]
    fn a_room_without_listeners_encodes_nothing() {
        let mut room = room_with(&[(TALKER, TALK), (OTHER_TALKER, TALK)], SwitchMethod::default());
        room.set_talking(TALKER, true).expect("talk");
        let feed = Feed { member: TALKER, from: 0, payloads: packets(&tone(450.0, 0.25, 20), true) };
        run(&mut room, &[feed], 20, |_, _| {});
        assert_eq!((room.stats().encodes, room.deliveries().count()), (0, 0));
        assert!(room.stats().frames_mixed > 10, "still decoded and mixed (for the card)");
    }

    /// What a speaking voice looks like to a codec, roughly: three partials and a 3 Hz syllable
    /// envelope, at about -14 dBFS RMS.
    fn voice_like(frames: usize) -> Vec<Vec<f32>> {
        let partials = [(220.0, 0.2), (660.0, 0.1), (1_430.0, 0.05)];
        (0..frames)
            .map(|k| {
                (0..FRAME_SAMPLES)
                    .map(|n| {
                        let t = (k * FRAME_SAMPLES + n) as f32 / 48_000.0;
                        let envelope = 0.6 + 0.4 * (std::f32::consts::TAU * 3.0 * t).sin();
                        let sum: f32 = partials.iter().map(|(f, a)| a * (std::f32::consts::TAU * f * t).sin()).sum();
                        envelope * sum
                    })
                    .collect()
            })
            .collect()
    }

    /// A click's measure: the largest RMS over 2.5 ms windows of the second difference of
    /// `samples` within `frames`. The second difference is a high-pass (+12 dB/octave): it
    /// passes a click's broadband energy and keeps only -30 dB of a 1.4 kHz partial, so what a
    /// codec does to the voice's waveform (at 32 kbit/s SILK is not waveform-exact: its error
    /// is -4 dB of the signal here) does not hide a discontinuity.
    fn click_level(samples: &[f32], frames: std::ops::Range<usize>) -> f32 {
        let span = &samples[frames.start * FRAME_SAMPLES..frames.end * FRAME_SAMPLES];
        let second_difference: Vec<f32> = span.windows(3).map(|w| w[2] - 2.0 * w[1] + w[0]).collect();
        second_difference.chunks(120).map(rms).fold(0.0, f32::max)
    }

    /// What a listener hears around its talk press (tick 100) and release (tick 200): the
    /// click level of each switch as a multiple of the steady level of the decoded voice
    /// (ticks 20–95, before any switch, by the listener who never switches); and the ticks it
    /// was on its own stream; and the loudest its own voice (1 kHz, 0.1) is in any frame it
    /// hears from its press to 300 ms after its release, as a multiple of what the other
    /// talker's voice and the codec put at 1 kHz anyway (ticks 20–95).
    fn switch_clicks(method: SwitchMethod) -> (f32, f32, usize, f32) {
        let members = [(TALKER, TALK), (LISTENER, LISTEN), (SWITCHER, BOTH)];
        let mut room = room_with(&members, method);
        room.set_talking(TALKER, true).expect("talk");
        let own_voice = tone(1_000.0, 0.1, 100);
        let feeds = [
            Feed { member: TALKER, from: 0, payloads: packets(&voice_like(300), true) },
            Feed { member: SWITCHER, from: 100, payloads: packets(&own_voice, true) },
        ];
        let heard = run(&mut room, &feeds, 300, |room, tick| match tick {
            100 => room.set_talking(SWITCHER, true).expect("talk"),
            200 => room.set_talking(SWITCHER, false).expect("release"),
            _ => {}
        });
        let steady = click_level(&heard.decoded(LISTENER), 20..95);
        let switcher = heard.decoded(SWITCHER);
        let (press, release) = (click_level(&switcher, 98..120), click_level(&switcher, 198..220));
        let own_ticks = heard.streams[&SWITCHER].iter().filter(|s| **s == Stream::Own).count();
        let frame = |k: usize| &switcher[k * FRAME_SAMPLES..(k + 1) * FRAME_SAMPLES];
        let itself = (100..215).map(|k| amplitude(frame(k), 1_000.0)).fold(0.0, f32::max);
        // What the voice-like signal and the codec put at 1 kHz anyway (before the press).
        let floor = (20..95).map(|k| amplitude(frame(k), 1_000.0)).fold(0.0, f32::max);
        (press / steady, release / steady, own_ticks, itself / floor)
    }

    #[test]
    fn a_listener_who_starts_and_stops_talking_hears_no_click() {
        let primed = switch_clicks(SwitchMethod::default());
        let parallel_only = switch_clicks(SwitchMethod::Primed { history_frames: 0, hangover_ticks: 0 });
        let fresh = switch_clicks(SwitchMethod::Fresh);
        eprintln!(
            "click / steady (press, release, own ticks): primed {primed:?}, parallel only {parallel_only:?}, fresh {fresh:?}"
        );
        // Measured: primed (0.97, 1.11), parallel only (0.90, 0.93), fresh (4.56, 0.93). A switch
        // without a click stays within the voice's own steady high-frequency peak (1.0) give or
        // take the codec's variation from frame to frame: 1.5 allowed. The naive switch clicks
        // on the press (a cold encoder).
        assert!(primed.0 < 1.5 && primed.1 < 1.5, "primed {primed:?}");
        assert!(fresh.0 > 2.5 * primed.0, "a fresh encoder clicks: {fresh:?} against {primed:?}");
        // The hangover keeps the talker off the shared stream while its faded last frame and
        // the shared encoder's memory of it are there: it never hears itself above the floor
        // (measured 0.92 of the floor), where moving back at once lets it hear its own last frame
        // (5.3 times the floor).
        assert!(primed.3 < 1.5, "primed: its own voice at {} times the floor", primed.3);
        assert!(parallel_only.3 > 3.0, "no hangover: its own voice at {} times the floor", parallel_only.3);
        // On its own stream from its first own frame (a tick or two after the press) to the
        // hangover's end.
        let hangover = HANGOVER_TICKS as usize;
        assert!((100 - 3 + hangover..=100 + hangover).contains(&primed.2), "{primed:?}");
    }

    /// The click level of a talker's onset after 2 s of silence (tick 200), as a multiple of its steady level (ticks 20–95), heard by
    /// a listener; and the room's encodes in the silence (ticks 120–190).
    fn onset_after_silence(idle_after_silent_frames: Option<u32>) -> (f32, u64) {
        let encoder = EncoderConfig { idle_after_silent_frames, ..EncoderConfig::default() };
        let config = MixConfig { encoder, ..MixConfig::default() };
        let mut room = Room::new(config).expect("room");
        room.join(TALKER, TALK).expect("join");
        room.join(LISTENER, LISTEN).expect("join");
        room.set_talking(TALKER, true).expect("talk");
        // The talker's encoder encodes silence (not sent) and the voice resumes with a 40 ms
        // fade-in, as speech starts.
        let mut signal = voice_like(300);
        signal[100..200].iter_mut().flatten().for_each(|sample| *sample = 0.0);
        for (n, sample) in signal[200..202].iter_mut().flatten().enumerate() {
            *sample *= n as f32 / (2 * FRAME_SAMPLES) as f32;
        }
        let voice = packets(&signal, true);
        let feeds = [
            Feed { member: TALKER, from: 0, payloads: voice[..100].to_vec() },
            Feed { member: OTHER_TALKER, from: 0, payloads: Vec::new() },
        ];
        let mut encodes_at = [0; 2];
        let mut heard = run(&mut room, &feeds[..1], 200, |room, tick| match tick {
            120 => encodes_at[0] = room.stats().encodes,
            190 => encodes_at[1] = room.stats().encodes,
            _ => {}
        });
        // The talker resumes where its stream left off (seq 200, its clock 4 s on).
        let start = Instant::now();
        for tick in 200..300 {
            let now = start + Duration::from_millis(20 * tick + 7);
            let ts = 960 * tick as u32;
            let payload = &voice[tick as usize];
            room.receive(TALKER, tick as u16, ts, payload, now - Duration::from_millis(2)).expect("receive");
            room.tick(now).expect("tick");
            heard.full_mix.extend_from_slice(room.full_mix());
            let delivery = room.deliveries().next().expect("a listener");
            heard.packets.entry(delivery.member).or_default().push(delivery.packet.to_vec());
        }
        let decoded = heard.decoded(LISTENER);
        let onset = click_level(&decoded, 198..215) / click_level(&heard.full_mix, 198..215);
        (onset, encodes_at[1] - encodes_at[0])
    }

    #[test]
    fn a_silent_room_stops_encoding_and_resumes_without_a_click() {
        let idle = onset_after_silence(Some(10));
        let always = onset_after_silence(None);
        eprintln!(
            "onset after silence / steady, encodes in 70 silent ticks: idling {idle:?}, always encoding {always:?}"
        );
        assert_eq!((idle.1, always.1), (0, 70));
        // Measured: 4.67 both ways (the signal's own abrupt onset); the packets after the onset
        // differ (the idle encoder missed the silence) but the decoder follows either.
        assert!(idle.0 < 1.5 && idle.0 <= always.0 * 1.1, "idling {idle:?}, always {always:?}");
    }
}
