//! `aes67-console`: an AES67 console of the tests' own, what partyline's AES67 tests connect
//! partyline to in place of a mixing desk (`testkit::aes67::Console` runs it in a network
//! namespace of its own). It follows the LAN's PTP grandmaster with GStreamer's PTP clock,
//! sends a stream as a console does (a sine on one channel, silence on the others, L24 or L16 at
//! 48 kHz in 1 ms packets, RTP time = PTP time × 48000, each packet leaving `--send-delay-us`
//! after its RTP time) and announces it by SAP; it prints every SAP packet it hears, and
//! receives a stream (from an SDP file, or the one SAP announces under a name) and reports what
//! it hears: each channel's level and tone, and how late the packets arrive after their RTP time.
//!
//! On stdout, one JSON object a line, each with its `event`; diagnostics go to stderr:
//!
//! - `synced`: the PTP clock follows a grandmaster (`grandmaster`: its EUI-64, `XX-XX-…`).
//! - `grandmaster`: the clock follows another grandmaster now.
//! - `sending`: the stream is on the wire (`group`, `port`, `sdp`).
//! - `sap`: a SAP packet (`deletion`, `origin`, `hash`, `name`: the SDP's `s=`, `sdp`,
//!   `sdp_error`: why [`Aes67Stream::parse`] refuses it, or null); `sap-invalid`: bytes on SAP's
//!   port that are no SAP packet (`error`).
//! - `receiving`: a stream is received (`name`, `group`, `port`, `encoding`, `channels`, …);
//!   `receive-stopped`: its announcement was withdrawn; `receive-refused`: its SDP is not one
//!   partyline would take (`error`, `code`).
//! - every `--report-ms` while receiving, `levels` (`frames` received in the window; per
//!   channel, `dbfs`: its RMS level, `tone_dbfs`: the level of `--tone-hz` alone, both as
//!   `testkit::audio` measures them, −100 for nothing) and `lateness` (`packets` arrived,
//!   `lost`: gaps in their sequence numbers; each packet's arrival (the kernel's stamp) minus
//!   its RTP time, on the PTP clock: `min_us`, `p50_us`, `p99_us`, `max_us`, null without
//!   packets, and the same on the host's `CLOCK_REALTIME` under `host`, which the test
//!   grandmasters send; `clock_offset_us`: the PTP clock minus `CLOCK_REALTIME`).
//! - `error`: a pipeline failed (`pipeline`, `message`).
//!
//! When its stdin reaches its end, it withdraws its announcement (a SAP deletion) and exits.
//!
//! Received audio is depayloaded here, not by GStreamer's `rtpL24depay`: with 8 channels and no
//! `channel-order` in its caps that element gives them the positions of RFC 3555's first
//! 8-channel order and reorders them into GStreamer's order (channels 5-6 and 7-8 swap), which
//! would hide the same mistake in what it checks. Its sender gives `rtpL24pay` unpositioned
//! channels, which it sends in the order given.

use std::f64::consts::{PI, SQRT_2};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_net as gst_net;
use partyline_shared::aes67::sap::SapPacket;
use partyline_shared::aes67::{Aes67Stream, Encoding, RATE, SAP_GROUP, SAP_PORT, format_eui64};
use partyline_testkit::audio::{rms_db, tone_db};
use serde_json::{Value, json};

/// An AES67 console of the tests' own: sends a tone, announces it by SAP, reports what it hears.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The interface of the AES67 network (PTP, SAP, RTP).
    #[arg(long, default_value = "eth0")]
    iface: String,
    /// The PTP domain followed, and named in the stream's SDP.
    #[arg(long, default_value_t = 0)]
    domain: u8,
    /// Its own address on --iface: the SDP's origin, SAP's origin and the packets' source.
    #[arg(long, default_value = "10.79.0.20")]
    address: Ipv4Addr,
    /// The multicast group of its stream.
    #[arg(long, default_value = "239.69.20.1")]
    send_group: Ipv4Addr,
    #[arg(long, default_value_t = 5004)]
    send_port: u16,
    /// Neither send nor announce a stream.
    #[arg(long)]
    no_send: bool,
    /// Channels of its stream.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=8))]
    channels: u8,
    #[arg(long, value_enum, default_value = "L24")]
    encoding: Format,
    #[arg(long, default_value_t = 96)]
    payload_type: u8,
    /// The channel (from 1) that carries the tone; 0: all silent.
    #[arg(long, default_value_t = 3)]
    tone_channel: u8,
    /// The tone's frequency, and the one whose level is reported on received channels.
    #[arg(long, default_value_t = 1000.0)]
    tone_hz: f64,
    /// The tone's RMS level (a sine of amplitude 1 is −3 dBFS, as `testkit::audio` measures).
    #[arg(long, default_value_t = -20.0, allow_negative_numbers = true)]
    tone_dbfs: f64,
    /// The tone in bursts, as a crew member talks (`partyline_crew`'s voice): 400 ms of every
    /// 500 ms of PTP time, so that a listener judges every burst for gaps.
    #[arg(long)]
    bursts: bool,
    /// The stream's name (SDP `s=`).
    #[arg(long, default_value = "console")]
    name: String,
    #[arg(long, default_value_t = 2000)]
    sap_interval_ms: u64,
    /// When a packet leaves after its RTP time: by default one packet time, as a console whose
    /// packet holds what its inputs sampled during that millisecond.
    #[arg(long, default_value_t = 1000)]
    send_delay_us: u64,
    /// The send's media clock offset (SDP's `mediaclk:direct=`): RTP time = PTP time × 48000 +
    /// this. Dante picks one at random.
    #[arg(long, default_value_t = 0)]
    media_clock_offset: u32,
    /// Receive the stream this SDP file describes.
    #[arg(long)]
    receive_sdp: Option<PathBuf>,
    /// Receive the stream SAP announces under this name (SDP `s=`), once announced.
    #[arg(long)]
    listen_sap: Option<String>,
    /// The window of each `levels` and `lateness` report.
    #[arg(long, default_value_t = 250)]
    report_ms: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    #[value(name = "L24")]
    L24,
    #[value(name = "L16")]
    L16,
}

impl Format {
    fn encoding(self) -> Encoding {
        match self {
            Format::L24 => Encoding::L24,
            Format::L16 => Encoding::L16,
        }
    }
}

/// Bytes of one sample of `encoding` on the wire.
fn sample_bytes(encoding: Encoding) -> usize {
    match encoding {
        Encoding::L16 => 2,
        Encoding::L24 => 3,
    }
}

/// Samples of one 1 ms packet.
const PACKET_FRAMES: u64 = RATE as u64 / 1000;
const NS_PER_S: u64 = 1_000_000_000;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("aes67-console: {error}");
            ExitCode::FAILURE
        }
    }
}

/// One line on stdout; a test that stopped reading is no reason to fail.
fn emit(event: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{event}");
    let _ = out.flush();
}

/// What the main loop acts on.
enum Message {
    /// Stdin reached its end.
    Stop,
    /// A SAP announcement or deletion.
    Sap(SapPacket),
}

fn run(args: &Args) -> Result<(), String> {
    gst::init().map_err(|e| format!("GStreamer: {e}"))?;
    let (messages, inbox) = mpsc::channel();
    let stopping = Arc::new(AtomicBool::new(false));
    {
        let (messages, stopping) = (messages.clone(), Arc::clone(&stopping));
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            stopping.store(true, Ordering::SeqCst);
            let _ = messages.send(Message::Stop);
        });
    }
    listen_sap(args, messages)?;

    gst_net::PtpClock::init(None, &[&args.iface]).map_err(|e| format!("PTP on {}: {e}", args.iface))?;
    let clock = gst_net::PtpClock::new(Some("ptp"), u32::from(args.domain)).map_err(|e| format!("PTP clock: {e}"))?;
    while clock.wait_for_sync(gst::ClockTime::from_mseconds(200)).is_err() {
        if stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
    }
    let grandmaster = eui64(clock.grandmaster_clock_id());
    emit(&json!({"event": "synced", "grandmaster": grandmaster}));
    let _watch = watch_grandmaster(args.domain, clock.grandmaster_clock_id());
    let clock: gst::Clock = clock.upcast();

    let window = Arc::new(Mutex::new(None::<Window>));
    report(args, &clock, Arc::clone(&window));
    let sending = if args.no_send {
        None
    } else {
        let stream = own_stream(args, &clock, &grandmaster);
        let sender = Sender::start(args, &clock, &stream)?;
        let announcer = Announcer::start(args, &stream)?;
        Some((sender, announcer))
    };
    let mut receiver = None;
    if let Some(path) = &args.receive_sdp {
        let sdp = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let stream = Aes67Stream::parse(&sdp).map_err(|e| format!("{}: {e}", path.display()))?;
        receiver = Some(Receiver::start(args, &clock, stream, None, &window)?);
    }

    for message in inbox {
        let packet = match message {
            Message::Stop => break,
            Message::Sap(packet) => packet,
        };
        if packet.deletion {
            let withdrawn = receiver.as_ref().is_some_and(|r: &Receiver| {
                r.announced_by == Some((packet.origin, packet.hash))
                    || session_name(&packet.sdp) == Some(&r.stream.name)
            });
            if withdrawn && let Some(r) = receiver.take() {
                emit(&json!({"event": "receive-stopped", "name": r.stream.name}));
            }
            continue;
        }
        if args.listen_sap.is_none() || session_name(&packet.sdp) != args.listen_sap.as_deref() {
            continue;
        }
        let stream = match Aes67Stream::parse(&packet.sdp) {
            Ok(stream) => stream,
            Err(error) => {
                emit(&json!({"event": "receive-refused", "error": error.to_string(), "code": error.code}));
                continue;
            }
        };
        // A repeated announcement changes nothing; a new description replaces the receiver.
        if receiver.as_ref().is_some_and(|r| same_media(&r.stream, &stream)) {
            continue;
        }
        // The old one stops first: the new one may take its group and port.
        drop(receiver.take());
        receiver = Some(Receiver::start(args, &clock, stream, Some((packet.origin, packet.hash)), &window)?);
    }

    if let Some((sender, announcer)) = sending {
        announcer.withdraw();
        drop(sender);
    }
    drop(receiver);
    Ok(())
}

/// An EUI-64 as SDP writes it (`XX-XX-…`), from GStreamer's clock id.
fn eui64(id: u64) -> String {
    format_eui64(&id.to_be_bytes())
}

/// Prints `grandmaster` events when the clock of `domain` follows another grandmaster than
/// `current` (GStreamer's best master clock statistics).
fn watch_grandmaster(domain: u8, current: u64) -> gst_net::PtpStatisticsCallback {
    let current = Mutex::new(current);
    gst_net::PtpClock::add_statistics_callback(move |from, statistics| {
        if from == domain
            && statistics.name() == "GstPtpStatisticsBestMasterClockSelected"
            && let Ok(id) = statistics.get::<u64>("grandmaster-clock-id")
        {
            let mut current = current.lock().unwrap_or_else(PoisonError::into_inner);
            if *current != id {
                *current = id;
                emit(&json!({"event": "grandmaster", "grandmaster": eui64(id)}));
            }
        }
        gst::glib::ControlFlow::Continue
    })
}

/// The `s=` line of an SDP, read without judging the rest (a deletion may carry only part).
fn session_name(sdp: &str) -> Option<&str> {
    sdp.lines().find_map(|line| line.trim_end().strip_prefix("s="))
}

/// Whether two descriptions make the same receiver: the same packets on the same group, the
/// same PTP domain and media clock offset. A new session version, or another grandmaster named
/// (GStreamer reads only the domain), does not restart it.
fn same_media(a: &Aes67Stream, b: &Aes67Stream) -> bool {
    let media =
        |s: &Aes67Stream| (s.group, s.port, s.encoding, s.channels, s.payload_type, s.ptp_domain, s.media_clock_offset);
    media(a) == media(b)
}

/// The stream this console sends, as its SDP says.
fn own_stream(args: &Args, clock: &gst::Clock, grandmaster: &str) -> Aes67Stream {
    // A session id of the moment (as NTP-time ids are): a restarted console's stream is new.
    let session_id = clock.time().seconds();
    Aes67Stream {
        name: args.name.clone(),
        session_id,
        version: session_id,
        origin: args.address,
        group: args.send_group,
        port: args.send_port,
        ttl: 32,
        encoding: args.encoding.encoding(),
        channels: args.channels,
        payload_type: args.payload_type,
        packet_time_us: 1000,
        ptp_domain: args.domain,
        grandmaster: Some(grandmaster.to_owned()),
        media_clock_offset: args.media_clock_offset,
    }
}

/// Posts a pipeline's errors as `error` events (from the thread that posts them).
fn report_errors(pipeline: &gst::Pipeline, name: &'static str) {
    let bus = pipeline.bus().expect("a pipeline has a bus");
    bus.set_sync_handler(move |_, message| {
        if let gst::MessageView::Error(error) = message.view() {
            let text = format!("{} ({:?})", error.error(), error.debug());
            eprintln!("aes67-console: {name} pipeline: {text}");
            emit(&json!({"event": "error", "pipeline": name, "message": text}));
        }
        gst::BusSyncReply::Drop
    });
}

/// Runs `pipeline` on the PTP clock with base time 0: running time = PTP time, so a buffer's
/// timestamp is the PTP time of its first sample.
fn play_on(pipeline: &gst::Pipeline, clock: &gst::Clock) -> Result<(), String> {
    pipeline.use_clock(Some(clock));
    pipeline.set_start_time(gst::ClockTime::NONE);
    pipeline.set_base_time(gst::ClockTime::ZERO);
    pipeline.set_state(gst::State::Playing).map_err(|e| format!("pipeline to PLAYING: {e}"))?;
    Ok(())
}

fn element(factory: &str) -> Result<gst::Element, String> {
    gst::ElementFactory::make(factory).build().map_err(|e| format!("{factory}: {e}"))
}

/// The send pipeline: samples made here (appsrc), timestamped with the PTP time of their first
/// sample, payloaded in 1 ms packets with RTP time = timestamp × 48000 (`timestamp-offset` 0),
/// sent by `udpsink` synchronised to the PTP clock `--send-delay-us` after their RTP time.
struct Sender {
    pipeline: gst::Pipeline,
}

impl Sender {
    fn start(args: &Args, clock: &gst::Clock, stream: &Aes67Stream) -> Result<Sender, String> {
        let channels = usize::from(stream.channels);
        let format = match stream.encoding {
            Encoding::L16 => "S16BE",
            Encoding::L24 => "S24BE",
        };
        let caps = gst::Caps::builder("audio/x-raw")
            .field("format", format)
            .field("layout", "interleaved")
            .field("rate", RATE as i32)
            .field("channels", channels as i32)
            .field("channel-mask", gst::Bitmask::new(0))
            .build();
        // 20 packets ahead at most; no latency of its own: udpsink sends at timestamp + ts-offset.
        let source = gst_app::AppSrc::builder()
            .caps(&caps)
            .format(gst::Format::Time)
            .is_live(true)
            .do_timestamp(false)
            .block(true)
            .max_buffers(20)
            .min_latency(0)
            .build();
        let pay = gst::ElementFactory::make(match stream.encoding {
            Encoding::L16 => "rtpL16pay",
            Encoding::L24 => "rtpL24pay",
        })
        .property("min-ptime", 1_000_000i64)
        .property("max-ptime", 1_000_000i64)
        .property("timestamp-offset", stream.media_clock_offset)
        .property("pt", u32::from(stream.payload_type))
        .build()
        .map_err(|e| format!("payloader: {e}"))?;
        let sink = element("udpsink")?;
        sink.set_property("host", stream.group.to_string());
        sink.set_property("port", i32::from(stream.port));
        sink.set_property("bind-address", args.address.to_string());
        sink.set_property("multicast-iface", args.iface.as_str());
        sink.set_property("auto-multicast", false);
        sink.set_property("ttl-mc", i32::from(stream.ttl));
        sink.set_property("sync", true);
        // Its default (20 ms) adds to the pipeline's latency: every packet would leave 20 ms late.
        sink.set_property("processing-deadline", 0u64);
        sink.set_property("ts-offset", (args.send_delay_us * 1000) as i64);
        let pipeline = gst::Pipeline::with_name("send");
        pipeline.add_many([source.upcast_ref(), &pay, &sink]).map_err(|e| format!("send pipeline: {e}"))?;
        gst::Element::link_many([source.upcast_ref(), &pay, &sink]).map_err(|e| format!("send pipeline: {e}"))?;
        report_errors(&pipeline, "send");

        // The first packet 20 ms from now, on a whole millisecond of PTP time.
        let first_ms = clock.time().mseconds() + 20;
        let tone = Tone {
            channels,
            encoding: stream.encoding,
            channel: usize::from(args.tone_channel),
            amplitude: 10f64.powf(args.tone_dbfs / 20.0) * SQRT_2,
            step: 2.0 * PI * args.tone_hz / f64::from(RATE),
            bursts: args.bursts,
        };
        let frame = first_ms * PACKET_FRAMES;
        let phase = 2.0 * PI * (args.tone_hz * frame as f64 / f64::from(RATE)).fract();
        std::thread::spawn(move || tone.feed(&source, frame, phase));
        play_on(&pipeline, clock)?;
        emit(&json!({"event": "sending", "group": stream.group, "port": stream.port, "sdp": stream.to_sdp()}));
        Ok(Sender { pipeline })
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// The sine of the send stream.
struct Tone {
    channels: usize,
    encoding: Encoding,
    /// From 1; 0: none.
    channel: usize,
    amplitude: f64,
    /// Radians a sample.
    step: f64,
    /// 400 ms on in every 500 ms.
    bursts: bool,
}

/// A burst cycle and the burst in it, in samples (500 ms and 400 ms at 48 kHz).
const CYCLE: u64 = 24_000;
const BURST: u64 = 19_200;

impl Tone {
    /// Pushes 1 ms buffers from sample `frame` (of PTP time: frame / 48000 s) on, until the
    /// pipeline stops; appsrc blocks while it holds 20.
    fn feed(&self, source: &gst_app::AppSrc, mut frame: u64, mut phase: f64) {
        let width = sample_bytes(self.encoding);
        loop {
            let mut bytes = Vec::with_capacity(PACKET_FRAMES as usize * self.channels * width);
            for i in 0..PACKET_FRAMES {
                let sounding = !self.bursts || (frame + i) % CYCLE < BURST;
                let value = if sounding { self.amplitude * phase.sin() } else { 0.0 };
                phase = (phase + self.step) % (2.0 * PI);
                for c in 1..=self.channels {
                    let sample = if c == self.channel { value } else { 0.0 };
                    match self.encoding {
                        Encoding::L24 => {
                            let v = (sample * 8_388_607.0).round().clamp(-8_388_608.0, 8_388_607.0) as i32;
                            bytes.extend_from_slice(&v.to_be_bytes()[1..]);
                        }
                        Encoding::L16 => {
                            let v = (sample * 32_767.0).round().clamp(-32_768.0, 32_767.0) as i16;
                            bytes.extend_from_slice(&v.to_be_bytes());
                        }
                    }
                }
            }
            let mut buffer = gst::Buffer::from_mut_slice(bytes);
            {
                let buffer = buffer.get_mut().expect("a new buffer is writable");
                // Exact: a packet starts on a whole millisecond.
                buffer.set_pts(gst::ClockTime::from_nseconds(frame / PACKET_FRAMES * 1_000_000));
                buffer.set_duration(gst::ClockTime::from_mseconds(1));
                buffer.set_offset(frame);
                buffer.set_offset_end(frame + PACKET_FRAMES);
            }
            if source.push_buffer(buffer).is_err() {
                return;
            }
            frame += PACKET_FRAMES;
        }
    }
}

/// Announces the stream by SAP every `--sap-interval-ms`, until withdrawn.
struct Announcer {
    socket: UdpSocket,
    packet: SapPacket,
    /// Set by the withdrawal, under the lock that sends: no announcement follows it.
    withdrawn: Mutex<bool>,
}

impl Announcer {
    fn start(args: &Args, stream: &Aes67Stream) -> Result<Arc<Announcer>, String> {
        let socket = UdpSocket::bind(SocketAddrV4::new(args.address, 0)).map_err(|e| format!("SAP socket: {e}"))?;
        let socket2 = socket2::SockRef::from(&socket);
        socket2.set_multicast_if_v4(&args.address).map_err(|e| format!("SAP socket: {e}"))?;
        socket.set_multicast_ttl_v4(u32::from(stream.ttl)).map_err(|e| format!("SAP socket: {e}"))?;
        // A message id hash of the session (never 0, which RFC 2974 sets aside).
        let hash = (stream.session_id as u16) | 1;
        let packet = SapPacket { deletion: false, origin: args.address, hash, sdp: stream.to_sdp() };
        let announcer = Arc::new(Announcer { socket, packet, withdrawn: Mutex::new(false) });
        let interval = Duration::from_millis(args.sap_interval_ms);
        let repeat = Arc::clone(&announcer);
        std::thread::spawn(move || {
            while repeat.send(false) {
                std::thread::sleep(interval);
            }
        });
        Ok(announcer)
    }

    /// Sends the announcement (or its deletion); false once withdrawn.
    fn send(&self, deletion: bool) -> bool {
        let mut withdrawn = self.withdrawn.lock().unwrap_or_else(PoisonError::into_inner);
        if *withdrawn {
            return false;
        }
        let packet = SapPacket { deletion, ..self.packet.clone() };
        if let Err(error) = self.socket.send_to(&packet.encode(), SocketAddrV4::new(SAP_GROUP, SAP_PORT)) {
            eprintln!("aes67-console: SAP: {error}");
        }
        *withdrawn = deletion;
        true
    }

    fn withdraw(&self) {
        self.send(true);
    }
}

/// Listens to SAP on `--iface`: prints every packet, and passes announcements and deletions on.
fn listen_sap(args: &Args, messages: mpsc::Sender<Message>) -> Result<(), String> {
    use socket2::{Domain, Protocol, Socket, Type};
    let fail = |e: std::io::Error| format!("SAP listener: {e}");
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(fail)?;
    // Beside partyline's own listener when both run in one namespace.
    socket.set_reuse_address(true).map_err(fail)?;
    // Bound to the group: only SAP's packets, not other groups' on the same port.
    socket.bind(&SocketAddrV4::new(SAP_GROUP, SAP_PORT).into()).map_err(fail)?;
    socket.join_multicast_v4(&SAP_GROUP, &args.address).map_err(fail)?;
    let socket: UdpSocket = socket.into();
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; 65_536];
        loop {
            let size = match socket.recv(&mut buffer) {
                Ok(size) => size,
                Err(error) => {
                    eprintln!("aes67-console: SAP listener: {error}");
                    return;
                }
            };
            let packet = match SapPacket::decode(&buffer[..size]) {
                Ok(packet) => packet,
                Err(error) => {
                    emit(&json!({"event": "sap-invalid", "error": error.to_string(), "bytes": size}));
                    continue;
                }
            };
            emit(&json!({
                "event": "sap",
                "deletion": packet.deletion,
                "origin": packet.origin,
                "hash": packet.hash,
                "name": session_name(&packet.sdp),
                "sdp": packet.sdp,
                "sdp_error": Aes67Stream::parse(&packet.sdp).err().map(|e| e.to_string()),
            }));
            if messages.send(Message::Sap(packet)).is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// What a report window gathered of the received stream.
struct Window {
    channels: usize,
    /// Each channel's samples, in arrival order.
    samples: Vec<Vec<f32>>,
    /// Each packet's arrival on the PTP clock minus its RTP time, in ns.
    lateness: Vec<i64>,
    /// The same on the host's `CLOCK_REALTIME`, the grandmasters' time.
    host_lateness: Vec<i64>,
    lost: u64,
    last_seq: Option<u16>,
}

impl Window {
    fn new(channels: usize) -> Window {
        Window {
            channels,
            samples: vec![Vec::new(); channels],
            lateness: Vec::new(),
            host_lateness: Vec::new(),
            lost: 0,
            last_seq: None,
        }
    }
}

/// The receive pipeline: `udpsrc` (its packets' arrival timed by a probe) → `rtpjitterbuffer`
/// placing them in time by RFC 7273 (PTP) → `appsink`, depayloaded here.
struct Receiver {
    pipeline: gst::Pipeline,
    stream: Aes67Stream,
    /// The SAP origin and hash of the announcement it came from.
    announced_by: Option<(Ipv4Addr, u16)>,
    /// Where it gathers; emptied when it stops, which ends the reports.
    window: Arc<Mutex<Option<Window>>>,
    /// Ends its timing of arrivals.
    stopped: Arc<AtomicBool>,
}

impl Receiver {
    fn start(
        args: &Args,
        clock: &gst::Clock,
        stream: Aes67Stream,
        announced_by: Option<(Ipv4Addr, u16)>,
        window: &Arc<Mutex<Option<Window>>>,
    ) -> Result<Receiver, String> {
        let grandmaster = stream.grandmaster.clone().unwrap_or_else(|| eui64(0));
        let caps = gst::Caps::builder("application/x-rtp")
            .field("media", "audio")
            .field("clock-rate", RATE as i32)
            .field("encoding-name", stream.encoding.name())
            .field("encoding-params", stream.channels.to_string())
            .field("channels", i32::from(stream.channels))
            .field("payload", i32::from(stream.payload_type))
            .field("a-ts-refclk", format!("ptp=IEEE1588-2008:{grandmaster}:{}", stream.ptp_domain))
            .field("a-mediaclk", format!("direct={}", stream.media_clock_offset))
            .build();
        let source = element("udpsrc")?;
        source.set_property("address", stream.group.to_string());
        source.set_property("port", i32::from(stream.port));
        source.set_property("multicast-iface", args.iface.as_str());
        source.set_property("caps", &caps);
        let jitter = element("rtpjitterbuffer")?;
        jitter.set_property_from_str("mode", "synced");
        jitter.set_property("rfc7273-sync", true);
        jitter.set_property("latency", 5u32);
        let channels = usize::from(stream.channels);
        let (encoding, payload_type) = (stream.encoding, stream.payload_type);
        let into = Arc::clone(window);
        let mut onsets = Onsets { quiet: vec![0; channels], clock: clock.clone(), offset: stream.media_clock_offset };
        let sink = gst_app::AppSink::builder()
            .sync(false)
            .callbacks(
                gst_app::AppSinkCallbacks::builder()
                    .new_sample(move |sink| {
                        let sample = sink.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                        if let Some(buffer) = sample.buffer()
                            && let Ok(map) = buffer.map_readable()
                            && let Some(payload) = rtp_payload(&map, payload_type)
                        {
                            let mut window = into.lock().unwrap_or_else(PoisonError::into_inner);
                            if let Some(window) = window.as_mut() {
                                let from = window.samples.first().map_or(0, Vec::len);
                                depayload(payload, encoding, channels, &mut window.samples);
                                let rtp_time = u32::from_be_bytes([map[4], map[5], map[6], map[7]]);
                                onsets.look(&window.samples, from, rtp_time);
                            }
                        }
                        Ok(gst::FlowSuccess::Ok)
                    })
                    .build(),
            )
            .build();
        let pipeline = gst::Pipeline::with_name("receive");
        pipeline.add_many([&source, &jitter, sink.upcast_ref()]).map_err(|e| format!("receive pipeline: {e}"))?;
        gst::Element::link_many([&source, &jitter, sink.upcast_ref()]).map_err(|e| format!("receive pipeline: {e}"))?;
        report_errors(&pipeline, "receive");

        let stopped = Arc::new(AtomicBool::new(false));
        time_arrivals(args, &stream, clock, window, &stopped)?;
        *window.lock().unwrap_or_else(PoisonError::into_inner) = Some(Window::new(channels));
        play_on(&pipeline, clock)?;
        emit(&json!({
            "event": "receiving",
            "name": stream.name,
            "origin": stream.origin,
            "group": stream.group,
            "port": stream.port,
            "encoding": stream.encoding.name(),
            "channels": stream.channels,
            "payload_type": stream.payload_type,
            "ptp_domain": stream.ptp_domain,
            "grandmaster": stream.grandmaster,
            "media_clock_offset": stream.media_clock_offset,
        }));
        Ok(Receiver { pipeline, stream, announced_by, window: Arc::clone(window), stopped })
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
        self.stopped.store(true, Ordering::SeqCst);
        *self.window.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Times the stream's packets as they reach this host: a socket of its own on the stream's group
/// and port, where the kernel stamps each packet's arrival (`SO_TIMESTAMPNS`, on
/// `CLOCK_REALTIME`), so that how late this process's threads run does not count. The arrival on
/// the PTP clock is that stamp plus the clock's offset from `CLOCK_REALTIME` when it is read.
fn time_arrivals(
    args: &Args,
    stream: &Aes67Stream,
    clock: &gst::Clock,
    window: &Arc<Mutex<Option<Window>>>,
    stopped: &Arc<AtomicBool>,
) -> Result<(), String> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
    use socket2::{Domain, Protocol, Socket, Type};
    let fail = |e: std::io::Error| format!("timing socket: {e}");
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(fail)?;
    // Beside udpsrc's socket on the same group and port: each gets every packet.
    socket.set_reuse_address(true).map_err(fail)?;
    socket.bind(&SocketAddrV4::new(stream.group, stream.port).into()).map_err(fail)?;
    socket.join_multicast_v4(&stream.group, &args.address).map_err(fail)?;
    socket.set_read_timeout(Some(Duration::from_millis(200))).map_err(fail)?;
    setsockopt(&socket, sockopt::ReceiveTimestampns, &true).map_err(|e| format!("SO_TIMESTAMPNS: {e}"))?;
    let socket: UdpSocket = socket.into();
    let (clock, window, stopped) = (clock.clone(), Arc::clone(window), Arc::clone(stopped));
    let (payload_type, offset) = (stream.payload_type, stream.media_clock_offset);
    std::thread::spawn(move || {
        let mut packet = vec![0u8; 2048];
        let mut control = nix::cmsg_space!(nix::sys::time::TimeSpec);
        while !stopped.load(Ordering::SeqCst) {
            let mut buffers = [std::io::IoSliceMut::new(&mut packet)];
            let (size, stamp) =
                match recvmsg::<()>(socket.as_raw_fd(), &mut buffers, Some(&mut control), MsgFlags::empty()) {
                    Ok(message) => {
                        let stamp = message.cmsgs().ok().and_then(|mut all| {
                            all.find_map(|c| match c {
                                ControlMessageOwned::ScmTimestampns(t) => {
                                    Some(t.tv_sec() as u64 * NS_PER_S + t.tv_nsec() as u64)
                                }
                                _ => None,
                            })
                        });
                        (message.bytes, stamp)
                    }
                    Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => continue,
                    Err(error) => {
                        eprintln!("aes67-console: timing socket: {error}");
                        return;
                    }
                };
            let (ptp_now, host_now) = (clock.time().nseconds(), realtime_ns());
            let arrival = stamp.unwrap_or(host_now);
            let data = &packet[..size];
            if size < 12 || data[1] & 0x7f != payload_type {
                continue;
            }
            let seq = u16::from_be_bytes([data[2], data[3]]);
            let rtp_time = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
            let on_ptp = arrival.wrapping_add(ptp_now.wrapping_sub(host_now));
            let mut window = window.lock().unwrap_or_else(PoisonError::into_inner);
            // Checked under the lock: a stopped receiver's last packet is not its successor's.
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            if let Some(window) = window.as_mut() {
                window.lateness.push(lateness_ns(on_ptp, rtp_time, offset));
                window.host_lateness.push(lateness_ns(arrival, rtp_time, offset));
                if let Some(last) = window.last_seq {
                    let gap = seq.wrapping_sub(last);
                    if (2..1000).contains(&gap) {
                        window.lost += u64::from(gap - 1);
                    }
                }
                window.last_seq = Some(seq);
            }
        }
    });
    Ok(())
}

/// The payload of an RTP packet of `payload_type` (after CSRCs and a header extension, before
/// padding), or None.
fn rtp_payload(packet: &[u8], payload_type: u8) -> Option<&[u8]> {
    let (&first, &second) = (packet.first()?, packet.get(1)?);
    if first >> 6 != 2 || second & 0x7f != payload_type {
        return None;
    }
    let mut start = 12 + 4 * usize::from(first & 0x0f);
    if first & 0x10 != 0 {
        let words = packet.get(start + 2..start + 4)?;
        start += 4 + 4 * usize::from(u16::from_be_bytes([words[0], words[1]]));
    }
    let padding = if first & 0x20 != 0 { usize::from(*packet.last()?) } else { 0 };
    packet.get(start..packet.len().checked_sub(padding)?)
}

/// Appends the frames of an L16 or L24 payload (big-endian, interleaved) to each channel.
fn depayload(payload: &[u8], encoding: Encoding, channels: usize, into: &mut [Vec<f32>]) {
    let width = sample_bytes(encoding);
    for frame in payload.chunks_exact(width * channels) {
        for (channel, sample) in into.iter_mut().zip(frame.chunks_exact(width)) {
            let value = match encoding {
                Encoding::L24 => f64::from(i32::from_be_bytes([sample[0], sample[1], sample[2], 0]) >> 8) / 8_388_608.0,
                Encoding::L16 => f64::from(i16::from_be_bytes([sample[0], sample[1]])) / 32_768.0,
            };
            channel.push(value as f32);
        }
    }
}

/// The onsets of the received channels, each reported with its latency from the burst that made
/// it: with `--bursts`, a console's and every burst it hears start on a whole 500 ms of PTP time
/// (the send's RTP time is PTP time × 48000), so an onset's PTP time past the last such moment is
/// how long the burst took to come back (less than 500 ms); its PTP time itself goes with it, for
/// bursts from elsewhere. An onset: the first sample over
/// −30 dBFS after 50 ms under it.
struct Onsets {
    /// Samples under the threshold so far, per channel.
    quiet: Vec<u32>,
    clock: gst::Clock,
    offset: u32,
}

impl Onsets {
    const LOUD: f32 = 0.0316;
    const QUIET: u32 = RATE / 20;

    /// Looks at the samples of one packet (from `from` on in each channel), its RTP time `rtp_time`.
    fn look(&mut self, samples: &[Vec<f32>], from: usize, rtp_time: u32) {
        for (channel, (quiet, values)) in self.quiet.iter_mut().zip(samples).enumerate() {
            for (i, value) in values.iter().skip(from).enumerate() {
                if value.abs() <= Self::LOUD {
                    *quiet = quiet.saturating_add(1);
                    continue;
                }
                if *quiet >= Self::QUIET {
                    let now = self.clock.time().nseconds();
                    let at = now as i64 - lateness_ns(now, rtp_time.wrapping_add(i as u32), self.offset);
                    let latency_ms = at.rem_euclid(500_000_000) as f64 / 1e6;
                    emit(&json!({"event": "onset", "channel": channel + 1, "latency_ms": latency_ms, "ptp_ns": at}));
                }
                *quiet = 0;
            }
        }
    }
}

/// How late a packet of RTP time `rtp_time` arrives at PTP time `now` (ns), its RTP time being
/// PTP time × 48000 + `offset` modulo 2³²: the packet's PTP time is the one of that RTP time
/// nearest to now.
fn lateness_ns(now: u64, rtp_time: u32, offset: u32) -> i64 {
    let now_frames = (u128::from(now) * u128::from(RATE) / u128::from(NS_PER_S)) as i64;
    let behind = (now_frames as u32).wrapping_sub(rtp_time.wrapping_sub(offset)) as i32;
    let frame = now_frames - i64::from(behind);
    now as i64 - (i128::from(frame) * i128::from(NS_PER_S) / i128::from(RATE)) as i64
}

/// Every `--report-ms`, while a stream is received: its `levels` and `lateness` over the window,
/// with how far this console's PTP time is from the host's `CLOCK_REALTIME` (the test
/// grandmasters' time: a measure of how well it follows them).
fn report(args: &Args, clock: &gst::Clock, window: Arc<Mutex<Option<Window>>>) {
    let (every, tone_hz, clock) = (Duration::from_millis(args.report_ms), args.tone_hz, clock.clone());
    std::thread::spawn(move || {
        let mut next = Instant::now();
        loop {
            next += every;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            let taken = {
                let mut window = window.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(current) = window.as_mut() else { continue };
                let fresh = Window { last_seq: current.last_seq, ..Window::new(current.channels) };
                std::mem::replace(current, fresh)
            };
            let round = |v: f64| (v * 100.0).round() / 100.0;
            emit(&json!({
                "event": "levels",
                "frames": taken.samples.first().map_or(0, Vec::len),
                "dbfs": taken.samples.iter().map(|s| round(rms_db(s))).collect::<Vec<_>>(),
                "tone_dbfs": taken.samples.iter().map(|s| round(tone_db(s, tone_hz))).collect::<Vec<_>>(),
            }));
            let ptp = clock.time().nseconds() as i64;
            let offset = ptp - realtime_ns() as i64;
            let (ptp, host) = (spread(taken.lateness), spread(taken.host_lateness));
            emit(&json!({
                "event": "lateness",
                "packets": ptp.len,
                "lost": taken.lost,
                "min_us": ptp.min_us,
                "p50_us": ptp.p50_us,
                "p99_us": ptp.p99_us,
                "max_us": ptp.max_us,
                "host": host.json(),
                "clock_offset_us": micros(offset),
            }));
        }
    });
}

/// The host's `CLOCK_REALTIME` in ns since the Unix epoch.
fn realtime_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn micros(ns: i64) -> f64 {
    (ns as f64 / 100.0).round() / 10.0
}

/// The least, median, 99th percentile and greatest of a window's latenesses (µs; null for none).
struct Spread {
    len: usize,
    min_us: Option<f64>,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    max_us: Option<f64>,
}

fn spread(mut ns: Vec<i64>) -> Spread {
    ns.sort_unstable();
    let at = |q: f64| {
        let rank = (ns.len() as f64 * q).ceil() as usize;
        ns.get(rank.max(1) - 1).map(|v| micros(*v))
    };
    Spread { len: ns.len(), min_us: at(0.0), p50_us: at(0.5), p99_us: at(0.99), max_us: at(1.0) }
}

impl Spread {
    fn json(&self) -> Value {
        json!({"min_us": self.min_us, "p50_us": self.p50_us, "p99_us": self.p99_us, "max_us": self.max_us})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_reads_the_rtp_time_nearest_to_now() {
        // 1.7e9 s of PTP time: RTP time has wrapped around many times.
        let sent: u64 = 1_700_000_000_123_000_000;
        let rtp = |ns: u64| (u128::from(ns) * 48_000 / 1_000_000_000) as u32;
        assert_eq!(lateness_ns(sent + 1_100_000, rtp(sent), 0), 1_100_000);
        assert_eq!(lateness_ns(sent + 250_000, rtp(sent).wrapping_add(7), 7), 250_000);
        // An early packet (a sender ahead of the receiver's clock).
        assert_eq!(lateness_ns(sent - 500_000, rtp(sent), 0), -500_000);
    }

    #[test]
    fn payloads_are_found_after_csrcs_and_extensions_and_before_padding() {
        let mut packet = vec![0x80 | 0x20 | 0x10 | 1, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        packet.extend([0; 4]); // one CSRC
        packet.extend([0xbe, 0xde, 0, 1, 0, 0, 0, 0]); // an extension of one word
        packet.extend([1, 2, 3, 4, 5, 6]);
        packet.extend([0, 2]); // two bytes of padding
        assert_eq!(rtp_payload(&packet, 96), Some(&[1, 2, 3, 4, 5, 6][..]));
        assert_eq!(rtp_payload(&packet, 97), None);
    }

    #[test]
    fn l24_and_l16_samples_are_read_big_endian_and_signed() {
        let mut channels = vec![Vec::new(); 2];
        depayload(&[0x40, 0, 0, 0xc0, 0, 0], Encoding::L24, 2, &mut channels);
        depayload(&[0x40, 0, 0xc0, 0], Encoding::L16, 2, &mut channels);
        assert_eq!(channels, [[0.5, 0.5], [-0.5, -0.5]]);
    }
}
