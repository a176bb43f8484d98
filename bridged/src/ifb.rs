//! The dip of an IFB's program while its interrupt group talks: one [`Ducker`] per output
//! channel, which lives as long as the card side (across matrix swaps, so a plan changing an
//! IFB never resets a dip that is under way).
//!
//! Talk is the interrupt's level: a block whose RMS is over [`TALK_DBFS`] holds the dip for
//! [`HOLD`] more. Janus mixes nothing for a muted panel (a released talk key), so the room's
//! mix is silence between talks; a card input of the group needs its noise floor under the
//! threshold. The gain moves in straight ramps, never steps: down in [`DOWN`] (a talker's first
//! syllable is over the program at once), up in [`UP`] after the hold (no pumping between words).
//! The same shape as the panel's program dimming (`web/join/program.js`).

use std::time::Duration;

/// The interrupt's level over a block above which it talks.
pub const TALK_DBFS: f32 = -50.0;
/// How long the dip holds after the interrupt's last block of talk.
pub const HOLD: Duration = Duration::from_millis(600);
/// From the program's full level to silence (a dip of −20 dB takes 90 % of it).
pub const DOWN: Duration = Duration::from_millis(10);
/// From silence back to the program's full level.
pub const UP: Duration = Duration::from_millis(150);

/// The ramps and the hold in samples at the card's rate.
#[derive(Debug, Clone, Copy)]
struct Timing {
    down_step: f32,
    up_step: f32,
    hold: u32,
}

/// An output's dip: its gain and how long the hold has left.
#[derive(Debug, Clone, Copy)]
pub struct Ducker {
    gain: f32,
    hold_left: u32,
}

impl Default for Ducker {
    fn default() -> Self {
        Ducker { gain: 1.0, hold_left: 0 }
    }
}

/// The duckers of every output channel.
#[derive(Debug, Clone)]
pub struct Duckers {
    timing: Timing,
    outputs: [Ducker; partyline_shared::config::CHANNELS],
}

impl Duckers {
    pub fn new(rate: u32) -> Duckers {
        #[allow(clippy::cast_precision_loss, reason = "a sampling rate is far below 2^24")]
        let samples = |d: Duration| d.as_secs_f32() * rate as f32;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a hold of seconds")]
        let hold = samples(HOLD) as u32;
        let timing = Timing { down_step: 1.0 / samples(DOWN), up_step: 1.0 / samples(UP), hold };
        Duckers { timing, outputs: [Ducker::default(); partyline_shared::config::CHANNELS] }
    }

    /// Starts a block on `output`: whether its interrupt talks in it (the block's `interrupt`
    /// samples).
    pub fn listen(&mut self, output: usize, interrupt: impl Iterator<Item = f32>) {
        let (mut power, mut n) = (0.0, 0u32);
        for sample in interrupt {
            power += sample * sample;
            n += 1;
        }
        #[allow(clippy::cast_precision_loss, reason = "a block's length")]
        let talks = n > 0 && 10.0 * (power / n as f32).log10() > TALK_DBFS;
        if talks {
            self.outputs[output].hold_left = self.timing.hold;
        }
    }

    /// The program's gain on `output` for the next sample, dipping to `dim` while held.
    pub fn next_gain(&mut self, output: usize, dim: f32) -> f32 {
        let timing = self.timing;
        let ducker = &mut self.outputs[output];
        if ducker.hold_left > 0 {
            ducker.hold_left -= 1;
            ducker.gain = (ducker.gain - timing.down_step).max(dim);
        } else {
            ducker.gain = (ducker.gain + timing.up_step).min(1.0);
        }
        ducker.gain
    }

    /// Whether `output`'s program is dipped (or on its way down or back up).
    #[cfg(test)]
    fn dipped(&self, output: usize) -> bool {
        let ducker = self.outputs[output];
        ducker.gain < 1.0 || ducker.hold_left > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: u32 = 48_000;

    fn ms(samples: usize) -> f32 {
        #[allow(clippy::cast_precision_loss, reason = "test lengths")]
        let ms = samples as f32 * 1000.0 / RATE as f32;
        ms
    }

    /// Runs `blocks` 5 ms blocks on output 0, the interrupt talking (0.1, −20 dBFS) in those
    /// `talks` says; the gain of every sample.
    fn run(duckers: &mut Duckers, blocks: usize, talks: impl Fn(usize) -> bool, dim: f32) -> Vec<f32> {
        let block = 240;
        let mut gains = Vec::new();
        for k in 0..blocks {
            let level = if talks(k) { 0.1 } else { 0.0 };
            duckers.listen(0, std::iter::repeat_n(level, block));
            gains.extend((0..block).map(|_| duckers.next_gain(0, dim)));
        }
        gains
    }

    #[test]
    fn talk_dips_the_program_in_10_ms_and_it_returns_after_the_hold_in_150_ms() {
        let mut duckers = Duckers::new(RATE);
        // 100 ms of talk from the start, then silence.
        let gains = run(&mut duckers, 300, |k| k < 20, 0.1);
        let down = gains.iter().position(|g| *g <= 0.1).expect("reaches the dip");
        assert!((ms(down) - 9.0).abs() < 0.1, "down in {} ms", ms(down));
        // The hold counts from the start of the last block of talk (95 ms).
        let up_from = gains.iter().rposition(|g| *g <= 0.1).expect("leaves the dip");
        assert!((ms(up_from) - 695.0).abs() < 0.1, "held until {} ms", ms(up_from));
        let back = gains[up_from..].iter().position(|g| *g >= 1.0).expect("back up");
        assert!((ms(back) - 135.0).abs() < 0.5, "back up in {} ms", ms(back));
        // No step anywhere: a ramp of at most 1/480 per sample.
        let steepest = gains.windows(2).map(|w| (w[1] - w[0]).abs()).fold(0.0, f32::max);
        assert!(steepest <= 1.0 / 480.0 + 1e-6, "a step of {steepest}");
    }

    #[test]
    fn a_quiet_interrupt_leaves_the_program_alone_and_a_cut_goes_to_silence() {
        let mut duckers = Duckers::new(RATE);
        // −60 dBFS: under the threshold (a card input's noise).
        duckers.listen(0, std::iter::repeat_n(0.001, 240));
        assert_eq!(duckers.next_gain(0, 0.1), 1.0);
        assert!(!duckers.dipped(0));
        let gains = run(&mut duckers, 10, |_| true, 0.0);
        assert_eq!(gains.last().copied(), Some(0.0), "a cut is silence");
        assert!(duckers.dipped(0) && !duckers.dipped(1), "each output dips on its own");
    }
}
