//! What bridged reports: written by the group participants, the card side and `Apply`, read
//! by `Status()` and by the D-Bus notifier (which emits `StatusChanged` and `PropertiesChanged`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use partyline_shared::bridge::{
    Aes67Status, AnnouncedStream, BranchState, BranchStatus, BridgeState, CardStatus, ParticipantStatus, PlanUser,
    PtpState, PtpStatus, Status,
};
use partyline_shared::sync::lock;
use tokio::sync::Notify;

use crate::jitter::Glitches;
use crate::mix::CHANNELS;

/// Level reported before the first measurement, and for silence.
pub const SILENCE_DB: f64 = -100.0;

/// A level in dBFS that streaming threads write and `Status()` reads.
#[derive(Debug)]
struct Level(AtomicU64);

impl Default for Level {
    fn default() -> Self {
        Level(AtomicU64::new(SILENCE_DB.to_bits()))
    }
}

impl Level {
    fn set(&self, db: f64) {
        let db = if db.is_finite() { db.clamp(SILENCE_DB, 0.0) } else { SILENCE_DB };
        self.0.store(db.to_bits(), Ordering::Relaxed);
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// The card's levels per channel, written by the card side's mixing thread.
#[derive(Debug, Default)]
pub struct Meters {
    input: [Level; CHANNELS],
    output: [Level; CHANNELS],
}

impl Meters {
    pub fn set(&self, input: &[f64; CHANNELS], output: &[f64; CHANNELS]) {
        for (level, db) in self.input.iter().zip(input).chain(self.output.iter().zip(output)) {
            level.set(*db);
        }
    }

    fn reset(&self) {
        self.set(&[SILENCE_DB; CHANNELS], &[SILENCE_DB; CHANNELS]);
    }
}

/// Packet counters of a group participant, updated by pad probes on streaming threads.
#[derive(Debug, Default)]
pub struct ParticipantStats {
    pub sent: AtomicU64,
    pub received: AtomicU64,
}

#[derive(Debug)]
struct Participant {
    display: String,
    state: BranchState,
    participant_id: String,
    last_error: String,
    stats: Arc<ParticipantStats>,
}

/// What `Status()` reports of the plan, the card side and the participants (the levels are
/// apart: [`Meters`], written without a lock).
#[derive(Debug, Default)]
struct Reported {
    generation: u64,
    pipeline_error: Option<String>,
    users: Vec<PlanUser>,
    /// By room.
    participants: BTreeMap<String, Participant>,
    aes67: Aes67Status,
}

/// The status board: everything bridged reports, written by the card side, the participants
/// and `Apply`, read by `Status()` and the D-Bus notifier; one for the process, shared by every
/// task.
#[derive(Debug, Default)]
pub struct StatusBoard {
    reported: Mutex<Reported>,
    pub meters: Meters,
    /// Signalled on every change that `StatusChanged` should report.
    pub changed: Notify,
    /// The card's voice activity changes (room, talking) not yet signalled, and their news.
    talk: Mutex<Vec<(String, bool)>>,
    pub talk_news: Notify,
    /// The card's playback faults and drift, written by the mixing thread.
    pub card: CardFigures,
}

/// [`CardStatus`]'s figures as the mixing thread updates them.
#[derive(Debug, Default)]
pub struct CardFigures {
    underruns: AtomicU64,
    overflowed_samples: AtomicU64,
    drift_ppm: AtomicU64,
}

impl CardFigures {
    pub fn add(&self, glitches: &Glitches, drift_ppm: Option<f64>) {
        self.underruns.fetch_add(glitches.underruns, Ordering::Relaxed);
        self.overflowed_samples.fetch_add(glitches.overflowed, Ordering::Relaxed);
        if let Some(ppm) = drift_ppm.filter(|ppm| ppm.is_finite()) {
            self.drift_ppm.store(ppm.to_bits(), Ordering::Relaxed);
        }
    }

    fn status(&self) -> CardStatus {
        CardStatus {
            underruns: self.underruns.load(Ordering::Relaxed),
            overflowed_samples: self.overflowed_samples.load(Ordering::Relaxed),
            drift_ppm: f64::from_bits(self.drift_ppm.load(Ordering::Relaxed)),
        }
    }
}

/// What `StatusChanged` reports, compared to decide whether to emit.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub state: BridgeState,
    pub generation: u64,
    pub participants: Vec<(String, BranchState, String)>,
    /// The PTP follower's state and grandmaster: a change is news for control (and the admin).
    pub ptp: (PtpState, String),
}

impl StatusBoard {
    fn lock(&self) -> MutexGuard<'_, Reported> {
        lock(&self.reported)
    }

    fn update(&self, f: impl FnOnce(&mut Reported)) {
        f(&mut self.lock());
        self.changed.notify_one();
    }

    /// The card started or stopped talking in `room` (from the card's thread: no waiting).
    pub fn talking(&self, room: &str, talking: bool) {
        lock(&self.talk).push((room.to_owned(), talking));
        self.talk_news.notify_one();
    }

    /// The voice activity changes since the last call, oldest first.
    pub fn take_talk(&self) -> Vec<(String, bool)> {
        std::mem::take(&mut *lock(&self.talk))
    }

    /// The plan in force: its generation and its server audio users.
    pub fn set_plan(&self, generation: u64, users: &[PlanUser]) {
        if users.is_empty() {
            self.meters.reset();
        }
        self.update(|reported| {
            reported.generation = generation;
            users.clone_into(&mut reported.users);
        });
    }

    /// The PTP follower's status; `StatusChanged` only when its state or grandmaster changes.
    pub fn set_ptp(&self, ptp: PtpStatus) {
        let mut reported = self.lock();
        let news = (reported.aes67.ptp.state, &reported.aes67.ptp.grandmaster) != (ptp.state, &ptp.grandmaster);
        reported.aes67.ptp = ptp;
        drop(reported);
        if news {
            self.changed.notify_one();
        }
    }

    pub fn ptp(&self) -> PtpStatus {
        self.lock().aes67.ptp.clone()
    }

    /// The streams SAP announces (read by `Status()`; no signal: the admin's page polls).
    pub fn set_announced(&self, announced: Vec<AnnouncedStream>) {
        self.lock().aes67.announced = announced;
    }

    /// The SDP partyline announces for its send (empty: none).
    pub fn set_send_sdp(&self, sdp: String) {
        self.update(|reported| reported.aes67.send_sdp = sdp);
    }

    /// The AES67 receive's figures.
    pub fn set_receive(&self, packets: u64, lost: u64, late: u64, foreign: u64, offset_p99_us: i64) {
        let mut reported = self.lock();
        reported.aes67.receive_packets = packets;
        reported.aes67.receive_foreign = foreign;
        reported.aes67.receive_lost = lost;
        reported.aes67.receive_late = late;
        reported.aes67.receive_offset_p99_us = offset_p99_us;
    }

    pub fn set_pipeline_error(&self, error: Option<String>) {
        self.update(|reported| reported.pipeline_error = error);
    }

    pub fn add_participant(&self, room: &str, display: &str) -> Arc<ParticipantStats> {
        let stats = Arc::new(ParticipantStats::default());
        let participant = Participant {
            display: display.to_owned(),
            state: BranchState::Connecting,
            participant_id: String::new(),
            last_error: String::new(),
            stats: stats.clone(),
        };
        self.update(|reported| {
            reported.participants.insert(room.to_owned(), participant);
        });
        stats
    }

    pub fn remove_participant(&self, room: &str) {
        self.update(|reported| {
            reported.participants.remove(room);
        });
    }

    pub fn participant_display(&self, room: &str, display: &str) {
        self.update(|reported| {
            if let Some(participant) = reported.participants.get_mut(room) {
                display.clone_into(&mut participant.display);
            }
        });
    }

    /// Sets a participant's state; `error` replaces the last error when given.
    pub fn participant_state(&self, room: &str, state: BranchState, participant_id: &str, error: Option<&str>) {
        self.update(|reported| {
            if let Some(participant) = reported.participants.get_mut(room) {
                participant.state = state;
                participant_id.clone_into(&mut participant.participant_id);
                if let Some(error) = error {
                    error.clone_into(&mut participant.last_error);
                }
            }
        });
    }

    fn state_of(reported: &Reported) -> (BridgeState, String) {
        if reported.users.is_empty() {
            let why = if reported.generation == 0 { "no plan yet" } else { "the plan has no server audio users" };
            return (BridgeState::Idle, why.to_owned());
        }
        if let Some(error) = &reported.pipeline_error {
            return (BridgeState::Error, error.clone());
        }
        let rooms =
            |state| reported.participants.iter().filter(move |(_, p)| p.state == state).map(|(room, _)| room.as_str());
        let retrying: Vec<&str> = rooms(BranchState::Retrying).collect();
        if !retrying.is_empty() {
            return (BridgeState::Degraded, format!("retrying: {}", retrying.join(", ")));
        }
        let connecting = rooms(BranchState::Connecting).count();
        if connecting > 0 {
            return (BridgeState::Running, format!("{connecting} room(s) connecting"));
        }
        (BridgeState::Running, format!("{} room(s) joined", reported.participants.len()))
    }

    pub fn status(&self) -> Status {
        let reported = self.lock();
        let (state, message) = StatusBoard::state_of(&reported);
        let participant = |room: &str| reported.participants.get(room);
        let branches = reported
            .users
            .iter()
            .map(|user| {
                let group = participant(&user.room);
                BranchStatus {
                    name: user.name.clone(),
                    room: user.room.clone(),
                    state: group.map_or(BranchState::Connecting, |p| p.state),
                    participant_id: group.map(|p| p.participant_id.clone()).unwrap_or_default(),
                    packets_sent: group.map_or(0, |p| p.stats.sent.load(Ordering::Relaxed)),
                    packets_received: group.map_or(0, |p| p.stats.received.load(Ordering::Relaxed)),
                    input_level_db: self.meters.input[usize::from(user.input_channel)].get(),
                    output_level_db: user
                        .output_channel
                        .map_or(SILENCE_DB, |channel| self.meters.output[usize::from(channel)].get()),
                    last_error: group.map(|p| p.last_error.clone()).unwrap_or_default(),
                }
            })
            .collect();
        let participants = reported
            .participants
            .iter()
            .map(|(room, p)| ParticipantStatus {
                room: room.clone(),
                display: p.display.clone(),
                state: p.state,
                participant_id: p.participant_id.clone(),
                packets_sent: p.stats.sent.load(Ordering::Relaxed),
                packets_received: p.stats.received.load(Ordering::Relaxed),
                last_error: p.last_error.clone(),
            })
            .collect();
        Status {
            state,
            generation: reported.generation,
            message,
            branches,
            participants,
            aes67: reported.aes67.clone(),
            card: self.card.status(),
        }
    }

    pub fn summary(&self) -> Summary {
        let reported = self.lock();
        Summary {
            state: StatusBoard::state_of(&reported).0,
            generation: reported.generation,
            participants: reported
                .participants
                .iter()
                .map(|(r, p)| (r.clone(), p.state, p.last_error.clone()))
                .collect(),
            ptp: (reported.aes67.ptp.state, reported.aes67.ptp.grandmaster.clone()),
        }
    }

    pub fn state(&self) -> BridgeState {
        StatusBoard::state_of(&self.lock()).0
    }

    pub fn generation(&self) -> u64 {
        self.lock().generation
    }
}
