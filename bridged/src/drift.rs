//! Crossing two clocks: the playback queue between a capture and a playback that do not share
//! a clock (one direction on AES67, on the PTP grandmaster's clock, the other on a local card's
//! crystal). Left alone, the queue would meet their drift the only ways a queue can: a faster
//! capture fills it until it drops samples, a faster playback empties it until it plays
//! silence. [`Drift`] reads the queue through an asynchronous resampler (rubato's, polynomial:
//! the ratio stays within a thousandth of 1, so no band-limiting is needed) whose ratio a PI
//! controller steers so that the queue's mean level stays at the level it starts playing at:
//! the latency the queue would keep by trimming, kept by resampling instead.
//!
//! ```text
//! capture (clock A) ─▶ queue ─▶ resampler (ratio ≈ B/A, steered by the queue's level) ─▶ playback (clock B)
//! ```

use std::collections::VecDeque;

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Adjustable, Async, FixedAsync, PolynomialDegree, Resampler};

/// How far from 1 the ratio may be steered: 1000 ppm, ten times the worst of two crystals
/// (±50 ppm each) and of a PTP grandmaster against a card.
const MAX_CORRECTION: f64 = 1e-3;
/// How often the controller moves the ratio, in seconds of playback.
const UPDATE_SECONDS: f64 = 0.5;
/// The time constant of the level's mean, in seconds: the level saws by a block or two as the
/// capture's blocks and the playback's pulls beat against each other; a second of mean holds
/// many beats.
const MEAN_SECONDS: f64 = 1.0;
/// How long the queue plays before the controller estimates the drift, in seconds: the queue
/// starts at the top of its saw, so its mean starts under the level it is held at, and the first
/// seconds' error is the start's, not the drift's.
const SETTLE_SECONDS: f64 = 5.0;
/// The controller's natural frequency, rad/s: an error in the level is made up within about
/// 20 s, slowly enough that what is left of the beats in the mean moves the ratio by a few ppm.
/// Critically damped.
const NATURAL_FREQUENCY: f64 = 0.2;
/// The largest error in the level the controller answers in full, in seconds: drift moves the
/// level by a few frames a second; an error larger than this is a start (the queue starts at the
/// top of its saw), a stall or a burst of the capture, which the queue meets itself (it runs dry,
/// or trims what is far too much: `jitter.rs`). Such an error moves the ratio by at most
/// ±400 ppm and is not taken into the drift's estimate.
const MAX_ERROR_SECONDS: f64 = 0.001;

/// The resampler between the queue and the playback, and what steers it.
pub struct Drift {
    resampler: Async<f32>,
    channels: usize,
    rate: f64,
    /// Frames the resampler asks for, interleaved; reused.
    input: Vec<f32>,
    /// One chunk of the resampler's output, interleaved; reused.
    output: Vec<f32>,
    /// Resampled samples not yet handed to the playback.
    ready: VecDeque<f32>,
    /// The queue's level while it plays (none while it does not).
    level: Option<Mean>,
    /// Frames played since the controller last moved the ratio.
    played: usize,
    /// The integral term: the drift as estimated so far (a fraction: +1e-4 is a capture 100 ppm
    /// faster than the playback).
    integral: f64,
}

/// The queue's mean level and the level it is held at, in frames, and how long it has been
/// playing, in seconds.
#[derive(Debug, Clone, Copy)]
struct Mean {
    mean: f64,
    target: f64,
    played: f64,
}

impl std::fmt::Debug for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drift").field("level", &self.level).field("integral", &self.integral).finish()
    }
}

/// What the queue said as it handed over samples: whether it is playing, its level after and
/// the level it starts playing at (in samples, all channels).
#[derive(Debug, Clone, Copy)]
pub struct Level {
    pub playing: bool,
    pub queued: usize,
    pub start: usize,
}

impl Drift {
    pub fn new(rate: u32, channels: usize) -> anyhow::Result<Drift> {
        // Output fixed at 1 ms: the playback's block is whatever its backend asks for, served
        // from `ready`, which never holds more than a chunk.
        let chunk = rate as usize / 1000;
        let resampler = Async::new_poly(
            1.0,
            1.0 + 2.0 * MAX_CORRECTION,
            PolynomialDegree::Septic,
            chunk,
            channels,
            FixedAsync::Output,
        )?;
        Ok(Drift {
            input: vec![0.0; resampler.input_frames_max() * channels],
            output: vec![0.0; resampler.output_frames_max() * channels],
            resampler,
            channels,
            rate: f64::from(rate),
            ready: VecDeque::with_capacity(2 * chunk * channels),
            level: None,
            played: 0,
            integral: 0.0,
        })
    }

    /// The drift made up, in ppm: positive when the capture runs faster than the playback (the
    /// controller's integral: the correction in force less its answer to the level's error).
    pub fn ppm(&self) -> f64 {
        self.integral * 1e6
    }

    /// Fills `out` (interleaved) with the queue's audio resampled; `pull` fills a buffer from the
    /// queue and says the queue's state after.
    pub fn fill(&mut self, out: &mut [f32], mut pull: impl FnMut(&mut [f32]) -> Level) {
        while self.ready.len() < out.len() {
            let needed = self.resampler.input_frames_next() * self.channels;
            let level = pull(&mut self.input[..needed]);
            self.observe(level, needed / self.channels);
            self.resample(needed);
        }
        let wanted = out.len();
        for (slot, sample) in out.iter_mut().zip(self.ready.drain(..wanted)) {
            *slot = sample;
        }
        self.played += out.len() / self.channels;
        if self.played as f64 >= UPDATE_SECONDS * self.rate {
            self.steer();
        }
    }

    fn resample(&mut self, needed: usize) {
        let frames_in = needed / self.channels;
        let frames_out = self.resampler.output_frames_next();
        let input = InterleavedSlice::new(&self.input[..needed], self.channels, frames_in);
        let output = InterleavedSlice::new_mut(&mut self.output[..], self.channels, frames_out);
        match (input, output) {
            (Ok(input), Ok(mut output)) => match self.resampler.process_into_buffer(&input, &mut output, None) {
                Ok((_, written)) => self.ready.extend(&self.output[..written * self.channels]),
                Err(error) => self.silence(frames_out, &error),
            },
            (Err(error), _) | (_, Err(error)) => self.silence(frames_out, &error),
        }
    }

    /// A chunk of silence for one the resampler could not make (it cannot fail with the sizes
    /// it asked for itself; logged should it ever).
    fn silence(&mut self, frames: usize, error: &dyn std::fmt::Display) {
        tracing::warn!("the playback's resampler failed: {error}");
        self.ready.extend(std::iter::repeat_n(0.0, frames * self.channels));
    }

    /// Takes the level into its mean, weighted by the `frames` that were taken.
    fn observe(&mut self, level: Level, frames: usize) {
        let (queued, start) = ((level.queued / self.channels) as f64, (level.start / self.channels) as f64);
        let seconds = frames as f64 / self.rate;
        let weight = (seconds / MEAN_SECONDS).min(1.0);
        self.level = match self.level {
            // Not started yet, or started over after running dry: measured anew once it
            // plays; the drift estimated so far stands.
            _ if !level.playing => None,
            Some(Mean { mean, played, .. }) => {
                Some(Mean { mean: mean + weight * (queued - mean), target: start, played: played + seconds })
            }
            None => Some(Mean { mean: queued, target: start, played: seconds }),
        };
    }

    /// Moves the ratio by the level's error: a PI controller on the queue, whose level
    /// integrates the difference of the two clocks' rates less the correction.
    fn steer(&mut self) {
        let dt = self.played as f64 / self.rate;
        self.played = 0;
        let Some(Mean { mean, target, played }) = self.level else { return };
        // The plant: d(level)/dt = rate × (drift − correction). Its PI loop is critically
        // damped at ω: correction = 2ω/rate × error + ω²/rate × ∫error dt.
        let largest = MAX_ERROR_SECONDS * self.rate;
        let error = (mean - target).clamp(-largest, largest);
        let omega = NATURAL_FREQUENCY;
        if played >= SETTLE_SECONDS && error.abs() < largest {
            self.integral =
                (self.integral + omega * omega / self.rate * error * dt).clamp(-MAX_CORRECTION, MAX_CORRECTION);
        }
        let correction = (self.integral + 2.0 * omega / self.rate * error).clamp(-MAX_CORRECTION, MAX_CORRECTION);
        // The ratio is output rate over input rate: a faster capture is consumed faster.
        if let Err(error) = self.resampler.set_resample_ratio_relative(1.0 / (1.0 + correction), true) {
            tracing::warn!("the playback's resampler refused a ratio: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::jitter::{Glitches, Jitter, QueueShape};

    const RATE: u32 = 48_000;
    const CHANNELS: usize = 2;
    /// The playback queue of a GStreamer card (card_side.rs).
    const SHAPE: QueueShape = QueueShape { start_ms: 10, margin_ms: 5, limit_ms: 200 };
    const TONE_HZ: f64 = 1000.0;
    const OMEGA: f64 = 2.0 * std::f64::consts::PI * TONE_HZ / RATE as f64;

    /// What a run did: the queue's glitches, the largest break in the tone after the first
    /// second (a dropped or repeated sample breaks it by about ω), the queue's levels over the
    /// last half, in frames, and the drift estimated at the end.
    struct Run {
        glitches: Glitches,
        worst_break: f64,
        levels: (usize, usize),
        ppm: Option<f64>,
    }

    /// A capture whose clock runs `drift_ppm` faster than the playback's, pushing blocks of 5 ms
    /// of its clock, and a playback pulling 256 frames at a time, for `seconds`; the capture
    /// holds its blocks back during `stall` (from, to: seconds) and hands them over at its end.
    fn run(queue: Jitter, drift_ppm: f64, seconds: f64, stall: Option<(f64, f64)>) -> Run {
        let mut queue = queue;
        let (push_frames, pull_frames) = (240, 256);
        let push_every = push_frames as f64 / (f64::from(RATE) * (1.0 + drift_ppm * 1e-6));
        let due = |block: usize| match (block as f64 * push_every, stall) {
            (at, Some((from, to))) if at >= from && at < to => to,
            (at, _) => at,
        };
        let pull_every = pull_frames as f64 / f64::from(RATE);
        let (mut pushed, mut pulls) = (0usize, 0usize);
        let mut block = vec![0.0f32; pull_frames * CHANNELS];
        let mut out: Vec<f32> = Vec::new();
        let mut levels = (usize::MAX, 0);
        let total_pulls = (seconds / pull_every) as usize;
        while pulls < total_pulls {
            // Whatever is due first: the capture's next block or the playback's next pull.
            if due(pushed / push_frames) <= pulls as f64 * pull_every {
                let samples: Vec<f32> =
                    (pushed..pushed + push_frames).flat_map(|n| [(OMEGA * n as f64).sin() as f32; CHANNELS]).collect();
                queue.push(&samples);
                pushed += push_frames;
            } else {
                queue.pull(&mut block);
                out.extend(block.iter().step_by(CHANNELS));
                pulls += 1;
                if pulls > total_pulls / 2 {
                    let level = queue.queued() / CHANNELS;
                    levels = (levels.0.min(level), levels.1.max(level));
                }
            }
        }
        let worst_break = partyline_testkit::audio::worst_break(&out[RATE as usize..], TONE_HZ);
        Run { glitches: queue.glitches, worst_break, levels, ppm: queue.drift_ppm() }
    }

    fn steered() -> Jitter {
        SHAPE.jitter(RATE, CHANNELS, 200).crossing_clocks(RATE, CHANNELS).expect("a resampler")
    }

    #[test]
    fn a_playback_on_another_clock_takes_the_capture_whole_at_a_steady_latency() {
        // Crystals are within ±50 ppm; a card against a PTP grandmaster likewise.
        for drift_ppm in [-300.0, -50.0, 50.0, 300.0] {
            let run = run(steered(), drift_ppm, 90.0, None);
            let what = format!("{drift_ppm:+} ppm");
            assert_eq!(run.glitches, Glitches::default(), "{what}: the queue dropped or ran dry");
            assert!(run.worst_break < 0.01, "{what}: the tone breaks by {:.4}", run.worst_break);
            // The latency stays the queue's: its start (10 ms) and a pull's worth of saw.
            let (lowest, highest) = run.levels;
            assert!(highest <= 480 + 2 * 256, "{what}: the level reaches {highest} frames");
            let ppm = run.ppm.expect("steered");
            println!("{what}: made up {ppm:.1} ppm, levels {lowest}..{highest}, worst break {:.5}", run.worst_break);
            assert!((ppm - drift_ppm).abs() < 10.0, "{what}: made up {ppm:.1} ppm");
        }
    }

    #[test]
    fn without_the_resampler_the_same_drift_drops_samples_or_runs_dry() {
        // What the queue of one clock does between two: the test above would fail on it.
        let faster = run(SHAPE.jitter(RATE, CHANNELS, 200), 300.0, 60.0, None);
        assert!(faster.glitches.trimmed > 0 && faster.worst_break > 0.05, "{:?}", faster.glitches);
        let slower = run(SHAPE.jitter(RATE, CHANNELS, 200), -300.0, 60.0, None);
        assert!(slower.glitches.underruns > 0, "{:?}", slower.glitches);
    }

    #[test]
    fn a_stall_of_the_capture_costs_a_glitch_but_neither_the_latency_nor_the_drift() {
        // 150 ms without a block (a busy machine), then all of them at once, 10 s in.
        let run = run(steered(), 100.0, 90.0, Some((10.0, 10.15)));
        println!("a stall at +100 ppm: {:?}, levels {:?}, made up {:?} ppm", run.glitches, run.levels, run.ppm);
        assert_eq!(run.glitches.underruns, 1, "{:?}", run.glitches);
        assert!(run.glitches.trimmed > 0, "the burst kept as latency: {:?}", run.glitches);
        assert!(run.levels.1 <= 480 + 2 * 256, "the level reaches {} frames", run.levels.1);
        let ppm = run.ppm.expect("steered");
        assert!((ppm - 100.0).abs() < 10.0, "made up {ppm:.1} ppm");
    }
}
