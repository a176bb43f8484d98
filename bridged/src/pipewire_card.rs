//! The card on PipeWire: a capture stream and a playback stream of bridged's own (the
//! `pipewire` crate), whose `process` callbacks run in PipeWire's data thread inside the graph's
//! cycle (`RT_PROCESS`). The capture mixes each block as it arrives ([`BlockMixer`]: the outputs into
//! the playback queue, the sends to the participants); the playback takes exactly what the cycle
//! asks for from that queue ([`Jitter`], which trims whatever level a start left). Both streams
//! are in one node group, so one driver runs them in one cycle, and in one data thread, the
//! capture's before the playback's (measured on the test card: a block is
//! played in the very cycle it was captured in, 0 ms between the card's input and output ports;
//! in the other order it would be the next cycle, and the queue's start level, less than a
//! block, serves both). Each direction is here only when its device is a PipeWire node
//! (`card.rs`); the other goes through GStreamer (`gstreamer_card.rs`).
//!
//! Not GStreamer's `pipewiresrc`/`pipewiresink`: pipewiresink (0.3.65) hands every buffer it
//! gets to its stream and gives the stream at least 8 buffers, and nothing trims that stream's
//! queue (pulled, it kept all 8 full: card → card 54 ms; fed a block per capture, it kept
//! whatever backlog the start left: 6 to 22 ms from one start to the next); pipewiresrc hands
//! each block over through two threads of its own, which made whether a block reached the
//! playback in its cycle or the next a race.
//!
//! The streams live on a thread of their own running PipeWire's main loop; stopped when dropped.

use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use partyline_shared::sync::lock;
use pipewire as pw;
use pw::spa;

use crate::card::Endpoint;
use crate::card_mix::BlockMixer;
use crate::jitter::Jitter;
use crate::mix::CHANNELS;
use crate::state::StatusBoard;

/// How long the streams may take to connect and agree on a format.
const START_TIMEOUT: Duration = Duration::from_secs(3);
/// Bytes per frame: F32 samples, the card's channels.
const FRAME_BYTES: usize = 4 * CHANNELS;

/// The card's channels in the positions PipeWire matches them by: card channel k on the node's
/// channel of the same position ([`crate::card::CARD_POSITIONS`]), both ways.
const POSITIONS: [u32; CHANNELS] = [
    spa::sys::SPA_AUDIO_CHANNEL_FL,
    spa::sys::SPA_AUDIO_CHANNEL_FR,
    spa::sys::SPA_AUDIO_CHANNEL_FC,
    spa::sys::SPA_AUDIO_CHANNEL_LFE,
    spa::sys::SPA_AUDIO_CHANNEL_RL,
    spa::sys::SPA_AUDIO_CHANNEL_RR,
    spa::sys::SPA_AUDIO_CHANNEL_SL,
    spa::sys::SPA_AUDIO_CHANNEL_SR,
];

/// The capture: its node, and the mix each block goes through.
pub struct Capture {
    pub endpoint: Endpoint,
    pub mixer: BlockMixer,
}

/// The playback: its node, and the queue it takes its blocks from.
pub struct Playback {
    pub endpoint: Endpoint,
    pub queue: Arc<Mutex<Jitter>>,
}

/// The running streams.
pub struct PipeWireCard {
    quit: pw::channel::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for PipeWireCard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipeWireCard").field("running", &self.thread.is_some()).finish_non_exhaustive()
    }
}

/// What the streams' thread needs to open them.
struct Opening {
    rate: u32,
    /// `node.latency`: the card's period, in frames.
    period: u32,
    capture: Option<Capture>,
    playback: Option<Playback>,
    board: Arc<StatusBoard>,
}

impl PipeWireCard {
    /// Opens the directions given at `rate`, asking for blocks of `period` frames, and returns
    /// once each stream is connected with its format (or one failed to be).
    pub fn start(
        rate: u32,
        period: u32,
        capture: Option<Capture>,
        playback: Option<Playback>,
        board: Arc<StatusBoard>,
    ) -> anyhow::Result<PipeWireCard> {
        let streams = usize::from(capture.is_some()) + usize::from(playback.is_some());
        let opening = Opening { rate, period, capture, playback, board };
        let (quit, quit_rx) = pw::channel::channel();
        let (ready, started) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("pw-card".into())
            .spawn(move || {
                if let Err(error) = run(opening, quit_rx, &ready) {
                    let _ = ready.send(Err(error));
                }
            })
            .context("no thread for the PipeWire streams")?;
        let card = PipeWireCard { quit, thread: Some(thread) };
        for _ in 0..streams {
            match started.recv_timeout(START_TIMEOUT) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(error),
                Err(_) => return Err(anyhow!("the PipeWire streams did not start within {START_TIMEOUT:?}")),
            }
        }
        Ok(card)
    }

    /// Stops the streams: nothing more is captured or played.
    pub fn stop(&self) {
        // The receiver is gone already when the thread ended on an error.
        let _ = self.quit.send(());
    }
}

impl Drop for PipeWireCard {
    fn drop(&mut self) {
        self.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

type Ready = mpsc::Sender<anyhow::Result<()>>;

/// The streams' thread: opens them, then runs PipeWire's loop until told to quit.
fn run(opening: Opening, quit: pw::channel::Receiver<()>, ready: &Ready) -> anyhow::Result<()> {
    pw::init();
    let mainloop = pw::main_loop::MainLoopRc::new(None).context("PipeWire main loop")?;
    let context = pw::context::ContextRc::new(&mainloop, None).context("PipeWire context")?;
    let core = context.connect_rc(None).context("PipeWire does not answer on its socket")?;
    let Opening { rate, period, capture, playback, board } = opening;
    let format = format_pod(rate)?;

    let mut streams = Vec::new();
    if let Some(Capture { endpoint, mut mixer }) = capture {
        let stream = stream(&core, &endpoint, "Capture", rate, period)?;
        let listener = stream
            .add_local_listener_with_user_data(())
            .state_changed(state_watcher("capture", ready.clone(), board.clone()))
            .process(move |stream, ()| {
                let Some(mut buffer) = stream.dequeue_buffer() else { return };
                let Some(data) = buffer.datas_mut().first_mut() else { return };
                let (offset, size) = (data.chunk().offset() as usize, data.chunk().size() as usize);
                let Some(bytes) = data.data() else { return };
                if let Some(block) = bytes.get(offset..offset + size) {
                    mixer.block(block);
                }
            })
            .register()
            .context("PipeWire capture listener")?;
        connect(&stream, spa::utils::Direction::Input, &format)?;
        streams.push((stream, listener));
    }
    if let Some(Playback { endpoint, queue }) = playback {
        let stream = stream(&core, &endpoint, "Playback", rate, period)?;
        let mut block = Vec::new();
        let listener = stream
            .add_local_listener_with_user_data(())
            .state_changed(state_watcher("playback", ready.clone(), board))
            .process(move |stream, ()| fill(stream, &queue, &mut block))
            .register()
            .context("PipeWire playback listener")?;
        connect(&stream, spa::utils::Direction::Output, &format)?;
        streams.push((stream, listener));
    }

    let quitting = mainloop.clone();
    let _quit = quit.attach(mainloop.loop_(), move |()| quitting.quit());
    mainloop.run();
    Ok(())
}

/// A stream of bridged's (`category` Capture or Playback) on `endpoint`'s node at the card's
/// period; a capture of a sink node records what it plays (PulseAudio's `NAME.monitor`).
fn stream<'c>(
    core: &'c pw::core::Core,
    endpoint: &Endpoint,
    category: &str,
    rate: u32,
    period: u32,
) -> anyhow::Result<pw::stream::StreamBox<'c>> {
    let mut properties = pw::properties::properties! {
        *pw::keys::MEDIA_TYPE => "Audio",
        *pw::keys::MEDIA_CATEGORY => category,
        *pw::keys::NODE_NAME => "partyline-bridged",
        *pw::keys::NODE_DESCRIPTION => "partyline-bridged",
        *pw::keys::APP_NAME => "partyline-bridged",
        *pw::keys::NODE_LATENCY => format!("{period}/{rate}"),
        // One driver for both streams, whatever drives the nodes they are linked to (two
        // devices are two drivers, each with its own timer): a block is then captured, mixed
        // and played within one cycle, instead of two cycles at a phase to each other that the
        // playback queue would have to absorb.
        *pw::keys::NODE_GROUP => "partyline-bridged-card",
    };
    if let Some(node) = &endpoint.device {
        properties.insert(*pw::keys::TARGET_OBJECT, node.as_str());
    }
    if endpoint.monitor {
        properties.insert(*pw::keys::STREAM_CAPTURE_SINK, "true");
    }
    pw::stream::StreamBox::new(core, "partyline-bridged", properties)
        .with_context(|| format!("PipeWire {} stream", category.to_lowercase()))
}

fn connect(stream: &pw::stream::Stream, direction: spa::utils::Direction, format: &[u8]) -> anyhow::Result<()> {
    let mut params = [spa::pod::Pod::from_bytes(format).ok_or_else(|| anyhow!("the format is no pod"))?];
    let flags = pw::stream::StreamFlags::AUTOCONNECT
        | pw::stream::StreamFlags::MAP_BUFFERS
        | pw::stream::StreamFlags::RT_PROCESS;
    stream.connect(direction, None, flags, &mut params).context("connecting a PipeWire stream")
}

/// Reports the stream's start (connected, format agreed) once, and any error: to the log and
/// to the status, as a GStreamer pipeline's errors are.
fn state_watcher(
    what: &'static str,
    ready: Ready,
    board: Arc<StatusBoard>,
) -> impl FnMut(&pw::stream::Stream, &mut (), pw::stream::StreamState, pw::stream::StreamState) + 'static {
    let mut started = false;
    move |_, (), _, state| match state {
        pw::stream::StreamState::Paused | pw::stream::StreamState::Streaming if !started => {
            started = true;
            let _ = ready.send(Ok(()));
        }
        pw::stream::StreamState::Error(error) => {
            let text = format!("PipeWire {what} stream: {error}");
            tracing::error!("sound card pipeline: {text}");
            if !started {
                started = true;
                let _ = ready.send(Err(anyhow!(text.clone())));
            }
            board.set_pipeline_error(Some(text));
        }
        _ => {}
    }
}

/// The one format offered both ways: F32 interleaved, the card's channels in [`POSITIONS`].
fn format_pod(rate: u32) -> anyhow::Result<Vec<u8>> {
    let mut info = spa::param::audio::AudioInfoRaw::new();
    info.set_format(spa::param::audio::AudioFormat::F32LE);
    info.set_rate(rate);
    info.set_channels(CHANNELS as u32);
    let mut position = [0; spa::param::audio::MAX_CHANNELS];
    position[..CHANNELS].copy_from_slice(&POSITIONS);
    info.set_position(position);
    let object = spa::pod::Object {
        type_: spa::sys::SPA_TYPE_OBJECT_Format,
        id: spa::sys::SPA_PARAM_EnumFormat,
        properties: info.into(),
    };
    let (bytes, _) = spa::pod::serialize::PodSerializer::serialize(
        std::io::Cursor::new(Vec::new()),
        &spa::pod::Value::Object(object),
    )
    .map_err(|error| anyhow!("the streams' format: {error:?}"))?;
    Ok(bytes.into_inner())
}

/// One cycle's block, from the playback queue (silence for what it lacks). Runs in PipeWire's
/// data thread: no allocation once `block` has grown to a cycle.
fn fill(stream: &pw::stream::Stream, queue: &Mutex<Jitter>, block: &mut Vec<f32>) {
    let Some(mut buffer) = stream.dequeue_buffer() else { return };
    let requested = usize::try_from(buffer.requested()).unwrap_or(usize::MAX);
    let Some(data) = buffer.datas_mut().first_mut() else { return };
    let Some(bytes) = data.data() else { return };
    // What the graph asks for this cycle (0: it does not say, so the whole buffer).
    let frames = match requested {
        0 => bytes.len() / FRAME_BYTES,
        n => n.min(bytes.len() / FRAME_BYTES),
    };
    block.resize(frames * CHANNELS, 0.0);
    lock(queue).pull(block);
    for (out, sample) in bytes.chunks_exact_mut(4).zip(block.iter()) {
        out.copy_from_slice(&sample.to_le_bytes());
    }
    let chunk = data.chunk_mut();
    *chunk.offset_mut() = 0;
    *chunk.stride_mut() = i32::try_from(FRAME_BYTES).unwrap_or(i32::MAX);
    *chunk.size_mut() = u32::try_from(frames * FRAME_BYTES).unwrap_or(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_offers_the_card_s_channels_in_the_card_s_positions() {
        let bytes = format_pod(48_000).expect("a format");
        let pod = spa::pod::Pod::from_bytes(&bytes).expect("a pod");
        let mut info = spa::param::audio::AudioInfoRaw::new();
        info.parse(pod).expect("an audio format");
        assert_eq!(info.format(), spa::param::audio::AudioFormat::F32LE);
        assert_eq!((info.rate(), info.channels()), (48_000, 8));
        assert_eq!(info.position()[..CHANNELS], POSITIONS);
        // POSITIONS spells out the map that card.rs opens nodes natively for, in its order.
        assert_eq!(["FL", "FR", "FC", "LFE", "RL", "RR", "SL", "SR"].join(","), crate::card::CARD_POSITIONS);
    }
}
