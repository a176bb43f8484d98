//! A branch's GStreamer elements, in one bin `branch:NAME` inside the card side's pipeline,
//! plugged into its tee and mixer by request pads:
//!
//! ```text
//! tee ─ queue ! audioconvert mix-matrix (input channel, F32 → S16) ! level [! audioresample] ! opusenc ! rtpopuspay ─ webrtcbin
//! webrtcbin ─ rtpopusdepay ! opusdec (mono) [! audioresample] ! audioconvert mix-matrix (output channel, S16 → F32) ─ audiomixer
//! ```
//!
//! One audioconvert per direction does both the channel routing and the sample format; the
//! resamplers are there only when the card does not run at Opus's 48 kHz.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use gst::glib;
use gst::prelude::*;
use gst_rtp::prelude::*;
use partyline_shared::bridge::PlanUser;
use tokio::sync::mpsc;

use super::negotiation::{self, RtcEvent};
use super::{Context, Stages};
use crate::pipeline::{Base, raw_caps};
use crate::plan::CHANNELS;
use crate::state::{BranchStats, Shared, Tap};

/// Opus frame (ms): the AudioBridge mixes 20 ms frames.
const OPUS_FRAME_MS: &str = "20";
/// Opus's rate (RTP clock and the encoder's input).
const OPUS_RATE: u32 = 48_000;
/// RTP payload type of Opus in the offer.
const OPUS_PT: u32 = 111;
/// RFC 6464 client-to-mixer audio level.
const AUDIO_LEVEL_URI: &str = "urn:ietf:params:rtp-hdrext:ssrc-audio-level";
/// The longest wait for the tee to be between two buffers when a branch is unplugged (it
/// pushes every 10 ms while the card runs, and at once when it does not).
const UNPLUG_TIMEOUT: Duration = Duration::from_secs(1);

/// A branch's bin, plugged into the card side; unplugged when dropped.
#[derive(Debug)]
pub struct Bin {
    bin: gst::Bin,
    webrtc: gst::Element,
    base: Arc<Base>,
    shared: Arc<Shared>,
    tee_pad: Option<gst::Pad>,
    mixer_pad: Option<gst::Pad>,
}

impl Bin {
    /// Builds the bin of `user`, plugs it into the running card side, and returns it with
    /// webrtcbin's events for the negotiation. `faults` gets the bin's GStreamer errors.
    pub fn build(
        context: &Context,
        user: &PlanUser,
        stats: Arc<BranchStats>,
        faults: mpsc::UnboundedSender<String>,
        stages: &Stages,
    ) -> anyhow::Result<(Bin, mpsc::UnboundedReceiver<RtcEvent>)> {
        let rate = context.base.rate;
        let name = format!("branch:{}", user.name);
        let bin = gst::Bin::with_name(&name);

        // Send: the input channel, encoded.
        let queue = gst::ElementFactory::make("queue")
            .property("max-size-buffers", 0u32)
            .property("max-size-bytes", 0u32)
            .property("max-size-time", gst::ClockTime::from_mseconds(60).nseconds())
            .property_from_str("leaky", "downstream")
            .build()?;
        // One audioconvert picks the input channel and converts F32 to the encoder's S16 in the
        // same pass (no dither: it costs a random number per sample and is inaudible at 16
        // bits on speech).
        let pick = gst::ElementFactory::make("audioconvert")
            .property("mix-matrix", selector(1, u32::from(CHANNELS), 0, u32::from(user.input_channel)))
            .property_from_str("dithering", "none")
            .build()?;
        let mono = caps_filter(&s16_mono(rate))?;
        let level = gst::ElementFactory::make("level")
            .property("interval", gst::ClockTime::from_mseconds(100).nseconds())
            .property("post-messages", true)
            .property("audio-level-meta", true)
            .build()?;
        // Opus takes 48 kHz: a resampler only for cards at another rate.
        let mut send = vec![queue.clone(), pick, mono, level];
        if rate != OPUS_RATE {
            send.push(gst::ElementFactory::make("audioresample").build()?);
            send.push(caps_filter(&s16_mono(OPUS_RATE))?);
        }
        let encoder = gst::ElementFactory::make("opusenc")
            .property("bitrate", i32::try_from(user.bitrate_kbps * 1000).unwrap_or(64_000))
            .property_from_str("frame-size", OPUS_FRAME_MS)
            .property_from_str("audio-type", "restricted-lowdelay")
            .build()
            .context("GStreamer element opusenc is missing (gstreamer1.0-plugins-base)")?;
        let payloader = gst::ElementFactory::make("rtpopuspay").property("pt", OPUS_PT).build()?;
        let extension = gst_rtp::RTPHeaderExtension::create_from_uri(AUDIO_LEVEL_URI)
            .ok_or_else(|| anyhow!("no RTP header extension for {AUDIO_LEVEL_URI}"))?;
        extension.set_id(1);
        payloader.emit_by_name::<()>("add-extension", &[&extension]);
        let webrtc = gst::ElementFactory::make("webrtcbin")
            .property_from_str("bundle-policy", "max-bundle")
            .property("latency", context.latency_ms)
            .build()
            .context("GStreamer element webrtcbin is missing (gstreamer1.0-plugins-bad, gstreamer1.0-nice)")?;
        send.extend([encoder, payloader.clone()]);
        bin.add_many(&send)?;
        bin.add(&webrtc)?;
        gst::Element::link_many(&send)?;
        let send_pad = webrtc.request_pad_simple("sink_%u").ok_or_else(|| anyhow!("webrtcbin gave no sink pad"))?;
        let pay_src = payloader.static_pad("src").ok_or_else(|| anyhow!("rtpopuspay without src pad"))?;
        pay_src.link(&send_pad)?;
        count_packets(&pay_src, &stats, true);
        let transceiver = send_pad.property::<gst_webrtc::WebRTCRTPTransceiver>("transceiver");
        let direction = if user.output_channel.is_some() {
            gst_webrtc::WebRTCRTPTransceiverDirection::Sendrecv
        } else {
            gst_webrtc::WebRTCRTPTransceiverDirection::Sendonly
        };
        transceiver.set_property("direction", direction);
        restrict_ice(&webrtc, &context.ice_addresses)?;

        // Receive: the room's mix onto the output channel.
        let receive = match user.output_channel {
            Some(channel) => {
                let depay = gst::ElementFactory::make("rtpopusdepay").build()?;
                let decoder = gst::ElementFactory::make("opusdec").property("plc", true).build()?;
                // The decoder downmixes to mono itself; then, for cards not at 48 kHz, a
                // resampler; then one audioconvert converts S16 to F32 and places the mono
                // signal on the output channel in the same pass.
                let mut receive = vec![depay.clone(), decoder, caps_filter(&s16_mono(OPUS_RATE))?];
                if rate != OPUS_RATE {
                    receive.push(gst::ElementFactory::make("audioresample").build()?);
                    receive.push(caps_filter(&s16_mono(rate))?);
                }
                let place = gst::ElementFactory::make("audioconvert")
                    .property("mix-matrix", selector(u32::from(CHANNELS), 1, u32::from(channel), 0))
                    .build()?;
                let card = caps_filter(&raw_caps(rate, u32::from(CHANNELS)))?;
                receive.extend([place, card.clone()]);
                bin.add_many(&receive)?;
                gst::Element::link_many(&receive)?;
                let depay_sink = depay.static_pad("sink").ok_or_else(|| anyhow!("depayloader without sink"))?;
                count_packets(&depay_sink, &stats, false);
                let card_src = card.static_pad("src").ok_or_else(|| anyhow!("capsfilter without src"))?;
                bin.add_pad(&gst::GhostPad::with_target(&card_src)?)?;
                Some(depay_sink)
            }
            None => None,
        };
        let bin_weak = bin.downgrade();
        webrtc.connect_pad_added(move |_, pad| {
            if pad.direction() != gst::PadDirection::Src {
                return;
            }
            if let Some(sink) = &receive
                && !sink.is_linked()
                && pad.link(sink).is_ok()
            {
                return;
            }
            // Nothing to play it on: drop it.
            let Some(bin) = bin_weak.upgrade() else { return };
            if let Ok(fakesink) = gst::ElementFactory::make("fakesink").property("async", false).build()
                && bin.add(&fakesink).is_ok()
            {
                let _ = fakesink.sync_state_with_parent();
                if let Some(sink) = fakesink.static_pad("sink") {
                    let _ = pad.link(&sink);
                }
            }
        });
        let rtc = negotiation::watch(&webrtc, stages);

        let queue_sink = queue.static_pad("sink").ok_or_else(|| anyhow!("queue without sink"))?;
        bin.add_pad(&gst::GhostPad::with_target(&queue_sink)?)?;

        // Plug into the running card side; on an error, the drop unplugs what was plugged.
        let base = &context.base;
        context.shared.add_tap(&name, Tap { stats, faults });
        let mut plugged = Bin {
            bin: bin.clone(),
            webrtc,
            base: base.clone(),
            shared: context.shared.clone(),
            tee_pad: None,
            mixer_pad: None,
        };
        base.pipeline.add(&bin)?;
        let tee_pad = base.tee.request_pad_simple("src_%u").ok_or_else(|| anyhow!("tee gave no pad"))?;
        plugged.tee_pad = Some(tee_pad.clone());
        let bin_sink = bin.static_pad("sink").ok_or_else(|| anyhow!("bin without sink"))?;
        if let Some(bin_src) = bin.static_pad("src") {
            let mixer_pad = base.mixer.request_pad_simple("sink_%u").ok_or_else(|| anyhow!("mixer gave no pad"))?;
            plugged.mixer_pad = Some(mixer_pad.clone());
            bin_src.link(&mixer_pad)?;
        }
        bin.sync_state_with_parent()?;
        tee_pad.link(&bin_sink)?;
        Ok((plugged, rtc))
    }

    pub fn webrtc(&self) -> &gst::Element {
        &self.webrtc
    }

    /// Takes the tee's pad away between two buffers, so the tee never pushes into a bin that
    /// is stopping (the card's capture would see a flushing branch).
    fn unplug_from_tee(&mut self) {
        let Some(tee_pad) = self.tee_pad.take() else { return };
        if !release_when_idle(&self.base.tee, &tee_pad) {
            // The tee is stuck (the card side is failing): take the pad away regardless.
            tracing::warn!("{}: the tee stayed busy for {UNPLUG_TIMEOUT:?}; unplugging anyway", self.bin.name());
            if let Some(peer) = tee_pad.peer() {
                let _ = tee_pad.unlink(&peer);
            }
            if tee_pad.parent().is_some() {
                self.base.tee.release_request_pad(&tee_pad);
            }
        }
    }
}

/// Unlinks `pad`, a request pad of `tee`, and releases it once no buffer is on its way
/// through it: an IDLE probe, which runs at once when the pad is idle, else from the
/// streaming thread between two buffers. Whether that happened within [`UNPLUG_TIMEOUT`].
fn release_when_idle(tee: &gst::Element, pad: &gst::Pad) -> bool {
    let (done_tx, done) = std::sync::mpsc::sync_channel(1);
    let tee_ref = tee.downgrade();
    pad.add_probe(gst::PadProbeType::IDLE, move |pad, _| {
        if let Some(peer) = pad.peer() {
            let _ = pad.unlink(&peer);
        }
        if let Some(tee) = tee_ref.upgrade() {
            tee.release_request_pad(pad);
        }
        let _ = done_tx.send(());
        gst::PadProbeReturn::Remove
    });
    done.recv_timeout(UNPLUG_TIMEOUT).is_ok()
}

impl Drop for Bin {
    /// Unplugs the bin: the tee stops feeding it, it stops (`Null`), the mixer forgets it.
    /// The other branches keep flowing.
    fn drop(&mut self) {
        self.unplug_from_tee();
        let _ = self.bin.set_state(gst::State::Null);
        if let Some(mixer_pad) = &self.mixer_pad {
            if let Some(peer) = mixer_pad.peer() {
                let _ = peer.unlink(mixer_pad);
            }
            self.base.mixer.release_request_pad(mixer_pad);
        }
        if self.bin.parent().is_some() {
            let _ = self.base.pipeline.remove(&self.bin);
        }
        self.shared.remove_tap(&self.bin.name());
    }
}

/// ICE only on the plan's addresses (when it names any), no UPnP discovery, UDP only.
fn restrict_ice(webrtc: &gst::Element, addresses: &[String]) -> anyhow::Result<()> {
    let ice = webrtc.property::<gst::Object>("ice-agent");
    for address in addresses {
        if !ice.emit_by_name::<bool>("add-local-ip-address", &[address]) {
            return Err(anyhow!("the ICE agent refused the local address {address}"));
        }
    }
    if ice.has_property("ice-tcp") {
        ice.set_property("ice-tcp", false);
    }
    if ice.has_property("agent") {
        let agent = ice.property::<glib::Object>("agent");
        if agent.has_property("upnp") {
            agent.set_property("upnp", false);
        }
    }
    Ok(())
}

fn caps_filter(caps: &gst::Caps) -> anyhow::Result<gst::Element> {
    Ok(gst::ElementFactory::make("capsfilter").property("caps", caps).build()?)
}

/// `audio/x-raw` S16 mono at `rate`: what Opus takes and gives.
fn s16_mono(rate: u32) -> gst::Caps {
    gst::Caps::builder("audio/x-raw")
        .field("format", "S16LE")
        .field("layout", "interleaved")
        .field("rate", i32::try_from(rate).unwrap_or(48_000))
        .field("channels", 1i32)
        .build()
}

/// A `mix-matrix` of `rows` × `columns` with a single 1.0 at (`row`, `column`).
fn selector(rows: u32, columns: u32, row: u32, column: u32) -> gst::Array {
    gst::Array::new(
        (0..rows).map(|r| gst::Array::new((0..columns).map(|c| if r == row && c == column { 1.0f32 } else { 0.0f32 }))),
    )
}

fn count_packets(pad: &gst::Pad, stats: &Arc<BranchStats>, sent: bool) {
    let stats = stats.clone();
    pad.add_probe(gst::PadProbeType::BUFFER | gst::PadProbeType::BUFFER_LIST, move |_, info| {
        let n = match &info.data {
            Some(gst::PadProbeData::Buffer(_)) => 1,
            Some(gst::PadProbeData::BufferList(list)) => list.len() as u64,
            _ => 0,
        };
        let counter = if sent { &stats.sent } else { &stats.received };
        counter.fetch_add(n, Ordering::Relaxed);
        gst::PadProbeReturn::Ok
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matrices that route one card channel: a row per output channel, a column per input.
    #[test]
    fn selectors_route_one_channel() {
        gst::init().expect("GStreamer");
        let rows = |matrix: &gst::Array| -> Vec<Vec<f32>> {
            matrix
                .iter()
                .map(|row| {
                    row.get::<gst::Array>().expect("a row").iter().map(|v| v.get::<f32>().expect("a gain")).collect()
                })
                .collect()
        };
        // Input channel 2 of 4 into the encoder's one channel.
        assert_eq!(rows(&selector(1, 4, 0, 2)), [[0.0, 0.0, 1.0, 0.0]]);
        // The decoder's one channel onto output channel 1 of 3.
        assert_eq!(rows(&selector(3, 1, 1, 0)), [[0.0], [1.0], [0.0]]);
    }

    /// A branch taken off a flowing tee: its pad released between two buffers, the other
    /// branch flowing on, no error.
    #[test]
    fn a_tee_pad_is_taken_away_while_buffers_flow_and_the_other_branch_goes_on() {
        gst::init().expect("GStreamer");
        let pipeline = gst::parse::launch(
            "audiotestsrc is-live=true samplesperbuffer=48 ! tee name=tee allow-not-linked=true \
             tee. ! queue ! fakesink name=kept sync=true  tee. ! queue name=taken ! fakesink sync=true",
        )
        .expect("pipeline")
        .downcast::<gst::Pipeline>()
        .expect("a pipeline");
        let by_name = |name: &str| pipeline.by_name(name).expect(name);
        let (tee, kept, taken) = (by_name("tee"), by_name("kept"), by_name("taken"));
        let count = |element: &gst::Element| {
            let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let pad = element.static_pad("sink").expect("sink");
            let seen = counter.clone();
            pad.add_probe(gst::PadProbeType::BUFFER, move |_, _| {
                seen.fetch_add(1, Ordering::Relaxed);
                gst::PadProbeReturn::Ok
            });
            counter
        };
        let (kept_buffers, taken_buffers) = (count(&kept), count(&taken));
        pipeline.set_state(gst::State::Playing).expect("playing");
        let bus = pipeline.bus().expect("bus");
        // Waits for `condition`, failing on the pipeline's first error.
        let wait = |what: &str, condition: &dyn Fn() -> bool| {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !condition() {
                assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
                if let Some(message) =
                    bus.timed_pop_filtered(gst::ClockTime::from_mseconds(5), &[gst::MessageType::Error])
                {
                    panic!("pipeline error while waiting for {what}: {message:?}");
                }
            }
        };
        wait("buffers in both branches", &|| taken_buffers.load(Ordering::Relaxed) > 5);
        let pad = taken.static_pad("sink").and_then(|sink| sink.peer()).expect("the tee's pad of the branch");
        assert!(release_when_idle(&tee, &pad), "released within {UNPLUG_TIMEOUT:?}");
        assert!(pad.parent().is_none() && !pad.is_linked(), "the pad is unlinked and released");
        assert_eq!(tee.src_pads().len(), 1, "the other branch keeps its pad");
        let (kept_then, taken_then) = (kept_buffers.load(Ordering::Relaxed), taken_buffers.load(Ordering::Relaxed));
        wait("the kept branch to go on", &|| kept_buffers.load(Ordering::Relaxed) > kept_then + 20);
        assert_eq!(taken_buffers.load(Ordering::Relaxed), taken_then, "the tee pushes nothing more into the branch");
        pipeline.set_state(gst::State::Null).expect("stopped");
    }
}
