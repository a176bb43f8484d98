//! Channels by number: AES67 numbers a stream's channels (channel k of the stream is card
//! channel k), while GStreamer's raw-audio RTP (de)payloaders place speakers: given positioned
//! audio, `rtpL24pay` reorders it into RFC 3551's order for the count, and `rtpL24depay`, for a
//! stream whose SDP has no `channel-order` (AES67's), reorders the wire's channels into
//! GStreamer's speaker order (8 channels: 5–6 and 7–8 swapped). The send hands the payloader
//! unpositioned audio; the receive learns the depayloader's order and undoes it in its matrix.

use anyhow::anyhow;
use gst::prelude::*;
use partyline_shared::aes67::{Encoding, RATE};

/// An `audioconvert` whose channel `k` of `to` channels is channel `source[k]` of `from`
/// (silence past the end of `source`): stream and card channels by number, not by speaker
/// position.
pub fn by_number(name: &str, from: usize, to: usize, source: &[usize]) -> anyhow::Result<gst::Element> {
    let rows = (0..to)
        .map(|out| gst::Array::new((0..from).map(|input| if source.get(out) == Some(&input) { 1.0_f32 } else { 0.0 })));
    Ok(gst::ElementFactory::make("audioconvert").name(name).property("mix-matrix", gst::Array::new(rows)).build()?)
}

/// Card channel k is stream channel k: the identity order.
pub fn in_order(channels: usize) -> Vec<usize> {
    (0..channels).collect()
}

/// The depayloader of `encoding`.
pub fn depayloader(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::L16 => "rtpL16depay",
        Encoding::L24 => "rtpL24depay",
    }
}

/// The RTP caps of an AES67 stream of `channels` as SDP without `channel-order` gives them.
fn aes67_caps(encoding: Encoding, channels: usize) -> gst::Caps {
    gst::Caps::builder("application/x-rtp")
        .field("media", "audio")
        .field("clock-rate", RATE as i32)
        .field("encoding-name", encoding.name())
        .field("channels", channels as i32)
        .field("payload", 96)
        .build()
}

/// Where GStreamer's depayloader puts each channel of a stream of `channels`: for wire channel
/// k, its channel in the depayloader's output. An SDP without `channel-order` (AES67's) gets
/// RFC 3551's default order for the count, which the depayloader reorders into GStreamer's
/// speaker order (8 channels: wire 5–6 and 7–8 swapped), while AES67 numbers channels, it
/// never places speakers. Learnt by running the depayloader on one marked packet, so it
/// follows GStreamer's own table whatever its version.
pub fn depayloader_order(encoding: Encoding, channels: usize) -> anyhow::Result<Vec<usize>> {
    let source = gst_app::AppSrc::builder().caps(&aes67_caps(encoding, channels)).format(gst::Format::Time).build();
    let depay = gst::ElementFactory::make(depayloader(encoding)).build()?;
    let sink = gst_app::AppSink::builder().sync(false).build();
    let pipeline = gst::Pipeline::new();
    pipeline.add_many([source.upcast_ref(), &depay, sink.upcast_ref()])?;
    gst::Element::link_many([source.upcast_ref(), &depay, sink.upcast_ref()])?;
    let width = if encoding == Encoding::L24 { 3 } else { 2 };
    // An RTP header (version 2, payload type 96), then one frame: wire channel k carries k + 1.
    let mut packet = vec![0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
    for k in 0..channels {
        packet.extend(&(k as u32 + 1).to_be_bytes()[4 - width..]);
    }
    let mut buffer = gst::Buffer::from_mut_slice(packet);
    buffer.get_mut().expect("a new buffer").set_pts(gst::ClockTime::ZERO);
    pipeline.set_state(gst::State::Playing)?;
    let pulled = source.push_buffer(buffer).ok().and_then(|_| sink.try_pull_sample(gst::ClockTime::from_seconds(2)));
    let _ = pipeline.set_state(gst::State::Null);
    let sample = pulled.ok_or_else(|| anyhow!("{} gives nothing for a marked packet", depayloader(encoding)))?;
    let map = sample.buffer().ok_or_else(|| anyhow!("an empty sample"))?.map_readable()?;
    let out: Vec<usize> = map
        .chunks_exact(width)
        .map(|b| b.iter().fold(0_usize, |v, byte| v << 8 | usize::from(*byte)))
        .take(channels)
        .collect();
    (0..channels)
        .map(|k| out.iter().position(|v| *v == k + 1))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| anyhow!("{} loses channels: {out:?}", depayloader(encoding)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elements::raw_caps;
    use crate::mix::CHANNELS;

    /// One marked packet of `channels` (wire channel k carries k + 1, scaled to be heard)
    /// through the receive's depayloader and channel matrix: what each card input gets.
    fn card_inputs(encoding: Encoding, channels: usize) -> Vec<f32> {
        let source = gst_app::AppSrc::builder().caps(&aes67_caps(encoding, channels)).format(gst::Format::Time).build();
        let order = depayloader_order(encoding, channels).expect("the depayloader's order");
        let chain = [
            source.clone().upcast(),
            gst::ElementFactory::make(depayloader(encoding)).build().expect("depay"),
            by_number("channels", channels, CHANNELS, &order).expect("matrix"),
            gst::ElementFactory::make("capsfilter")
                .property("caps", raw_caps(RATE, CHANNELS as u32))
                .build()
                .expect("caps"),
        ];
        let sink = gst_app::AppSink::builder().sync(false).build();
        let pipeline = gst::Pipeline::new();
        pipeline.add_many(&chain).expect("add");
        pipeline.add(&sink).expect("add");
        gst::Element::link_many(&chain).expect("link");
        chain[3].link(&sink).expect("link");
        let width = if encoding == Encoding::L24 { 3 } else { 2 };
        let mut packet = vec![0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        for k in 0..channels {
            // k + 1 in the sample's top byte: 1/128 of full scale per step.
            let mut sample = vec![0; width];
            sample[0] = k as u8 + 1;
            packet.extend(sample);
        }
        pipeline.set_state(gst::State::Playing).expect("playing");
        source.push_buffer(gst::Buffer::from_mut_slice(packet)).expect("pushed");
        let sample = sink.try_pull_sample(gst::ClockTime::from_seconds(2)).expect("a sample");
        let _ = pipeline.set_state(gst::State::Null);
        let map = sample.buffer().expect("a buffer").map_readable().expect("readable");
        map.chunks_exact(4).take(CHANNELS).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * 128.0).collect()
    }

    /// Wire channel k of a stream reaches card input k, for every channel count and both
    /// encodings (GStreamer's depayloader alone would swap 5–6 and 7–8 of 8 channels).
    #[test]
    fn wire_channel_k_is_card_input_k() {
        gst::init().expect("GStreamer");
        for encoding in [Encoding::L16, Encoding::L24] {
            for channels in 1..=CHANNELS {
                let inputs = card_inputs(encoding, channels);
                let expected: Vec<f32> =
                    (0..CHANNELS).map(|k| if k < channels { k as f32 + 1.0 } else { 0.0 }).collect();
                let rounded: Vec<f32> = inputs.iter().map(|v| v.round()).collect();
                assert_eq!(rounded, expected, "{encoding:?} × {channels}: {inputs:?}");
            }
        }
    }
}
