//! Sample conversions between the card's F32 and GStreamer buffers: the card side's blocks
//! (F32LE) and the participants' codecs (S16LE, Opus's own format). Converted in a pass of their
//! own here rather than by an `audioconvert` in each pipeline: no element, no caps negotiation.

/// F32 samples as a buffer of little-endian bytes.
pub fn to_buffer(samples: &[f32]) -> gst::Buffer {
    gst::Buffer::from_mut_slice(samples.iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<u8>>())
}

/// F32LE bytes as samples, appended to `into`.
pub fn from_bytes(bytes: &[u8], into: &mut Vec<f32>) {
    into.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
}

/// Samples as a buffer of S16LE, Opus's own format: converted here rather than by an
/// `audioconvert` in each participant's pipeline (one pass, no element, no caps negotiation).
/// The send is limited before it gets here; anything out of range still clips, never wraps
/// (a float-to-integer `as` saturates).
pub fn to_s16_buffer(samples: &[f32]) -> gst::Buffer {
    let s16 = |s: f32| ((s * 32768.0).round() as i16).to_le_bytes();
    gst::Buffer::from_mut_slice(samples.iter().flat_map(|&s| s16(s)).collect::<Vec<u8>>())
}

/// S16LE bytes as samples, appended to `into`.
pub fn from_s16_bytes(bytes: &[u8], into: &mut Vec<f32>) {
    into.extend(bytes.chunks_exact(2).map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s16_conversion_round_trips_and_clips_instead_of_wrapping() {
        gst::init().expect("GStreamer");
        let samples = [0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5];
        let buffer = to_s16_buffer(&samples);
        let map = buffer.map_readable().expect("readable");
        let raw: Vec<i16> = map.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
        assert_eq!(raw, [0, 16384, -16384, 32767, -32768, 32767, -32768]);
        let mut back = Vec::new();
        from_s16_bytes(map.as_slice(), &mut back);
        for (got, want) in back.iter().zip(&samples[..3]) {
            assert!((got - want).abs() < 1e-4, "{got} for {want}");
        }
        assert!(back[3] > 0.999 && back[5] > 0.999 && back[6] == -1.0, "{back:?}");
    }
}
