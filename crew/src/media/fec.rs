//! Whether an Opus packet carries in-band FEC: the previous frame's low-bitrate copy (SILK's
//! LBRR), from which a receiver rebuilds that frame when its own packet was lost.
//!
//! A listener that decodes with FEC (`decode_fec`) gets audio whether or not the packet has
//! it: without, libopus conceals instead. To tell a rebuilt frame from a concealed one, as a
//! browser's statistics do, the flag is read from the packet itself. libopus 1.5 answers this
//! with `opus_packet_has_lbrr`; Debian 12 ships 1.3, so the two symbols in front of it are
//! range-decoded here (RFC 6716 §4.1 and §4.2.3): one voice-activity flag per SILK frame, then
//! the packet's LBRR flag.

/// Whether `packet` (one Opus packet of a single mono frame) carries FEC for the frame before.
/// Only SILK and hybrid packets can; CELT-only ones never do.
pub fn has_fec(packet: &[u8]) -> bool {
    let Some((&toc, frame)) = packet.split_first() else { return false };
    let config = toc >> 3;
    // RFC 6716 §3.1: configs 0–11 SILK-only, 12–15 hybrid, 16–31 CELT-only.
    if config >= 16 || toc & 0b11 != 0 {
        return false; // CELT, or several frames in the packet (not what a 20 ms talker sends)
    }
    // SILK frames in the packet's one Opus frame: 10 and 20 ms hold one, 40 ms two, 60 ms three.
    let silk_frames = match (config % 4, config < 12) {
        (2, true) => 2,
        (3, true) => 3,
        _ => 1,
    };
    let mut decoder = RangeDecoder::new(frame);
    for _ in 0..silk_frames {
        decoder.bit(); // voice activity
    }
    decoder.bit()
}

/// The opening of RFC 6716's range decoder (§4.1), as far as equiprobable bits.
struct RangeDecoder<'a> {
    bytes: &'a [u8],
    next: usize,
    range: u32,
    value: u32,
    /// The last byte read, whose low bit goes into the next symbol.
    remainder: u32,
}

impl<'a> RangeDecoder<'a> {
    fn new(bytes: &'a [u8]) -> RangeDecoder<'a> {
        let mut decoder = RangeDecoder { bytes, next: 0, range: 128, value: 0, remainder: 0 };
        decoder.remainder = decoder.byte();
        decoder.value = 127 - (decoder.remainder >> 1);
        decoder.normalize();
        decoder
    }

    /// The next byte, 0 past the end (§4.1.1).
    fn byte(&mut self) -> u32 {
        let byte = self.bytes.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        u32::from(byte)
    }

    /// Keeps the range over 2^23, a byte at a time (`ec_dec_normalize`; 32-bit arithmetic that
    /// wraps, as the reference's).
    fn normalize(&mut self) {
        while self.range <= 1 << 23 {
            self.range <<= 8;
            let previous = self.remainder;
            self.remainder = self.byte();
            let symbol = ((previous << 8) | self.remainder) >> 1;
            self.value = (self.value.wrapping_shl(8).wrapping_add(255 & !symbol)) & ((1 << 31) - 1);
        }
    }

    /// One bit of probability 1/2 (`ec_dec_bit_logp(dec, 1)`).
    fn bit(&mut self) -> bool {
        let half = self.range >> 1;
        let one = self.value < half;
        if one {
            self.range = half;
        } else {
            self.value -= half;
            self.range -= half;
        }
        self.normalize();
        one
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audiopus::coder::Encoder;
    use audiopus::{Application, Bitrate, Channels, SampleRate};

    /// 50 packets of a 450 Hz tone at 32 kbit/s, as a browser's Opus sends a voice.
    fn packets(fec: bool) -> Vec<Vec<u8>> {
        let mut encoder = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip).expect("encoder");
        encoder.set_bitrate(Bitrate::BitsPerSecond(32_000)).expect("bitrate");
        encoder.set_inband_fec(fec).expect("fec");
        encoder.set_packet_loss_perc(if fec { 10 } else { 0 }).expect("loss");
        let mut output = [0u8; 1500];
        (0..50)
            .map(|k| {
                let frame: Vec<f32> = (0..960)
                    .map(|n| 0.25 * (std::f32::consts::TAU * 450.0 * (k * 960 + n) as f32 / 48_000.0).sin())
                    .collect();
                let length = encoder.encode_float(&frame, &mut output).expect("encode");
                output[..length].to_vec()
            })
            .collect()
    }

    #[test]
    fn a_packet_encoded_with_fec_says_so_and_one_without_does_not() {
        // SILK copies only a frame it judged voice, and a steady tone's voicing comes and goes
        // (measured: 31 of the first 32 packets, then 10 of the last 18).
        let with = packets(true).iter().filter(|p| has_fec(p)).count();
        assert!(with >= 30, "{with} of 50 packets with FEC");
        assert_eq!(packets(false).iter().filter(|p| has_fec(p)).count(), 0);
    }

    #[test]
    fn celt_and_empty_packets_carry_none() {
        assert!(!has_fec(&[]));
        assert!(!has_fec(&[31 << 3, 0xff, 0xff]), "CELT-only");
        assert!(!has_fec(&[(1 << 3) | 1, 0xff]), "two frames");
    }
}
