//! One group's feed: where the card side and the group's participant meet. The card's thread
//! cuts the group's send into Opus frames for the participant's encoder (placed against Janus's
//! mixing tick over plain RTP: `tick.rs`), and the participant's decoder writes the room's mix into
//! a queue the card's thread reads block by block. On partyline's own rooms the feed is the
//! room's local line itself (`LocalLine`): the send queued as PCM for the rooms' tick to take,
//! the room's mix written into the same queue a decoder would, no codec either way.
//!
//! Neither side ever pushes into the other's pipeline: a participant joining or leaving its room
//! never touches the card side, and a feed outlives its participant's retries (a participant
//! rejoining finds it as it left it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use partyline_rooms::engine::LocalLine;
use partyline_shared::bridge::Transport;
use partyline_shared::janus::{TALK_LEVEL_DBOV, TALK_WINDOW_PACKETS};
use partyline_shared::sync::lock;

use crate::card::BLOCKS_PER_SECOND;
use crate::encoders::{EncoderInput, Frame};
use crate::jitter::{Jitter, QueueShape};
use crate::levels::VoiceActivity;
use crate::mix::Limiter;
use crate::samples::to_s16_buffer;
use crate::tick::{Aligner, Shift, Step, TickPhase};

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
/// Between the card and partyline's rooms, each way: the rooms' thread takes or gives 20 ms at
/// its tick, the card's thread a block at its own pace, as with Janus over plain RTP.
const ROOMS_QUEUE: QueueShape = REMOTE_QUEUE_RTP;
/// The group participants' Opus frame (ms): AudioBridge 1.1.2 mixes one packet per participant
/// per 20 ms tick, so 10 ms frames lose most of the audio (bridged/README.md, "Platform facts").
pub const OPUS_FRAME_MS: usize = 20;
/// The rooms' ticks in a second (each takes and gives 20 ms).
const TICKS_PER_SECOND: usize = 50;

/// One group's exchange with the card side, kept while the group has server audio users (a
/// participant rejoining its room finds it as it left it).
#[derive(Debug)]
pub struct Feed {
    pub room: String,
    /// The room's mix (mono, the card's rate), written by the participant's decoder.
    pub remote: Mutex<Jitter>,
    /// The group's send on its way to partyline's rooms (their local line), read at their tick.
    to_rooms: Mutex<Jitter>,
    /// The admin muted the card on this line (partyline's rooms: the room mixes without it).
    muted: AtomicBool,
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
    /// The send goes to partyline's rooms as PCM ([`Feed::connect_rooms`]).
    rooms: bool,
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
            Transport::Rooms => ROOMS_QUEUE,
        };
        Feed {
            room: room.to_owned(),
            remote: Mutex::new(remote.jitter(rate, 1, BLOCKS_PER_SECOND)),
            to_rooms: Mutex::new(ROOMS_QUEUE.jitter(rate, 1, TICKS_PER_SECOND)),
            muted: AtomicBool::new(false),
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

    /// From now on the group's send goes to partyline's rooms, which take it as PCM.
    pub fn connect_rooms(&self) {
        *lock(&self.sending) = Sending { rooms: true, ..Sending::default() };
    }

    /// The plan's mute of the card on this line (`PlanGroup::muted`): on partyline's rooms the
    /// room mixes without the send from the next tick on.
    pub fn set_muted(&self, muted: bool) {
        if self.muted.swap(muted, Ordering::Relaxed) != muted {
            tracing::info!(room = self.room, muted, "the card's send to the room");
        }
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

    /// Takes a block of the group's send (in the card's thread): limits it, follows its voice
    /// activity, and cuts it into frames for the participant's encoder, added to `frames`.
    /// Returns the card's talking in the room when it changed.
    pub fn send(&self, block: &mut [f32], frames: &mut Vec<Frame>) -> Option<bool> {
        lock(&self.limiter).run(block);
        let talking = lock(&self.voice).add(block);
        self.cut_frames(block, frames);
        talking
    }

    /// Cuts a block of the group's send into frames for the participant's encoder, added to
    /// `frames` (dropped while the group has no participant running).
    fn cut_frames(&self, block: &[f32], frames: &mut Vec<Frame>) {
        let mut sending = lock(&self.sending);
        let Sending { encoder, rooms, unsent, aligner, to_drop } = &mut *sending;
        if *rooms {
            lock(&self.to_rooms).push(block);
            return;
        }
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

/// The feed as partyline's rooms see it, called on their thread at each tick: its locks are
/// the card thread's for a block's copy at most.
impl LocalLine for Feed {
    fn send(&self, frame: &mut [f32]) -> bool {
        if !lock(&self.sending).rooms {
            return false;
        }
        // Muted, the queue is still read: unmuted, the send starts from now, not from then.
        lock(&self.to_rooms).pull(frame);
        !self.muted.load(Ordering::Relaxed)
    }

    fn hear(&self, frame: &[f32]) {
        lock(&self.remote).push(frame);
    }
}

/// Drops what is pending of a [`Shift::Drop`] from the head of `unsent`.
fn drop_pending(unsent: &mut Vec<f32>, to_drop: &mut usize) {
    let now = (*to_drop).min(unsent.len());
    unsent.drain(..now);
    *to_drop -= now;
}
