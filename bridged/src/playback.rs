//! The card's playback on a PipeWire node: a stream of bridged's own, which PipeWire asks for
//! exactly one block per graph cycle, taken from the playback queue the mix fills
//! ([`Jitter`]). So card → card is the queue's level plus one cycle, and the queue trims
//! whatever level a start or a burst left, as on PulseAudio and ALSA.
//!
//! Not GStreamer's `pipewiresink`: it (0.3.65) hands every buffer it gets to its stream, whose
//! queue nothing trims, and gives the stream at least 8 buffers. Fed a block per capture, the
//! stream kept whatever backlog the start left, for the session (card → card 6, 10 or 16 ms
//! depending on the start, against 5 for a bare loop); pulled, it kept all 8 full (54 ms).
//!
//! The stream lives on a thread of its own running PipeWire's main loop; its `process` runs in
//! PipeWire's data thread (`RT_PROCESS`), inside the graph's cycle, so the block it fills is
//! played in that cycle.

use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use pipewire as pw;
use pw::spa;

use crate::card::Endpoint;
use crate::mix::{CHANNELS, Jitter};
use crate::state::Shared;

/// How long the stream may take to connect and agree on a format.
const START_TIMEOUT: Duration = Duration::from_secs(3);
/// Bytes per frame: F32 samples, the card's channels.
const FRAME_BYTES: usize = 4 * CHANNELS;

/// The card's channels in the positions PipeWire matches them by: card channel k on the node's
/// channel of the same position ([`crate::card::CARD_POSITIONS`]).
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

/// The running playback stream; stopped when dropped.
pub struct Playback {
    quit: pw::channel::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the stream's thread needs to open it.
struct Opening {
    node: Option<String>,
    rate: u32,
    /// `node.latency`: the card's period, in frames.
    period: u32,
    queue: Arc<Mutex<Jitter>>,
    shared: Arc<Shared>,
}

impl Playback {
    /// Opens the playback on `endpoint`'s node at `rate`, asking for blocks of `period` frames,
    /// and returns once the stream is connected with its format (or failed to be).
    pub fn start(
        endpoint: &Endpoint,
        rate: u32,
        period: u32,
        queue: Arc<Mutex<Jitter>>,
        shared: Arc<Shared>,
    ) -> anyhow::Result<Playback> {
        let opening = Opening { node: endpoint.device.clone(), rate, period, queue, shared };
        let (quit, quit_rx) = pw::channel::channel();
        let (ready, started) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("pw-playback".into())
            .spawn(move || {
                if let Err(error) = run(opening, quit_rx, &ready) {
                    let _ = ready.send(Err(error));
                }
            })
            .context("no thread for the PipeWire playback")?;
        let playback = Playback { quit, thread: Some(thread) };
        match started.recv_timeout(START_TIMEOUT) {
            Ok(Ok(())) => Ok(playback),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(anyhow!("the PipeWire playback stream did not start within {START_TIMEOUT:?}")),
        }
    }
}

impl std::fmt::Debug for Playback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Playback").field("running", &self.thread.is_some()).finish_non_exhaustive()
    }
}

impl Playback {
    /// Stops the stream: it plays nothing more.
    pub fn stop(&self) {
        // The receiver is gone already when the thread ended on an error.
        let _ = self.quit.send(());
    }
}

impl Drop for Playback {
    fn drop(&mut self) {
        self.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The stream's thread: opens it, then runs PipeWire's loop until told to quit.
fn run(
    opening: Opening,
    quit: pw::channel::Receiver<()>,
    ready: &mpsc::Sender<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    pw::init();
    let mainloop = pw::main_loop::MainLoopRc::new(None).context("PipeWire main loop")?;
    let context = pw::context::ContextRc::new(&mainloop, None).context("PipeWire context")?;
    let core = context.connect_rc(None).context("PipeWire does not answer on its socket")?;
    let stream = pw::stream::StreamBox::new(&core, "partyline-bridged", properties(&opening))
        .context("PipeWire playback stream")?;

    let Opening { queue, shared, .. } = opening;
    let ready = ready.clone();
    let mut block = Vec::new();
    let _listener = stream
        .add_local_listener_with_user_data(())
        .state_changed(move |_, (), _, state| match state {
            pw::stream::StreamState::Paused | pw::stream::StreamState::Streaming => {
                let _ = ready.send(Ok(()));
            }
            pw::stream::StreamState::Error(error) => {
                let text = format!("PipeWire playback stream: {error}");
                tracing::error!("sound card pipeline: {text}");
                let _ = ready.send(Err(anyhow!(text.clone())));
                shared.set_pipeline_error(Some(text));
            }
            pw::stream::StreamState::Unconnected | pw::stream::StreamState::Connecting => {}
        })
        .process(move |stream, ()| fill(stream, &queue, &mut block))
        .register()
        .context("PipeWire stream listener")?;

    let format = format_pod(opening.rate)?;
    let mut params = [spa::pod::Pod::from_bytes(&format).ok_or_else(|| anyhow!("the format is no pod"))?];
    stream
        .connect(
            spa::utils::Direction::Output,
            None,
            pw::stream::StreamFlags::AUTOCONNECT
                | pw::stream::StreamFlags::MAP_BUFFERS
                | pw::stream::StreamFlags::RT_PROCESS,
            &mut params,
        )
        .context("connecting the PipeWire playback stream")?;

    let quitting = mainloop.clone();
    let _quit = quit.attach(mainloop.loop_(), move |()| quitting.quit());
    mainloop.run();
    Ok(())
}

/// The stream's properties: a playback of bridged's on the node, at the card's period.
fn properties(opening: &Opening) -> pw::properties::PropertiesBox {
    let mut properties = pw::properties::properties! {
        *pw::keys::MEDIA_TYPE => "Audio",
        *pw::keys::MEDIA_CATEGORY => "Playback",
        *pw::keys::NODE_NAME => "partyline-bridged",
        *pw::keys::NODE_DESCRIPTION => "partyline-bridged",
        *pw::keys::APP_NAME => "partyline-bridged",
        *pw::keys::NODE_LATENCY => format!("{}/{}", opening.period, opening.rate),
    };
    if let Some(node) = &opening.node {
        properties.insert(*pw::keys::TARGET_OBJECT, node.as_str());
    }
    properties
}

/// The one format offered: F32 interleaved, the card's channels in [`POSITIONS`].
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
    .map_err(|error| anyhow!("the playback's format: {error:?}"))?;
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
    queue.lock().unwrap_or_else(PoisonError::into_inner).pull(block);
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
