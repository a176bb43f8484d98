//! The thread that encodes every group's send. The card's thread (`card_mix.rs`, `feed.rs`)
//! cuts each group's send into Opus frames; once per card block it hands the frames completed in
//! that block over here, in one go, and this thread pushes each through its participant's encoder
//! chain (opusenc, the payloader, the way to Janus: `participant/media.rs`).
//!
//! One thread for all groups rather than a streaming thread per participant: eight groups were
//! eight threads woken 50 times a second each, each through `appsrc`'s own queue. With the
//! receiving side's one thread (`participant/rtp_port.rs`) the same Opus work costs less
//! (BENCHMARKS.md, "The matrix"). Encoding stays out of the card's thread: a card block is
//! 5 ms, and eight encodes can land in one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use anyhow::Context as _;
use partyline_shared::sync::lock;

use crate::pads::Injector;
use crate::realtime;

/// The most frames waiting for the thread before the oldest is dropped: the card's thread never
/// waits for the encoders, and a late frame is worth less than the next one.
const QUEUE_LIMIT: usize = 64;

/// A frame on its way to a participant's encoder.
pub type Frame = (Arc<EncoderInput>, gst::Buffer);

/// The encoders' thread; stopped and joined when dropped.
#[derive(Debug)]
pub struct Encoders {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Queue {
    waiting: Mutex<Waiting>,
    ready: Condvar,
}

#[derive(Debug, Default)]
struct Waiting {
    frames: Vec<Frame>,
    dropped: u64,
    stopping: bool,
}

impl Encoders {
    pub fn start() -> anyhow::Result<Encoders> {
        let queue = Arc::new(Queue::default());
        let serving = queue.clone();
        let thread = std::thread::Builder::new()
            .name("encoders".into())
            .spawn(move || {
                // A placed send must reach Janus before its tick: the encoders run ahead of every
                // ordinary thread, as the card's do (an encode is a fraction of a millisecond).
                realtime::promote("the encoders");
                serve(&serving);
            })
            .context("cannot start the encoders' thread")?;
        Ok(Encoders { queue, thread: Some(thread) })
    }

    /// Takes every frame of `frames` (the card's thread's, once per block), and wakes the
    /// thread once for all of them.
    pub fn hand_over(&self, frames: &mut Vec<Frame>) {
        if frames.is_empty() {
            return;
        }
        let mut waiting = lock(&self.queue.waiting);
        waiting.frames.append(frames);
        let excess = waiting.frames.len().saturating_sub(QUEUE_LIMIT);
        if excess > 0 {
            waiting.frames.drain(..excess);
            waiting.dropped += excess as u64;
        }
        drop(waiting);
        self.queue.ready.notify_one();
    }
}

impl Drop for Encoders {
    fn drop(&mut self) {
        lock(&self.queue.waiting).stopping = true;
        self.queue.ready.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(queue: &Queue) {
    let mut batch = Vec::new();
    loop {
        let dropped = {
            let mut waiting = lock(&queue.waiting);
            while waiting.frames.is_empty() && !waiting.stopping {
                waiting = queue.ready.wait(waiting).unwrap_or_else(PoisonError::into_inner);
            }
            if waiting.stopping {
                return;
            }
            std::mem::swap(&mut batch, &mut waiting.frames);
            std::mem::take(&mut waiting.dropped)
        };
        if dropped > 0 {
            tracing::warn!("the encoders fell behind the card: {dropped} frame(s) dropped");
        }
        for (input, buffer) in batch.drain(..) {
            input.push(buffer);
        }
    }
}

/// A participant's encoder chain as the card side sees it: frames of the group's send (S16
/// mono at the card's rate), stamped one after the other.
#[derive(Debug)]
pub struct EncoderInput {
    injector: Injector,
    rate: u64,
    /// Samples pushed so far: the next frame's timestamp.
    samples: AtomicU64,
}

impl EncoderInput {
    pub fn new(injector: Injector, rate: u32) -> EncoderInput {
        EncoderInput { injector, rate: u64::from(rate), samples: AtomicU64::new(0) }
    }

    /// Runs a frame through the chain (in the calling thread). A refusal means the participant
    /// is stopping or its pipeline failed, which its bus reports: the frame is dropped.
    pub fn push(&self, mut buffer: gst::Buffer) {
        let samples = buffer.size() as u64 / 2;
        let start = self.samples.fetch_add(samples, Ordering::Relaxed);
        let stamp = |samples: u64| gst::ClockTime::from_nseconds(samples * 1_000_000_000 / self.rate);
        let frame = buffer.make_mut();
        frame.set_pts(stamp(start));
        frame.set_duration(stamp(samples));
        let _ = self.injector.push(buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst::prelude::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// A sink pad standing for a participant's encoder: it reports what it is given.
    fn recorder(tx: mpsc::Sender<(u8, Option<gst::ClockTime>, Option<gst::ClockTime>)>) -> gst::Pad {
        let tx = Mutex::new(tx);
        gst::Pad::builder(gst::PadDirection::Sink)
            .chain_function(move |_, _, buffer| {
                let first = buffer.map_readable().map(|map| map[0]).unwrap_or_default();
                let _ = lock(&tx).send((first, buffer.pts(), buffer.duration()));
                Ok(gst::FlowSuccess::Ok)
            })
            .build()
    }

    #[test]
    fn frames_handed_over_in_one_go_reach_their_encoders_in_order_stamped_back_to_back() {
        gst::init().expect("GStreamer");
        let caps = gst::Caps::builder("audio/x-raw").field("format", "S16LE").build();
        let (tx, rx) = mpsc::channel();
        let (a, b) = (recorder(tx.clone()), recorder(tx));
        for pad in [&a, &b] {
            pad.set_active(true).expect("active");
        }
        let input =
            |pad: &gst::Pad| Arc::new(EncoderInput::new(Injector::new("in", &caps, pad).expect("linked"), 48_000));
        let (to_a, to_b) = (input(&a), input(&b));
        let frame = |first: u8| gst::Buffer::from_mut_slice(vec![first; 960 * 2]);
        let encoders = Encoders::start().expect("thread");
        // One block completing a frame of each group, then a block completing a's next two.
        let mut frames = vec![(to_a.clone(), frame(1)), (to_b, frame(2))];
        encoders.hand_over(&mut frames);
        assert!(frames.is_empty(), "taken, not copied");
        frames.extend([(to_a.clone(), frame(3)), (to_a, frame(4))]);
        encoders.hand_over(&mut frames);

        let ms = |ms: u64| Some(gst::ClockTime::from_mseconds(ms));
        let got: Vec<_> = (0..4).map(|_| rx.recv_timeout(Duration::from_secs(2)).expect("a frame")).collect();
        assert_eq!(got, [(1, ms(0), ms(20)), (2, ms(0), ms(20)), (3, ms(20), ms(20)), (4, ms(40), ms(20))]);
    }

    /// The card's thread never waits for the encoders: with the encoder stuck, handing over
    /// goes on at once, and past [`QUEUE_LIMIT`] the oldest frames are the ones dropped.
    #[test]
    fn handing_over_never_waits_for_a_stuck_encoder_and_drops_the_oldest() {
        gst::init().expect("GStreamer");
        let caps = gst::Caps::builder("audio/x-raw").field("format", "S16LE").build();
        let ((tx, rx), (entering, entered)) = (mpsc::channel(), mpsc::channel());
        let stuck = Arc::new(Mutex::new(()));
        let holding = lock(&stuck);
        let encoder = {
            let (stuck, tx, entering) = (stuck.clone(), Mutex::new(tx), Mutex::new(entering));
            gst::Pad::builder(gst::PadDirection::Sink)
                .chain_function(move |_, _, buffer| {
                    let _ = lock(&entering).send(());
                    drop(lock(&stuck));
                    let first =
                        buffer.map_readable().map(|map| u16::from_le_bytes([map[0], map[1]])).unwrap_or_default();
                    let _ = lock(&tx).send(first);
                    Ok(gst::FlowSuccess::Ok)
                })
                .build()
        };
        encoder.set_active(true).expect("active");
        let input = Arc::new(EncoderInput::new(Injector::new("in", &caps, &encoder).expect("linked"), 48_000));
        let encoders = Encoders::start().expect("thread");
        let frame = |n: u16| gst::Buffer::from_mut_slice([n.to_le_bytes(); 960].concat());
        // The first frame gets the encoder stuck; then the card goes on.
        encoders.hand_over(&mut vec![(input.clone(), frame(0))]);
        entered.recv_timeout(Duration::from_secs(2)).expect("the encoder took the first frame");
        let started = std::time::Instant::now();
        let total = QUEUE_LIMIT as u16 * 2 + 1;
        for n in 1..total {
            encoders.hand_over(&mut vec![(input.clone(), frame(n))]);
        }
        assert!(started.elapsed() < Duration::from_millis(500), "handing over waited for the encoder");
        drop(holding);
        let got: Vec<u16> =
            (0..=QUEUE_LIMIT).map(|_| rx.recv_timeout(Duration::from_secs(2)).expect("a frame")).collect();
        // The frame the encoder was stuck on, then the newest QUEUE_LIMIT.
        let newest: Vec<u16> = (total - QUEUE_LIMIT as u16..total).collect();
        assert_eq!(got[0], 0);
        assert_eq!(got[1..], newest[..], "the oldest were dropped");
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "nothing more");
    }
}
