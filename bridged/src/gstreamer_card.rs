//! The card's GStreamer backend: a direction on a PulseAudio device or an ALSA PCM is opened by
//! GStreamer's elements (`elements.rs`) in one pipeline. The capture's appsink hands each block
//! to the block callback (`card_mix.rs`) in the capture's streaming thread; the playback's appsrc,
//! whenever the sink has room, takes a period from the playback queue (silence when it is empty),
//! so the playback never underruns for lack of a block. Both streaming threads ask for
//! real-time scheduling (`realtime.rs`). The pipeline's errors go to the log and the status.
//!
//! ```text
//! pulsesrc ! F32 8ch ! appsink ─▶ BlockMixer::block ─▶ playback queue
//! appsrc (pulls the playback queue) ! F32 8ch ! capssetter (unpositioned) ! pulsesink
//! ```
//!
//! An ALSA device has the reorder of `elements::alsa_order` after the source and before the sink
//! in place of the capssetter.

use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail};
use futures_util::StreamExt as _;
use gst::prelude::*;
use partyline_shared::sync::lock;

use crate::card::{Api, Endpoint};
use crate::card_mix::BlockMixer;
use crate::elements::{alsa_order, capture_source, playback_sink, raw_caps, unposition};
use crate::jitter::Jitter;
use crate::mix::CHANNELS;
use crate::realtime::PromoteOnce;
use crate::samples::to_buffer;
use crate::state::StatusBoard;

/// The card's directions that GStreamer opens, in one pipeline.
#[derive(Debug)]
pub struct GStreamerCard {
    pipeline: gst::Pipeline,
    /// F32 at the card's rate in its channels: the caps of every link.
    caps: gst::Caps,
    /// Reads the pipeline's bus while it runs.
    bus_task: Option<tokio::task::JoinHandle<()>>,
}

impl GStreamerCard {
    /// An empty pipeline at `rate`: the directions are added to it, then it is started.
    pub fn new(rate: u32) -> GStreamerCard {
        let caps = raw_caps(rate, CHANNELS as u32);
        GStreamerCard { pipeline: gst::Pipeline::with_name("partyline"), caps, bus_task: None }
    }

    /// Adds the capture of `input`, each block mixed by `mixer`.
    pub fn add_capture(&self, input: &Endpoint, mixer: BlockMixer) -> anyhow::Result<()> {
        capture(&self.pipeline, input, &self.caps, mixer)
    }

    /// Adds the playback of `output`, pulling periods of `period` frames from `queue`.
    pub fn add_playback(&self, output: &Endpoint, period: u32, queue: Arc<Mutex<Jitter>>) -> anyhow::Result<()> {
        playback(&self.pipeline, output, &self.caps, period, queue)
    }

    /// Starts the pipeline and waits until it runs (or says why it does not). Must run inside
    /// the tokio runtime (the bus is read by a task).
    pub fn start(&mut self, board: Arc<StatusBoard>) -> anyhow::Result<()> {
        let pipeline = &self.pipeline;
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
        self.bus_task = Some(tokio::spawn(watch_bus(bus, board)));
        Ok(())
    }

    /// Stops the pipeline (state `Null`) and its bus watch.
    pub fn stop(&self) {
        let _ = self.pipeline.set_state(gst::State::Null);
        if let Some(bus_task) = &self.bus_task {
            bus_task.abort();
        }
    }
}

/// The GStreamer capture of a PulseAudio or ALSA device into an appsink whose callback mixes
/// each block (in the capture's streaming thread, which asks for real-time scheduling).
fn capture(
    pipeline: &gst::Pipeline,
    input: &Endpoint,
    card_caps: &gst::Caps,
    mut mixer: BlockMixer,
) -> anyhow::Result<()> {
    let src = capture_source(input)?;
    let capture_caps =
        gst::ElementFactory::make("capsfilter").name("capture-caps").property("caps", card_caps).build()?;
    let mut capture = vec![src, capture_caps];
    if input.api == Api::Alsa {
        capture.extend(alsa_order(card_caps, "capture-order")?);
    }
    let captured = gst_app::AppSink::builder()
        .property("name", "captured")
        .caps(card_caps)
        .sync(false)
        .async_(false)
        .max_buffers(4)
        .drop(true)
        .build();
    capture.push(captured.clone().upcast());
    pipeline.add_many(&capture)?;
    gst::Element::link_many(&capture)?;
    let mut promotion = PromoteOnce::new("the card's capture and mix");
    captured.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |sink| {
                promotion.here();
                let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                let buffer = sample.buffer().ok_or(gst::FlowError::Error)?;
                let map = buffer.map_readable().map_err(|_| gst::FlowError::Error)?;
                mixer.block(map.as_slice());
                Ok(gst::FlowSuccess::Ok)
            })
            .build(),
    );
    Ok(())
}

/// The GStreamer playback of a PulseAudio or ALSA device: an appsrc that, whenever the sink
/// has room, hands it a period from the playback `queue` (silence when the queue is empty).
fn playback(
    pipeline: &gst::Pipeline,
    output: &Endpoint,
    card_caps: &gst::Caps,
    period: u32,
    queue: Arc<Mutex<Jitter>>,
) -> anyhow::Result<()> {
    let mixed = gst_app::AppSrc::builder()
        .property("name", "mixed")
        .caps(card_caps)
        .format(gst::Format::Time)
        .is_live(true)
        .do_timestamp(true)
        .build();
    let mut playback = vec![mixed.clone().upcast::<gst::Element>()];
    if output.api == Api::Pulse {
        playback.push(unposition()?);
    } else {
        playback.extend(alsa_order(card_caps, "playback-order")?);
    }
    playback.push(playback_sink(output)?);
    pipeline.add_many(&playback)?;
    gst::Element::link_many(&playback)?;

    let mut next = vec![0.0; period as usize * CHANNELS];
    let mut promotion = PromoteOnce::new("the card's playback");
    mixed.set_callbacks(
        gst_app::AppSrcCallbacks::builder()
            .need_data(move |src, _| {
                promotion.here();
                lock(&queue).pull(&mut next);
                let _ = src.push_buffer(to_buffer(&next));
            })
            .build(),
    );
    Ok(())
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

pub async fn watch_bus(bus: gst::Bus, board: Arc<StatusBoard>) {
    let mut messages = bus.stream();
    while let Some(message) = messages.next().await {
        match message.view() {
            gst::MessageView::Error(error) => {
                let text = describe_error(&message, error);
                tracing::error!("sound card pipeline: {text}");
                board.set_pipeline_error(Some(text));
            }
            gst::MessageView::Warning(warning) => {
                let source = message.src().map(|s| s.name().to_string()).unwrap_or_default();
                tracing::warn!("{source}: {}", warning.error());
            }
            _ => {}
        }
    }
}
