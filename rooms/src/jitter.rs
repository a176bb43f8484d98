//! A talker's jitter buffer: RTP packets in, one decoded 20 ms frame out per mixer tick.
//!
//! Frames are `f32` (960 samples, 48 kHz mono): the mixer sums talkers with headroom above
//! full scale and limits the sum before the encoder, libopus here is the float build (its
//! `encode_float`/`decode_float` take floats without conversion), and an `i16` sum would need
//! widening anyway.
//!
//! **Waiting.** Each frame has a deadline: `baseline + media time + target` (see [`delay`]:
//! the baseline is the smallest relative delay of the last 2.56 s, the target the peak-to-peak
//! jitter measured over the same window, at least one frame, at most 120 ms). A talk spurt
//! starts at the first tick at or after its first frame's deadline; from then on one frame per
//! tick. When the due packet is missing:
//! - before its deadline (the target grew): a concealed frame is played and the due frame is
//!   kept for the next tick (the buffer stretches by one frame);
//! - after it: the next packet's in-band FEC rebuilds it when that packet is there and carries
//!   FEC, else libopus conceals it (PLC).
//!
//! When the buffer is a frame or more behind its target (the target shrank, or the clocks
//! drifted), one quiet frame is skipped. Two concealed frames in a row (the second faded out)
//! end the spurt: the talker yields `None` and its decoder is not run until a packet's
//! deadline comes. A packet for a frame already played or concealed is late: counted and
//! dropped; a second copy of a waiting packet is a duplicate, counted and dropped. Sequence
//! numbers and timestamps wrap (16 and 32 bits).

mod delay;
pub mod lbrr;
mod ring;
#[cfg(test)]
pub(crate) mod test_signal;

use std::time::{Duration, Instant};

use audiopus::coder::Decoder;
use audiopus::{Channels, SampleRate};

pub use delay::{TARGET_CEILING, TARGET_FLOOR};
pub use ring::MAX_PACKET;
use ring::{Put, Ring, SLOTS, seq_distance};

/// Samples per second of every stream (Opus in WebRTC).
pub const SAMPLE_RATE: u32 = 48_000;
/// Samples of one frame: 20 ms, the mixer's tick.
pub const FRAME_SAMPLES: usize = 960;
/// One frame's duration.
pub const FRAME: Duration = Duration::from_millis(20);
/// µs of one frame.
const FRAME_US: i64 = 20_000;
/// Concealed frames in a row after which a spurt ends (the last one faded to silence).
const CONCEALED_RUN_LIMIT: u32 = 2;
/// How far behind its deadline (µs) the buffer plays before it skips a quiet frame: a frame
/// plus a margin, so the tick's own phase (0 to 20 ms after a deadline) never triggers it.
const BEHIND_US: i64 = FRAME_US + 5_000;
/// A spurt's fade-in: 5 ms, too short to hear as a fade, long enough not to click.
const FADE_IN_SAMPLES: usize = 240;
/// A frame below this mean square (-45 dBFS RMS) can be skipped without an audible jump.
const QUIET_MEAN_SQUARE: f32 = 3.2e-5;
/// A packet this far before the next expected one is a sender's restart, not a late packet.
const RESTART_DISTANCE: i32 = -1000;

/// What a jitter buffer did since it was created.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct JitterStats {
    /// Frames decoded from their own packet.
    pub played: u64,
    /// Frames rebuilt from the next packet's in-band FEC.
    pub fec: u64,
    /// Frames concealed by libopus (PLC), including the ones that wait for a late packet.
    pub concealed: u64,
    /// Packets that came after their frame was played or concealed: dropped.
    pub late: u64,
    /// Second copies of a waiting packet: dropped.
    pub duplicates: u64,
    /// Quiet frames skipped to come back to the target.
    pub skipped: u64,
    /// Packets refused: empty, larger than [`MAX_PACKET`], or too far ahead of the ring.
    pub invalid: u64,
}

/// One talker's jitter buffer and Opus decoder.
#[derive(Debug)]
pub struct JitterBuffer {
    decoder: Decoder,
    ring: Ring,
    delays: delay::DelayWindow,
    /// The time every µs figure counts from (the first instant seen).
    epoch: Option<Instant>,
    /// The last packet's timestamp and its extension to 64 bits.
    last_timestamp: Option<(u32, i64)>,
    /// The next frame to play or conceal; before the first packet, none.
    next_seq: Option<u16>,
    /// The media time (µs) of `next_seq`'s frame.
    next_media_us: i64,
    playing: bool,
    /// The spurt's first frame is faded in (a talk key pressed mid-word starts mid-waveform).
    fade_in: bool,
    /// The next frame is faded out and the spurt ends (the talk key was released).
    releasing: bool,
    concealed_run: u32,
    pcm: Vec<f32>,
    stats: JitterStats,
}

impl JitterBuffer {
    /// An empty buffer with its decoder (48 kHz mono); the ring is allocated here, once.
    pub fn new() -> Result<JitterBuffer, audiopus::Error> {
        Ok(JitterBuffer {
            decoder: Decoder::new(SampleRate::Hz48000, Channels::Mono)?,
            ring: Ring::new(),
            delays: delay::DelayWindow::new(),
            epoch: None,
            last_timestamp: None,
            next_seq: None,
            next_media_us: 0,
            playing: false,
            fade_in: false,
            releasing: false,
            concealed_run: 0,
            pcm: vec![0.0; FRAME_SAMPLES],
            stats: JitterStats::default(),
        })
    }

    pub fn stats(&self) -> JitterStats {
        self.stats
    }

    /// The current target delay after the fastest packet (see the module's doc).
    pub fn target(&self) -> Duration {
        self.delays.target()
    }

    /// Whether a talk spurt is being played (the decoder runs each tick).
    pub fn is_playing(&self) -> bool {
        self.playing
    }

    /// The frame the last [`tick`](Self::tick) returned (meaningful only if it returned one).
    pub fn last_frame(&self) -> &[f32] {
        &self.pcm
    }

    /// Forgets the waiting packets and ends the spurt at once; the measured jitter is kept.
    pub fn clear(&mut self) {
        self.ring.clear();
        self.playing = false;
        self.concealed_run = 0;
        self.releasing = false;
    }

    /// Ends the spurt after one more frame, faded out, instead of cutting the voice
    /// mid-waveform (the talk key was released); then as [`clear`](Self::clear).
    pub fn release(&mut self) {
        if self.playing {
            self.releasing = true;
        } else {
            self.clear();
        }
    }

    /// Whether the buffer still owes its faded last frame after a [`release`](Self::release).
    pub fn is_releasing(&self) -> bool {
        self.releasing
    }

    /// Takes back a [`release`](Self::release) not yet played (talk pressed again at once).
    pub fn cancel_release(&mut self) {
        self.releasing = false;
    }

    /// Takes one RTP packet (an Opus payload of one 20 ms frame) that arrived at `arrival`.
    pub fn receive(&mut self, seq: u16, timestamp: u32, payload: &[u8], arrival: Instant) {
        if payload.is_empty() || payload.len() > MAX_PACKET {
            self.stats.invalid += 1;
            return;
        }
        let media_us = self.extend_timestamp(timestamp) * 1_000_000 / i64::from(SAMPLE_RATE);
        let arrival_us = self.micros(arrival);
        // Late packets count too: they are the jitter the target has to cover.
        self.delays.record(arrival_us - media_us);
        let next = *self.next_seq.get_or_insert(seq);
        let distance = seq_distance(next, seq);
        if distance < 0 && distance > RESTART_DISTANCE {
            self.stats.late += 1;
            return;
        }
        if distance < 0 || distance >= SLOTS as i32 {
            if self.playing {
                self.stats.invalid += 1;
                return;
            }
            // Not playing: the sender restarted or skipped far ahead; wait for it afresh.
            self.ring.clear();
            self.next_seq = Some(seq);
        }
        if self.ring.put(seq, media_us, payload) == Put::Duplicate {
            self.stats.duplicates += 1;
        }
    }

    /// The frame to mix at the tick `now`, or `None` when the talker is silent (no spurt
    /// started or its deadline not come yet): the decoder is then not run.
    pub fn tick(&mut self, now: Instant) -> Option<&[f32]> {
        let now_us = self.micros(now);
        if !self.playing && !self.start(now_us) {
            return None;
        }
        self.play_next(now_us);
        if std::mem::take(&mut self.fade_in) {
            let ramp = FADE_IN_SAMPLES as f32;
            for (n, sample) in self.pcm[..FADE_IN_SAMPLES].iter_mut().enumerate() {
                *sample *= n as f32 / ramp;
            }
        }
        if self.releasing {
            fade_out(&mut self.pcm);
            self.clear();
        }
        Some(&self.pcm[..])
    }

    /// Starts a spurt at its earliest waiting frame if that frame's deadline has come.
    fn start(&mut self, now_us: i64) -> bool {
        let Some(next) = self.next_seq else { return false };
        let Some(first) = self.ring.earliest_from(next) else { return false };
        let media_us = self.ring.get(first).map_or(0, |slot| slot.media_us);
        if now_us < self.deadline(media_us) {
            return false;
        }
        self.next_seq = Some(first);
        self.next_media_us = media_us;
        self.playing = true;
        self.fade_in = true;
        self.concealed_run = 0;
        true
    }

    /// Plays, rebuilds, conceals or skips the due frame into `pcm`.
    fn play_next(&mut self, now_us: i64) {
        let Some(due) = self.next_seq else { return };
        if self.ring.get(due).is_some() {
            self.decode_own(due);
            let behind = now_us - self.deadline(self.next_media_us - FRAME_US) >= BEHIND_US;
            if behind && self.is_quiet() && self.ring.get(due.wrapping_add(1)).is_some() {
                self.stats.skipped += 1;
                self.decode_own(due.wrapping_add(1));
            }
            return;
        }
        if now_us < self.deadline(self.next_media_us) {
            self.conceal(); // waits: the due frame stays due
            return;
        }
        let following = due.wrapping_add(1);
        let has_fec = self.ring.get(following).is_some_and(|slot| lbrr::has_lbrr(slot.payload()));
        if has_fec && self.decode_fec_from(following) {
            self.stats.fec += 1;
            self.concealed_run = 0;
        } else {
            self.conceal();
        }
        self.advance(due);
    }

    /// Decodes `seq`'s own packet (present) and moves past it.
    fn decode_own(&mut self, seq: u16) {
        let Some(slot) = self.ring.get(seq) else { return };
        let media_us = slot.media_us;
        let decoded = self.decoder.decode_float(Some(slot.payload()), &mut self.pcm[..], false);
        self.ring.remove(seq);
        self.next_media_us = media_us;
        self.advance(seq);
        match decoded {
            Ok(FRAME_SAMPLES) => {
                self.stats.played += 1;
                self.concealed_run = 0;
            }
            _ => self.conceal_in_place(),
        }
    }

    /// Rebuilds the frame before `seq` from `seq`'s in-band FEC; the packet stays for its turn.
    fn decode_fec_from(&mut self, seq: u16) -> bool {
        let Some(slot) = self.ring.get(seq) else { return false };
        let decoded = self.decoder.decode_float(Some(slot.payload()), &mut self.pcm[..], true);
        matches!(decoded, Ok(FRAME_SAMPLES))
    }

    /// One frame of libopus's concealment; the second in a row fades to silence and ends the
    /// spurt.
    fn conceal(&mut self) {
        let concealed = self.decoder.decode_float(None::<&[u8]>, &mut self.pcm[..], false);
        if !matches!(concealed, Ok(FRAME_SAMPLES)) {
            self.pcm.fill(0.0);
        }
        self.conceal_in_place();
    }

    fn conceal_in_place(&mut self) {
        self.stats.concealed += 1;
        self.concealed_run += 1;
        if self.concealed_run >= CONCEALED_RUN_LIMIT {
            fade_out(&mut self.pcm);
            self.playing = false;
            self.concealed_run = 0;
        }
    }

    /// Moves the due frame past `seq` (one frame of media time later).
    fn advance(&mut self, seq: u16) {
        self.next_seq = Some(seq.wrapping_add(1));
        self.next_media_us += FRAME_US;
    }

    fn is_quiet(&self) -> bool {
        let energy: f32 = self.pcm.iter().map(|s| s * s).sum();
        energy / (FRAME_SAMPLES as f32) < QUIET_MEAN_SQUARE
    }

    /// When the frame of media time `media_us` is due (µs since the epoch).
    fn deadline(&self, media_us: i64) -> i64 {
        let target = i64::try_from(self.delays.target().as_micros()).unwrap_or(i64::MAX);
        self.delays.baseline() + media_us + target
    }

    /// `timestamp` extended to 64 bits across wraps, from the last packet's.
    fn extend_timestamp(&mut self, timestamp: u32) -> i64 {
        let extended = match self.last_timestamp {
            None => i64::from(timestamp),
            Some((last, last_extended)) => last_extended + i64::from(timestamp.wrapping_sub(last) as i32),
        };
        self.last_timestamp = Some((timestamp, extended));
        extended
    }

    /// µs from the epoch (the first instant seen) to `instant`; negative before it.
    fn micros(&mut self, instant: Instant) -> i64 {
        let epoch = *self.epoch.get_or_insert(instant);
        match instant.checked_duration_since(epoch) {
            Some(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
            None => -i64::try_from(epoch.duration_since(instant).as_micros()).unwrap_or(i64::MAX),
        }
    }
}

/// A linear fade from the frame's start to silence at its end.
fn fade_out(pcm: &mut [f32]) {
    let len = pcm.len() as f32;
    for (n, sample) in pcm.iter_mut().enumerate() {
        *sample *= 1.0 - n as f32 / len;
    }
}

#[cfg(test)]
mod tests {
    use super::test_signal::{packets, rms, tone};
    use super::*;

    /// A sent packet: its index in the stream and its network delay (ms, may be fractional).
    struct Sent {
        index: usize,
        delay_ms: f64,
    }

    /// What a run produced: each tick's frame (or none) and the buffer's counters.
    struct Run {
        frames: Vec<Option<Vec<f32>>>,
        stats: JitterStats,
        target: Duration,
    }

    impl Run {
        fn played_samples(&self) -> Vec<f32> {
            self.frames.iter().flatten().flatten().copied().collect()
        }
    }

    /// Sends `payloads[index]` at `index × 20 ms` (seq and timestamp from the given starts),
    /// each arriving after its delay, and runs `ticks` mixer ticks (7 ms into each 20 ms).
    fn run(payloads: &[Vec<u8>], sent: &[Sent], first_seq: u16, first_ts: u32, ticks: usize) -> Run {
        let start = Instant::now();
        let at = |ms: f64| start + Duration::from_micros((ms * 1000.0) as u64);
        let mut arrivals: Vec<(f64, usize)> =
            sent.iter().map(|s| (s.index as f64 * 20.0 + s.delay_ms, s.index)).collect();
        arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut buffer = JitterBuffer::new().expect("decoder");
        let mut arrivals = arrivals.into_iter().peekable();
        let mut frames = Vec::new();
        for tick in 0..ticks {
            let now_ms = 7.0 + 20.0 * tick as f64;
            while let Some((arrival, index)) = arrivals.next_if(|(arrival, _)| *arrival <= now_ms) {
                let seq = first_seq.wrapping_add(index as u16);
                let ts = first_ts.wrapping_add(960 * index as u32);
                buffer.receive(seq, ts, &payloads[index], at(arrival));
            }
            frames.push(buffer.tick(at(now_ms)).map(<[f32]>::to_vec));
        }
        Run { frames, stats: buffer.stats(), target: buffer.target() }
    }

    fn steady(count: usize, delay_ms: f64) -> Vec<Sent> {
        (0..count).map(|index| Sent { index, delay_ms }).collect()
    }

    fn stats(played: u64, fec: u64, concealed: u64, late: u64) -> JitterStats {
        JitterStats { played, fec, concealed, late, ..JitterStats::default() }
    }

    #[test]
    fn an_in_order_stream_is_played_then_fades_out_and_the_decoder_stops() {
        let payloads = packets(&tone(450.0, 0.25, 50), false);
        let result = run(&payloads, &steady(50, 5.0), 100, 5000, 70);
        // 50 frames, then two concealed (the second faded), then nothing: the decoder idles.
        assert_eq!(result.stats, stats(50, 0, 2, 0));
        let produced: Vec<bool> = result.frames.iter().map(Option::is_some).collect();
        let first = produced.iter().position(|p| *p).expect("a frame");
        assert!(first <= 2, "the first frame waits one target (20 ms) at most a tick more: {first}");
        assert!(produced[first..first + 52].iter().all(|p| *p), "{produced:?}");
        assert!(produced[first + 52..].iter().all(|p| !*p), "{produced:?}");
        let level = rms(&result.played_samples()[960 * 5..960 * 45]);
        assert!((level - 0.25 / 2f32.sqrt()).abs() < 0.03, "level {level}");
        assert_eq!(result.target, TARGET_FLOOR);
    }

    /// A fixed pseudo-random sequence in [-1, 1] (a linear congruential generator).
    fn noise(count: usize) -> Vec<f64> {
        let mut state = 0x2545_f491_u64;
        (0..count)
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (state >> 33) as f64 / f64::from(1u32 << 31) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn jitter_of_15_ms_either_way_plays_without_a_gap_once_the_target_has_adapted() {
        let count = 500;
        let payloads = packets(&tone(450.0, 0.25, count), false);
        // The first 10 packets come as fast as the network allows (the spurt starts at the
        // smallest delay), then the delay varies by ±15 ms around 20 ms.
        let delay = |index: usize, n: f64| if index < 10 { 5.0 } else { 20.0 + 15.0 * n };
        let sent: Vec<Sent> =
            noise(count).iter().enumerate().map(|(index, n)| Sent { index, delay_ms: delay(index, *n) }).collect();
        let adapted = run(&payloads, &sent[..150], 0, 0, 150);
        let whole = run(&payloads, &sent, 0, 0, count + 10);
        let after = |s: JitterStats| (s.concealed - adapted.stats.concealed, s.late - adapted.stats.late);
        // The first 3 s adapt (concealing while the target grows); the next 7 s have no gap but
        // the end's fade-out.
        assert_eq!(after(whole.stats), (2, 0), "{:?} then {:?}", adapted.stats, whole.stats);
        let target = whole.target.as_secs_f64() * 1000.0;
        assert!((27.0..=31.0).contains(&target), "target {target} ms for a 30 ms spread");
    }

    #[test]
    fn a_lost_packet_is_rebuilt_from_the_next_one_s_fec() {
        let signal = tone(450.0, 0.25, 50);
        let payloads = packets(&signal, true);
        let sent: Vec<Sent> = steady(50, 5.0).into_iter().filter(|s| s.index != 10).collect();
        let result = run(&payloads, &sent, 0, 0, 60);
        assert_eq!(result.stats, stats(49, 1, 2, 0));
        // The rebuilt frame carries the tone at about its level.
        let rebuilt = result.frames.iter().flatten().nth(10).expect("frame 10");
        assert!(rms(rebuilt) > 0.12, "rebuilt level {}", rms(rebuilt));
    }

    #[test]
    fn a_lost_packet_without_fec_is_concealed() {
        let payloads = packets(&tone(450.0, 0.25, 50), false);
        let sent: Vec<Sent> = steady(50, 5.0).into_iter().filter(|s| s.index != 10).collect();
        let result = run(&payloads, &sent, 0, 0, 60);
        assert_eq!(result.stats, stats(49, 0, 3, 0));
        let concealed = result.frames.iter().flatten().nth(10).expect("frame 10");
        assert!(rms(concealed) > 0.05, "concealment continues the tone: {}", rms(concealed));
    }

    #[test]
    fn reordered_packets_are_put_back_in_order() {
        let payloads = packets(&tone(450.0, 0.25, 50), false);
        let in_order = run(&payloads, &steady(50, 5.0), 0, 0, 60);
        let mut sent = steady(50, 5.0);
        sent[10].delay_ms = 14.0; // arrives after packet 11 (at 225 ms), before its deadline
        sent[20].delay_ms = 18.0;
        let reordered = run(&payloads, &sent, 0, 0, 60);
        assert_eq!(reordered.stats, stats(50, 0, 2, 0));
        assert_eq!(reordered.played_samples(), in_order.played_samples());
    }

    #[test]
    fn sequence_numbers_and_timestamps_wrap() {
        let payloads = packets(&tone(450.0, 0.25, 50), false);
        let reference = run(&payloads, &steady(50, 5.0), 0, 0, 60);
        let wrapped = run(&payloads, &steady(50, 5.0), 65_530, u32::MAX - 960 * 3, 60);
        assert_eq!(wrapped.stats, stats(50, 0, 2, 0));
        assert_eq!(wrapped.played_samples(), reference.played_samples());
    }

    #[test]
    fn a_packet_after_its_frame_was_concealed_is_late_and_dropped() {
        let payloads = packets(&tone(450.0, 0.25, 50), false);
        let mut sent = steady(50, 5.0);
        sent[10].delay_ms = 200.0;
        let result = run(&payloads, &sent, 0, 0, 60);
        assert_eq!(result.stats, stats(49, 0, 3, 1));
    }

    #[test]
    fn a_second_copy_is_a_duplicate() {
        let payloads = packets(&tone(450.0, 0.25, 50), false);
        let mut sent = steady(50, 5.0);
        sent.push(Sent { index: 5, delay_ms: 6.0 });
        let result = run(&payloads, &sent, 0, 0, 60);
        assert_eq!((result.stats.duplicates, result.stats.played), (1, 50));
    }

    #[test]
    fn a_spurt_fades_in_and_a_release_fades_out_then_stops() {
        let payloads = packets(&tone(450.0, 0.25, 30), false);
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut buffer = JitterBuffer::new().expect("decoder");
        let mut frames = Vec::new();
        for (index, payload) in payloads.iter().enumerate().take(20) {
            let tick = 20 * index as u64 + 7;
            buffer.receive(index as u16, 960 * index as u32, payload, at(tick - 2));
            if let Some(frame) = buffer.tick(at(tick)) {
                frames.push(frame.to_vec());
            }
        }
        let peak = |samples: &[f32]| samples.iter().fold(0f32, |peak, s| peak.max(s.abs()));
        let first = &frames[0];
        assert!(peak(&first[..24]) < 0.1 * peak(&first[240..]), "the first 0.5 ms are faded in");
        buffer.release();
        let last = buffer.tick(at(20 * 20 + 7)).expect("the faded last frame").to_vec();
        assert!(peak(&last[..240]) > 0.15 && peak(&last[912..]) < 0.02, "faded out");
        // What was still waiting is forgotten: the spurt has ended.
        assert!(buffer.tick(at(20 * 21 + 7)).is_none() && buffer.tick(at(20 * 22 + 7)).is_none());
        assert_eq!(buffer.stats().concealed, 0);
    }
}
