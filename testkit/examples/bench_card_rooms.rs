//! The card on partyline's own rooms (run by `bench/rooms`): a release build of
//! partyline-bridged hosting the rooms, on the PipeWire test card (null sinks at a forced
//! quantum of 256 frames at 48 kHz), its plan on `Transport::Rooms`: server audio user A (input
//! 0, output 1) in group `x`, whose feed is the room's local line. A panel (str0m, full ICE, as
//! a browser) joins `x` through `org.partyline.Rooms1`, talks, and sends back at once every
//! packet it hears: ticks on the card's input come back on its output through the room twice.
//! Prints a markdown section on stdout.
//!
//!   bench_card_rooms --bridged BIN [--secs S]
//!
//! The round trip card → room → panel → room → card is measured on the card's ports (the input's
//! and the output's monitor ports in one recording: [`PipeWireServer::record_ports`]), a tick
//! being 20 ms of 1 kHz every 300 ms. The panel echoes what it receives without a jitter buffer
//! or a playout: a browser adds its own on the way in.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use partyline_shared::bridge::{BranchState, Plan, Transport};
use partyline_shared::rooms_bus::{RoomLine, RoomsProxy};
use partyline_testkit::SoundServer;
use partyline_testkit::audio::{RATE, TICKS, Tone, channel, tick_latencies};
use partyline_testkit::bench::{machine_line, quantile};
use partyline_testkit::card::QUANTUM;
use partyline_testkit::dbus::{Bridged, Bus, wait_status};
use partyline_testkit::pipewire::PipeWireServer;
use partyline_testkit::plan::{group, user};
use partyline_testkit::webrtc_panel::Panel;

const WAIT: Duration = Duration::from_secs(30);
/// From the panel connected to the first measurement: the queues between the card and the
/// rooms trim what their start left (once a second).
const SETTLE: Duration = Duration::from_secs(3);
/// The rooms' goal for card → browser is 40 ms each way: twice that for the round trip, before
/// a browser's jitter buffer.
const ROUND_TRIP_GOAL_MS: f64 = 80.0;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (bridged_binary, secs) = options();
    let machine = machine_line();
    let card = PipeWireServer::start();
    card.force_quantum(QUANTUM);
    for sink in ["card_in", "card_out"] {
        card.add_card(sink, RATE);
    }
    let bus = Bus::start();
    let env = [("RUST_LOG", "warn"), ("MALLOC_ARENA_MAX", "2"), ("PARTYLINE_ROOMS_ADDRESS", "127.0.0.1:0")];
    let bridged = Bridged::start_binary_on_card(&bridged_binary, &bus, &card, &env);
    let proxy = bus.bridge().await;
    let plan = Plan {
        input_device: "card_in.monitor".into(),
        output_device: "card_out".into(),
        device_sample_rate: RATE,
        transport: Transport::Rooms,
        jitter_buffer_ms: 20,
        groups: vec![group("x")],
        users: vec![user("A", "x", 0, Some(1))],
        ..Plan::default()
    };
    let generation = proxy.apply(&plan).await.unwrap_or_else(|e| panic!("Apply: {e:?}\n{}", bridged.log()));
    wait_status(&proxy, WAIT, "the card in room x", |s| {
        s.generation == generation && s.participants.iter().all(|p| p.state == BranchState::Joined)
    })
    .await;

    let connection = bus.connect().await;
    let rooms = RoomsProxy::new(&connection).await.expect("the rooms' proxy");
    let (mut panel, offer) = Panel::offer("127.0.0.1", 1);
    let lines = [RoomLine { room: "x".into(), talk: true, listen: true }];
    let joined = rooms.join(&offer, &lines).await.expect("the rooms take the offer");
    panel.accept(&joined.answer);
    rooms.set_talking(joined.session, 0, true).await.expect("the panel's talk key");
    let stop = Arc::new(AtomicBool::new(false));
    let echo = std::thread::spawn({
        let stop = stop.clone();
        move || echo(panel, &stop)
    });

    tokio::time::sleep(SETTLE).await;
    eprintln!("bench_card_rooms: ticks card_in 0 → room x → panel → room x → card_out 1, {secs} s");
    let recording = card.record_ports(&[("card_in", 0), ("card_out", 1)]);
    recording.wait_until(0.5).await;
    let ticks = Tone::source(&card, "card_in", &[0], TICKS);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    drop(ticks);
    let until = recording.seconds() + 0.5;
    let samples = recording.finish_after(until).await;
    stop.store(true, Ordering::Relaxed);
    let echoed = echo.join().expect("the echo thread");
    let latencies = tick_latencies(&channel(&samples, 0), &channel(&samples, 1));
    print(&machine, &latencies, echoed);
    assert!(latencies.iter().any(Option::is_some), "no tick came back:\n{}", bridged.log());
}

fn options() -> (PathBuf, u64) {
    let (mut bridged, mut secs) = (PathBuf::new(), 20);
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--bridged" => bridged = value.into(),
            "--secs" => secs = value.parse().expect("--secs N"),
            other => panic!("unknown argument {other} (--bridged BIN --secs N)"),
        }
    }
    assert!(bridged.exists(), "--bridged: the release binary of partyline-bridged");
    (bridged, secs)
}

/// Drives the panel until `stop`, sending back every packet it hears the moment it arrives;
/// returns how many it echoed.
fn echo(mut panel: Panel, stop: &AtomicBool) -> usize {
    let started = Instant::now();
    while !panel.connected {
        assert!(started.elapsed() < WAIT, "the panel did not connect within {WAIT:?}");
        panel.drive(Duration::from_millis(1));
    }
    let mut echoed = panel.heard.len();
    let first = echoed;
    while !stop.load(Ordering::Relaxed) {
        panel.drive(Duration::from_micros(500));
        while echoed < panel.heard.len() {
            let payload = panel.heard[echoed].payload.clone();
            panel.send(0, &payload);
            echoed += 1;
        }
    }
    echoed - first
}

fn print(machine: &str, latencies: &[Option<f64>], echoed: usize) {
    let heard: Vec<f64> = latencies.iter().flatten().copied().collect();
    let at = |q: f64| quantile(&heard, q).unwrap_or(f64::NAN);
    println!("#### The card on partyline's own rooms: a round trip through a panel\n");
    println!(
        "{machine}. Test card: PipeWire null sinks, quantum {QUANTUM} at {RATE} Hz; bridged (release) hosting the rooms, the card's participant on `Transport::Rooms`; a panel (str0m) echoing every packet it hears.\n"
    );
    let verdict = if at(0.5) <= ROUND_TRIP_GOAL_MS { "met" } else { "not met" };
    println!("| path | median (ms) | p95 | min | max | ticks heard | goal | verdict |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| card → room → panel (echo) → room → card | {:.0} | {:.0} | {:.0} | {:.0} | {} of {} | median ≤ {ROUND_TRIP_GOAL_MS:.0} | {verdict} |",
        at(0.5),
        at(0.95),
        at(0.0),
        at(1.0),
        heard.len(),
        latencies.len()
    );
    println!(
        "\nThe panel echoed {echoed} packets. Each way is one pass through the room (the card's queue in, one 20 ms Opus frame, the tick, the card's queue out); the panel adds no jitter buffer or playout of its own, a browser does."
    );
}
