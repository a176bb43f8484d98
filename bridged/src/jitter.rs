//! The queue between two paces ([`Jitter`]): the room's mix on its way from the decoder to the
//! card, and the card's mix on its way to the playback. The writer and the reader each keep their
//! own pace and their own block size; the queue keeps what their bursts need and trims the rest,
//! so the latency settles whatever level a start or a stall left.

use std::collections::VecDeque;

use crate::drift::{Drift, Level};

/// A queue between two paces: the room's mix on its way to the card (written in the decoder's
/// 20 ms frames at the network's pace, read in the card's blocks), and the mix on its way to the
/// playback (written as the capture hands over its blocks, sometimes in bursts, read as the
/// playback has room).
///
/// It starts playing once `start` samples are queued, plays silence and starts over on an
/// underrun. It keeps what bursts need and a margin more: when the lowest level seen over a
/// window of `window` reads stayed above the margin, the excess is dropped, so the latency
/// settles at the largest burst plus the margin whatever level the start left, and follows
/// drifting clocks. The margin adapts: each underrun adds `margin` to it (up to
/// [`MARGIN_GROWTH_LIMIT`] times), and every [`CALM_WINDOWS`] windows without one take that back
/// off. So a quiet machine keeps the latency low, and a busy one pays a little latency instead of
/// a glitch after every hiccup. Above `limit` it is cut back to its start level at once.
#[derive(Debug)]
pub struct Jitter {
    queued: VecDeque<f32>,
    playing: bool,
    shape: JitterShape,
    /// The margin in force: `shape.margin` times 1..=[`MARGIN_GROWTH_LIMIT`].
    margin: usize,
    reads: usize,
    lowest: usize,
    calm_windows: usize,
    /// What it did to its stream so far.
    pub glitches: Glitches,
    /// `glitches` when [`Jitter::glitches_since_last_asked`] last answered.
    reported: Glitches,
    /// Between two clocks: the reader's side resampled to hold the level, which is then
    /// trimmed only of a burst ([`Jitter::crossing_clocks`]).
    drift: Option<Box<Drift>>,
}

/// What a [`Jitter`] did to its stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Glitches {
    /// Times it ran dry (and played silence).
    pub underruns: u64,
    /// Samples dropped because the queue went over its limit.
    pub overflowed: u64,
    /// Samples dropped to bring the level back to the margin: the start's excess, and what a
    /// faster writer adds. Not a fault, but audible if it falls in speech.
    pub trimmed: u64,
}

/// How many times its base margin a [`Jitter`]'s margin may grow to.
pub const MARGIN_GROWTH_LIMIT: usize = 6;
/// Windows without an underrun after which a grown margin shrinks by one step.
pub const CALM_WINDOWS: usize = 10;

/// A [`Jitter`]'s levels, in samples, and its window, in reads.
#[derive(Debug, Clone, Copy)]
pub struct JitterShape {
    pub start: usize,
    pub margin: usize,
    pub limit: usize,
    pub window: usize,
}

impl Jitter {
    pub fn new(shape: JitterShape) -> Jitter {
        Jitter {
            queued: VecDeque::with_capacity(shape.limit),
            playing: false,
            shape,
            margin: shape.margin,
            reads: 0,
            lowest: usize::MAX,
            calm_windows: 0,
            glitches: Glitches::default(),
            reported: Glitches::default(),
            drift: None,
        }
    }

    /// The queue between a writer and a reader on different clocks (`drift.rs`): the reader's
    /// side is resampled so the level stays where it settled, instead of being trimmed
    /// (dropped samples) or running dry as the clocks drift apart.
    pub fn crossing_clocks(mut self, rate: u32, channels: usize) -> anyhow::Result<Jitter> {
        self.drift = Some(Box::new(Drift::new(rate, channels)?));
        Ok(self)
    }

    /// The drift being made up, in ppm (the writer's clock faster: positive); none when the
    /// writer and the reader share a clock.
    pub fn drift_ppm(&self) -> Option<f64> {
        self.drift.as_ref().map(|d| d.ppm())
    }

    /// What happened since the last call.
    pub fn glitches_since_last_asked(&mut self) -> Glitches {
        let (now, before) = (self.glitches, self.reported);
        self.reported = now;
        Glitches {
            underruns: now.underruns - before.underruns,
            overflowed: now.overflowed - before.overflowed,
            trimmed: now.trimmed - before.trimmed,
        }
    }

    /// The level it starts playing at: its start, plus what the margin has grown by.
    fn start_level(&self) -> usize {
        self.shape.start + self.margin - self.shape.margin
    }

    pub fn push(&mut self, samples: &[f32]) {
        self.queued.extend(samples);
        if self.queued.len() > self.shape.limit {
            let excess = self.queued.len() - self.start_level().min(self.shape.limit);
            self.queued.drain(..excess);
            self.glitches.overflowed += excess as u64;
        }
    }

    /// Fills `out` (silence for what is missing).
    pub fn pull(&mut self, out: &mut [f32]) {
        match self.drift.take() {
            Some(mut drift) => {
                drift.fill(out, |input| {
                    self.pull_as_is(input, true);
                    Level { playing: self.playing, queued: self.queued.len(), start: self.start_level() }
                });
                self.drift = Some(drift);
            }
            None => self.pull_as_is(out, false),
        }
    }

    /// Fills `out` from the queue itself; `steered`: the level is held by a resampler.
    fn pull_as_is(&mut self, out: &mut [f32], steered: bool) {
        if !self.playing && self.queued.len() >= self.start_level() {
            self.playing = true;
        }
        let take = if self.playing { out.len().min(self.queued.len()) } else { 0 };
        let (front, back) = self.queued.as_slices();
        let from_front = take.min(front.len());
        out[..from_front].copy_from_slice(&front[..from_front]);
        out[from_front..take].copy_from_slice(&back[..take - from_front]);
        self.queued.drain(..take);
        out[take..].fill(0.0);
        if !self.playing {
            return;
        }
        if take < out.len() {
            self.playing = false;
            self.glitches.underruns += 1;
            self.margin = (self.margin + self.shape.margin).min(self.shape.margin * MARGIN_GROWTH_LIMIT);
            (self.reads, self.lowest, self.calm_windows) = (0, usize::MAX, 0);
            return;
        }
        self.lowest = self.lowest.min(self.queued.len());
        self.reads += 1;
        if self.reads >= self.shape.window {
            self.calm_windows += 1;
            if self.calm_windows >= CALM_WINDOWS && self.margin > self.shape.margin {
                self.margin -= self.shape.margin;
                self.calm_windows = 0;
            }
            let excess = self.lowest.saturating_sub(self.margin);
            // Between two clocks the resampler holds the level: only what no drift makes in a
            // window, a burst after a stall, is trimmed.
            if excess > 0 && !(steered && excess <= self.shape.start) {
                self.queued.drain(..excess);
                self.glitches.trimmed += excess as u64;
            }
            (self.reads, self.lowest) = (0, usize::MAX);
        }
    }

    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.queued.len()
    }
}

/// A [`JitterShape`] in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct QueueShape {
    pub start_ms: usize,
    pub margin_ms: usize,
    pub limit_ms: usize,
}

impl QueueShape {
    /// In samples of `channels` channels at `rate`, the window `window` reads.
    pub fn jitter(self, rate: u32, channels: usize, window: usize) -> Jitter {
        let samples = |ms: usize| rate as usize * ms / 1000 * channels;
        Jitter::new(JitterShape {
            start: samples(self.start_ms),
            margin: samples(self.margin_ms),
            limit: samples(self.limit_ms),
            window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20 ms frames in, 10 ms blocks out, at 48 kHz; a window of a second.
    fn network_to_card() -> (Jitter, usize, usize) {
        let (frame, block) = (960, 480);
        let shape = JitterShape { start: frame + block, margin: block, limit: 10 * frame, window: 100 };
        (Jitter::new(shape), frame, block)
    }

    #[test]
    fn a_queue_starts_once_a_frame_and_a_block_are_in_and_survives_both_paces() {
        let (mut jitter, frame, block) = network_to_card();
        let mut out = vec![0.0; block];
        jitter.push(&vec![0.5; frame]);
        jitter.pull(&mut out);
        assert!(out.iter().all(|s| *s == 0.0), "not started before a frame and a block are queued");
        jitter.push(&vec![0.5; frame]);
        // Steady: a frame every two blocks, never an underrun.
        for n in 0..1_000 {
            jitter.pull(&mut out);
            assert!(out.iter().all(|s| *s == 0.5), "block {n}");
            if n % 2 == 1 {
                jitter.push(&vec![0.5; frame]);
            }
        }
        assert_eq!(jitter.glitches.underruns, 0);
        // The network stalls: silence, one underrun, then it starts over.
        let queued = jitter.queued();
        for _ in 0..=queued / block {
            jitter.pull(&mut out);
        }
        assert_eq!(jitter.glitches.underruns, 1);
        // A burst far past the limit: the oldest go at once, down to its start level (which
        // the underrun raised by a step).
        jitter.push(&vec![0.25; 20 * frame]);
        assert_eq!(jitter.queued(), frame + block + block);
    }

    /// Whatever level a start or a burst left, the queue settles at what the pace needs: the
    /// lowest level over a window is trimmed to the margin.
    #[test]
    fn a_queue_keeps_what_bursts_need_and_no_more() {
        let (mut jitter, frame, block) = network_to_card();
        let mut out = vec![0.0; block];
        // 100 ms arrive at once, then the steady pace.
        jitter.push(&vec![0.5; 5 * frame]);
        let mut highest_after_settling = 0;
        for n in 0..600 {
            jitter.pull(&mut out);
            if n % 2 == 1 {
                jitter.push(&vec![0.5; frame]);
            }
            if n > 300 {
                highest_after_settling = highest_after_settling.max(jitter.queued());
            }
        }
        assert_eq!(jitter.glitches.underruns, 0);
        assert!(jitter.glitches.trimmed > 0, "the excess of the burst is dropped");
        // A frame comes every two reads: the level swings by a frame above the margin.
        assert!(highest_after_settling <= block + frame, "settled at {highest_after_settling} samples");
    }

    /// Each underrun grows the margin one step (a hiccup of a busy machine is not met twice with
    /// the same margin); calm windows shrink it back.
    #[test]
    fn the_margin_grows_with_underruns_and_shrinks_when_calm() {
        let (mut jitter, frame, block) = network_to_card();
        let mut out = vec![0.0; block];
        let steady = |jitter: &mut Jitter, out: &mut Vec<f32>, reads: usize| {
            for n in 0..reads {
                jitter.pull(out);
                if n % 2 == 1 {
                    jitter.push(&vec![0.5; frame]);
                }
            }
        };
        jitter.push(&vec![0.5; 2 * frame]);
        steady(&mut jitter, &mut out, 400);
        let settled = jitter.queued();
        // Two stalls of the network: two underruns, each restarting a step higher.
        for _ in 0..2 {
            while jitter.queued() > 0 {
                jitter.pull(&mut out);
            }
            jitter.pull(&mut out);
            jitter.push(&vec![0.5; 4 * frame]);
            steady(&mut jitter, &mut out, 400);
        }
        assert_eq!(jitter.glitches.underruns, 2);
        assert_eq!(jitter.margin, 3 * block, "two steps up");
        assert!(jitter.queued() > settled, "it keeps more now: {} > {settled}", jitter.queued());
        // Calm: back down, a step per CALM_WINDOWS windows.
        steady(&mut jitter, &mut out, 2 * CALM_WINDOWS * 100 + 10);
        assert_eq!(jitter.margin, block, "back to its base");
    }
}
