//! The card's directions on AES67: each a pipeline of its own on the PTP clock, with base time 0
//! so that running time is PTP time, started once the clock has synced.
//!
//! ```text
//! receive: udpsrc ! rtpjitterbuffer (synced, RFC 7273) ! rtpL24depay ! audioconvert (stream
//!          channel k → card input k) ! audioresample ! F32 8ch ! audiobuffersplit (card period)
//!          ! appsink (sync: each block at its media time + the latency) ─▶ BlockMixer::block
//!          (no stream: audiotestsrc silence, live, so the mix still runs on the PTP clock)
//! send:    appsrc (pulls the playback queue, PTS = the block's PTP time) ! audioconvert (card
//!          output k → stream channel k) ! audioresample ! S24BE ! rtpL24pay (1 ms)
//!          ! udpsink (sync, no processing deadline: each packet leaves at its RTP time)
//! ```
//!
//! The receive's jitter buffer places each packet by the stream's `ts-refclk` and `mediaclk`
//! (`mode=synced`, `rfc7273-sync`): the capture is handed to the mix at media time plus the
//! pipeline's latency (the receive latency and one card period), whatever the network did. The
//! send stamps each block with the PTP time it is due, so its RTP time is PTP time × 48000 (the
//! payloader's offset is 0) and udpsink sends each packet when that time comes.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, anyhow};
use gst::prelude::*;
use gst_app::gst_base::prelude::BaseSinkExt as _;
use partyline_shared::aes67::{Aes67Stream, PAYLOAD_TYPE, RATE};
use partyline_shared::bridge::PlanAes67;
use partyline_shared::sync::lock;

use super::Network;
use super::channels::{by_number, depayloader, depayloader_order, in_order};
use crate::card::PERIOD_US;
use crate::card_mix::BlockMixer;
use crate::elements::raw_caps;
use crate::jitter::Jitter;
use crate::mix::CHANNELS;
use crate::realtime::PromoteOnce;
use crate::samples::to_buffer;
use crate::state::StatusBoard;

/// How far ahead of its PTP time a sent block is stamped when the send starts or catches up:
/// the time to pass the payloader and reach udpsink.
const SEND_LEAD_NS: u64 = 1_000_000;
/// A send this far off its schedule (a stalled thread, a step of PTP time) starts again from now.
const SEND_CATCH_UP_NS: u64 = 20_000_000;

/// One AES67 direction of the card, running (or waiting for the PTP clock).
#[derive(Debug)]
pub struct Direction {
    pipeline: gst::Pipeline,
    starter: tokio::task::JoinHandle<()>,
}

impl Direction {
    /// Plays `pipeline` on the network's clock once it has synced, and again on each new clock
    /// after PTP time stepped (base time 0 on each: running time stays PTP time).
    fn start(
        pipeline: gst::Pipeline,
        network: &Arc<Network>,
        board: Arc<StatusBoard>,
        what: &'static str,
    ) -> Direction {
        pipeline.set_start_time(gst::ClockTime::NONE);
        pipeline.set_base_time(gst::ClockTime::ZERO);
        let (network, playing) = (network.clone(), pipeline.clone());
        let starter = tokio::spawn(async move {
            network.ptp.synced().await;
            let mut clocks = network.ptp.clocks();
            loop {
                playing.use_clock(Some(&*clocks.borrow_and_update()));
                if let Err(error) = playing.set_state(gst::State::Playing) {
                    let text = format!("the AES67 {what} pipeline does not start: {error}");
                    tracing::error!("{text}");
                    board.set_pipeline_error(Some(text));
                    return;
                }
                tracing::info!("AES67 {what}: running on the PTP clock");
                let bus = playing.bus().expect("a pipeline's bus");
                tokio::select! {
                    () = crate::gstreamer_card::watch_bus(bus, board.clone()) => return,
                    changed = clocks.changed() => if changed.is_err() { return },
                }
                // From Null: a clock's waits and its running time start again on the new one.
                let _ = playing.set_state(gst::State::Null);
            }
        });
        Direction { pipeline, starter }
    }

    pub fn stop(&self) {
        self.starter.abort();
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

fn make(factory: &str, name: &str) -> anyhow::Result<gst::Element> {
    gst::ElementFactory::make(factory)
        .name(name)
        .build()
        .with_context(|| format!("GStreamer element {factory} is missing"))
}

/// The receive's figures for the status.
#[derive(Debug, Default)]
pub struct ReceiveStats {
    /// Packets of the stream (its origin's, of its SSRC) received, and those to its group and
    /// port that were not its own, dropped (`source.rs`).
    pub source: Arc<super::source::Counted>,
    /// The jitter buffer, whose own figures say what came too late or never.
    jitter: std::sync::OnceLock<gst::Element>,
    /// |handed to the mix − (media time + latency)|, 99th percentile of the last second, µs.
    pub offset_p99_us: AtomicI64,
}

/// The card's capture from the stream of `plan.receive_sdp` (or silence when there is none).
pub fn receive(
    plan: &PlanAes67,
    rate: u32,
    network: &Arc<Network>,
    mut mixer: BlockMixer,
    board: Arc<StatusBoard>,
) -> anyhow::Result<(Direction, Arc<ReceiveStats>)> {
    let pipeline = gst::Pipeline::with_name("aes67-receive");
    let card_caps = raw_caps(rate, CHANNELS as u32);
    let period_frames = u64::from(rate) * PERIOD_US as u64 / 1_000_000;
    let stats = Arc::new(ReceiveStats::default());
    let mut chain: Vec<gst::Element> = Vec::new();
    if plan.receive_sdp.is_empty() {
        chain.push(
            gst::ElementFactory::make("audiotestsrc")
                .name("aes67-silence")
                .property_from_str("wave", "silence")
                .property("is-live", true)
                .property("samplesperbuffer", i32::try_from(period_frames).unwrap_or(240))
                .build()?,
        );
        chain.push(gst::ElementFactory::make("capsfilter").property("caps", &card_caps).build()?);
    } else {
        let stream = Aes67Stream::parse(&plan.receive_sdp).map_err(|e| anyhow!("audio.aes67.receiveSdp: {e}"))?;
        let source = gst::ElementFactory::make("udpsrc")
            .name("aes67-udpsrc")
            .property("address", stream.group.to_string())
            .property("port", i32::from(stream.port))
            .property("multicast-iface", &network.interface.name)
            .property("auto-multicast", true)
            .property("caps", rtp_caps(&stream))
            .build()?;
        super::source::guard(&source, super::source::SourceFilter::new(stream.origin), Arc::clone(&stats.source));
        let jitter = gst::ElementFactory::make("rtpjitterbuffer")
            .name("aes67-jitter")
            .property_from_str("mode", "synced")
            .property("rfc7273-sync", true)
            .property("latency", plan.receive_latency_ms)
            .build()?;
        let _ = stats.jitter.set(jitter.clone());
        let depay = make(depayloader(stream.encoding), "aes67-depay")?;
        let order = depayloader_order(stream.encoding, usize::from(stream.channels))?;
        let split = gst::ElementFactory::make("audiobuffersplit")
            .name("aes67-blocks")
            .property("output-buffer-duration", gst::Fraction::new(PERIOD_US as i32, 1_000_000))
            .build()?;
        let channels = by_number("aes67-channels", usize::from(stream.channels), CHANNELS, &order)?;
        chain.extend([source, jitter, depay, channels]);
        chain.push(make("audioresample", "aes67-resample")?);
        chain.push(gst::ElementFactory::make("capsfilter").property("caps", &card_caps).build()?);
        chain.push(split);
        tracing::info!(
            "AES67 receive: {:?} from {} ({}:{}, {} {} ch), latency {} ms",
            stream.name,
            stream.origin,
            stream.group,
            stream.port,
            stream.encoding.name(),
            stream.channels,
            plan.receive_latency_ms
        );
    }
    let captured = gst_app::AppSink::builder().name("aes67-captured").caps(&card_caps).sync(true).build();
    // No processing deadline: a base sink adds its default 20 ms to the pipeline's latency, which
    // would hand each block to the mix 20 ms after it is complete. The receive latency is the
    // one margin for what comes late (bridged logs the latency in force: media time + 27 ms with it, 7 without).
    captured.set_processing_deadline(gst::ClockTime::ZERO);
    chain.push(captured.clone().upcast());
    pipeline.add_many(&chain)?;
    gst::Element::link_many(&chain)?;

    let mut offsets = Offsets::default();
    let offset_stats = stats.clone();
    let mut promotion = PromoteOnce::new("the card's AES67 capture and mix");
    let mut told_latency = false;
    captured.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |sink| {
                promotion.here();
                let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                let buffer = sample.buffer().ok_or(gst::FlowError::Error)?;
                // GStreamer's own type hierarchy: an appsink is a base sink.
                let latency = sink.dynamic_cast_ref::<gst_app::gst_base::BaseSink>().map(|s| s.latency());
                if let (Some(pts), Some(latency), Some(clock)) = (buffer.pts(), latency, sink.clock()) {
                    if !told_latency {
                        tracing::info!(
                            "AES67 receive: each block reaches the mix at its media time + {:.1} ms",
                            latency.nseconds() as f64 / 1e6
                        );
                        told_latency = true;
                    }
                    let now = clock.time();
                    let due = pts + latency;
                    offsets.add(&offset_stats, now.nseconds() as i64 - due.nseconds() as i64);
                }
                let map = buffer.map_readable().map_err(|_| gst::FlowError::Error)?;
                mixer.block(map.as_slice());
                Ok(gst::FlowSuccess::Ok)
            })
            .build(),
    );
    Ok((Direction::start(pipeline, network, board, "receive"), stats))
}

/// The last second's offsets of the capture against media time.
#[derive(Debug, Default)]
struct Offsets {
    window: Vec<i64>,
}

impl ReceiveStats {
    /// Packets the jitter buffer counted lost and those that came after their time (dropped).
    pub fn lost_and_late(&self) -> (u64, u64) {
        let Some(stats) = self.jitter.get().map(|j| j.property::<gst::Structure>("stats")) else { return (0, 0) };
        (stats.get::<u64>("num-lost").unwrap_or(0), stats.get::<u64>("num-late").unwrap_or(0))
    }
}

impl Offsets {
    fn add(&mut self, stats: &ReceiveStats, offset_ns: i64) {
        self.window.push(offset_ns.abs());
        if self.window.len() * PERIOD_US as usize >= 1_000_000 {
            self.window.sort_unstable();
            let p99 = self.window[self.window.len() * 99 / 100];
            stats.offset_p99_us.store(p99 / 1000, Ordering::Relaxed);
            self.window.clear();
        }
    }
}

/// The RTP caps of `stream` for udpsrc, with what RFC 7273 placement reads: the reference clock
/// (GStreamer reads only its domain: a stream that names no grandmaster gets a placeholder) and
/// the media clock's offset.
fn rtp_caps(stream: &Aes67Stream) -> gst::Caps {
    let grandmaster = stream.grandmaster.clone().unwrap_or_else(|| "00-00-00-00-00-00-00-00".into());
    gst::Caps::builder("application/x-rtp")
        .field("media", "audio")
        .field("clock-rate", RATE as i32)
        .field("encoding-name", stream.encoding.name())
        .field("channels", i32::from(stream.channels))
        .field("payload", i32::from(stream.payload_type))
        .field("a-ts-refclk", format!("ptp=IEEE1588-2008:{grandmaster}:{}", stream.ptp_domain))
        .field("a-mediaclk", format!("direct={}", stream.media_clock_offset))
        .build()
}

/// The card's playback as the stream of `plan.send_*` to `group`, pulling blocks from `queue`.
pub fn send(
    plan: &PlanAes67,
    group: std::net::Ipv4Addr,
    rate: u32,
    network: &Arc<Network>,
    queue: Arc<Mutex<Jitter>>,
    board: Arc<StatusBoard>,
) -> anyhow::Result<Direction> {
    let pipeline = gst::Pipeline::with_name("aes67-send");
    let card_caps = raw_caps(rate, CHANNELS as u32);
    let channels = usize::from(plan.send_channels);
    let mixed = gst_app::AppSrc::builder()
        .name("aes67-mixed")
        .caps(&card_caps)
        .format(gst::Format::Time)
        .is_live(true)
        // One block queued: the block sent next is pulled from the playback queue one card
        // period before it is due, not a queue's worth earlier.
        .max_bytes((u64::from(rate) * PERIOD_US as u64 / 1_000_000) * CHANNELS as u64 * 4)
        .build();
    let stream_caps = gst::Caps::builder("audio/x-raw")
        .field("format", "S24BE")
        .field("layout", "interleaved")
        .field("rate", RATE as i32)
        .field("channels", channels as i32)
        .build();
    let packet_ns = 1_000_000_i64;
    let chain = [
        mixed.clone().upcast(),
        by_number("aes67-channels", CHANNELS, channels, &in_order(channels))?,
        make("audioresample", "aes67-resample")?,
        gst::ElementFactory::make("capsfilter").property("caps", &stream_caps).build()?,
        // Unpositioned for the payloader: with speaker positions it would reorder the channels
        // into RFC 3551's order for the count (and say so in a `channel-order` no AES67 SDP
        // carries), while AES67's channel k must be card output k.
        gst::ElementFactory::make("capssetter")
            .property("caps", gst::Caps::builder("audio/x-raw").field("channel-mask", gst::Bitmask::new(0)).build())
            .property("join", true)
            .property("replace", false)
            .build()
            .context("GStreamer element capssetter is missing (gstreamer1.0-plugins-good)")?,
        gst::ElementFactory::make("rtpL24pay")
            .name("aes67-pay")
            .property("pt", u32::from(PAYLOAD_TYPE))
            .property("min-ptime", packet_ns)
            .property("max-ptime", packet_ns)
            .property("timestamp-offset", 0_u32)
            // One SSRC for the stream (its session id's: its name's on this host), not a new
            // random one at each start: a start on a new clock after a step is the same stream
            // to a receiver that locks on its sender's SSRC.
            .property("ssrc", super::session_id(&plan.send_name, network.interface.address) as u32)
            .build()
            .context("GStreamer element rtpL24pay is missing (gstreamer1.0-plugins-good)")?,
        gst::ElementFactory::make("udpsink")
            .name("aes67-udpsink")
            .property("host", group.to_string())
            .property("port", i32::from(plan.send_port))
            .property("multicast-iface", &network.interface.name)
            .property("ttl-mc", i32::from(plan.send_ttl))
            .property("auto-multicast", true)
            // Expedited Forwarding, as AES67 (and Dante) mark their media.
            .property("qos-dscp", 46)
            .property("sync", true)
            .property("async", false)
            .property("processing-deadline", 0_u64)
            .build()?,
    ];
    pipeline.add_many(&chain)?;
    gst::Element::link_many(&chain)?;

    let period_frames = (u64::from(rate) * PERIOD_US as u64 / 1_000_000) as usize;
    let period_ns = PERIOD_US as u64 * 1000;
    let mut block = vec![0.0; period_frames * CHANNELS];
    let mut next: Option<u64> = None;
    let mut promotion = PromoteOnce::new("the card's AES67 send");
    mixed.set_callbacks(
        gst_app::AppSrcCallbacks::builder()
            .need_data(move |src, _| {
                promotion.here();
                // The pipeline's clock: a new one after PTP time stepped.
                let Some(now) = src.clock().map(|c| c.time().nseconds()) else { return };
                let pts = match next {
                    Some(pts) if pts.abs_diff(now) < SEND_CATCH_UP_NS => pts,
                    Some(pts) => {
                        let off_ms = (pts as f64 - now as f64) / 1e6;
                        tracing::warn!("AES67 send: {off_ms:+.1} ms off its schedule, starting again from now");
                        now + SEND_LEAD_NS
                    }
                    None => now + SEND_LEAD_NS,
                };
                next = Some(pts + period_ns);
                lock(&queue).pull(&mut block);
                let mut buffer = to_buffer(&block);
                if let Some(buffer) = buffer.get_mut() {
                    buffer.set_pts(gst::ClockTime::from_nseconds(pts));
                    buffer.set_duration(gst::ClockTime::from_nseconds(period_ns));
                }
                let _ = src.push_buffer(buffer);
            })
            .build(),
    );
    Ok(Direction::start(pipeline, network, board, "send"))
}
