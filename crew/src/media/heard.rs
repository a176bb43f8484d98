//! What a listener heard on one line ([`Heard`]: packets, gaps, mouth-to-ear, levels), and the
//! onsets talkers spoke, for each line's [`ear`](super::ear) to match ([`Onsets`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

/// A talker's onset older than this is not the one a listener hears.
const ONSET_MATCH: Duration = Duration::from_secs(2);

/// One onset a talker spoke: when, and whether its burst opens a talk spurt.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spoken {
    pub(super) at: Instant,
    pub(super) opens_spurt: bool,
}

/// The onsets talkers spoke, per room, for listeners to match (one talker per room at a time).
#[derive(Debug, Clone, Default)]
pub struct Onsets(Arc<Mutex<HashMap<String, VecDeque<Spoken>>>>);

impl Onsets {
    /// A burst's onset spoken at `at`; `opens_spurt`: the first since the talker's key went on.
    pub fn spoken(&self, room: &str, at: Instant, opens_spurt: bool) {
        let mut rooms = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let onsets = rooms.entry(room.to_owned()).or_default();
        onsets.push_back(Spoken { at, opens_spurt });
        while onsets.len() > 16 {
            onsets.pop_front();
        }
    }

    /// The onsets spoken in `room` that are still kept (the last 16, 8 s of bursts).
    pub fn spoken_in(&self, room: &str) -> Vec<Instant> {
        let rooms = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        rooms.get(room).map(|onsets| onsets.iter().map(|s| s.at).collect()).unwrap_or_default()
    }

    /// Whether anyone spoke an onset in `room` after `at`: another talker has the line.
    pub(super) fn spoken_since(&self, room: &str, at: Instant) -> bool {
        let rooms = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        rooms.get(room).and_then(|onsets| onsets.back()).is_some_and(|last| last.at > at)
    }

    /// Whether anyone spoke an onset in `room` in the `window` before `at` (not at `at` itself).
    pub(super) fn spoken_before(&self, room: &str, at: Instant, window: Duration) -> bool {
        let rooms = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let recent = |s: &&Spoken| s.at < at && at.duration_since(s.at) < window;
        rooms.get(room).is_some_and(|onsets| onsets.iter().rev().any(|s| recent(&s)))
    }

    /// The latest onset spoken in `room` at or before `heard` (within 2 s).
    pub(super) fn matching(&self, room: &str, heard: Instant) -> Option<Spoken> {
        let rooms = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let spoken = rooms.get(room)?.iter().rev().find(|s| s.at <= heard).copied()?;
        (heard.duration_since(spoken.at) < ONSET_MATCH).then_some(spoken)
    }
}

/// What one listener heard on one line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Heard {
    pub packets: u64,
    /// Their Opus payloads' bytes: the mix's bitrate.
    pub payload_bytes: u64,
    /// Packets that never came (sequence numbers skipped).
    pub lost: u64,
    /// Packets that came after the jitter buffer's wait (or after their turn was given up).
    pub late: u64,
    /// Lost packets rebuilt from the next one's in-band FEC (not concealed, not in `lost`'s
    /// gaps).
    pub fec_recovered: u64,
    /// Milliseconds of audio concealed inside bursts (lost or late packets).
    pub concealed_ms: u64,
    /// Dropouts and concealments of 10 ms or more inside bursts.
    pub gaps: u64,
    /// Bursts heard that opened a talk spurt (matched to their talker's first after its key
    /// went on), and the gaps inside them: the onsets' share of `gaps`.
    pub spurts: u64,
    pub onset_gaps: u64,
    /// Milliseconds of sound heard on the line while it talked: its own voice, which the
    /// room's mix should leave out.
    pub own_voice_ms: u64,
    /// Frames this line sent while talking 10 ms or more after their tick: the generator's
    /// own lateness (a late talker's frame can miss the room's mix).
    pub sent_late: u64,
    /// Datagrams that came through the TURN relay (media, RTCP and ICE's checks).
    pub relayed_datagrams: u64,
    pub longest_gap_ms: u64,
    /// Each gap: when it ended (ms of the stream since the ear's first packet) and how long.
    #[serde(skip)]
    pub gap_times: Vec<(u64, u64)>,
    pub bursts: u64,
    /// Mouth-to-ear of each burst matched to its talker, in ms.
    #[serde(skip)]
    pub mouth_to_ear_ms: Vec<f64>,
    /// When each burst was heard (its onset's window, as its packet arrived): for a talker
    /// outside this process, matched by the caller on a clock they share.
    #[serde(skip)]
    pub onsets_heard: Vec<Instant>,
    /// Energy of the line's tone and of everything else, inside bursts (for the levels).
    #[serde(skip)]
    pub(super) tone_energy: f64,
    #[serde(skip)]
    pub(super) other_energy: f64,
    #[serde(skip)]
    pub(super) judged_samples: u64,
}

impl Heard {
    /// The line's tone inside bursts, dBFS RMS (None before any burst).
    pub fn tone_db(&self) -> Option<f64> {
        (self.judged_samples > 0).then(|| db(self.tone_energy / self.judged_samples as f64))
    }

    /// Everything but the line's tone inside bursts, dBFS RMS.
    pub fn other_db(&self) -> Option<f64> {
        (self.judged_samples > 0).then(|| db(self.other_energy / self.judged_samples as f64))
    }

    /// Adds `other`'s counts to these (a step's or a line's totals).
    pub fn add(&mut self, other: &Heard) {
        self.packets += other.packets;
        self.payload_bytes += other.payload_bytes;
        self.lost += other.lost;
        self.late += other.late;
        self.fec_recovered += other.fec_recovered;
        self.concealed_ms += other.concealed_ms;
        self.gaps += other.gaps;
        self.spurts += other.spurts;
        self.onset_gaps += other.onset_gaps;
        self.own_voice_ms += other.own_voice_ms;
        self.sent_late += other.sent_late;
        self.relayed_datagrams += other.relayed_datagrams;
        self.longest_gap_ms = self.longest_gap_ms.max(other.longest_gap_ms);
        self.gap_times.extend_from_slice(&other.gap_times);
        self.bursts += other.bursts;
        self.mouth_to_ear_ms.extend_from_slice(&other.mouth_to_ear_ms);
        self.onsets_heard.extend_from_slice(&other.onsets_heard);
        self.tone_energy += other.tone_energy;
        self.other_energy += other.other_energy;
        self.judged_samples += other.judged_samples;
    }
}

fn db(energy: f64) -> f64 {
    10.0 * energy.max(1e-12).log10()
}
