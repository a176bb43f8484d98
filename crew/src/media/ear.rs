//! What a simulated listener hears on one line, judged as a person would: is the line's tone
//! there and nothing else, does it drop out, and how long after it was spoken does it arrive.
//!
//! Each packet of the room's mix is decoded and cut into 1 ms windows. A burst's onset (the
//! first loud window after 50 ms of quiet) is matched to the talker's onset (the same process
//! spoke it: [`Onsets`]), which gives mouth-to-ear up to the listener's jitter buffer. Inside a
//! burst (its first and last 5 ms aside) every quiet window is a dropout; a packet that never
//! came or came later than the jitter buffer waits is concealed audio. Either, for 10 ms or
//! more, is a gap.
//!
//! A burst that opens a talk spurt (the first after its talker's key went on) is told apart:
//! its gaps are the spurt's onset's, where a media server that does not prebuffer again after a
//! mute drops frames.
//!
//! A line that talks expects to hear nobody on it (the room's mix leaves its own voice out).
//! What it hears of itself anyway is counted apart (`own_voice_ms`), never taken for a burst.
//! The tails of a handover belong to nobody: a line whose key went on just after another
//! talker's burst still hears that burst's last frames for a mouth-to-ear, and a line whose key
//! went off still hears its own until another talker speaks.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use audiopus::coder::Decoder;
use audiopus::{Channels, SampleRate};

pub use super::heard::{Heard, Onsets};
use super::voice::{BURST, FRAME, RATE};
use partyline_rooms::jitter::lbrr::has_lbrr;

/// A 1 ms window, in samples.
const WINDOW: usize = RATE / 1000;
/// A window this loud (RMS) is sound: 25 dB under the tone's RMS.
const LOUD: f32 = 0.0099;
/// Quiet before a loud window for it to be an onset, in windows (ms).
const QUIET_BEFORE_ONSET: u32 = 50;
/// The shortest dropout that counts as a gap, in ms.
pub const GAP_MS: u32 = 10;
/// The edges of a burst not judged for dropouts (Opus's attack and release), in ms.
const EDGE_MS: u64 = 5;
/// How long after its talk key goes off a line can still hear its own voice: the frames it
/// sent last are still in the room's jitter buffer.
const OWN_VOICE_TAIL: Duration = Duration::from_millis(200);
/// How long after its talk key goes on a line can still hear the talker it took over from
/// (one who spoke an onset within a cycle before): that talker's last frames are on their way.
const TAKEOVER_TAIL: Duration = OWN_VOICE_TAIL;
/// A talker who spoke an onset this shortly before a key went on may still be heard after it.
const TAKEOVER_WINDOW: Duration = Duration::from_millis(500);

/// A 1 ms window is sound: its RMS over [`LOUD`].
fn is_loud(window: &[f32]) -> bool {
    (window.iter().map(|s| s * s).sum::<f32>() / window.len() as f32).sqrt() > LOUD
}

/// A packet waiting for its turn.
#[derive(Debug)]
struct Waiting {
    media_time: u64,
    arrived: Instant,
    /// Its arrival less its media time, in s.
    transit: f64,
    payload: Vec<u8>,
}

/// Packets waiting at most: 1 s of them.
const MAX_WAITING: usize = 50;
/// Media time in samples per ms.
const SAMPLES_PER_MS: u64 = RATE as u64 / 1000;

/// The listener of one line.
#[derive(Debug)]
pub struct Ear {
    room: String,
    /// One frame of the line's tone, sine and cosine: what a frame is projected on.
    basis: Vec<(f32, f32)>,
    onsets: Onsets,
    jitter_buffer: Duration,
    decoder: Decoder,
    pcm: Vec<f32>,
    heard: Heard,
    /// The last packet heard or given up.
    last_seq: Option<u64>,
    /// Packets that came before the one they follow, by sequence number.
    waiting: BTreeMap<u64, Waiting>,
    /// The smallest (arrival − media time) seen: the path's fixed delay.
    base_transit: Option<f64>,
    /// The stream position (ms) where the current burst's judged part ends.
    burst_end_ms: u64,
    burst_start_ms: u64,
    /// The current burst opens a talk spurt.
    burst_opens_spurt: bool,
    quiet_windows: u32,
    dropout_ms: u64,
    /// The stream position of the first packet.
    first_ms: u64,
    talking: bool,
    stopped_talking: Option<Instant>,
    /// When the key went on just after another talker spoke (see [`TAKEOVER_TAIL`]).
    took_over: Option<Instant>,
}

impl Ear {
    pub fn new(room: &str, frequency: f32, onsets: Onsets, jitter_buffer: Duration) -> Result<Ear, audiopus::Error> {
        Ok(Ear {
            room: room.to_owned(),
            basis: (0..FRAME)
                .map(|n| {
                    let phase = std::f64::consts::TAU * f64::from(frequency) * n as f64 / RATE as f64;
                    (phase.sin() as f32, phase.cos() as f32)
                })
                .collect(),
            onsets,
            jitter_buffer,
            decoder: Decoder::new(SampleRate::Hz48000, Channels::Mono)?,
            pcm: vec![0.0; FRAME * 6],
            heard: Heard::default(),
            last_seq: None,
            waiting: BTreeMap::new(),
            base_transit: None,
            burst_end_ms: 0,
            burst_start_ms: 0,
            burst_opens_spurt: false,
            quiet_windows: QUIET_BEFORE_ONSET,
            dropout_ms: 0,
            first_ms: u64::MAX,
            talking: false,
            stopped_talking: None,
            took_over: None,
        })
    }

    /// The line's talk key went on or off (as sent, at `at`).
    pub fn talking(&mut self, on: bool, at: Instant) {
        self.talking = on;
        self.stopped_talking = (!on).then_some(at);
        self.took_over = (on && self.onsets.spoken_before(&self.room, at, TAKEOVER_WINDOW)).then_some(at);
    }

    /// What was heard so far (taken: the next call starts from nothing).
    pub fn take(&mut self) -> Heard {
        std::mem::take(&mut self.heard)
    }

    /// One packet of the mix: its sequence number, media time (samples at 48 kHz), arrival.
    ///
    /// Packets are heard in sequence, as a browser's jitter buffer plays them: one that comes
    /// before the one it follows waits for it; a missing one is given up once a packet comes
    /// later than the jitter buffer waits for it (its media time after the path's fixed delay,
    /// plus the buffer), then rebuilt from the next packet's in-band FEC where that packet is
    /// here and carries it, concealed otherwise. A packet that comes after it was given up, or
    /// later than the buffer waits, is late: concealed.
    pub fn packet(&mut self, seq: u64, media_time: u64, arrived: Instant, started: Instant, payload: &[u8]) {
        self.heard.packets += 1;
        self.heard.payload_bytes += payload.len() as u64;
        self.first_ms = self.first_ms.min(media_time / SAMPLES_PER_MS);
        let transit = arrived.duration_since(started).as_secs_f64() - media_time as f64 / RATE as f64;
        let base = *self.base_transit.get_or_insert(transit);
        self.base_transit = Some(base.min(transit));
        let packet = Waiting { media_time, arrived, transit, payload: payload.to_vec() };
        let Some(last) = self.last_seq else {
            self.last_seq = Some(seq);
            self.play(&packet);
            return;
        };
        if seq <= last || self.waiting.contains_key(&seq) {
            self.heard.late += 1; // given up already (or a duplicate)
            return;
        }
        if self.waiting.len() >= MAX_WAITING {
            self.waiting.pop_last();
        }
        self.waiting.insert(seq, packet);
        self.play_ready(arrived, started);
    }

    /// Plays the waiting packets whose turn has come by `now`.
    fn play_ready(&mut self, now: Instant, started: Instant) {
        while let (Some(last), Some((&first, _))) = (self.last_seq, self.waiting.first_key_value()) {
            let next = last + 1;
            if first == next {
                let packet = self.waiting.remove(&first).expect("the first waiting packet");
                self.last_seq = Some(next);
                self.play(&packet);
                continue;
            }
            // `next` is missing: its media time follows the first waiting one's back.
            let media_time = self.waiting[&first].media_time.saturating_sub((first - next) * FRAME as u64);
            let due = self.base_transit.unwrap_or_default() + media_time as f64 / RATE as f64;
            if now.duration_since(started).as_secs_f64() < due + self.jitter_buffer.as_secs_f64() {
                return;
            }
            self.heard.lost += 1;
            self.last_seq = Some(next);
            let position_ms = media_time / SAMPLES_PER_MS;
            let fec = (first == next + 1).then(|| self.waiting[&first].payload.clone()).filter(|p| has_lbrr(p));
            match fec {
                Some(following) => {
                    self.heard.fec_recovered += 1;
                    let frame_start = now.checked_sub(Duration::from_millis(20)).unwrap_or(now);
                    if let Ok(samples) = self.decoder.decode_float(Some(&following[..]), &mut self.pcm[..FRAME], true) {
                        self.hear(samples, position_ms, frame_start, now, false);
                    }
                }
                None => {
                    // Concealed, as a browser's decoder does, which keeps its state in step.
                    let _ = self.decoder.decode_float(None::<&[u8]>, &mut self.pcm[..FRAME], false);
                    self.concealed(position_ms, 20);
                }
            }
        }
    }

    /// Decodes and judges one packet, in its turn.
    fn play(&mut self, packet: &Waiting) {
        let position_ms = packet.media_time / SAMPLES_PER_MS;
        let base = self.base_transit.unwrap_or(packet.transit);
        let late = packet.transit - base > self.jitter_buffer.as_secs_f64();
        if late {
            self.heard.late += 1;
            self.concealed(position_ms, 20);
        }
        let Ok(samples) = self.decoder.decode_float(Some(&packet.payload[..]), &mut self.pcm[..], false) else {
            return;
        };
        let frame_start = packet.arrived.checked_sub(Duration::from_millis(20)).unwrap_or(packet.arrived);
        self.hear(samples, position_ms, frame_start, packet.arrived, late);
    }

    /// Judges `samples` decoded into `pcm`, heard at `arrived`: the line's own voice, or a listen.
    fn hear(&mut self, samples: usize, position_ms: u64, frame_start: Instant, arrived: Instant, concealed: bool) {
        // Just after its key went on, a line still hears the talker it took over from.
        if self.talking && self.took_over.is_some_and(|at| arrived < at + TAKEOVER_TAIL) {
            self.hear_nobody_s(samples, position_ms, false);
            return;
        }
        // After its key goes off a line may still hear its own last frames, until another
        // talker has spoken on it: what comes then is theirs.
        let own_voice = self.talking
            || self
                .stopped_talking
                .is_some_and(|at| arrived < at + OWN_VOICE_TAIL && !self.onsets.spoken_since(&self.room, at));
        if own_voice {
            self.hear_nobody_s(samples, position_ms, true);
        } else {
            self.listen(samples, position_ms, frame_start, concealed);
        }
    }

    /// The decoded samples of one packet starting at stream position `position_ms`.
    fn listen(&mut self, samples: usize, position_ms: u64, frame_start: Instant, concealed: bool) {
        let pcm = std::mem::take(&mut self.pcm);
        for (w, window) in pcm[..samples].chunks_exact(WINDOW).enumerate() {
            let at_ms = position_ms + w as u64;
            let loud = is_loud(window);
            if loud && self.quiet_windows >= QUIET_BEFORE_ONSET && at_ms >= self.burst_end_ms {
                self.onset(at_ms, frame_start + Duration::from_millis(w as u64));
            }
            self.quiet_windows = if loud { 0 } else { self.quiet_windows.saturating_add(1) };
            let judged = at_ms >= self.burst_start_ms + EDGE_MS && at_ms + EDGE_MS < self.burst_end_ms;
            if judged && !concealed {
                if loud {
                    self.end_dropout(at_ms);
                } else {
                    self.dropout_ms += 1;
                }
            } else {
                self.end_dropout(at_ms);
            }
        }
        if samples == FRAME && self.inside_burst(position_ms) && self.inside_burst(position_ms + 19) {
            self.measure_tone(&pcm[..samples]);
        }
        self.pcm = pcm;
    }

    /// The decoded samples of a packet heard while the line talks or just after, where no
    /// burst is judged: any sound is its own voice if `own`, a handover's tail if not.
    fn hear_nobody_s(&mut self, samples: usize, position_ms: u64, own: bool) {
        self.end_dropout(position_ms);
        self.burst_end_ms = self.burst_end_ms.min(position_ms);
        for window in self.pcm[..samples].chunks_exact(WINDOW) {
            let loud = is_loud(window);
            self.heard.own_voice_ms += u64::from(loud && own);
            self.quiet_windows = if loud { 0 } else { self.quiet_windows.saturating_add(1) };
        }
    }

    fn inside_burst(&self, at_ms: u64) -> bool {
        at_ms >= self.burst_start_ms + EDGE_MS && at_ms + EDGE_MS < self.burst_end_ms
    }

    fn onset(&mut self, at_ms: u64, heard: Instant) {
        // A dropout running up to this onset was the last burst's.
        self.end_dropout(at_ms);
        self.heard.bursts += 1;
        self.burst_start_ms = at_ms;
        self.burst_end_ms = at_ms + (BURST / WINDOW) as u64;
        self.heard.onsets_heard.push(heard);
        let spoken = self.onsets.matching(&self.room, heard);
        if let Some(spoken) = spoken {
            self.heard.mouth_to_ear_ms.push(heard.duration_since(spoken.at).as_secs_f64() * 1000.0);
        }
        self.burst_opens_spurt = spoken.is_some_and(|s| s.opens_spurt);
        self.heard.spurts += u64::from(self.burst_opens_spurt);
    }

    /// `ms` of audio from `at_ms` were concealed: a gap where a burst was expected.
    fn concealed(&mut self, at_ms: u64, ms: u64) {
        if self.inside_burst(at_ms) {
            self.heard.concealed_ms += ms;
            self.dropout_ms += ms;
        }
    }

    fn end_dropout(&mut self, at_ms: u64) {
        if self.dropout_ms >= u64::from(GAP_MS) {
            self.heard.gaps += 1;
            self.heard.onset_gaps += u64::from(self.burst_opens_spurt);
            self.heard.gap_times.push((at_ms.saturating_sub(self.first_ms), self.dropout_ms));
            self.heard.longest_gap_ms = self.heard.longest_gap_ms.max(self.dropout_ms);
        }
        self.dropout_ms = 0;
    }

    /// Splits a frame's energy into the line's tone (its projection on the tone) and the rest.
    fn measure_tone(&mut self, frame: &[f32]) {
        let (mut sine, mut cosine, mut total) = (0f32, 0f32, 0f32);
        for (sample, (sin, cos)) in frame.iter().zip(&self.basis) {
            sine += sample * sin;
            cosine += sample * cos;
            total += sample * sample;
        }
        let (sine, cosine, total) = (f64::from(sine), f64::from(cosine), f64::from(total));
        // A sine of amplitude A over N samples of whole cycles projects to A·N/2 on the pair
        // (sine² + cosine² = A²N²/4); its energy over the frame is A²N/2.
        let tone_energy = 2.0 * (sine * sine + cosine * cosine) / frame.len() as f64;
        self.heard.tone_energy += tone_energy;
        self.heard.other_energy += (total - tone_energy).max(0.0);
        self.heard.judged_samples += frame.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::voice::{AMPLITUDE, Voice, line_tone};

    /// Plays `voice`'s loop into an ear as Janus would relay it (one packet per 20 ms),
    /// dropping the packets `lost` names.
    fn hear(voice: &Voice, ear_tone: f32, lost: &[u64]) -> Heard {
        hear_spoken(voice, ear_tone, lost).0
    }

    /// [`hear`], with the onsets its talker spoke.
    fn hear_spoken(voice: &Voice, ear_tone: f32, lost: &[u64]) -> (Heard, Vec<Instant>) {
        hear_over(voice, ear_tone, |seq| (!lost.contains(&seq)).then_some(0))
    }

    /// [`hear`] over a path that delays packet `seq` by `delay(seq)` ms on top of 30 ms, or
    /// loses it (None): the ear gets them in the order they arrive.
    fn hear_over(voice: &Voice, ear_tone: f32, delay: impl Fn(u64) -> Option<u64>) -> (Heard, Vec<Instant>) {
        let onsets = Onsets::default();
        let mut ear = Ear::new("room", ear_tone, onsets.clone(), Duration::from_millis(40)).expect("decoder");
        let started = Instant::now();
        let mut arriving = Vec::new();
        for (seq, frame) in voice.frames.iter().enumerate() {
            let sent = started + Duration::from_millis(20 * seq as u64 + 20);
            if let Some(onset) = frame.onset {
                let at = sent - Duration::from_millis(20) + Duration::from_micros(onset as u64 * 1000 / 48);
                // The loop's first burst opens a talk spurt; the others go on in it.
                onsets.spoken("room", at, seq == 0);
            }
            if let Some(extra) = delay(seq as u64) {
                arriving.push((sent + Duration::from_millis(30 + extra), seq, frame));
            }
        }
        arriving.sort_by_key(|(arrived, seq, _)| (*arrived, *seq));
        for (arrived, seq, frame) in arriving {
            ear.packet(seq as u64, (seq * FRAME) as u64, arrived, started, &frame.payload);
        }
        (ear.take(), onsets.spoken_in("room"))
    }

    #[test]
    fn a_clean_line_has_its_tone_every_burst_and_no_gap() {
        let voice = Voice::encode(line_tone(0), 0).expect("encode");
        let (heard, spoken) = hear_spoken(&voice, line_tone(0), &[]);
        assert_eq!(heard.bursts, 8, "{heard:?}");
        assert_eq!((heard.gaps, heard.lost, heard.late), (0, 0, 0), "{heard:?}");
        let tone = heard.tone_db().expect("judged");
        let expected = 20.0 * f64::from(AMPLITUDE / 2f32.sqrt()).log10();
        assert!((tone - expected).abs() < 1.5, "tone at {tone:.1} dBFS, sent at {expected:.1}");
        assert!(heard.other_db().expect("judged") < tone - 20.0, "{heard:?}");
        // Opus's delay (a few ms) on top of the 30 ms path; every onset matched.
        assert_eq!(heard.mouth_to_ear_ms.len(), 8, "{heard:?}");
        for m2e in &heard.mouth_to_ear_ms {
            assert!((29.0..40.0).contains(m2e), "{:?}", heard.mouth_to_ear_ms);
        }
        // When each was heard, for a caller matching talkers of its own: the spoken onsets'
        // times plus their mouth-to-ear.
        assert_eq!((heard.onsets_heard.len(), spoken.len()), (8, 8), "{heard:?}");
        for ((heard_at, spoken_at), m2e) in heard.onsets_heard.iter().zip(&spoken).zip(&heard.mouth_to_ear_ms) {
            let ms = heard_at.duration_since(*spoken_at).as_secs_f64() * 1000.0;
            assert!((ms - m2e).abs() < 0.01, "heard {ms} ms after it was spoken, mouth-to-ear {m2e} ms");
        }
    }

    #[test]
    fn another_line_s_tone_is_heard_as_other() {
        let voice = Voice::encode(line_tone(1), 0).expect("encode");
        let heard = hear(&voice, line_tone(0), &[]);
        let (tone, other) = (heard.tone_db().expect("judged"), heard.other_db().expect("judged"));
        assert!(other > tone + 20.0, "tone {tone:.1}, other {other:.1}");
    }

    #[test]
    fn a_packet_lost_inside_a_burst_is_a_gap() {
        let voice = Voice::encode(line_tone(0), 0).expect("encode");
        // Packet 10 is in the middle of the first burst; 22 is in the cycle's silence.
        let heard = hear(&voice, line_tone(0), &[10, 22]);
        assert_eq!(heard.lost, 2, "{heard:?}");
        assert_eq!(heard.gaps, 1, "{heard:?}");
        assert_eq!(heard.concealed_ms, 20, "{heard:?}");
    }

    #[test]
    fn a_packet_overtaken_within_the_jitter_buffer_is_heard_in_its_turn_one_later_is_late() {
        let voice = Voice::encode(line_tone(0), 0).expect("encode");
        // Packet 10 comes 30 ms late, after 11: the buffer (40 ms) waits for it.
        let (waited, _) = hear_over(&voice, line_tone(0), |seq| Some(if seq == 10 { 30 } else { 0 }));
        assert_eq!((waited.lost, waited.late, waited.gaps), (0, 0, 0), "{waited:?}");
        // 70 ms late: given up when a packet comes after its wait, a gap; late when it comes.
        let (given_up, _) = hear_over(&voice, line_tone(0), |seq| Some(if seq == 10 { 70 } else { 0 }));
        assert_eq!((given_up.lost, given_up.late, given_up.gaps), (1, 1, 1), "{given_up:?}");
    }

    #[test]
    fn a_lost_packet_is_rebuilt_from_the_next_one_s_fec_and_concealed_without() {
        let with_fec = Voice::encode(line_tone(0), 10).expect("encode");
        let rebuilt = hear(&with_fec, line_tone(0), &[10]);
        assert_eq!((rebuilt.lost, rebuilt.fec_recovered, rebuilt.gaps), (1, 1, 0), "{rebuilt:?}");
        assert_eq!(rebuilt.concealed_ms, 0, "{rebuilt:?}");
        // Two in a row: the first concealed, the second rebuilt.
        let two = hear(&with_fec, line_tone(0), &[10, 11]);
        assert_eq!((two.lost, two.fec_recovered, two.gaps, two.concealed_ms), (2, 1, 1, 20), "{two:?}");
        let without = hear(&Voice::encode(line_tone(0), 0).expect("encode"), line_tone(0), &[10]);
        assert_eq!((without.fec_recovered, without.gaps, without.concealed_ms), (0, 1, 20), "{without:?}");
    }

    #[test]
    fn a_gap_in_the_burst_that_opens_a_spurt_is_the_onset_s() {
        let voice = Voice::encode(line_tone(0), 0).expect("encode");
        // The first burst (packets 0–19) opens the spurt; the second (25–44) goes on in it.
        let opening = hear(&voice, line_tone(0), &[3]);
        assert_eq!((opening.spurts, opening.gaps, opening.onset_gaps), (1, 1, 1), "{opening:?}");
        let later = hear(&voice, line_tone(0), &[28]);
        assert_eq!((later.spurts, later.gaps, later.onset_gaps), (1, 1, 0), "{later:?}");
    }

    /// One frame of a burst's middle, then quiet: what a talker hears when Janus's mixer
    /// takes its own frame out of a mix it was not in (its own voice, inverted, 20 ms).
    fn one_loud_frame(talking: bool) -> Heard {
        one_loud_frame_after(|ear, _, started| ear.talking(talking, started))
    }

    fn one_loud_frame_after(key: impl FnOnce(&mut Ear, &Onsets, Instant)) -> Heard {
        let voice = Voice::encode(line_tone(0), 0).expect("encode");
        let onsets = Onsets::default();
        let mut ear = Ear::new("room", line_tone(0), onsets.clone(), Duration::from_millis(40)).expect("decoder");
        let started = Instant::now();
        key(&mut ear, &onsets, started);
        let frames = (0..8).map(|_| &voice.silence).chain([&voice.frames[5]]).chain((0..20).map(|_| &voice.silence));
        for (seq, frame) in frames.enumerate() {
            let arrived = started + Duration::from_millis(20 * seq as u64 + 50);
            ear.packet(seq as u64, (seq * FRAME) as u64, arrived, started, &frame.payload);
        }
        ear.take()
    }

    #[test]
    fn what_a_talking_line_hears_is_its_own_voice_not_a_burst() {
        let listening = one_loud_frame(false);
        assert_eq!((listening.bursts, listening.gaps, listening.own_voice_ms), (1, 1, 0), "{listening:?}");
        let talking = one_loud_frame(true);
        assert_eq!((talking.bursts, talking.gaps), (0, 0), "{talking:?}");
        assert!((15..=30).contains(&talking.own_voice_ms), "{talking:?}");
    }

    #[test]
    fn a_stopped_talker_s_tail_is_its_own_voice_until_another_talker_speaks() {
        // The key goes off 100 ms in: the loud frame comes 110 ms later, inside the tail.
        let stopped = |ear: &mut Ear, _: &Onsets, at: Instant| {
            ear.talking(true, at);
            ear.talking(false, at + Duration::from_millis(100));
        };
        let alone = one_loud_frame_after(stopped);
        assert_eq!((alone.bursts, alone.gaps), (0, 0), "{alone:?}");
        assert!(alone.own_voice_ms > 0, "{alone:?}");
        let handed_over = one_loud_frame_after(|ear, onsets, at| {
            stopped(ear, onsets, at);
            onsets.spoken("room", at + Duration::from_millis(101), true);
        });
        assert_eq!((handed_over.bursts, handed_over.own_voice_ms), (1, 0), "{handed_over:?}");
    }

    #[test]
    fn a_line_that_takes_over_hears_the_last_talker_s_tail_as_nobody_s() {
        // The key goes on 100 ms in: the loud frame comes 110 ms later.
        let alone = one_loud_frame_after(|ear, _, at| ear.talking(true, at + Duration::from_millis(100)));
        assert!(alone.own_voice_ms > 0, "{alone:?}");
        // Another talker spoke 400 ms before the key went on: the frame is that talker's tail.
        let took_over = one_loud_frame_after(|ear, onsets, at| {
            onsets.spoken("room", at - Duration::from_millis(300), false);
            ear.talking(true, at + Duration::from_millis(100));
        });
        assert_eq!((took_over.bursts, took_over.gaps, took_over.own_voice_ms), (0, 0, 0), "{took_over:?}");
        // Heard later than the takeover's tail, it is the line's own voice again.
        let late = one_loud_frame_after(|ear, onsets, at| {
            onsets.spoken("room", at - Duration::from_millis(400), false);
            ear.talking(true, at);
        });
        assert!(late.own_voice_ms > 0, "{late:?}");
    }
}
