//! One mix's Opus encoder: the limiter in front of it, and its packet, reused every tick.

use audiopus::coder::Encoder;
use audiopus::softclip::SoftClip;
use audiopus::{Application, Bitrate, Channels, SampleRate};

use crate::jitter::FRAME_SAMPLES;

/// Room for one encoded frame (libopus never writes more than 1275 bytes for one frame).
const PACKET_CAPACITY: usize = 1500;

/// How every mix of a room is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderConfig {
    /// Bits per second of each mix (32 kbit/s: what a browser sends for a voice).
    pub bitrate: i32,
    /// libopus complexity 0–10; `None` keeps libopus's default (9 in Debian 12's 1.3). The
    /// encoders are most of a room's cost: 5 halves it (`examples/mixer_cost.rs`).
    pub complexity: Option<u8>,
    /// The loss the in-band FEC is sized for, in percent (FEC is on when above 0).
    pub fec_loss_percent: u8,
    /// After this many frames of digital silence in a row the encoder stops running and its
    /// last packet is sent again, until the mix is not silent any more (`None`: never). A room
    /// nobody talks in then costs no encode, nor does a lone talker's mix-minus; see the test
    /// `a_silent_room_stops_encoding_and_resumes_without_a_click`. Off by default (encodes per
    /// tick stay 1 + talkers who listen); `Some(10)` turns it on.
    pub idle_after_silent_frames: Option<u32>,
}

impl Default for EncoderConfig {
    fn default() -> EncoderConfig {
        EncoderConfig { bitrate: 32_000, complexity: None, fec_loss_percent: 10, idle_after_silent_frames: None }
    }
}

/// A mix's encoder, its limiter and its last packet.
#[derive(Debug)]
pub(crate) struct MixEncoder {
    encoder: Encoder,
    /// libopus's soft clipper: a sum above full scale is bent smoothly back under it instead
    /// of wrapping or clipping hard. Its memory carries the bend across frames.
    limiter: SoftClip,
    input: Vec<f32>,
    packet: Vec<u8>,
    len: usize,
    /// Frames of digital silence in a row, and after how many the encoder idles.
    silent_frames: u32,
    idle_after: Option<u32>,
}

impl MixEncoder {
    pub(crate) fn new(config: EncoderConfig) -> Result<MixEncoder, audiopus::Error> {
        let mut encoder = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip)?;
        encoder.set_bitrate(Bitrate::BitsPerSecond(config.bitrate))?;
        encoder.set_inband_fec(config.fec_loss_percent > 0)?;
        encoder.set_packet_loss_perc(config.fec_loss_percent)?;
        if let Some(complexity) = config.complexity {
            encoder.set_complexity(complexity)?;
        }
        Ok(MixEncoder {
            encoder,
            limiter: SoftClip::new(Channels::Mono),
            input: vec![0.0; FRAME_SAMPLES],
            packet: vec![0; PACKET_CAPACITY],
            len: 0,
            silent_frames: 0,
            idle_after: config.idle_after_silent_frames,
        })
    }

    /// Limits and encodes one frame of `mix` (a sum, possibly above full scale); `false` when
    /// the encoder idles in a silence and its last packet stands.
    pub(crate) fn encode(&mut self, mix: &[f32]) -> Result<bool, audiopus::Error> {
        let silent = mix.iter().all(|sample| *sample == 0.0);
        self.silent_frames = if silent { self.silent_frames.saturating_add(1) } else { 0 };
        if self.idle_after.is_some_and(|after| self.silent_frames > after) {
            self.input.fill(0.0);
            return Ok(false);
        }
        self.input.copy_from_slice(mix);
        self.limiter.apply(&mut self.input[..])?;
        self.len = self.encoder.encode_float(&self.input, &mut self.packet)?;
        Ok(true)
    }

    /// The last frame encoded, as limited: what a listener of this mix should hear.
    pub(crate) fn input(&self) -> &[f32] {
        &self.input
    }

    /// The last packet.
    pub(crate) fn packet(&self) -> &[u8] {
        &self.packet[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sum_over_full_scale_is_limited_not_wrapped() {
        let mut encoder = MixEncoder::new(EncoderConfig::default()).expect("encoder");
        let loud: Vec<f32> = (0..FRAME_SAMPLES).map(|n| 3.0 * (n as f32 / 20.0).sin()).collect();
        encoder.encode(&loud).expect("encode");
        let peak = encoder.input().iter().fold(0f32, |peak, s| peak.max(s.abs()));
        assert!(peak <= 1.0 && peak > 0.9, "peak {peak}");
        // The limited signal keeps the sum's sign everywhere (no wrap).
        assert!(loud.iter().zip(encoder.input()).all(|(a, b)| a * b >= 0.0));
        assert!(!encoder.packet().is_empty());
    }
}
