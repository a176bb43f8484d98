//! What a simulated talker says: marked tone bursts, Opus-encoded once at start and replayed,
//! so a talking line costs a packet copy, not an encoder.
//!
//! A cycle is 500 ms: a 400 ms burst of the line's tone, then 100 ms of silence, so a listener
//! sees each burst's onset clearly. The onset moves within its 20 ms frame from cycle to cycle
//! (7 ms further each time): measured against the mixer's own 20 ms clock, the onsets sample
//! every phase, so the mouth-to-ear median is not one phase's figure.

use std::sync::Arc;

use audiopus::coder::Encoder;
use audiopus::{Application, Bitrate, Channels, SampleRate};

/// Samples per second of every stream (Opus in WebRTC runs at 48 kHz).
pub const RATE: usize = 48_000;
/// Samples in one 20 ms frame.
pub const FRAME: usize = RATE / 50;
/// Frames in one cycle: 500 ms.
pub const CYCLE_FRAMES: usize = 25;
/// The burst's length in samples: 400 ms.
pub const BURST: usize = RATE * 2 / 5;
/// Cycles in the encoded loop (the onset phases it goes through).
const CYCLES: usize = 8;
/// How far the onset moves from one cycle to the next, in samples (7 ms).
const ONSET_STEP: usize = RATE * 7 / 1000;
/// The tone's peak amplitude: -12 dBFS (an RMS of -15 dBFS).
pub const AMPLITUDE: f32 = 0.25;
/// The RFC 6464 level of a frame of tone (-dBov of its RMS) and of silence.
pub const TONE_LEVEL: i8 = -15;
pub const SILENCE_LEVEL: i8 = -127;
/// What a phone's Opus sends for speech (Chromium's default for mono).
const BITRATE: i32 = 32_000;

/// The tone of line `index` of a panel: a whole number of cycles in 20 ms (a multiple of
/// 50 Hz), so any 20 ms of it is orthogonal to any other line's tone and a listener measures
/// exactly how much of each it hears. Far enough apart for Opus not to blur them.
pub fn line_tone(index: usize) -> f32 {
    450.0 + 200.0 * (index % 8) as f32
}

/// One encoded frame of the loop.
#[derive(Debug, Clone)]
pub struct Frame {
    pub payload: Arc<[u8]>,
    /// Where the burst starts in this frame (samples), on the frame that starts one.
    pub onset: Option<usize>,
    /// Its RFC 6464 level and voice activity.
    pub level: i8,
}

/// The encoded loop of one tone, and the encoded silence a muted talk key sends.
#[derive(Debug)]
pub struct Voice {
    pub frequency: f32,
    pub frames: Vec<Frame>,
    pub silence: Frame,
}

impl Voice {
    /// Encodes the loop of `frequency`'s bursts; with in-band FEC for `fec_percent` % of loss,
    /// as a browser that measured that loss on its link sends (0: none).
    pub fn encode(frequency: f32, fec_percent: u8) -> Result<Voice, audiopus::Error> {
        let mut encoder = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip)?;
        encoder.set_bitrate(Bitrate::BitsPerSecond(BITRATE))?;
        encoder.set_inband_fec(fec_percent > 0)?;
        encoder.set_packet_loss_perc(fec_percent)?;
        let samples = bursts(frequency);
        let mut frames = Vec::with_capacity(samples.len() / FRAME);
        let mut output = [0u8; 1500];
        for (index, frame) in samples.chunks_exact(FRAME).enumerate() {
            let length = encoder.encode_float(frame, &mut output)?;
            let cycle_start = index.is_multiple_of(CYCLE_FRAMES);
            let onset = cycle_start.then(|| onset_of(index / CYCLE_FRAMES));
            let loud = frame.iter().any(|s| s.abs() > 0.0);
            let level = if loud { TONE_LEVEL } else { SILENCE_LEVEL };
            frames.push(Frame { payload: output[..length].into(), onset, level });
        }
        // A muted talk key sends digital silence; after a few frames its encoding repeats.
        let mut silent = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip)?;
        silent.set_bitrate(Bitrate::BitsPerSecond(BITRATE))?;
        let zeros = [0f32; FRAME];
        let mut length = 0;
        for _ in 0..5 {
            length = silent.encode_float(&zeros, &mut output)?;
        }
        let silence = Frame { payload: output[..length].into(), onset: None, level: SILENCE_LEVEL };
        Ok(Voice { frequency, frames, silence })
    }
}

/// The burst's onset in the first frame of cycle `cycle`, in samples.
fn onset_of(cycle: usize) -> usize {
    (cycle * ONSET_STEP) % FRAME
}

/// The loop's samples: [`CYCLES`] cycles, each a burst from its onset, then silence.
fn bursts(frequency: f32) -> Vec<f32> {
    let cycle = CYCLE_FRAMES * FRAME;
    let mut samples = vec![0f32; CYCLES * cycle];
    for c in 0..CYCLES {
        let start = c * cycle + onset_of(c);
        for (n, sample) in samples[start..start + BURST].iter_mut().enumerate() {
            let phase = std::f32::consts::TAU * frequency * n as f32 / RATE as f32;
            *sample = AMPLITUDE * phase.sin();
        }
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cycle_starts_a_burst_at_its_own_phase() {
        let voice = Voice::encode(line_tone(0), 0).expect("encode");
        assert_eq!(voice.frames.len(), CYCLES * CYCLE_FRAMES);
        let onsets: Vec<usize> = voice.frames.iter().filter_map(|f| f.onset).collect();
        assert_eq!(onsets, [0, 336, 672, 48, 384, 720, 96, 432]);
        // A burst's frames carry the tone's level; the cycle's last 100 ms are silent.
        let levels: Vec<i8> = voice.frames[..CYCLE_FRAMES].iter().map(|f| f.level).collect();
        assert!(levels[..20].iter().all(|l| *l == TONE_LEVEL), "{levels:?}");
        assert!(levels[20..].iter().all(|l| *l == SILENCE_LEVEL), "{levels:?}");
    }

    #[test]
    fn line_tones_are_whole_cycles_in_a_frame_and_apart() {
        for index in 0..8 {
            let tone = line_tone(index);
            assert_eq!(tone % 50.0, 0.0, "{tone}");
            assert!(tone < 2000.0);
        }
        assert_ne!(line_tone(0), line_tone(1));
    }
}
