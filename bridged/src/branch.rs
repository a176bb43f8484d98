//! One server audio user: a bin plugged into the card side (`pipeline.rs`), a webrtcbin
//! joined to its Janus AudioBridge room, and the task that joins, watches and rejoins.
//!
//! ```text
//! tee ─ queue ! audioconvert mix-matrix (input channel, F32 → S16) ! level [! audioresample] ! opusenc ! rtpopuspay ─ webrtcbin
//! webrtcbin ─ rtpopusdepay ! opusdec (mono) [! audioresample] ! audioconvert mix-matrix (output channel, S16 → F32) ─ audiomixer
//! ```
//!
//! One audioconvert per direction does both the channel routing and the sample format; the
//! resamplers are there only when the card does not run at Opus's 48 kHz.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use gst::glib;
use gst::prelude::*;
use gst_rtp::prelude::*;
use partyline_shared::bridge::{BranchState, PlanUser};
use partyline_shared::janus::prebuffer_packets;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::janus::{JanusError, Session, plugin_error};
use crate::pipeline::{Base, raw_caps};
use crate::plan::CHANNELS;
use crate::state::{BranchStats, Shared, Tap};

/// First and last pause between two attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Janus drops a session after 60 s without a request.
const KEEPALIVE: Duration = Duration::from_secs(25);
/// How long each step of a join may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Opus frame (ms): the AudioBridge mixes 20 ms frames.
const OPUS_FRAME_MS: &str = "20";
/// Opus's rate (RTP clock and the encoder's input).
const OPUS_RATE: u32 = 48_000;
/// RTP payload type of Opus in the offer.
const OPUS_PT: u32 = 111;
/// RFC 6464 client-to-mixer audio level.
const AUDIO_LEVEL_URI: &str = "urn:ietf:params:rtp-hdrext:ssrc-audio-level";

/// The stages of one join, timed from the start of the attempt: `debug` lines
/// (`RUST_LOG=partyline_bridged=debug`) that show where a join's time goes.
#[derive(Debug, Clone)]
struct Stages {
    user: Arc<str>,
    started: Instant,
}

impl Stages {
    fn new(user: &str) -> Stages {
        Stages { user: user.into(), started: Instant::now() }
    }

    fn mark(&self, stage: &str) {
        tracing::debug!(
            "{}: join stage at {:.1} ms: {stage}",
            self.user,
            self.started.elapsed().as_secs_f64() * 1000.0
        );
    }

    fn elapsed_ms(&self) -> u128 {
        self.started.elapsed().as_millis()
    }
}

/// What every branch of one plan shares.
#[derive(Debug, Clone)]
pub struct Context {
    pub base: Arc<Base>,
    pub shared: Arc<Shared>,
    pub http: reqwest::Client,
    pub janus_url: String,
    pub ice_addresses: Vec<String>,
    pub latency_ms: u32,
}

/// A running branch; [`Handle::stop`] leaves the room and removes the bin.
#[derive(Debug)]
pub struct Handle {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Handle {
    pub fn start(context: Context, user: PlanUser) -> Handle {
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(context, user, cancel.clone()));
        Handle { cancel, task }
    }

    pub async fn stop(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

async fn run(context: Context, user: PlanUser, cancel: CancellationToken) {
    let stats = context.shared.add_branch(&user.name, &user.room);
    let mut backoff = BACKOFF_MIN;
    loop {
        let started = Instant::now();
        let mut joined = false;
        let outcome = attempt(&context, &user, &stats, &cancel, &mut joined).await;
        match outcome {
            Ok(()) => break,
            Err(error) => {
                if joined && started.elapsed() > Duration::from_secs(10) {
                    backoff = BACKOFF_MIN;
                }
                tracing::warn!("{}: {error:#}; retrying in {} ms", user.name, backoff.as_millis());
                context.shared.branch_state(&user.name, BranchState::Retrying, "", Some(&format!("{error:#}")));
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    context.shared.remove_branch(&user.name);
}

/// One join: `Ok` when stopped, `Err` when the branch must rejoin.
async fn attempt(
    context: &Context,
    user: &PlanUser,
    stats: &Arc<BranchStats>,
    cancel: &CancellationToken,
    joined: &mut bool,
) -> anyhow::Result<()> {
    context.shared.branch_state(&user.name, BranchState::Connecting, "", None);
    let stages = Stages::new(&user.name);
    // control registers a user's token with Janus before bridged hears of the user, so a
    // refusal here is a real failure (Janus restarted and not yet told, a revoked token).
    let session = tokio::select! {
        () = cancel.cancelled() => return Ok(()),
        opened = Session::open(&context.http, &context.janus_url, &user.token) => opened?,
    };
    stages.mark("Janus session and handle");
    let outcome = joined_session(context, user, stats, cancel, &session, joined, &stages).await;
    // Leave the room: a session destroyed is a participant gone (best effort, bounded).
    let _ = tokio::time::timeout(Duration::from_secs(2), session.destroy()).await;
    outcome
}

async fn joined_session(
    context: &Context,
    user: &PlanUser,
    stats: &Arc<BranchStats>,
    cancel: &CancellationToken,
    session: &Session,
    joined: &mut bool,
    stages: &Stages,
) -> anyhow::Result<()> {
    let exists = session.request(json!({"request": "exists", "room": user.room})).await?;
    if exists["exists"] != true {
        return Err(anyhow!("room {:?} does not exist on Janus", user.room));
    }
    // The long poll runs on its own: a pending GET must never be dropped (its events would be lost).
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let poller = session.poller();
    let poll_task = tokio::spawn(async move {
        loop {
            let batch = poller.next().await;
            let failed = batch.is_err();
            if events_tx.send(batch).is_err() || failed {
                break;
            }
        }
    });
    let (faults_tx, mut faults) = mpsc::unbounded_channel();
    stages.mark("room exists");
    let built = Bin::build(context, user, stats.clone(), faults_tx, stages);
    let outcome = match built {
        Ok((bin, rtc)) => {
            stages.mark("bin built and plugged in");
            let outcome = negotiate_and_watch(
                context,
                user,
                cancel,
                session,
                &bin,
                rtc,
                &mut events,
                &mut faults,
                joined,
                stages,
            )
            .await;
            bin.remove(context);
            outcome
        }
        Err(error) => Err(error),
    };
    poll_task.abort();
    outcome
}

#[allow(clippy::too_many_arguments)]
async fn negotiate_and_watch(
    context: &Context,
    user: &PlanUser,
    cancel: &CancellationToken,
    session: &Session,
    bin: &Bin,
    mut rtc: mpsc::UnboundedReceiver<RtcEvent>,
    events: &mut mpsc::UnboundedReceiver<Result<Vec<Value>, JanusError>>,
    faults: &mut mpsc::UnboundedReceiver<String>,
    joined: &mut bool,
    stages: &Stages,
) -> anyhow::Result<()> {
    let offer = tokio::select! {
        () = cancel.cancelled() => return Ok(()),
        offer = tokio::time::timeout(STEP_TIMEOUT, make_offer(&bin.webrtc, &mut rtc, stages)) => {
            offer.map_err(|_| anyhow!("webrtcbin made no offer within {STEP_TIMEOUT:?}"))??
        }
    };
    // Its own prebuffering: the room's is sized for the crew's network, a branch sits next to Janus.
    // The room admits only the tokens control issued for it: the join carries ours.
    let join = json!({"request": "join", "room": user.room, "id": user.identity, "display": user.name,
                      "token": user.token,
                      "bitrate": user.bitrate_kbps * 1000, "muted": false,
                      "prebuffer": prebuffer_packets(context.latency_ms)});
    let transaction = session.send(join, Some(json!({"type": "offer", "sdp": offer}))).await?;
    stages.mark("join with the offer acknowledged by Janus");

    // The answer comes on the long poll with the `joined` event of our transaction.
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let answer = loop {
        let batch = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            () = tokio::time::sleep_until(deadline) => return Err(anyhow!("Janus did not answer the join within {STEP_TIMEOUT:?}")),
            batch = events.recv() => batch.ok_or_else(|| anyhow!("the long poll ended"))??,
        };
        let mut answer = None;
        for event in batch {
            if event["transaction"] == transaction.as_str() && event["janus"] == "event" {
                let data = &event["plugindata"]["data"];
                plugin_error(data).context("join refused")?;
                if let Some(sdp) = event["jsep"]["sdp"].as_str() {
                    answer = Some(sdp.to_owned());
                }
            } else {
                check_event(&event, &user.identity)?;
            }
        }
        if let Some(answer) = answer {
            break answer;
        }
    };
    stages.mark("Janus's answer received");
    set_answer(&bin.webrtc, &answer).await?;
    stages.mark("answer set as remote description");
    *joined = true;
    context.shared.branch_state(&user.name, BranchState::Connecting, &user.identity, None);

    let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + KEEPALIVE, KEEPALIVE);
    let media_deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let mut media_up = false;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            _ = keepalive.tick() => session.keepalive().await?,
            () = tokio::time::sleep_until(media_deadline), if !media_up => {
                return Err(anyhow!("ICE/DTLS with Janus did not come up within {STEP_TIMEOUT:?}"));
            }
            fault = faults.recv() => return Err(anyhow!("pipeline: {}", fault.unwrap_or_default())),
            batch = events.recv() => {
                for event in batch.ok_or_else(|| anyhow!("the long poll ended"))?? {
                    if let Some(kind @ ("webrtcup" | "media")) = event["janus"].as_str() {
                        stages.mark(&format!("Janus event {kind}"));
                    }
                    if event["janus"] == "webrtcup" && !media_up {
                        media_up = true;
                        tracing::info!("{} joined room {} (media up in {} ms)", user.name, user.room, stages.elapsed_ms());
                        context.shared.branch_state(&user.name, BranchState::Joined, &user.identity, Some(""));
                    }
                    check_event(&event, &user.identity)?;
                }
            }
        }
    }
}

/// An event that ends this participation: rejoin.
fn check_event(event: &Value, identity: &str) -> anyhow::Result<()> {
    match event["janus"].as_str() {
        Some("hangup") => Err(anyhow!("Janus hung up: {}", event["reason"].as_str().unwrap_or("no reason given"))),
        Some("detached") => Err(anyhow!("Janus detached the handle")),
        Some("event") => {
            let data = &event["plugindata"]["data"];
            if data["kicked"] == identity {
                return Err(anyhow!("kicked from room {}", data["room"]));
            }
            if data["leaving"] == identity {
                return Err(anyhow!("left room {}", data["room"]));
            }
            if data["audiobridge"] == "destroyed" {
                return Err(anyhow!("room {} was destroyed", data["room"]));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[derive(Debug)]
enum RtcEvent {
    NegotiationNeeded,
    Candidate(String),
    GatheringComplete,
}

/// Creates the offer, sets it as local description and waits until ICE gathering is over, so
/// the offer carries every candidate (host candidates only: gathering takes milliseconds, and
/// one `join` replaces a trickle of requests). Returns the SDP text.
async fn make_offer(
    webrtc: &gst::Element,
    rtc: &mut mpsc::UnboundedReceiver<RtcEvent>,
    stages: &Stages,
) -> anyhow::Result<String> {
    // webrtcbin asks once its transceiver is ready.
    loop {
        match rtc.recv().await {
            Some(RtcEvent::NegotiationNeeded) => break,
            Some(_) => {}
            None => return Err(anyhow!("webrtcbin went away")),
        }
    }
    stages.mark("negotiation needed");
    let (promise, reply) = gst::Promise::new_future();
    webrtc.emit_by_name::<()>("create-offer", &[&None::<gst::Structure>, &promise]);
    let reply =
        reply.await.map_err(|e| anyhow!("create-offer: {e:?}"))?.ok_or_else(|| anyhow!("create-offer: no reply"))?;
    if let Ok(error) = reply.get::<glib::Error>("error") {
        return Err(anyhow!("create-offer: {error}"));
    }
    let offer = reply.get::<gst_webrtc::WebRTCSessionDescription>("offer").context("create-offer")?;
    stages.mark("offer created");
    webrtc.emit_by_name::<()>("set-local-description", &[&offer, &None::<gst::Promise>]);
    // The DTLS transport exists once the local description is set.
    if let Some(transceiver) =
        webrtc.emit_by_name::<Option<gst_webrtc::WebRTCRTPTransceiver>>("get-transceiver", &[&0i32])
        && let Some(sender) = transceiver.sender()
        && let Some(dtls) = sender.transport()
    {
        let timing = stages.clone();
        dtls.connect_notify(Some("state"), move |dtls, _| {
            timing.mark(&format!("DTLS state {:?}", dtls.property::<gst_webrtc::WebRTCDTLSTransportState>("state")));
        });
    }
    let mut candidates = Vec::new();
    loop {
        match rtc.recv().await {
            Some(RtcEvent::Candidate(candidate)) => {
                stages.mark(&format!("local candidate {candidate}"));
                candidates.push(candidate);
            }
            Some(RtcEvent::GatheringComplete) => {
                stages.mark("ICE gathering complete");
                break;
            }
            Some(RtcEvent::NegotiationNeeded) => {}
            None => return Err(anyhow!("webrtcbin went away")),
        }
    }
    let local = webrtc
        .property::<Option<gst_webrtc::WebRTCSessionDescription>>("local-description")
        .ok_or_else(|| anyhow!("no local description"))?;
    let mut sdp = local.sdp().as_text().context("local description")?;
    if !sdp.contains("a=candidate") {
        // One bundled m-line: the candidates go at its end.
        for candidate in &candidates {
            sdp.push_str(&format!("a={candidate}\r\n"));
        }
        sdp.push_str("a=end-of-candidates\r\n");
    }
    if !sdp.contains("a=candidate") {
        return Err(anyhow!("ICE gathered no candidate (check ice_addresses)"));
    }
    Ok(sdp)
}

async fn set_answer(webrtc: &gst::Element, sdp: &str) -> anyhow::Result<()> {
    let message = gst_sdp::SDPMessage::parse_buffer(sdp.as_bytes()).context("Janus's answer is not SDP")?;
    let answer = gst_webrtc::WebRTCSessionDescription::new(gst_webrtc::WebRTCSDPType::Answer, message);
    let (promise, reply) = gst::Promise::new_future();
    webrtc.emit_by_name::<()>("set-remote-description", &[&answer, &promise]);
    let reply =
        tokio::time::timeout(STEP_TIMEOUT, reply).await.map_err(|_| anyhow!("set-remote-description timed out"))?;
    if let Ok(Some(reply)) = reply
        && let Ok(error) = reply.get::<glib::Error>("error")
    {
        return Err(anyhow!("set-remote-description: {error}"));
    }
    Ok(())
}

/// The branch's elements, in one bin `branch:NAME` inside the pipeline.
#[derive(Debug)]
struct Bin {
    bin: gst::Bin,
    webrtc: gst::Element,
    tee_pad: gst::Pad,
    mixer_pad: Option<gst::Pad>,
}

fn element(factory: &str) -> anyhow::Result<gst::Element> {
    gst::ElementFactory::make(factory)
        .build()
        .with_context(|| format!("GStreamer element {factory} is missing (install its plugin package)"))
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

/// A `mix-matrix` of `rows` × `columns` with a single 1.0 at (`row`, `column`).
fn selector(rows: u32, columns: u32, row: u32, column: u32) -> gst::Array {
    gst::Array::new(
        (0..rows).map(|r| gst::Array::new((0..columns).map(|c| if r == row && c == column { 1.0f32 } else { 0.0f32 }))),
    )
}

fn count_packets(pad: &gst::Pad, stats: &Arc<BranchStats>, sent: bool) {
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

impl Bin {
    fn build(
        context: &Context,
        user: &PlanUser,
        stats: Arc<BranchStats>,
        faults: mpsc::UnboundedSender<String>,
        stages: &Stages,
    ) -> anyhow::Result<(Bin, mpsc::UnboundedReceiver<RtcEvent>)> {
        let rate = context.base.rate;
        let name = format!("branch:{}", user.name);
        let bin = gst::Bin::with_name(&name);

        // Send: the input channel, encoded.
        let queue = gst::ElementFactory::make("queue")
            .property("max-size-buffers", 0u32)
            .property("max-size-bytes", 0u32)
            .property("max-size-time", gst::ClockTime::from_mseconds(60).nseconds())
            .property_from_str("leaky", "downstream")
            .build()?;
        // One audioconvert picks the input channel and converts F32 to the encoder's S16 in the
        // same pass (no dither: it costs a random number per sample and is inaudible at 16
        // bits on speech).
        let pick = gst::ElementFactory::make("audioconvert")
            .property("mix-matrix", selector(1, u32::from(CHANNELS), 0, u32::from(user.input_channel)))
            .property_from_str("dithering", "none")
            .build()?;
        let mono = caps_filter(&s16_mono(rate))?;
        let level = gst::ElementFactory::make("level")
            .property("interval", gst::ClockTime::from_mseconds(100).nseconds())
            .property("post-messages", true)
            .property("audio-level-meta", true)
            .build()?;
        // Opus takes 48 kHz: a resampler only for cards at another rate.
        let mut send = vec![queue.clone(), pick, mono, level];
        if rate != OPUS_RATE {
            send.push(element("audioresample")?);
            send.push(caps_filter(&s16_mono(OPUS_RATE))?);
        }
        let encoder = gst::ElementFactory::make("opusenc")
            .property("bitrate", i32::try_from(user.bitrate_kbps * 1000).unwrap_or(64_000))
            .property_from_str("frame-size", OPUS_FRAME_MS)
            .property_from_str("audio-type", "restricted-lowdelay")
            .build()
            .context("GStreamer element opusenc is missing (gstreamer1.0-plugins-base)")?;
        let payloader = gst::ElementFactory::make("rtpopuspay").property("pt", OPUS_PT).build()?;
        let extension = gst_rtp::RTPHeaderExtension::create_from_uri(AUDIO_LEVEL_URI)
            .ok_or_else(|| anyhow!("no RTP header extension for {AUDIO_LEVEL_URI}"))?;
        extension.set_id(1);
        payloader.emit_by_name::<()>("add-extension", &[&extension]);
        let webrtc = gst::ElementFactory::make("webrtcbin")
            .property_from_str("bundle-policy", "max-bundle")
            .property("latency", context.latency_ms)
            .build()
            .context("GStreamer element webrtcbin is missing (gstreamer1.0-plugins-bad, gstreamer1.0-nice)")?;
        send.extend([encoder, payloader.clone()]);
        bin.add_many(&send)?;
        bin.add(&webrtc)?;
        gst::Element::link_many(&send)?;
        let send_pad = webrtc.request_pad_simple("sink_%u").ok_or_else(|| anyhow!("webrtcbin gave no sink pad"))?;
        let pay_src = payloader.static_pad("src").ok_or_else(|| anyhow!("rtpopuspay without src pad"))?;
        pay_src.link(&send_pad)?;
        count_packets(&pay_src, &stats, true);
        let transceiver = send_pad.property::<gst_webrtc::WebRTCRTPTransceiver>("transceiver");
        let direction = if user.output().is_some() {
            gst_webrtc::WebRTCRTPTransceiverDirection::Sendrecv
        } else {
            gst_webrtc::WebRTCRTPTransceiverDirection::Sendonly
        };
        transceiver.set_property("direction", direction);

        // ICE: the addresses of the plan, no UPnP discovery, UDP only.
        let ice = webrtc.property::<gst::Object>("ice-agent");
        for address in &context.ice_addresses {
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

        // Receive: the room's mix onto the output channel.
        let receive = match user.output() {
            Some(channel) => {
                let depay = element("rtpopusdepay")?;
                let decoder = gst::ElementFactory::make("opusdec").property("plc", true).build()?;
                // The decoder downmixes to mono itself; then, for cards not at 48 kHz, a
                // resampler; then one audioconvert converts S16 to F32 and places the mono
                // signal on the output channel in the same pass.
                let mut receive = vec![depay.clone(), decoder, caps_filter(&s16_mono(OPUS_RATE))?];
                if rate != OPUS_RATE {
                    receive.push(element("audioresample")?);
                    receive.push(caps_filter(&s16_mono(rate))?);
                }
                let place = gst::ElementFactory::make("audioconvert")
                    .property("mix-matrix", selector(u32::from(CHANNELS), 1, u32::from(channel), 0))
                    .build()?;
                let card = caps_filter(&raw_caps(rate, u32::from(CHANNELS)))?;
                receive.extend([place, card.clone()]);
                bin.add_many(&receive)?;
                gst::Element::link_many(&receive)?;
                let depay_sink = depay.static_pad("sink").ok_or_else(|| anyhow!("depayloader without sink"))?;
                count_packets(&depay_sink, &stats, false);
                let card_src = card.static_pad("src").ok_or_else(|| anyhow!("capsfilter without src"))?;
                bin.add_pad(&gst::GhostPad::with_target(&card_src)?)?;
                Some(depay_sink)
            }
            None => None,
        };
        let bin_weak = bin.downgrade();
        webrtc.connect_pad_added(move |_, pad| {
            if pad.direction() != gst::PadDirection::Src {
                return;
            }
            if let Some(sink) = &receive
                && !sink.is_linked()
                && pad.link(sink).is_ok()
            {
                return;
            }
            // Nothing to play it on: drop it.
            let Some(bin) = bin_weak.upgrade() else { return };
            if let Ok(fakesink) = gst::ElementFactory::make("fakesink").property("async", false).build()
                && bin.add(&fakesink).is_ok()
            {
                let _ = fakesink.sync_state_with_parent();
                if let Some(sink) = fakesink.static_pad("sink") {
                    let _ = pad.link(&sink);
                }
            }
        });

        let (rtc_tx, rtc_rx) = mpsc::unbounded_channel();
        let tx = rtc_tx.clone();
        webrtc.connect("on-negotiation-needed", false, move |_| {
            let _ = tx.send(RtcEvent::NegotiationNeeded);
            None
        });
        let tx = rtc_tx.clone();
        webrtc.connect("on-ice-candidate", false, move |values| {
            if let Ok(candidate) = values[2].get::<String>() {
                let _ = tx.send(RtcEvent::Candidate(candidate));
            }
            None
        });
        let timing = stages.clone();
        webrtc.connect_notify(Some("ice-connection-state"), move |webrtc, _| {
            let state = webrtc.property::<gst_webrtc::WebRTCICEConnectionState>("ice-connection-state");
            timing.mark(&format!("ICE connection state {state:?}"));
        });
        let timing = stages.clone();
        webrtc.connect_notify(Some("connection-state"), move |webrtc, _| {
            let state = webrtc.property::<gst_webrtc::WebRTCPeerConnectionState>("connection-state");
            timing.mark(&format!("peer connection state {state:?} (ICE and DTLS)"));
        });
        webrtc.connect_notify(Some("ice-gathering-state"), move |webrtc, _| {
            let state = webrtc.property::<gst_webrtc::WebRTCICEGatheringState>("ice-gathering-state");
            if state == gst_webrtc::WebRTCICEGatheringState::Complete {
                let _ = rtc_tx.send(RtcEvent::GatheringComplete);
            }
        });

        let queue_sink = queue.static_pad("sink").ok_or_else(|| anyhow!("queue without sink"))?;
        bin.add_pad(&gst::GhostPad::with_target(&queue_sink)?)?;

        // Plug into the running card side.
        let base = &context.base;
        context.shared.add_tap(&name, Tap { stats, faults });
        base.pipeline.add(&bin)?;
        let mut plugged = Bin {
            bin: bin.clone(),
            webrtc,
            tee_pad: gst::Pad::builder(gst::PadDirection::Src).build(),
            mixer_pad: None,
        };
        let result = (|| -> anyhow::Result<()> {
            let tee_pad = base.tee.request_pad_simple("src_%u").ok_or_else(|| anyhow!("tee gave no pad"))?;
            plugged.tee_pad = tee_pad.clone();
            let bin_sink = bin.static_pad("sink").ok_or_else(|| anyhow!("bin without sink"))?;
            if let Some(bin_src) = bin.static_pad("src") {
                let mixer_pad = base.mixer.request_pad_simple("sink_%u").ok_or_else(|| anyhow!("mixer gave no pad"))?;
                plugged.mixer_pad = Some(mixer_pad.clone());
                bin_src.link(&mixer_pad)?;
            }
            bin.sync_state_with_parent()?;
            tee_pad.link(&bin_sink)?;
            Ok(())
        })();
        if let Err(error) = result {
            plugged.remove(context);
            return Err(error);
        }
        Ok((plugged, rtc_rx))
    }

    /// Unplugs the bin: the tee stops feeding it, it stops (`Null`), the mixer forgets it.
    /// The other branches keep flowing.
    fn remove(&self, context: &Context) {
        let base = &context.base;
        if let Some(peer) = self.tee_pad.peer() {
            let _ = self.tee_pad.unlink(&peer);
        }
        if self.tee_pad.parent().is_some() {
            base.tee.release_request_pad(&self.tee_pad);
        }
        let _ = self.bin.set_state(gst::State::Null);
        if let Some(mixer_pad) = &self.mixer_pad {
            if let Some(peer) = mixer_pad.peer() {
                let _ = peer.unlink(mixer_pad);
            }
            base.mixer.release_request_pad(mixer_pad);
        }
        let _ = base.pipeline.remove(&self.bin);
        context.shared.remove_tap(&self.bin.name());
    }
}
