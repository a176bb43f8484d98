//! Measurements of the card's signals: the level of each channel for `Status()` ([`Meter`])
//! and the voice activity of a group's send for the `Talking` signal ([`VoiceActivity`], which
//! Janus decides for no plain-RTP participant). Both run in the card's thread on each block.

use crate::mix::CHANNELS;

/// Levels of the card's channels over a period: RMS in dBFS, −100 for silence.
#[derive(Debug)]
pub struct Meter {
    squares: [f64; CHANNELS],
    frames: usize,
    period: usize,
}

impl Meter {
    /// A level every `period` frames.
    pub fn new(period: usize) -> Meter {
        Meter { squares: [0.0; CHANNELS], frames: 0, period: period.max(1) }
    }

    /// Adds an interleaved block; the levels when a period is complete.
    pub fn add(&mut self, block: &[f32]) -> Option<[f64; CHANNELS]> {
        for frame in block.chunks_exact(CHANNELS) {
            for (square, sample) in self.squares.iter_mut().zip(frame) {
                *square += f64::from(*sample) * f64::from(*sample);
            }
        }
        self.frames += block.len() / CHANNELS;
        if self.frames < self.period {
            return None;
        }
        #[allow(clippy::cast_precision_loss, reason = "a period is a few thousand frames")]
        let frames = self.frames as f64;
        let levels = self.squares.map(|square| {
            let rms = (square / frames).sqrt();
            if rms > 1e-5 { 20.0 * rms.log10() } else { -100.0 }
        });
        (self.squares, self.frames) = ([0.0; CHANNELS], 0);
        Some(levels)
    }
}

/// Voice activity of one mono signal, decided as AudioBridge decides it from a participant's
/// RFC 6464 levels: the level of each 20 ms packet in dBov (0 loudest, 127 silence), averaged
/// over `window` packets; talking while that average is under `threshold`.
#[derive(Debug)]
pub struct VoiceActivity {
    packet: usize,
    squares: f64,
    frames: usize,
    window: u32,
    threshold: u32,
    levels: u32,
    packets: u32,
    talking: bool,
}

impl VoiceActivity {
    pub fn new(rate: u32, window: u32, threshold: u32) -> VoiceActivity {
        VoiceActivity {
            packet: rate as usize / 50,
            squares: 0.0,
            frames: 0,
            window: window.max(1),
            threshold,
            levels: 0,
            packets: 0,
            talking: false,
        }
    }

    /// Adds samples; the new state when it changed.
    pub fn add(&mut self, samples: &[f32]) -> Option<bool> {
        let mut changed = None;
        for &sample in samples {
            self.squares += f64::from(sample) * f64::from(sample);
            self.frames += 1;
            if self.frames == self.packet {
                changed = self.packet_done().or(changed);
            }
        }
        changed
    }

    fn packet_done(&mut self) -> Option<bool> {
        #[allow(clippy::cast_precision_loss, reason = "a packet is a few hundred frames")]
        let rms = (self.squares / self.frames as f64).sqrt();
        (self.squares, self.frames) = (0.0, 0);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to 0..=127")]
        let dbov = if rms > 0.0 { (-20.0 * rms.log10()).round().clamp(0.0, 127.0) as u32 } else { 127 };
        self.levels += dbov;
        self.packets += 1;
        if self.packets < self.window {
            return None;
        }
        let talking = self.levels / self.packets < self.threshold;
        (self.levels, self.packets) = (0, 0);
        (talking != self.talking).then(|| {
            self.talking = talking;
            talking
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_per_channel() {
        let mut meter = Meter::new(480);
        let mut block = vec![0.0; 480 * CHANNELS];
        for frame in block.chunks_exact_mut(CHANNELS) {
            frame[3] = 0.5;
        }
        let levels = meter.add(&block).expect("a period");
        assert!((levels[3] - 20.0 * 0.5_f64.log10()).abs() < 0.01, "{levels:?}");
        assert_eq!(levels[0], -100.0);
        assert!(meter.add(&block[..CHANNELS * 100]).is_none(), "a period is not complete");
    }

    fn tone(amplitude: f32, frames: usize) -> Vec<f32> {
        (0..frames).map(|i| amplitude * (i as f32 * 0.0654).sin()).collect()
    }

    /// AudioBridge's rule: the average of 10 packet levels under 40 dBov. A −20 dBFS tone talks
    /// after one window (200 ms), silence stops it a window later, a −50 dBFS tone never talks,
    /// and only changes are reported, whatever the block size.
    #[test]
    fn talks_over_a_window_of_loud_packets_and_stops_after_a_quiet_one() {
        let mut voice = VoiceActivity::new(48_000, 10, 40);
        let changes = |voice: &mut VoiceActivity, samples: &[f32]| -> Vec<bool> {
            samples.chunks(256).filter_map(|block| voice.add(block)).collect()
        };
        assert_eq!(changes(&mut voice, &tone(0.1, 9 * 960)), Vec::<bool>::new(), "not before a whole window");
        assert_eq!(changes(&mut voice, &tone(0.1, 960)), [true]);
        assert_eq!(changes(&mut voice, &tone(0.1, 20 * 960)), Vec::<bool>::new(), "still talking: no news");
        assert_eq!(changes(&mut voice, &vec![0.0; 10 * 960]), [false]);
        assert_eq!(changes(&mut voice, &tone(0.003, 30 * 960)), Vec::<bool>::new(), "−50 dBFS is not talk");
    }
}
