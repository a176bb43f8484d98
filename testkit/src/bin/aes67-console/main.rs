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

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use clap::{Parser, ValueEnum};
use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_net as gst_net;
use partyline_shared::aes67::sap::SapPacket;
use partyline_shared::aes67::{Aes67Stream, Encoding, RATE, format_eui64};
use serde_json::{Value, json};

mod receive;
mod report;
mod sap;
mod send;

use receive::{Receiver, Window};
use report::report;
use sap::{Announcer, listen_sap};
use send::Sender;

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
