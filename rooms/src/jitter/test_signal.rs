//! Test signals: tones and their Opus packets, as a browser's encoder would send them.

use audiopus::coder::{Decoder, Encoder};
use audiopus::{Application, Bitrate, Channels, SampleRate};

use super::FRAME_SAMPLES;

/// `frames` frames of a sine of `frequency` Hz at `amplitude`, continuous across frames.
pub(crate) fn tone(frequency: f32, amplitude: f32, frames: usize) -> Vec<Vec<f32>> {
    (0..frames)
        .map(|k| {
            (0..FRAME_SAMPLES)
                .map(|n| {
                    let t = (k * FRAME_SAMPLES + n) as f32 / 48_000.0;
                    amplitude * (std::f32::consts::TAU * frequency * t).sin()
                })
                .collect()
        })
        .collect()
}

/// A talker's encoder: 32 kbit/s voice, with in-band FEC for 10 % loss or without.
pub(crate) fn talker_encoder(fec: bool) -> Encoder {
    let mut encoder = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip).expect("encoder");
    encoder.set_bitrate(Bitrate::BitsPerSecond(32_000)).expect("bitrate");
    encoder.set_inband_fec(fec).expect("fec");
    encoder.set_packet_loss_perc(if fec { 10 } else { 0 }).expect("loss");
    encoder
}

/// `frames` encoded by a fresh talker's encoder.
pub(crate) fn packets(frames: &[Vec<f32>], fec: bool) -> Vec<Vec<u8>> {
    let encoder = talker_encoder(fec);
    let mut output = [0u8; 1500];
    frames
        .iter()
        .map(|frame| {
            let length = encoder.encode_float(frame, &mut output).expect("encode");
            output[..length].to_vec()
        })
        .collect()
}

/// A persistent listener's decoder of a stream of packets.
pub(crate) fn decode_all<'a>(packets: impl IntoIterator<Item = &'a [u8]>) -> Vec<f32> {
    let mut decoder = Decoder::new(SampleRate::Hz48000, Channels::Mono).expect("decoder");
    let mut pcm = vec![0f32; FRAME_SAMPLES];
    let mut all = Vec::new();
    for packet in packets {
        let decoded = decoder.decode_float(Some(packet), &mut pcm[..], false).expect("decode");
        all.extend_from_slice(&pcm[..decoded]);
    }
    all
}

pub(crate) fn rms(samples: &[f32]) -> f32 {
    (samples.iter().map(|s| s * s).sum::<f32>() / samples.len().max(1) as f32).sqrt()
}
