//! A group participant's media: codec chains in a GStreamer pipeline `participant:ROOM` of its
//! own beside the card side, which it meets only through the group's [`Feed`]:
//!
//! ```text
//! ▶ [encoders' thread] [audioresample !] opusenc ! rtpopuspay ─▶ Janus
//! Janus ─▶ [RTP port's thread] rtpopusdepay ! opusdec [! audioresample] ▶ Feed (the room's mix)
//! ```
//!
//! The chains have no streaming thread of their own: their ends are pads of bridged's own
//! (`pads.rs`), pushed by threads that serve every group. The encoders' thread (`encoders.rs`)
//! pushes each frame of the group's send (S16 mono, cut and placed by the feed); the decoded mix
//! is converted into the feed's queue in the thread that pushed the packet. The feed converts
//! between the card's F32 and Opus's S16 itself, so the chains hold only the codec and its RTP
//! framing. The packets carry no RFC 6464 audio level: the card's talking comes from bridged's
//! own `Talking` signal, whatever the transport.
//!
//! Between the payloader and Janus ([`Transport`]): with `rtp`, the loopback socket every
//! plain-RTP participant shares and the thread that receives on it (`rtp_port.rs`); with
//! `webrtc`, a webrtcbin (ICE, DTLS-SRTP and its own jitter buffer and threads, as a browser),
//! behind a queue whose thread takes the packets into it (webrtcbin blocks its sender until DTLS
//! is up, and the encoders' thread must never wait).
//!
//! The resamplers are there only when the card does not run at Opus's 48 kHz. The pipeline
//! stops (`Null`) and the feed forgets its encoder when this is dropped; the card side never
//! notices a participant come or go.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use anyhow::{Context as _, anyhow};
use futures_util::StreamExt as _;
use gst::glib;
use gst::prelude::*;
use partyline_shared::bridge::{PlanGroup, Transport};
use partyline_shared::janus::RtpPeer;
use partyline_shared::sync::lock;
use tokio::sync::{Notify, mpsc};
use tokio_util::task::AbortOnDropHandle;

use super::negotiation::{self, RtcEvent};
use super::rtp_port::{Route, RtpPort};
use super::{Context, Stages};
use crate::encoders::EncoderInput;
use crate::feed::{Feed, OPUS_FRAME_MS};
use crate::pads::{self, Injector};
use crate::samples::{from_s16_bytes, to_s16_buffer};
use crate::state::ParticipantStats;
use crate::tick::Aligner;

/// Opus's rate (RTP clock and the encoder's input).
const OPUS_RATE: u32 = 48_000;
/// RTP payload type of Opus in the offer or the plain-RTP join.
pub const OPUS_PT: u8 = 111;
/// What a WebRTC participant's send may queue in front of webrtcbin.
const WEBRTC_SEND_QUEUE: gst::ClockTime = gst::ClockTime::from_mseconds(60);

/// A participant's running pipeline; stopped when dropped.
#[derive(Debug)]
pub struct Media {
    pipeline: gst::Pipeline,
    link: Link,
    feed: Arc<Feed>,
    /// The group's send: handed to the feed once Janus's address is known.
    encoder_input: Arc<EncoderInput>,
    /// The depayloader's sink, for the packets of a plain-RTP participant.
    depay_sink: gst::Pad,
    /// The pads of bridged's own that the chains end in (a link does not keep its peer).
    _ends: Vec<gst::Pad>,
    _bus: AbortOnDropHandle<()>,
}

/// How the pipeline meets Janus.
#[derive(Debug)]
pub enum Link {
    /// webrtcbin, and its events for the negotiation.
    Webrtc { webrtc: gst::Element, events: mpsc::UnboundedReceiver<RtcEvent> },
    /// A plain-RTP participant on the shared port: where its packets go once
    /// [`Media::send_to`] has Janus's address, the route of what Janus sends back, and a permit
    /// given by the first packet from Janus (which sends only after it has received one).
    Rtp { port: Arc<RtpPort>, janus: Arc<OnceLock<SocketAddr>>, route: Option<Route>, flowing: Arc<Notify> },
}

impl Media {
    /// Builds and starts the pipeline of `group`, and returns it with the pipeline's errors.
    pub fn start(
        context: &Context,
        group: &PlanGroup,
        feed: Arc<Feed>,
        stats: &Arc<ParticipantStats>,
        stages: &Stages,
    ) -> anyhow::Result<(Media, mpsc::UnboundedReceiver<String>)> {
        let rate = context.rate;
        let pipeline = gst::Pipeline::with_name(&format!("participant:{}", group.room));
        let send = encoder(rate, group.bitrate_kbps)?;
        pipeline.add_many(&send)?;
        gst::Element::link_many(&send)?;
        let pay_src = send.last().and_then(|pay| pay.static_pad("src")).ok_or_else(|| anyhow!("no payloader"))?;
        count_packets(&pay_src, stats, true);
        let receive = decoder(rate)?;
        pipeline.add_many(&receive)?;
        gst::Element::link_many(&receive)?;
        let depay_sink = receive[0].static_pad("sink").ok_or_else(|| anyhow!("depayloader without sink"))?;
        count_packets(&depay_sink, stats, false);
        let decoded = receive.last().and_then(|last| last.static_pad("src")).ok_or_else(|| anyhow!("no decoder"))?;
        let mut ends = vec![into_feed(&decoded, rate, feed.clone())?];
        let link = match context.transport {
            Transport::Rtp => {
                let (link, to_janus) = plain_rtp(&context.rtp, &pay_src)?;
                ends.push(to_janus);
                link
            }
            Transport::Webrtc => webrtc(context, &pipeline, &pay_src, depay_sink.clone(), stages)?,
            // `local.rs` meets the rooms: no pipeline to build.
            Transport::Rooms => return Err(anyhow!("partyline's rooms take the card without a pipeline")),
        };
        let (faults_tx, faults) = mpsc::unbounded_channel();
        let bus = pipeline.bus().ok_or_else(|| anyhow!("pipeline without a bus"))?;
        let bus_task = AbortOnDropHandle::new(tokio::spawn(forward_errors(bus, faults_tx)));
        pipeline.set_state(gst::State::Playing).context("the participant's pipeline does not start")?;
        let encoder_sink = send[0].static_pad("sink").ok_or_else(|| anyhow!("no encoder input"))?;
        let encoder_input =
            Arc::new(EncoderInput::new(Injector::new("group-send", &s16_mono(rate), &encoder_sink)?, rate));
        let media = Media { pipeline, link, feed, encoder_input, depay_sink, _ends: ends, _bus: bus_task };
        if let Link::Webrtc { .. } = media.link {
            // webrtcbin holds what it gets until ICE and DTLS are up.
            media.feed.connect(media.encoder_input.clone(), None);
        }
        Ok((media, faults))
    }

    pub fn link(&mut self) -> &mut Link {
        &mut self.link
    }

    /// Plain RTP: sends to Janus at `janus` from now on (its answer to the join), which
    /// prebuffers `prebuffer` of its packets, and takes the room's mix from there.
    pub fn send_to(&mut self, janus: &RtpPeer, prebuffer: u32) -> anyhow::Result<()> {
        let Link::Rtp { port, janus: to, route, flowing } = &mut self.link else {
            return Err(anyhow!("not a plain-RTP participant"));
        };
        let address = SocketAddr::new(
            janus.ip.parse().with_context(|| format!("Janus's plain-RTP address {:?} is not an IP", janus.ip))?,
            janus.port,
        );
        to.set(address).map_err(|_| anyhow!("Janus's address is already set"))?;
        let rtp = Injector::new("from-janus", &rtp_caps(), &self.depay_sink)?;
        *route = Some(port.route(address.port(), arrivals(rtp, flowing.clone(), self.feed.clone())));
        // One packet now starts Janus (it sends the room's mix only after one); the group's send
        // follows once placed against the tick that mix shows (`tick.rs`).
        self.encoder_input.push(to_s16_buffer(&self.feed.silent_frame()));
        self.feed.connect(self.encoder_input.clone(), Some(Aligner::new(prebuffer)));
        Ok(())
    }

    /// Plain RTP: resolves at the first packet from Janus; never for WebRTC (Janus's
    /// `webrtcup` tells).
    pub async fn flowing(&self) {
        match &self.link {
            Link::Rtp { flowing, .. } => flowing.notified().await,
            Link::Webrtc { .. } => std::future::pending().await,
        }
    }
}

/// What the RTP port's thread does with each packet from Janus: the first gives the permit,
/// each marks Janus's tick (it sends the room's mix right after each), and each is decoded into
/// the feed, stamped with its arrival.
fn arrivals(rtp: Injector, flowing: Arc<Notify>, feed: Arc<Feed>) -> impl Fn(&[u8], Instant) + Send + Sync + 'static {
    let (first, started) = (AtomicBool::new(true), Instant::now());
    move |packet, arrived| {
        if first.swap(false, Ordering::Relaxed) {
            flowing.notify_one();
        }
        feed.tick.arrived(arrived);
        let mut buffer = gst::Buffer::from_slice(packet.to_vec());
        let since = arrived.saturating_duration_since(started);
        buffer.make_mut().set_pts(gst::ClockTime::from_nseconds(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)));
        let _ = rtp.push(buffer);
    }
}

/// The send chain, from the group's send (S16 mono at the card's rate) to RTP, in order (the
/// payloader last).
fn encoder(rate: u32, bitrate_kbps: u32) -> anyhow::Result<Vec<gst::Element>> {
    let mut send = Vec::new();
    if rate != OPUS_RATE {
        send.extend([gst::ElementFactory::make("audioresample").build()?, caps_filter(&s16_mono(OPUS_RATE))?]);
    }
    let encoder = gst::ElementFactory::make("opusenc")
        .property("bitrate", i32::try_from(bitrate_kbps * 1000).unwrap_or(64_000))
        .property_from_str("frame-size", &OPUS_FRAME_MS.to_string())
        .property_from_str("audio-type", "restricted-lowdelay")
        .build()
        .context("GStreamer element opusenc is missing (gstreamer1.0-plugins-base)")?;
    let payloader = gst::ElementFactory::make("rtpopuspay").property("pt", u32::from(OPUS_PT)).build()?;
    send.extend([encoder, payloader]);
    Ok(send)
}

/// The receive chain, from RTP to S16 mono at the card's rate (the depayloader first).
fn decoder(rate: u32) -> anyhow::Result<Vec<gst::Element>> {
    let depay = gst::ElementFactory::make("rtpopusdepay").build()?;
    let decoder = gst::ElementFactory::make("opusdec").property("plc", true).build()?;
    let mut receive = vec![depay, decoder];
    if rate != OPUS_RATE {
        receive.extend([caps_filter(&s16_mono(OPUS_RATE))?, gst::ElementFactory::make("audioresample").build()?]);
    }
    Ok(receive)
}

/// The decoded room's mix into the feed's queue, in the thread that decoded it.
fn into_feed(decoded: &gst::Pad, rate: u32, feed: Arc<Feed>) -> anyhow::Result<gst::Pad> {
    let samples = Mutex::new(Vec::new());
    pads::sink("room-mix", s16_mono(rate), decoded, move |buffer| {
        let Ok(map) = buffer.map_readable() else { return };
        let mut samples = lock(&samples);
        samples.clear();
        from_s16_bytes(map.as_slice(), &mut samples);
        lock(&feed.remote).push(&samples);
    })
}

/// Plain RTP on the shared loopback port: the payloader's packets go out from it to Janus's
/// address once [`Media::send_to`] knows it; what Janus sends comes back through the port's
/// thread ([`Media::arrivals`]). No jitter buffer: packets come over loopback in order, and
/// the feed's queue absorbs Janus's tick jitter (its size is the card's business).
/// Returns the link and the pad the packets leave through.
fn plain_rtp(port: &Arc<RtpPort>, pay_src: &gst::Pad) -> anyhow::Result<(Link, gst::Pad)> {
    let janus = Arc::new(OnceLock::new());
    let (to, sending) = (janus.clone(), port.clone());
    let failed = AtomicBool::new(false);
    let to_janus = pads::sink("to-janus", rtp_caps(), pay_src, move |packet| {
        let (Some(to), Ok(map)) = (to.get(), packet.map_readable()) else { return };
        if let Err(error) = sending.send(map.as_slice(), *to)
            && !failed.swap(true, Ordering::Relaxed)
        {
            tracing::warn!("cannot send to Janus at {to}: {error}");
        }
    })?;
    Ok((Link::Rtp { port: port.clone(), janus, route: None, flowing: Arc::new(Notify::new()) }, to_janus))
}

/// What the payloader makes and the depayloader takes.
fn rtp_caps() -> gst::Caps {
    gst::Caps::builder("application/x-rtp")
        .field("media", "audio")
        .field("encoding-name", "OPUS")
        .field("clock-rate", i32::try_from(OPUS_RATE).unwrap_or(48_000))
        .field("payload", i32::from(OPUS_PT))
        .build()
}

/// webrtcbin between the payloader and the depayloader, sending and receiving one audio
/// stream, its ICE limited to the plan's addresses.
fn webrtc(
    context: &Context,
    pipeline: &gst::Pipeline,
    pay_src: &gst::Pad,
    depay_sink: gst::Pad,
    stages: &Stages,
) -> anyhow::Result<Link> {
    let webrtc = gst::ElementFactory::make("webrtcbin")
        .property_from_str("bundle-policy", "max-bundle")
        .property("latency", context.jitter_buffer_ms)
        .build()
        .context("GStreamer element webrtcbin is missing (gstreamer1.0-plugins-bad, gstreamer1.0-nice)")?;
    pipeline.add(&webrtc)?;
    // webrtcbin (1.22) holds each outgoing packet in a `clocksync` until its running time:
    // measured 6–16 ms of median delay per run on the send path, for nothing here (the
    // encoder's input is live and paced by the card already).
    if let Some(bin) = webrtc.downcast_ref::<gst::Bin>() {
        bin.connect_deep_element_added(|_, _, element| {
            if element.factory().is_some_and(|f| f.name() == "clocksync") {
                element.set_property("sync", false);
            }
        });
    }
    // webrtcbin blocks the thread that pushes into it until DTLS is up: a queue hands its
    // packets over in a thread of its own, so the encoders' thread, which serves every group,
    // never waits (leaky: what piles up meanwhile is dropped, as Janus would drop it).
    let queue = gst::ElementFactory::make("queue")
        .property("max-size-buffers", 0u32)
        .property("max-size-bytes", 0u32)
        .property("max-size-time", WEBRTC_SEND_QUEUE.nseconds())
        .property_from_str("leaky", "downstream")
        .build()?;
    pipeline.add(&queue)?;
    pay_src.link(&queue.static_pad("sink").ok_or_else(|| anyhow!("queue without sink"))?)?;
    let send_pad = webrtc.request_pad_simple("sink_%u").ok_or_else(|| anyhow!("webrtcbin gave no sink pad"))?;
    queue.static_pad("src").ok_or_else(|| anyhow!("queue without src"))?.link(&send_pad)?;
    let transceiver = send_pad.property::<gst_webrtc::WebRTCRTPTransceiver>("transceiver");
    transceiver.set_property("direction", gst_webrtc::WebRTCRTPTransceiverDirection::Sendrecv);
    restrict_ice(&webrtc, &context.ice_addresses)?;
    let pipeline_weak = pipeline.downgrade();
    webrtc.connect_pad_added(move |_, pad| {
        if pad.direction() != gst::PadDirection::Src {
            return;
        }
        if !depay_sink.is_linked() && pad.link(&depay_sink).is_ok() {
            return;
        }
        // A second stream (none is offered): dropped.
        let Some(pipeline) = pipeline_weak.upgrade() else { return };
        if let Ok(fakesink) = gst::ElementFactory::make("fakesink").property("async", false).build()
            && pipeline.add(&fakesink).is_ok()
        {
            let _ = fakesink.sync_state_with_parent();
            if let Some(sink) = fakesink.static_pad("sink") {
                let _ = pad.link(&sink);
            }
        }
    });
    let events = negotiation::watch(&webrtc, stages);
    Ok(Link::Webrtc { webrtc, events })
}

impl Drop for Media {
    fn drop(&mut self) {
        self.feed.disconnect();
        if let Link::Rtp { route, .. } = &mut self.link {
            route.take();
        }
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// The pipeline's errors, as text, until the bus ends.
async fn forward_errors(bus: gst::Bus, faults: mpsc::UnboundedSender<String>) {
    let mut messages = bus.stream();
    while let Some(message) = messages.next().await {
        if let gst::MessageView::Error(error) = message.view() {
            let source = message.src().map(|s| s.name().to_string()).unwrap_or_default();
            let text = match error.debug() {
                Some(debug) => format!("{source}: {} ({debug})", error.error()),
                None => format!("{source}: {}", error.error()),
            };
            if faults.send(text).is_err() {
                return;
            }
        }
    }
}

/// ICE only on the plan's addresses (when it names any), no UPnP discovery, UDP only.
fn restrict_ice(webrtc: &gst::Element, addresses: &[String]) -> anyhow::Result<()> {
    let ice = webrtc.property::<gst::Object>("ice-agent");
    for address in addresses {
        if !ice.emit_by_name::<bool>("add-local-ip-address", &[address]) {
            return Err(anyhow!("the ICE agent refused the local address {address}"));
        }
    }
    if ice.has_property("ice-tcp") {
        ice.set_property("ice-tcp", false);
    }
    if ice.has_property("agent") {
        let agent = ice.property::<glib::Object>("agent");
        if agent.has_property("upnp") {
            agent.set_property("upnp", false);
        }
    }
    Ok(())
}

fn caps_filter(caps: &gst::Caps) -> anyhow::Result<gst::Element> {
    Ok(gst::ElementFactory::make("capsfilter").property("caps", caps).build()?)
}

/// `audio/x-raw` S16 mono at `rate`: what Opus takes and gives.
fn s16_mono(rate: u32) -> gst::Caps {
    gst::Caps::builder("audio/x-raw")
        .field("format", "S16LE")
        .field("layout", "interleaved")
        .field("rate", i32::try_from(rate).unwrap_or(48_000))
        .field("channels", 1i32)
        .build()
}

fn count_packets(pad: &gst::Pad, stats: &Arc<ParticipantStats>, sent: bool) {
    let stats = stats.clone();
    pad.add_probe(gst::PadProbeType::BUFFER | gst::PadProbeType::BUFFER_LIST, move |_, info| {
        let n = match &info.data {
            Some(gst::PadProbeData::Buffer(_)) => 1,
            Some(gst::PadProbeData::BufferList(list)) => list.len() as u64,
            _ => 0,
        };
        let counter = if sent { &stats.sent } else { &stats.received };
        counter.fetch_add(n, Ordering::Relaxed);
        gst::PadProbeReturn::Ok
    });
}
