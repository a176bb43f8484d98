//! A group participant's media: a GStreamer pipeline `participant:ROOM` of its own beside the
//! card side, which it meets only through the group's [`Feed`]:
//!
//! ```text
//! appsrc (Feed::send: the group's send, S16 mono) [! audioresample] ! opusenc ! rtpopuspay ─▶ Janus
//! Janus ─▶ rtpopusdepay ! opusdec [! audioresample] ! appsink (S16 mono → Feed::remote)
//! ```
//!
//! The feed converts between the card's F32 and Opus's S16 itself, so the chains hold only the
//! codec and its RTP framing. The packets carry no RFC 6464 audio level: the card's talking
//! comes from bridged's own `Talking` signal, whatever the transport.
//!
//! Between the payloader and Janus ([`Transport`]): with `rtp`, a `udpsink` and a `udpsrc`
//! sharing one loopback socket (AudioBridge's plain-RTP participant: Janus's socket is
//! connected to the address the join gave, so the participant sends from it); with `webrtc`,
//! a webrtcbin (ICE, DTLS-SRTP and its own jitter buffer, as a browser).
//!
//! The resamplers are there only when the card does not run at Opus's 48 kHz. The pipeline
//! stops (`Null`) and the feed forgets its encoder when this is dropped; the card side never
//! notices a participant come or go.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{Context as _, anyhow};
use futures_util::StreamExt as _;
use gst::glib;
use gst::prelude::*;
use partyline_shared::bridge::{PlanGroup, Transport};
use partyline_shared::janus::RtpPeer;
use tokio::sync::{Notify, mpsc};
use tokio_util::task::AbortOnDropHandle;

use super::negotiation::{self, RtcEvent};
use super::{Context, Stages};
use crate::pipeline::{Feed, OPUS_FRAME_MS, from_s16_bytes, to_s16_buffer};
use crate::state::ParticipantStats;
use crate::tick::Aligner;

/// Opus's rate (RTP clock and the encoder's input).
const OPUS_RATE: u32 = 48_000;
/// RTP payload type of Opus in the offer or the plain-RTP join.
pub const OPUS_PT: u8 = 111;
/// Where a plain-RTP participant receives: loopback only (Janus is on this host).
pub const PLAIN_RTP_ADDRESS: &str = "127.0.0.1";
/// The most of the group's send queued for the encoder before the oldest is dropped (the
/// card's thread never waits for a participant).
const SEND_QUEUE_MS: u64 = 60;

/// A participant's running pipeline; stopped when dropped.
#[derive(Debug)]
pub struct Media {
    pipeline: gst::Pipeline,
    link: Link,
    feed: Arc<Feed>,
    /// The group's send: handed to the feed once Janus's address is known.
    encoder_input: gst_app::AppSrc,
    _bus: AbortOnDropHandle<()>,
}

/// How the pipeline meets Janus.
#[derive(Debug)]
pub enum Link {
    /// webrtcbin, and its events for the negotiation.
    Webrtc { webrtc: gst::Element, events: mpsc::UnboundedReceiver<RtcEvent> },
    /// A plain-RTP participant: the loopback port Janus is to send to, the sink that sends to
    /// Janus once [`Media::send_to`] names its address, and a permit given by the first packet
    /// from Janus (which sends only after it has received one).
    Rtp { port: u16, udpsink: gst::Element, flowing: Arc<Notify> },
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
        let (encoder_input, send) = encoder(rate, group.bitrate_kbps)?;
        let payloader = send.last().cloned().ok_or_else(|| anyhow!("an empty send chain"))?;
        pipeline.add_many(&send)?;
        gst::Element::link_many(&send)?;
        let pay_src = payloader.static_pad("src").ok_or_else(|| anyhow!("rtpopuspay without src pad"))?;
        count_packets(&pay_src, stats, true);
        let receive = decoder(rate, feed.clone())?;
        pipeline.add_many(&receive)?;
        gst::Element::link_many(&receive)?;
        let depay_sink = receive[0].static_pad("sink").ok_or_else(|| anyhow!("depayloader without sink"))?;
        count_packets(&depay_sink, stats, false);
        let link = match context.transport {
            Transport::Rtp => plain_rtp(&pipeline, &pay_src, &depay_sink, &feed)?,
            Transport::Webrtc => webrtc(context, &pipeline, &pay_src, depay_sink, stages)?,
        };
        let (faults_tx, faults) = mpsc::unbounded_channel();
        let bus = pipeline.bus().ok_or_else(|| anyhow!("pipeline without a bus"))?;
        let bus_task = tokio::spawn(forward_errors(bus, faults_tx));
        let media = Media { pipeline, link, feed, encoder_input, _bus: AbortOnDropHandle::new(bus_task) };
        media.pipeline.set_state(gst::State::Playing).context("the participant's pipeline does not start")?;
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
    /// prebuffers `prebuffer` of its packets.
    pub fn send_to(&self, janus: &RtpPeer, prebuffer: u32) -> anyhow::Result<()> {
        let Link::Rtp { udpsink, .. } = &self.link else {
            return Err(anyhow!("not a plain-RTP participant"));
        };
        udpsink.set_property("host", &janus.ip);
        udpsink.set_property("port", i32::from(janus.port));
        // One packet now starts Janus (it sends the room's mix only after one); the group's send
        // follows once placed against the tick that mix shows (`tick.rs`).
        self.encoder_input
            .push_buffer(to_s16_buffer(&self.feed.silent_frame()))
            .context("the participant's encoder refused its first frame")?;
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

/// The send chain, from the group's send to RTP: the appsrc the card's thread pushes to, and
/// every element in order (the payloader last).
fn encoder(rate: u32, bitrate_kbps: u32) -> anyhow::Result<(gst_app::AppSrc, Vec<gst::Element>)> {
    let send_queue = u64::from(rate) * SEND_QUEUE_MS / 1000 * 2;
    let encoder_input = gst_app::AppSrc::builder()
        .caps(&s16_mono(rate))
        .format(gst::Format::Time)
        .is_live(true)
        .do_timestamp(true)
        .max_bytes(send_queue)
        .leaky_type(gst_app::AppLeakyType::Downstream)
        .build();
    let mut send = vec![encoder_input.clone().upcast::<gst::Element>()];
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
    Ok((encoder_input, send))
}

/// The receive chain, from RTP to the group's feed (the depayloader first).
fn decoder(rate: u32, feed: Arc<Feed>) -> anyhow::Result<Vec<gst::Element>> {
    let depay = gst::ElementFactory::make("rtpopusdepay").build()?;
    let decoder = gst::ElementFactory::make("opusdec").property("plc", true).build()?;
    let mut receive = vec![depay, decoder];
    if rate != OPUS_RATE {
        receive.extend([caps_filter(&s16_mono(OPUS_RATE))?, gst::ElementFactory::make("audioresample").build()?]);
    }
    let room_mix = gst_app::AppSink::builder().caps(&s16_mono(rate)).sync(false).build();
    let mut samples = Vec::new();
    room_mix.set_callbacks(
        gst_app::AppSinkCallbacks::builder()
            .new_sample(move |sink| {
                let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                let buffer = sample.buffer().ok_or(gst::FlowError::Error)?;
                let map = buffer.map_readable().map_err(|_| gst::FlowError::Error)?;
                samples.clear();
                from_s16_bytes(map.as_slice(), &mut samples);
                feed.remote.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(&samples);
                Ok(gst::FlowSuccess::Ok)
            })
            .build(),
    );
    receive.push(room_mix.upcast());
    Ok(receive)
}

/// Plain RTP on loopback: a `udpsrc` on a port of its own choosing and a `udpsink` sending
/// from that same socket. No jitter buffer: packets come over loopback in order, and the
/// feed's queue absorbs Janus's tick jitter (its size is the card's business).
fn plain_rtp(
    pipeline: &gst::Pipeline,
    pay_src: &gst::Pad,
    depay_sink: &gst::Pad,
    feed: &Arc<Feed>,
) -> anyhow::Result<Link> {
    let caps = gst::Caps::builder("application/x-rtp")
        .field("media", "audio")
        .field("encoding-name", "OPUS")
        .field("clock-rate", i32::try_from(OPUS_RATE).unwrap_or(48_000))
        .field("payload", i32::from(OPUS_PT))
        .build();
    let udpsrc = gst::ElementFactory::make("udpsrc")
        .property("address", PLAIN_RTP_ADDRESS)
        .property("port", 0i32)
        .property("caps", &caps)
        .build()
        .context("GStreamer element udpsrc is missing (gstreamer1.0-plugins-good)")?;
    // The socket exists from READY on: its port goes into the join, and the sink sends from it.
    pipeline.add(&udpsrc)?;
    udpsrc.set_state(gst::State::Ready).context("udpsrc cannot open a loopback socket")?;
    let port = u16::try_from(udpsrc.property::<i32>("port"))
        .ok()
        .filter(|&port| port != 0)
        .ok_or_else(|| anyhow!("udpsrc's socket has no local port"))?;
    // Its address until Janus's is known: an IPv4 one (the default, `localhost`, may resolve
    // to ::1, which the IPv4 socket refuses at start). Nothing is sent before [`Media::send_to`].
    let udpsink = gst::ElementFactory::make("udpsink")
        .property("socket", udpsrc.property_value("used-socket"))
        .property("host", PLAIN_RTP_ADDRESS)
        .property("port", i32::from(port))
        .property("close-socket", false)
        .property("sync", false)
        .property("async", false)
        .build()?;
    pipeline.add(&udpsink)?;
    pay_src.link(&udpsink.static_pad("sink").ok_or_else(|| anyhow!("udpsink without sink"))?)?;
    let src = udpsrc.static_pad("src").ok_or_else(|| anyhow!("udpsrc without src"))?;
    src.link(depay_sink)?;
    let flowing = Arc::new(Notify::new());
    let first = flowing.clone();
    src.add_probe(gst::PadProbeType::BUFFER, move |_, _| {
        first.notify_one();
        gst::PadProbeReturn::Remove
    });
    // Janus sends the room's mix right after each tick: its arrival is the tick's phase.
    let feed = feed.clone();
    src.add_probe(gst::PadProbeType::BUFFER, move |_, _| {
        feed.tick.arrived(Instant::now());
        gst::PadProbeReturn::Ok
    });
    Ok(Link::Rtp { port, udpsink, flowing })
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
        .property("latency", context.latency_ms)
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
    let send_pad = webrtc.request_pad_simple("sink_%u").ok_or_else(|| anyhow!("webrtcbin gave no sink pad"))?;
    pay_src.link(&send_pad)?;
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
