//! The card side: the capture and the playback of the sound card, and between them, in one
//! callback per captured block, the local matrix (`mix.rs`). Group participants
//! (`participant/`) exchange audio with it through their [`Feed`]s, never through pads of
//! this pipeline: a participant joining or leaving a room never touches the card's pipeline,
//! and a change of the plan's users is a new [`Matrix`] swapped in between two blocks.
//!
//! ```text
//! pulsesrc ! F32 8ch ! appsink ─┐ mix: outputs = each user's group minus itself, sends = each group's sum
//!                               │ limit, meter
//! appsrc ! F32 8ch ! capssetter (unpositioned) ! pulsesink ◀─ outputs
//!                        sends ─▶ each group participant's appsrc (Feed::send)
//!            Feed::remote (the room's mix, mono) ─▶ outputs
//! ```
//!
//! A direction on a PipeWire node (the sound server is pipewire-pulse and PipeWire's own socket
//! answers) is a stream of bridged's own instead (`pipewire_card.rs`): the capture mixes in
//! PipeWire's data thread, the playback takes one quantum per graph cycle. An ALSA device (`alsa:`
//! id, or no sound server) is opened with alsasrc/alsasink, with the reorder of
//! `card::alsa_order` after the source and before the sink in place of the capssetter. Each
//! direction is chosen on its own (`card.rs`).
//!
//! The playback pulls: whenever it has room it asks for a block, which comes from the playback
//! queue the mix fills ([`PLAYBACK_QUEUE`], [`PIPEWIRE_PLAYBACK_QUEUE`]), or is silence when the
//! queue is empty. So the playback never underruns for lack of a block, and the card → card
//! latency stays the capture's period plus the queue plus the playback's buffering, whatever the
//! scheduling did before: the queue trims what a start or a burst left. On PipeWire the capture
//! and the playback are two streams of one graph, run in one thread: a block is played in the
//! cycle it was captured in (`pipewire_card.rs`).

use std::str::FromStr as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use futures_util::StreamExt as _;
use gst::prelude::*;
use partyline_shared::bridge::{Plan, Transport};
use partyline_shared::janus::{TALK_LEVEL_DBOV, TALK_WINDOW_PACKETS};
use partyline_shared::sync::lock;

use crate::card::{Api, Card, Endpoint, alsa_order};
use crate::encoders::{EncoderInput, Encoders, Frame};
use crate::jitter::{Glitches, Jitter, QueueShape};
use crate::levels::{Meter, VoiceActivity};
use crate::mix::{CHANNELS, Limiter, Routing};
use crate::pipewire_card::{Capture, PipeWireCard, Playback};
use crate::realtime;
use crate::state::Shared;
use crate::tick::{Aligner, Shift, Step, TickPhase};

/// Capture buffering: pulsesrc/alsasrc `buffer-time` and `latency-time` (µs): the capture
/// delivers a block every `latency-time`, and each block is mixed and played at once. On
/// PipeWire the period is the graph's quantum that holds `latency-time` ([`period_frames`]).
const CAPTURE_BUFFER_US: i64 = 10_000;
const CAPTURE_PERIOD_US: i64 = 5_000;
/// Card blocks in a second: the window over which the queues trim.
const BLOCKS_PER_SECOND: usize = 1_000_000 / CAPTURE_PERIOD_US as usize;
/// Playback buffering of pulsesink/alsasink (µs): what the playback may queue, the card → card
/// latency's main part (PipeWire's playback takes a block per cycle: `pipewire_card.rs`).
const PLAYBACK_BUFFER_US: i64 = 20_000;
const PLAYBACK_PERIOD_US: i64 = 5_000;
/// The playback queue between the mix and the playback ([`Jitter`]): the capture may hand
/// over its blocks in bursts (a sound server's period can be longer than ours), and a burst
/// must not leave the playback empty between two. It starts at two blocks, keeps one block
/// beyond what the bursts need (more for a while after an underrun: [`Jitter`]), and trims over
/// windows of a second. Card → card on PulseAudio's
/// null sinks, 10 ms / 5 ms capture and this queue: medians of 20–25 ms (a 20 ms / 10 ms
/// capture and a 20 ms queue: 71 ms).
const PLAYBACK_QUEUE: QueueShape = QueueShape { start_ms: 10, margin_ms: 5, limit_ms: 200 };
/// The playback queue on PipeWire (`pipewire_card.rs`): the capture and the playback are two
/// streams of one graph, run in one thread, so each block is mixed and pulled within a cycle: the
/// queue starts with one block (a quantum of 5.33 ms holds this start) and needs no margin for
/// bursts; 1 ms lets it grow a step at each underrun.
const PIPEWIRE_PLAYBACK_QUEUE: QueueShape = QueueShape { start_ms: 5, margin_ms: 1, limit_ms: 200 };
/// The room's mix on its way to the outputs, over plain RTP: it starts with one decoded Opus
/// frame (the decoder hands over 20 ms at a time) and a margin for the arrivals' jitter. Janus
/// sends the mix right after each tick and the packets cross loopback straight to the decoder,
/// so a few milliseconds do: on `scripts/run`'s idle virtual card 3 ms ran dry about once a
/// minute, 5 ms not in four (an underrun grows the margin: [`Jitter`]).
const REMOTE_QUEUE_RTP: QueueShape = QueueShape { start_ms: 25, margin_ms: 5, limit_ms: 200 };
/// The same over WebRTC, where webrtcbin's jitter buffer hands the packets over at its own
/// pace: half a frame of margin (3 ms made the bench's WebRTC crew member's latency step several
/// times a run).
const REMOTE_QUEUE_WEBRTC: QueueShape = QueueShape { start_ms: 30, margin_ms: 10, limit_ms: 200 };
/// The group participants' Opus frame (ms): AudioBridge 1.1.2 mixes one packet per participant
/// per 20 ms tick, so 10 ms frames lose most of the audio (bridged/README.md, "Platform facts").
pub const OPUS_FRAME_MS: usize = 20;
/// How often at most the playback queue's glitches are logged.
const GLITCH_REPORT: std::time::Duration = std::time::Duration::from_secs(5);
/// How often the levels in the status are refreshed.
const METER_PERIOD_MS: usize = 100;

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
    if channels == CHANNELS as u32 {
        caps = caps.field("channel-mask", gst::Bitmask::new(CARD_CHANNEL_MASK));
    }
    caps.build()
}

/// One group's exchange with the card side, kept while the group has server audio users (a
/// participant rejoining its room finds it as it left it).
#[derive(Debug)]
pub struct Feed {
    pub room: String,
    /// The room's mix (mono, the card's rate), written by the participant's decoder.
    pub remote: Mutex<Jitter>,
    /// When the room's mix last arrived (plain RTP): Janus's tick, for the send's placement.
    pub tick: TickPhase,
    sending: Mutex<Sending>,
    rate: u32,
    /// Samples in one Opus frame at the card's rate.
    frame: usize,
    limiter: Mutex<Limiter<1>>,
    /// The send's voice activity: the card's talking in the room (Janus reports none for a
    /// plain-RTP participant).
    voice: Mutex<VoiceActivity>,
}

/// Where the group's send goes and how it is cut into frames.
#[derive(Debug, Default)]
struct Sending {
    /// The participant's encoder input, while it has one.
    encoder: Option<Arc<EncoderInput>>,
    /// The send gathered until it makes a whole Opus frame: the encoder waits for one anyway,
    /// and the encoders' thread is woken once per block that completes frames, not per block.
    unsent: Vec<f32>,
    /// The frames' placement against Janus's tick (plain RTP: `tick.rs`); none for WebRTC.
    aligner: Option<Aligner>,
    /// Samples still to drop before the next frame (a [`Shift::Drop`] longer than what was
    /// gathered).
    to_drop: usize,
}

impl Feed {
    pub fn new(room: &str, rate: u32, transport: Transport) -> Feed {
        let remote = match transport {
            Transport::Rtp => REMOTE_QUEUE_RTP,
            Transport::Webrtc => REMOTE_QUEUE_WEBRTC,
        };
        Feed {
            room: room.to_owned(),
            remote: Mutex::new(remote.jitter(rate, 1, BLOCKS_PER_SECOND)),
            tick: TickPhase::default(),
            sending: Mutex::new(Sending::default()),
            rate,
            frame: rate as usize * OPUS_FRAME_MS / 1000,
            limiter: Mutex::new(Limiter::new(rate)),
            voice: Mutex::new(VoiceActivity::new(rate, TALK_WINDOW_PACKETS, TALK_LEVEL_DBOV)),
        }
    }

    /// From now on the group's send goes to `encoder`, placed by `aligner` when there is one.
    pub fn connect(&self, encoder: Arc<EncoderInput>, aligner: Option<Aligner>) {
        *lock(&self.sending) = Sending { encoder: Some(encoder), aligner, ..Sending::default() };
    }

    /// The participant is gone: the send is dropped, and its tick forgotten.
    pub fn disconnect(&self) {
        *lock(&self.sending) = Sending::default();
        self.tick.forget();
    }

    /// Samples in one Opus frame at the card's rate (all zero: the packet that starts Janus).
    pub fn silent_frame(&self) -> Vec<f32> {
        vec![0.0; self.frame]
    }

    /// Cuts a block of the group's send into frames for the participant's encoder, added to
    /// `frames` (dropped while the group has no participant running).
    fn send(&self, block: &[f32], frames: &mut Vec<Frame>) {
        let mut sending = lock(&self.sending);
        let Sending { encoder, unsent, aligner, to_drop } = &mut *sending;
        let Some(encoder) = encoder.as_ref() else {
            unsent.clear();
            return;
        };
        unsent.extend_from_slice(block);
        drop_pending(unsent, to_drop);
        // Exactly a frame, as soon as the block that completes it is in: the encoder gets each
        // frame when it would have with a push per block.
        let block_duration = self.duration(block.len());
        while unsent.len() >= self.frame {
            let step = match aligner.as_mut() {
                // The frame ended before the samples of this block that follow it.
                Some(aligner) => self.place(aligner, self.duration(unsent.len() - self.frame), block_duration),
                None => Step { send: true, shift: Shift::None },
            };
            if step.send {
                frames.push((encoder.clone(), to_s16_buffer(&unsent[..self.frame])));
            }
            let repeat = match step.shift {
                Shift::None => 0,
                Shift::Drop(by) => {
                    *to_drop += self.samples(by);
                    0
                }
                Shift::Repeat(by) => self.samples(by).min(self.frame),
            };
            // A repeat plays the frame's last samples again at the head of the next one.
            unsent.drain(..self.frame - repeat);
            drop_pending(unsent, to_drop);
        }
    }

    /// The aligner's step for the frame that ended `ago`, its outcome logged once.
    fn place(&self, aligner: &mut Aligner, ago: Duration, block: Duration) -> Step {
        let before = (aligner.aligned(), aligner.unaligned());
        let ended = Instant::now().checked_sub(ago).unwrap_or_else(Instant::now);
        let step = aligner.frame(self.tick.lead(ended), block);
        if !before.0 && aligner.aligned() {
            tracing::info!("room {}: the card's send is in step with Janus's mixing tick", self.room);
        } else if !before.1 && aligner.unaligned() {
            tracing::warn!("room {}: no mix from Janus to place the card's send by: sending unaligned", self.room);
        }
        step
    }

    fn duration(&self, samples: usize) -> Duration {
        Duration::from_nanos(u64::try_from(samples as u128 * 1_000_000_000 / u128::from(self.rate)).unwrap_or(u64::MAX))
    }

    fn samples(&self, duration: Duration) -> usize {
        usize::try_from(duration.as_nanos() * u128::from(self.rate) / 1_000_000_000).unwrap_or(usize::MAX)
    }
}

/// Drops what is pending of a [`Shift::Drop`] from the head of `unsent`.
fn drop_pending(unsent: &mut Vec<f32>, to_drop: &mut usize) {
    let now = (*to_drop).min(unsent.len());
    unsent.drain(..now);
    *to_drop -= now;
}

/// The matrix in force: the routing and each of its groups' feed, in the routing's order.
#[derive(Debug, Default)]
pub struct Matrix {
    pub routing: Routing,
    pub feeds: Vec<Arc<Feed>>,
}

/// The card's capture and playback, running, and the matrix between them.
#[derive(Debug)]
pub struct Base {
    /// The card's GStreamer elements: the directions not on a PipeWire node.
    pub pipeline: gst::Pipeline,
    /// The directions on a PipeWire node, streams of bridged's own.
    pipewire: Option<PipeWireCard>,
    matrix: Arc<Mutex<Arc<Matrix>>>,
    bus_task: tokio::task::JoinHandle<()>,
}

impl Base {
    /// Builds and starts the card side for `plan` with `matrix` and waits until it runs.
    /// Must run inside the tokio runtime (the bus is read by a task).
    pub fn start(plan: &Plan, card: &Card, shared: Arc<Shared>, matrix: Matrix) -> anyhow::Result<Base> {
        let rate = plan.device_sample_rate;
        let card_caps = raw_caps(rate, CHANNELS as u32);
        let pipeline = gst::Pipeline::with_name("partyline");

        let matrix = Arc::new(Mutex::new(Arc::new(matrix)));
        let shape = if card.output.api == Api::PipeWire { PIPEWIRE_PLAYBACK_QUEUE } else { PLAYBACK_QUEUE };
        let queue = Arc::new(Mutex::new(shape.jitter(rate, CHANNELS, BLOCKS_PER_SECOND)));
        let mixing = Mixing::new(rate, matrix.clone(), queue.clone(), Encoders::start()?, shared.clone());
        // Each direction on a PipeWire node is a stream of bridged's own; the others are
        // GStreamer elements in `pipeline`.
        let capture = match card.input.api {
            Api::PipeWire => Some(Capture { endpoint: card.input.clone(), mixing }),
            Api::Pulse | Api::Alsa => {
                gstreamer_capture(&pipeline, &card.input, &card_caps, mixing)?;
                None
            }
        };
        let playback = match card.output.api {
            Api::PipeWire => Some(Playback { endpoint: card.output.clone(), queue }),
            Api::Pulse | Api::Alsa => {
                gstreamer_playback(&pipeline, &card.output, &card_caps, period_frames(card.output.api, rate), queue)?;
                None
            }
        };
        let pipewire = if capture.is_some() || playback.is_some() {
            let period = period_frames(Api::PipeWire, rate);
            Some(PipeWireCard::start(rate, period, capture, playback, shared.clone())?)
        } else {
            None
        };

        tracing::info!("sound card: input {}, output {}", card.input, card.output);
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
        let bus_task = tokio::spawn(watch_bus(bus, shared));
        Ok(Base { pipeline, pipewire, matrix, bus_task })
    }

    /// Swaps the matrix: the next block is mixed by `matrix`.
    pub fn set_matrix(&self, matrix: Matrix) {
        *lock(&self.matrix) = Arc::new(matrix);
    }

    /// Stops everything (state `Null`).
    pub fn stop(&self) {
        let _ = self.pipeline.set_state(gst::State::Null);
        if let Some(pipewire) = &self.pipewire {
            pipewire.stop();
        }
        self.bus_task.abort();
    }
}

/// The GStreamer capture of a PulseAudio or ALSA device into an appsink whose callback mixes
/// each block (in the capture's streaming thread, which asks for real-time scheduling).
fn gstreamer_capture(
    pipeline: &gst::Pipeline,
    input: &Endpoint,
    card_caps: &gst::Caps,
    mut mixing: Mixing,
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
    let mut promoted = false;
    captured.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |sink| {
                if !promoted {
                    realtime::promote("the card's capture and mix");
                    promoted = true;
                }
                let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                let buffer = sample.buffer().ok_or(gst::FlowError::Error)?;
                let map = buffer.map_readable().map_err(|_| gst::FlowError::Error)?;
                mixing.block(map.as_slice());
                Ok(gst::FlowSuccess::Ok)
            })
            .build(),
    );
    Ok(())
}

/// The GStreamer playback of a PulseAudio or ALSA device: an appsrc that, whenever the sink
/// has room, hands it a period from the playback `queue` (silence when the queue is empty).
fn gstreamer_playback(
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
    let mut promoted = false;
    mixed.set_callbacks(
        gst_app::AppSrcCallbacks::builder()
            .need_data(move |src, _| {
                if !promoted {
                    realtime::promote("the card's playback");
                    promoted = true;
                }
                lock(&queue).pull(&mut next);
                let _ = src.push_buffer(to_buffer(&next));
            })
            .build(),
    );
    Ok(())
}

/// The frames of one card period on `api`: [`CAPTURE_PERIOD_US`], or on PipeWire the graph's
/// quantum that holds it (PipeWire runs its graph in power-of-two quanta: asking for 240
/// frames would get 128, twice the wake-ups for nothing).
fn period_frames(api: Api, rate: u32) -> u32 {
    let frames = (u64::from(rate) * CAPTURE_PERIOD_US as u64 / 1_000_000) as u32;
    if api == Api::PipeWire { frames.next_power_of_two() } else { frames }
}

/// The card's capture on a PulseAudio or ALSA `endpoint`: the server (or ALSA) buffers
/// `buffer-time` and delivers a block every `latency-time`; each block is mixed and played at
/// once.
fn capture_source(endpoint: &Endpoint) -> anyhow::Result<gst::Element> {
    let factory = endpoint.api.source();
    endpoint
        .builder(factory, "capture")
        .property("buffer-time", CAPTURE_BUFFER_US)
        .property("latency-time", CAPTURE_PERIOD_US)
        .build()
        .with_context(|| endpoint.api.missing(factory))
}

/// The card's playback on a PulseAudio or ALSA `endpoint`. It plays what it is given as soon
/// as it has room (`sync` off: its pace is the card's), and starts without waiting for a first
/// block (`async` off: the appsrc in front of it is fed only in PLAYING, so waiting for it to
/// preroll would wait forever).
fn playback_sink(endpoint: &Endpoint) -> anyhow::Result<gst::Element> {
    let factory = endpoint.api.sink();
    endpoint
        .builder(factory, "playback")
        .property("sync", false)
        .property("async", false)
        .property("buffer-time", PLAYBACK_BUFFER_US)
        .property("latency-time", PLAYBACK_PERIOD_US)
        .build()
        .with_context(|| endpoint.api.missing(factory))
}

/// The capture's own state: the buffers it mixes in, reused block after block, and the output
/// limiters and meters, which outlive every matrix swap. Lives in the capture's thread
/// (GStreamer's streaming thread, or PipeWire's data thread: `pipewire_card.rs`).
pub struct Mixing {
    matrix: Arc<Mutex<Arc<Matrix>>>,
    /// The playback queue: the mix writes every output block into it, the playback pulls.
    playback: Arc<Mutex<Jitter>>,
    /// The thread the frames are encoded in: it lives as long as the mix.
    encoders: Encoders,
    /// The frames a block completed, on their way to the encoders.
    frames: Vec<Frame>,
    shared: Arc<Shared>,
    input: Vec<f32>,
    output: Vec<f32>,
    remote: Vec<Vec<f32>>,
    sends: Vec<Vec<f32>>,
    limiter: Limiter<CHANNELS>,
    input_meter: Meter,
    output_meter: Meter,
    /// When the queues' glitches were last reported.
    reported: std::time::Instant,
}

impl Mixing {
    pub fn new(
        rate: u32,
        matrix: Arc<Mutex<Arc<Matrix>>>,
        playback: Arc<Mutex<Jitter>>,
        encoders: Encoders,
        shared: Arc<Shared>,
    ) -> Mixing {
        let period = rate as usize * METER_PERIOD_MS / 1000;
        Mixing {
            matrix,
            playback,
            encoders,
            frames: Vec::new(),
            shared,
            input: Vec::new(),
            output: Vec::new(),
            remote: Vec::new(),
            sends: Vec::new(),
            limiter: Limiter::new(rate),
            input_meter: Meter::new(period),
            output_meter: Meter::new(period),
            reported: std::time::Instant::now(),
        }
    }

    /// One captured block (F32LE, the card's channels interleaved) in; the played block and
    /// every group's send out.
    pub fn block(&mut self, bytes: &[u8]) {
        self.input.clear();
        from_bytes(bytes, &mut self.input);
        let frames = self.input.len() / CHANNELS;
        let matrix = lock(&self.matrix).clone();
        let groups = matrix.feeds.len();
        self.remote.resize_with(groups, Vec::new);
        self.sends.resize_with(groups, Vec::new);
        for (remote, feed) in self.remote.iter_mut().zip(&matrix.feeds) {
            remote.resize(frames, 0.0);
            lock(&feed.remote).pull(remote);
        }
        self.output.resize(self.input.len(), 0.0);
        matrix.routing.mix(&self.input, &self.remote, &mut self.output, &mut self.sends);
        self.limiter.run(&mut self.output);
        for (send, feed) in self.sends.iter_mut().zip(&matrix.feeds) {
            lock(&feed.limiter).run(send);
            if let Some(talking) = lock(&feed.voice).add(send) {
                self.shared.talking(&feed.room, talking);
            }
            feed.send(send, &mut self.frames);
        }
        lock(&self.playback).push(&self.output);
        self.encoders.hand_over(&mut self.frames);
        if let (Some(input), Some(output)) = (self.input_meter.add(&self.input), self.output_meter.add(&self.output)) {
            self.shared.meters.set(&input, &output);
            self.report_glitches(&matrix.feeds);
        }
    }
}

impl Mixing {
    /// Logs what the queues did since the last report, at most every [`GLITCH_REPORT`]: each
    /// is audible (on every output for the playback queue, on a group's outputs for its room's
    /// mix).
    fn report_glitches(&mut self, feeds: &[Arc<Feed>]) {
        let now = std::time::Instant::now();
        if now.duration_since(self.reported) < GLITCH_REPORT {
            return;
        }
        self.reported = now;
        log_glitches("the card's playback queue", lock(&self.playback).glitches_since_last_asked(), CHANNELS);
        for feed in feeds {
            let remote = lock(&feed.remote).glitches_since_last_asked();
            log_glitches(&format!("room {}'s mix", feed.room), remote, 1);
        }
    }
}

/// An underrun or an overflow is a fault (silence, or audio lost): a warning. A trim is the
/// queue settling its latency (after every start, and when a faster writer fills it): logged,
/// not warned about.
fn log_glitches(queue: &str, glitches: Glitches, channels: usize) {
    let frames = |samples: u64| samples / channels as u64;
    if glitches.underruns > 0 || glitches.overflowed > 0 {
        tracing::warn!(
            "{queue} ran dry {} time(s) and overflowed by {} frame(s) since the last report",
            glitches.underruns,
            frames(glitches.overflowed)
        );
    }
    if glitches.trimmed > 0 {
        tracing::info!("{queue} settled its latency: {} frame(s) dropped", frames(glitches.trimmed));
    }
}

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

async fn watch_bus(bus: gst::Bus, shared: Arc<Shared>) {
    let mut messages = bus.stream();
    while let Some(message) = messages.next().await {
        match message.view() {
            gst::MessageView::Error(error) => {
                let text = describe_error(&message, error);
                tracing::error!("sound card pipeline: {text}");
                shared.set_pipeline_error(Some(text));
            }
            gst::MessageView::Warning(warning) => {
                let source = message.src().map(|s| s.name().to_string()).unwrap_or_default();
                tracing::warn!("{source}: {}", warning.error());
            }
            _ => {}
        }
    }
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
