//! partyline-bridged: the GStreamer pipeline between the sound card and the Janus rooms, driven
//! over D-Bus (`org.partyline.Bridge1`) by partyline-control. It never reads the config file.

extern crate gstreamer as gst;
extern crate gstreamer_app as gst_app;
extern crate gstreamer_net as gst_net;
extern crate gstreamer_sdp as gst_sdp;
extern crate gstreamer_webrtc as gst_webrtc;

mod aes67;
mod card;
mod card_mix;
mod card_side;
mod drift;
mod elements;
mod encoders;
mod feed;
mod gstreamer_card;
mod ifb;
mod jitter;
mod levels;
mod logbus;
mod mix;
mod pads;
mod participant;
mod pipewire_card;
mod plan;
mod player;
mod realtime;
mod rooms_host;
mod rooms_service;
mod samples;
mod service;
mod state;
mod tick;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use partyline_shared::bridge::{BUS_NAME, BusChoice, OBJECT_PATH};
use partyline_shared::janus::client::Client;
use partyline_shared::rooms_bus::ROOMS_PATH;
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::prelude::*;

/// The audio bridge of partyline: sound card ⇄ Janus rooms, driven over D-Bus.
///
/// Serves org.partyline.Bridge1 at /org/partyline/Bridge1 and runs the GStreamer pipeline that
/// partyline-control's plan describes: one capture of the sound card, and per server audio user
/// one input channel sent as Opus into its group's Janus AudioBridge room and the room's mix
/// played on one output channel. It never reads partyline's config file; Apply(plan) brings
/// everything, and only the difference from the plan in force is applied. It keeps playing its
/// last plan when partyline-control is away. SIGTERM or SIGINT leave the rooms and stop cleanly.
///
/// Environment: PARTYLINE_BUS (system, session, or a bus address) when no flag is given;
/// PULSE_SERVER (the PulseAudio server); PIPEWIRE_REMOTE, PIPEWIRE_RUNTIME_DIR or
/// XDG_RUNTIME_DIR (PipeWire's own socket: when the PulseAudio server is PipeWire's, the card
/// is opened through it); RUST_LOG (log filter, default info; logs go to stderr and, info and
/// above, to partyline-control's log as LogEntry signals).
#[derive(Debug, Parser)]
#[command(name = "partyline-bridged", version, about, long_about)]
struct Args {
    /// Use the session bus (DBUS_SESSION_BUS_ADDRESS) instead of the system bus.
    #[arg(long)]
    session: bool,
    /// Use the bus at this address (e.g. unix:path=/run/x), as tests do with a private bus.
    #[arg(long, value_name = "ADDR")]
    bus_address: Option<String>,
    /// Run partyline's own rooms (org.partyline.Rooms1) with their WebRTC socket on this UDP
    /// address (IP:PORT, the address panels reach; port 0: any free one). Without it, the
    /// rooms' methods answer Disabled and Janus is the only media server.
    #[arg(long, value_name = "IP:PORT", env = "PARTYLINE_ROOMS_ADDRESS")]
    rooms_address: Option<std::net::SocketAddr>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let bus = BusChoice::pick(args.session, args.bus_address, std::env::var("PARTYLINE_BUS").ok().as_deref());
    let (log_tx, log_rx) = tokio::sync::mpsc::channel(logbus::QUEUE);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter(filter),
        )
        .with(logbus::BusLayer::new(log_tx))
        .init();
    gst::init().context("GStreamer does not initialise")?;
    partyline_shared::crypto::install_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(run(bus, args.rooms_address, log_rx))
}

/// How long a request to Janus may take (the long poll aside).
const JANUS_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

async fn run(
    bus: BusChoice,
    rooms_address: Option<std::net::SocketAddr>,
    log_rx: tokio::sync::mpsc::Receiver<logbus::LogLine>,
) -> anyhow::Result<()> {
    let janus = Client::new(JANUS_REQUEST_TIMEOUT).context("HTTP client")?;
    let board = Arc::new(state::StatusBoard::default());
    let (room_events, room_events_rx) = tokio::sync::mpsc::unbounded_channel();
    let rooms = rooms_address.map(|address| rooms_host::RoomsHost::start(address, room_events)).transpose()?;
    let player = Arc::new(player::Player::new(board, janus, rooms.clone())?);
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    // The objects are served before the name is requested: a client that sees the name can call.
    let connection = bus
        .builder()?
        .serve_at(OBJECT_PATH, service::BridgeService::new(player.clone()))?
        .serve_at(ROOMS_PATH, rooms_service::RoomsService::new(rooms))?
        .name(BUS_NAME)?
        .build()
        .await
        .with_context(|| format!("cannot serve {BUS_NAME} on the {bus}"))?;
    tokio::spawn(service::notify(connection.clone(), player.clone(), log_rx));
    tokio::spawn(rooms_service::notify(connection.clone(), room_events_rx));
    tracing::info!("serving {BUS_NAME} at {OBJECT_PATH} on the {bus} (GStreamer {})", gst::version_string());
    println!("partyline-bridged ready: {BUS_NAME} on the {bus}");

    let signal_name = tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    };
    tracing::info!("{signal_name}: leaving the rooms and stopping");
    player.shutdown().await;
    let _ = connection.release_name(BUS_NAME).await;
    tracing::info!("stopped");
    Ok(())
}

/// The man page `packaging/man/partyline-bridged.8` (installed gzipped by the package) is
/// rendered from [`Args`]: this test fails when it is stale, and `UPDATE_EXPECT=1` rewrites it.
#[cfg(test)]
mod man_page {
    use clap::CommandFactory as _;

    #[test]
    fn matches_the_command_line() {
        let mut command = super::Args::command();
        command.build(); // adds -V/--version while the version is still set
        // Neither version nor date in the page: it changes only when the command line does. The
        // empty date is quoted, else .TH's next argument (the source) would take its place.
        let man = clap_mangen::Man::new(command.version(None)).section("8").date("\"\"").source("partyline");
        let mut page = Vec::new();
        man.render(&mut page).expect("render the man page");
        let page = String::from_utf8(page).expect("UTF-8");
        expect_test::expect_file!["../../packaging/man/partyline-bridged.8"].assert_eq(&page);
    }
}
