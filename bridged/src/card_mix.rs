//! The card's block callback: what each captured block goes through, whichever backend drives
//! it (GStreamer's capture streaming thread, `gstreamer_card.rs`, or PipeWire's data thread,
//! `pipewire_card.rs`). It reads every group's room mix from its feed, mixes the block by the
//! [`Matrix`] in force (`mix.rs`), limits and meters the outputs, hands each group's send to its
//! feed and the frames completed to the encoders' thread, and writes the outputs into the
//! playback queue the playback pulls from. One place for this, so both backends mix alike.
//!
//! ```text
//! capture ─▶ BlockMixer::block: outputs = each user's group minus itself, sends = each group's sum
//!            limit, meter  ─▶ playback queue ─▶ playback (pulls; silence when empty)
//!            sends ─▶ Feed::send ─▶ encoders' thread
//!            Feed::remote (the room's mix, mono) ─▶ outputs
//! ```
//!
//! A change of the plan's users is a new [`Matrix`] swapped in between two blocks.

use std::sync::{Arc, Mutex};

use partyline_shared::sync::lock;

use crate::encoders::{Encoders, Frame};
use crate::feed::Feed;
use crate::ifb::Duckers;
use crate::jitter::{Glitches, Jitter};
use crate::levels::Meter;
use crate::mix::{CHANNELS, Limiter, Routing};
use crate::samples::from_bytes;
use crate::state::StatusBoard;

/// How often at most the playback queue's glitches are logged.
const GLITCH_REPORT: std::time::Duration = std::time::Duration::from_secs(5);
/// How far the drift between two clocks made up in the playback (`drift.rs`) moves before it is
/// logged again, in ppm.
const DRIFT_REPORT_PPM: f64 = 10.0;
/// How often the levels in the status are refreshed.
const METER_PERIOD_MS: usize = 100;

/// The matrix in force: the routing and each of its groups' feed, in the routing's order.
#[derive(Debug, Default)]
pub struct Matrix {
    pub routing: Routing,
    pub feeds: Vec<Arc<Feed>>,
}

/// The block callback's own state: the buffers it mixes in, reused block after block, and the output
/// limiters and meters, which outlive every matrix swap. Lives in the capture's thread
/// (GStreamer's streaming thread, or PipeWire's data thread: `pipewire_card.rs`).
pub struct BlockMixer {
    matrix: Arc<Mutex<Arc<Matrix>>>,
    /// The playback queue: the mix writes every output block into it, the playback pulls.
    playback: Arc<Mutex<Jitter>>,
    /// The thread the frames are encoded in: it lives as long as the mix.
    encoders: Encoders,
    /// The frames a block completed, on their way to the encoders.
    frames: Vec<Frame>,
    board: Arc<StatusBoard>,
    input: Vec<f32>,
    output: Vec<f32>,
    remote: Vec<Vec<f32>>,
    sends: Vec<Vec<f32>>,
    limiter: Limiter<CHANNELS>,
    /// The IFB outputs' dips, kept across matrix swaps.
    duckers: Duckers,
    input_meter: Meter,
    output_meter: Meter,
    /// When the queues' glitches were last reported.
    reported: std::time::Instant,
    /// The drift last logged, in ppm.
    drift_reported: f64,
}

impl BlockMixer {
    pub fn new(
        rate: u32,
        matrix: Arc<Mutex<Arc<Matrix>>>,
        playback: Arc<Mutex<Jitter>>,
        encoders: Encoders,
        board: Arc<StatusBoard>,
    ) -> BlockMixer {
        let period = rate as usize * METER_PERIOD_MS / 1000;
        BlockMixer {
            matrix,
            playback,
            encoders,
            frames: Vec::new(),
            board,
            input: Vec::new(),
            output: Vec::new(),
            remote: Vec::new(),
            sends: Vec::new(),
            limiter: Limiter::new(rate),
            duckers: Duckers::new(rate),
            input_meter: Meter::new(period),
            output_meter: Meter::new(period),
            reported: std::time::Instant::now(),
            drift_reported: 0.0,
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
        matrix.routing.mix(&self.input, &self.remote, &mut self.output, &mut self.sends, &mut self.duckers);
        self.limiter.run(&mut self.output);
        for (send, feed) in self.sends.iter_mut().zip(&matrix.feeds) {
            if let Some(talking) = feed.send(send, &mut self.frames) {
                self.board.talking(&feed.room, talking);
            }
        }
        lock(&self.playback).push(&self.output);
        self.encoders.hand_over(&mut self.frames);
        if let (Some(input), Some(output)) = (self.input_meter.add(&self.input), self.output_meter.add(&self.output)) {
            self.board.meters.set(&input, &output);
            self.report_glitches(&matrix.feeds);
        }
    }
}

impl BlockMixer {
    /// Logs what the queues did since the last report, at most every [`GLITCH_REPORT`]: each
    /// is audible (on every output for the playback queue, on a group's outputs for its room's
    /// mix).
    fn report_glitches(&mut self, feeds: &[Arc<Feed>]) {
        let now = std::time::Instant::now();
        if now.duration_since(self.reported) < GLITCH_REPORT {
            return;
        }
        self.reported = now;
        let (glitches, drift) = {
            let mut playback = lock(&self.playback);
            (playback.glitches_since_last_asked(), playback.drift_ppm())
        };
        self.board.card.add(&glitches, drift);
        log_glitches("the card's playback queue", glitches, CHANNELS);
        if let Some(ppm) = drift.filter(|ppm| (ppm - self.drift_reported).abs() >= DRIFT_REPORT_PPM) {
            tracing::info!("the playback follows the capture's clock: the capture runs {ppm:+.0} ppm against it");
            self.drift_reported = ppm;
        }
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
