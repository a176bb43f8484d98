//! The card side of the pipeline: one capture of every input channel into a `tee`, one
//! `audiomixer` of every branch's output into the playback device. Branches (`branch/`) plug
//! into the tee and the mixer while this keeps running.
//!
//! ```text
//! pulsesrc ! F32 8ch ! tee ─┬─ branch A (request pad) …
//!                           └─ branch B …
//! audiotestsrc wave=silence ! F32 8ch ─┐
//! branch B's mix on channel k ─────────┴─ audiomixer ! F32 8ch ! capssetter (unpositioned) ! pulsesink
//! ```
//!
//! An ALSA device (`alsa:` id, or no sound server) is opened with alsasrc/alsasink instead, each
//! direction on its own (`card.rs`), with the reorder of `card::alsa_order` after alsasrc and
//! before alsasink in place of the capssetter.

use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use futures_util::StreamExt as _;
use gst::glib;
use gst::prelude::*;
use partyline_shared::bridge::Plan;

use crate::card::{Api, Card, alsa_order};
use crate::plan::CHANNELS;
use crate::state::Shared;

/// Capture buffering: pulsesrc/alsasrc `buffer-time` and `latency-time` (µs). GStreamer's
/// default is 200 ms / 10 ms.
const CAPTURE_BUFFER_US: i64 = 20_000;
const CAPTURE_PERIOD_US: i64 = 10_000;
/// Playback buffering (µs): a bit more than the capture, the mixer's output comes in 10 ms blocks.
const PLAYBACK_BUFFER_US: i64 = 30_000;
const PLAYBACK_PERIOD_US: i64 = 10_000;
/// The playback sink's `processing-deadline`, which GStreamer adds to the pipeline latency
/// (basesink's default is 20 ms). The only processing after the mixer is the copy into the
/// sound server, and the mixer already hands its block over one block ahead; the sink's own
/// ring buffer (≈ 20 ms, also part of the pipeline latency) is the margin. Measured: −20 ms of
/// tone latency, no lost tick and no dropout in the audio path test.
const PLAYBACK_DEADLINE: Duration = Duration::ZERO;
/// How bridged's streams are named in the sound server.
/// The mixer's output block.
const MIX_BLOCK: Duration = Duration::from_millis(10);
/// Latency the mixer allows its inputs on top of the jitter buffer, so that branches plugged in
/// later never raise the pipeline's latency. A branch's receive side reports exactly the jitter
/// buffer's latency (the decoder and the conversions add none), so this only covers Janus's
/// send jitter and the decoder's scheduling: 10 ms (it was 30: −20 ms of tone latency). Every
/// millisecond here is a millisecond of latency on every output.
const MIX_SLACK_MS: u64 = 10;

/// GStreamer's 7.1 layout, in its canonical order: front-left, front-right, front-center, lfe,
/// rear-left, rear-right, side-left, side-right. The card's channels are numbers, not speakers,
/// but GStreamer 1.22 needs positions: pulsesrc maps unpositioned channels to no PulseAudio
/// position and, for more than 6 channels, fails to create its stream ("Invalid argument"), and
/// audioconvert fixates an unpositioned 8-channel output back to this layout. So inside the
/// pipeline card channel k is position k of this list; on capture PulseAudio matches these
/// positions by name against the device's (README, "Channel order"); playback drops them
/// ([`PLAYBACK_CAPS`]).
const CARD_CHANNEL_MASK: u64 = 0xc3f;

/// What the playback's caps become just before pulsesink: the same samples, unpositioned. For
/// unpositioned caps pulsesink 1.22 creates its stream without a channel map, and PulseAudio
/// then gives the stream the sink's own map, so it copies output channel k to the device's
/// channel k whatever that map is (`aux0…aux7`, 7.1 in ALSA's order, …). With the 7.1 positions
/// PulseAudio would match names instead: silence on an `aux` device, channels swapped on a 7.1
/// device in another order. A `capssetter` only rewrites the caps: no copy, no remap.
const PLAYBACK_CAPS: &str = "audio/x-raw, channel-mask=(bitmask)0x0";

/// `audio/x-raw` F32 interleaved at `rate`, mono or the card's 8 channels.
pub fn raw_caps(rate: u32, channels: u32) -> gst::Caps {
    let mut caps = gst::Caps::builder("audio/x-raw")
        .field("format", "F32LE")
        .field("layout", "interleaved")
        .field("rate", i32::try_from(rate).unwrap_or(48_000))
        .field("channels", i32::try_from(channels).unwrap_or(1));
    if channels == u32::from(CHANNELS) {
        caps = caps.field("channel-mask", gst::Bitmask::new(CARD_CHANNEL_MASK));
    }
    caps.build()
}

/// The capture, the tee, the mixer and the playback, running.
#[derive(Debug)]
pub struct Base {
    pub pipeline: gst::Pipeline,
    pub tee: gst::Element,
    pub mixer: gst::Element,
    pub rate: u32,
    bus_task: tokio::task::JoinHandle<()>,
}

impl Base {
    /// Builds and starts the card side for `plan` and waits until it runs. Must run inside
    /// the tokio runtime (the bus is read by a task).
    pub fn start(plan: &Plan, card: &Card, shared: Arc<Shared>) -> anyhow::Result<Base> {
        let rate = plan.device_sample_rate;
        let card_caps = raw_caps(rate, u32::from(CHANNELS));
        let pipeline = gst::Pipeline::with_name("partyline");

        let src = card
            .input
            .builder(card.input.api.source(), "capture")
            .property("buffer-time", CAPTURE_BUFFER_US)
            .property("latency-time", CAPTURE_PERIOD_US)
            .build()
            .with_context(|| card.input.api.missing(card.input.api.source()))?;
        let capture_caps =
            gst::ElementFactory::make("capsfilter").name("capture-caps").property("caps", &card_caps).build()?;
        let mut capture = vec![src, capture_caps];
        if card.input.api == Api::Alsa {
            capture.extend(alsa_order(&card_caps, "capture-order")?);
        }
        let tee = gst::ElementFactory::make("tee").name("capture-tee").property("allow-not-linked", true).build()?;

        let silence = gst::ElementFactory::make("audiotestsrc")
            .name("silence")
            .property_from_str("wave", "silence")
            .property("is-live", true)
            .property("samplesperbuffer", i32::try_from(rate / 100).unwrap_or(480))
            .build()?;
        let silence_caps =
            gst::ElementFactory::make("capsfilter").name("silence-caps").property("caps", &card_caps).build()?;
        let jitter = u64::from(plan.latency_ms) + MIX_SLACK_MS;
        let mixer = gst::ElementFactory::make("audiomixer")
            .name("mixer")
            .property("output-buffer-duration", gst::ClockTime::from_nseconds(MIX_BLOCK.as_nanos() as u64).nseconds())
            .property("min-upstream-latency", gst::ClockTime::from_mseconds(jitter).nseconds())
            .property_from_str("start-time-selection", "first")
            .build()?;
        let mix_caps = gst::ElementFactory::make("capsfilter").name("mix-caps").property("caps", &card_caps).build()?;
        let sink = card
            .output
            .builder(card.output.api.sink(), "playback")
            .property("buffer-time", PLAYBACK_BUFFER_US)
            .property("latency-time", PLAYBACK_PERIOD_US)
            .property("processing-deadline", PLAYBACK_DEADLINE.as_nanos() as u64)
            .build()
            .with_context(|| card.output.api.missing(card.output.api.sink()))?;
        let mut playback = vec![silence, silence_caps, mixer.clone(), mix_caps];
        match card.output.api {
            Api::Pulse => playback.push(unposition()?),
            Api::Alsa => playback.extend(alsa_order(&card_caps, "playback-order")?),
        }
        playback.push(sink);
        capture.push(tee.clone());

        pipeline.add_many(&capture)?;
        pipeline.add_many(&playback)?;
        gst::Element::link_many(&capture)?;
        gst::Element::link_many(&playback)?;

        let bus = pipeline.bus().ok_or_else(|| anyhow!("pipeline without a bus"))?;
        if let Err(error) = pipeline.set_state(gst::State::Playing) {
            let why = first_error(&bus).unwrap_or_else(|| error.to_string());
            let _ = pipeline.set_state(gst::State::Null);
            bail!("the sound card pipeline does not start: {why}");
        }
        // Live: PLAYING is reached once the sink has its first buffer.
        let (result, _, _) = pipeline.state(gst::ClockTime::from_seconds(3));
        if result.is_err() || first_error_peek(&bus) {
            let why = first_error(&bus).unwrap_or_else(|| "it did not reach PLAYING within 3 s".into());
            let _ = pipeline.set_state(gst::State::Null);
            bail!("the sound card pipeline does not start: {why}");
        }
        let bus_task = tokio::spawn(watch_bus(bus, pipeline.downgrade(), shared));
        Ok(Base { pipeline, tee, mixer, rate, bus_task })
    }

    /// Stops everything (state `Null`).
    pub fn stop(&self) {
        let _ = self.pipeline.set_state(gst::State::Null);
        self.bus_task.abort();
    }
}

/// The `capssetter` that makes the playback's caps [`PLAYBACK_CAPS`]. PulseAudio only: the
/// remapping by name it avoids is PulseAudio's.
fn unposition() -> anyhow::Result<gst::Element> {
    let caps = gst::Caps::from_str(PLAYBACK_CAPS).context("PLAYBACK_CAPS")?;
    gst::ElementFactory::make("capssetter")
        .name("playback-unpositioned")
        .property("caps", &caps)
        .property("join", true)
        .property("replace", false)
        .build()
        .context("GStreamer element capssetter is missing (gstreamer1.0-plugins-good)")
}

fn first_error_peek(bus: &gst::Bus) -> bool {
    bus.peek().is_some_and(|m| matches!(m.view(), gst::MessageView::Error(_)))
}

fn first_error(bus: &gst::Bus) -> Option<String> {
    let message = bus.pop_filtered(&[gst::MessageType::Error])?;
    match message.view() {
        gst::MessageView::Error(error) => Some(describe_error(&message, error)),
        _ => None,
    }
}

fn describe_error(message: &gst::Message, error: &gst::message::Error) -> String {
    let source = message.src().map(|s| s.name().to_string()).unwrap_or_default();
    match error.debug() {
        Some(debug) => format!("{source}: {} ({debug})", error.error()),
        None => format!("{source}: {}", error.error()),
    }
}

/// The branch bin (`branch:NAME`) an object belongs to.
fn branch_of(object: &gst::Object) -> Option<String> {
    let mut current = Some(object.clone());
    while let Some(object) = current {
        let name = object.name();
        if name.starts_with("branch:") {
            return Some(name.to_string());
        }
        current = object.parent();
    }
    None
}

async fn watch_bus(bus: gst::Bus, pipeline: glib::WeakRef<gst::Pipeline>, shared: Arc<Shared>) {
    let mut messages = bus.stream();
    while let Some(message) = messages.next().await {
        match message.view() {
            gst::MessageView::Error(error) => {
                let text = describe_error(&message, error);
                match message.src().and_then(branch_of).and_then(|bin| shared.tap(&bin).map(|tap| (bin, tap))) {
                    Some((bin, tap)) => {
                        tracing::warn!("{bin}: {text}");
                        let _ = tap.faults.send(text);
                    }
                    None => {
                        tracing::error!("sound card pipeline: {text}");
                        shared.set_pipeline_error(Some(text));
                    }
                }
            }
            gst::MessageView::Warning(warning) => {
                let source = message.src().map(|s| s.name().to_string()).unwrap_or_default();
                tracing::warn!("{source}: {}", warning.error());
            }
            gst::MessageView::Element(element) => {
                let Some(structure) = element.structure() else { continue };
                if structure.name() != "level" {
                    continue;
                }
                let Some(tap) = message.src().and_then(branch_of).and_then(|bin| shared.tap(&bin)) else { continue };
                if let Ok(rms) = structure.get::<glib::ValueArray>("rms")
                    && let Some(db) = rms.iter().next().and_then(|v| v.get::<f64>().ok())
                {
                    tap.stats.set_level(db);
                }
            }
            gst::MessageView::Latency(_) => {
                if let Some(pipeline) = pipeline.upgrade() {
                    let _ = pipeline.recalculate_latency();
                    let mut query = gst::query::Latency::new();
                    if pipeline.query(&mut query) {
                        tracing::debug!("pipeline latency (live, min, max): {:?}", query.result());
                    }
                }
            }
            _ => {}
        }
    }
}
