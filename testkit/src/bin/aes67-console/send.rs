//! The console's own stream: the send pipeline ([`Sender`]) and the tone it carries, steady or
//! in bursts.

use std::f64::consts::{PI, SQRT_2};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use partyline_shared::aes67::{Aes67Stream, Encoding, RATE};
use serde_json::json;

use super::{Args, PACKET_FRAMES, element, emit, play_on, report_errors, sample_bytes};

/// The send pipeline: samples made here (appsrc), timestamped with the PTP time of their first
/// sample, payloaded in 1 ms packets with RTP time = timestamp × 48000 (`timestamp-offset` 0),
/// sent by `udpsink` synchronised to the PTP clock `--send-delay-us` after their RTP time.
pub(crate) struct Sender {
    pipeline: gst::Pipeline,
}

impl Sender {
    pub(crate) fn start(args: &Args, clock: &gst::Clock, stream: &Aes67Stream) -> Result<Sender, String> {
        let channels = usize::from(stream.channels);
        let format = match stream.encoding {
            Encoding::L16 => "S16BE",
            Encoding::L24 => "S24BE",
        };
        let caps = gst::Caps::builder("audio/x-raw")
            .field("format", format)
            .field("layout", "interleaved")
            .field("rate", RATE as i32)
            .field("channels", channels as i32)
            .field("channel-mask", gst::Bitmask::new(0))
            .build();
        // 20 packets ahead at most; no latency of its own: udpsink sends at timestamp + ts-offset.
        let source = gst_app::AppSrc::builder()
            .caps(&caps)
            .format(gst::Format::Time)
            .is_live(true)
            .do_timestamp(false)
            .block(true)
            .max_buffers(20)
            .min_latency(0)
            .build();
        let pay = gst::ElementFactory::make(match stream.encoding {
            Encoding::L16 => "rtpL16pay",
            Encoding::L24 => "rtpL24pay",
        })
        .property("min-ptime", 1_000_000i64)
        .property("max-ptime", 1_000_000i64)
        .property("timestamp-offset", stream.media_clock_offset)
        .property("pt", u32::from(stream.payload_type))
        .build()
        .map_err(|e| format!("payloader: {e}"))?;
        let sink = element("udpsink")?;
        sink.set_property("host", stream.group.to_string());
        sink.set_property("port", i32::from(stream.port));
        sink.set_property("bind-address", args.address.to_string());
        sink.set_property("multicast-iface", args.iface.as_str());
        sink.set_property("auto-multicast", false);
        sink.set_property("ttl-mc", i32::from(stream.ttl));
        sink.set_property("sync", true);
        // Its default (20 ms) adds to the pipeline's latency: every packet would leave 20 ms late.
        sink.set_property("processing-deadline", 0u64);
        sink.set_property("ts-offset", (args.send_delay_us * 1000) as i64);
        let pipeline = gst::Pipeline::with_name("send");
        pipeline.add_many([source.upcast_ref(), &pay, &sink]).map_err(|e| format!("send pipeline: {e}"))?;
        gst::Element::link_many([source.upcast_ref(), &pay, &sink]).map_err(|e| format!("send pipeline: {e}"))?;
        report_errors(&pipeline, "send");

        // The first packet 20 ms from now, on a whole millisecond of PTP time.
        let first_ms = clock.time().mseconds() + 20;
        let tone = Tone {
            channels,
            encoding: stream.encoding,
            channel: usize::from(args.tone_channel),
            amplitude: 10f64.powf(args.tone_dbfs / 20.0) * SQRT_2,
            step: 2.0 * PI * args.tone_hz / f64::from(RATE),
            bursts: args.bursts,
        };
        let frame = first_ms * PACKET_FRAMES;
        let phase = 2.0 * PI * (args.tone_hz * frame as f64 / f64::from(RATE)).fract();
        std::thread::spawn(move || tone.feed(&source, frame, phase));
        play_on(&pipeline, clock)?;
        emit(&json!({"event": "sending", "group": stream.group, "port": stream.port, "sdp": stream.to_sdp()}));
        Ok(Sender { pipeline })
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// The sine of the send stream.
struct Tone {
    channels: usize,
    encoding: Encoding,
    /// From 1; 0: none.
    channel: usize,
    amplitude: f64,
    /// Radians a sample.
    step: f64,
    /// 400 ms on in every 500 ms.
    bursts: bool,
}

/// A burst cycle and the burst in it, in samples (500 ms and 400 ms at 48 kHz).
const CYCLE: u64 = 24_000;
const BURST: u64 = 19_200;

impl Tone {
    /// Pushes 1 ms buffers from sample `frame` (of PTP time: frame / 48000 s) on, until the
    /// pipeline stops; appsrc blocks while it holds 20.
    fn feed(&self, source: &gst_app::AppSrc, mut frame: u64, mut phase: f64) {
        let width = sample_bytes(self.encoding);
        loop {
            let mut bytes = Vec::with_capacity(PACKET_FRAMES as usize * self.channels * width);
            for i in 0..PACKET_FRAMES {
                let sounding = !self.bursts || (frame + i) % CYCLE < BURST;
                let value = if sounding { self.amplitude * phase.sin() } else { 0.0 };
                phase = (phase + self.step) % (2.0 * PI);
                for c in 1..=self.channels {
                    let sample = if c == self.channel { value } else { 0.0 };
                    match self.encoding {
                        Encoding::L24 => {
                            let v = (sample * 8_388_607.0).round().clamp(-8_388_608.0, 8_388_607.0) as i32;
                            bytes.extend_from_slice(&v.to_be_bytes()[1..]);
                        }
                        Encoding::L16 => {
                            let v = (sample * 32_767.0).round().clamp(-32_768.0, 32_767.0) as i16;
                            bytes.extend_from_slice(&v.to_be_bytes());
                        }
                    }
                }
            }
            let mut buffer = gst::Buffer::from_mut_slice(bytes);
            {
                let buffer = buffer.get_mut().expect("a new buffer is writable");
                // Exact: a packet starts on a whole millisecond.
                buffer.set_pts(gst::ClockTime::from_nseconds(frame / PACKET_FRAMES * 1_000_000));
                buffer.set_duration(gst::ClockTime::from_mseconds(1));
                buffer.set_offset(frame);
                buffer.set_offset_end(frame + PACKET_FRAMES);
            }
            if source.push_buffer(buffer).is_err() {
                return;
            }
            frame += PACKET_FRAMES;
        }
    }
}
