//! The card side: the card's capture and playback, running, with the matrix in force between
//! them. Each direction is opened by the backend its device needs (`card.rs` chooses, each
//! direction on its own): GStreamer's elements for a PulseAudio device or an ALSA PCM
//! (`gstreamer_card.rs`), streams of bridged's own on a PipeWire node (`pipewire_card.rs`),
//! pipelines of their own on the PTP clock for AES67 (`aes67/`). Every backend drives the same block callback (`card_mix.rs`) and pull from the same kind of
//! playback queue. Group participants (`participant/`) meet the card side only through their
//! feeds (`feed.rs`): a participant joining or leaving a room never touches it, and a change of
//! the plan's users is a new [`Matrix`] swapped in between two blocks.
//!
//! The playback pulls: whenever it has room it takes a block from the playback queue the mix
//! fills ([`PLAYBACK_QUEUE`], [`IN_STEP_PLAYBACK_QUEUE`]), or silence when the queue is empty.
//! So the card → card latency stays the capture's period plus the queue plus the playback's
//! buffering, whatever the scheduling did before: the queue trims what a start or a burst left.
//! On PipeWire the capture and the playback are two streams of one graph, run in one thread: a
//! block is played in the cycle it was captured in (`pipewire_card.rs`).

use std::sync::{Arc, Mutex};

use partyline_shared::bridge::Plan;
use partyline_shared::sync::lock;

use crate::aes67::{self, Network};
use crate::card::{Api, BLOCKS_PER_SECOND, Card, period_frames};
use crate::card_mix::{BlockMixer, Matrix};
use crate::encoders::Encoders;
use crate::gstreamer_card::GStreamerCard;
use crate::jitter::QueueShape;
use crate::mix::CHANNELS;
use crate::pipewire_card::{Capture, PipeWireCard, Playback};
use crate::state::StatusBoard;

/// The playback queue between the mix and the playback ([`Jitter`]): the capture may hand
/// over its blocks in bursts (a sound server's period can be longer than ours), and a burst
/// must not leave the playback empty between two. It starts at two blocks, keeps one block
/// beyond what the bursts need (more for a while after an underrun: [`Jitter`]), and trims over
/// windows of a second. Card → card on PulseAudio's
/// null sinks, 10 ms / 5 ms capture and this queue: medians of 20–25 ms (a 20 ms / 10 ms
/// capture and a 20 ms queue: 71 ms).
const PLAYBACK_QUEUE: QueueShape = QueueShape { start_ms: 10, margin_ms: 5, limit_ms: 200 };
/// The playback queue when the capture and the playback go in step, block for block, so that
/// no burst comes: on PipeWire (`pipewire_card.rs`) they are two streams of one graph, run in one
/// thread, and each block is mixed and pulled within a cycle; on AES67 both ways (`aes67/`) the
/// receive hands over and the send pulls a block every card period on the one PTP clock. The
/// queue starts with one block (a PipeWire quantum of 5.33 ms holds this start) and needs no
/// margin for bursts; 1 ms lets it grow a step at each underrun.
const IN_STEP_PLAYBACK_QUEUE: QueueShape = QueueShape { start_ms: 5, margin_ms: 1, limit_ms: 200 };

/// The card's capture and playback, running, and the matrix between them.
#[derive(Debug)]
pub struct CardSide {
    /// The directions GStreamer opens (an empty pipeline when both are on PipeWire nodes).
    gstreamer: GStreamerCard,
    /// The directions on a PipeWire node, streams of bridged's own.
    pipewire: Option<PipeWireCard>,
    /// The directions on AES67.
    aes67_receive: Option<aes67::Receiver>,
    aes67_send: Option<aes67::Sender>,
    matrix: Arc<Mutex<Arc<Matrix>>>,
}

impl CardSide {
    /// Builds and starts the card side for `plan` with `matrix` and waits until it runs.
    /// Must run inside the tokio runtime (the bus is read by a task). An AES67 direction needs the
    /// media `network`.
    pub fn start(
        plan: &Plan,
        card: &Card,
        network: Option<&Arc<Network>>,
        board: Arc<StatusBoard>,
        matrix: Matrix,
    ) -> anyhow::Result<CardSide> {
        let rate = plan.device_sample_rate;
        let mut gstreamer = GStreamerCard::new(rate);

        let matrix = Arc::new(Mutex::new(Arc::new(matrix)));
        // In step: both directions PipeWire nodes (one graph, one thread) or both AES67 (one clock).
        let in_step = card.input.api == card.output.api && matches!(card.input.api, Api::PipeWire | Api::Aes67);
        let shape = if in_step { IN_STEP_PLAYBACK_QUEUE } else { PLAYBACK_QUEUE };
        let mut queue = shape.jitter(rate, CHANNELS, BLOCKS_PER_SECOND);
        // AES67 runs on the grandmaster's clock, a local device on its own crystal: between the
        // two, the playback is resampled to the capture's pace (`drift.rs`).
        if (card.input.api == Api::Aes67) != (card.output.api == Api::Aes67) {
            queue = queue.crossing_clocks(rate, CHANNELS)?;
        }
        let queue = Arc::new(Mutex::new(queue));
        let mixer = BlockMixer::new(rate, matrix.clone(), queue.clone(), Encoders::start()?, board.clone());
        let network =
            || network.ok_or_else(|| anyhow::anyhow!("the card uses AES67 but audio.aes67.interface is not set"));
        // Each direction on a PipeWire node is a stream of bridged's own, each on AES67 a
        // pipeline of its own; the others are GStreamer elements in one pipeline.
        let (mut capture, mut aes67_receive) = (None, None);
        match card.input.api {
            Api::PipeWire => capture = Some(Capture { endpoint: card.input.clone(), mixer }),
            Api::Aes67 => aes67_receive = Some(aes67::receive(&plan.aes67, rate, network()?, mixer, board.clone())?),
            Api::Pulse | Api::Alsa => gstreamer.add_capture(&card.input, mixer)?,
        }
        let (mut playback, mut aes67_send) = (None, None);
        match card.output.api {
            Api::PipeWire => playback = Some(Playback { endpoint: card.output.clone(), queue }),
            Api::Aes67 => {
                aes67_send = Some(aes67::Sender::start(&plan.aes67, rate, network()?, queue, board.clone())?);
            }
            Api::Pulse | Api::Alsa => {
                gstreamer.add_playback(&card.output, period_frames(card.output.api, rate), queue)?;
            }
        }
        let pipewire = if capture.is_some() || playback.is_some() {
            let period = period_frames(Api::PipeWire, rate);
            Some(PipeWireCard::start(rate, period, capture, playback, board.clone())?)
        } else {
            None
        };

        tracing::info!("sound card: input {}, output {}", card.input, card.output);
        gstreamer.start(board)?;
        Ok(CardSide { gstreamer, pipewire, aes67_receive, aes67_send, matrix })
    }

    /// Swaps the matrix: the next block is mixed by `matrix`.
    pub fn set_matrix(&self, matrix: Matrix) {
        *lock(&self.matrix) = Arc::new(matrix);
    }

    /// Stops everything: nothing more is captured or played, partyline's stream is withdrawn.
    pub async fn stop(&self) {
        self.gstreamer.stop();
        if let Some(pipewire) = &self.pipewire {
            pipewire.stop();
        }
        if let Some(receive) = &self.aes67_receive {
            receive.stop();
        }
        if let Some(send) = &self.aes67_send {
            send.stop().await;
        }
    }
}
