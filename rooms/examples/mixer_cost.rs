//! What a room's mixer costs: CPU time per 20 ms tick for N listeners and 1–2 talkers, per
//! listener, and the listeners (and four-line users) one core can serve.
//!
//! `cargo run --release -p partyline-rooms --example mixer_cost [ticks] [complexity]`
//!
//! Each talker (talking and listening: a mix-minus of its own) sends a pre-encoded voice-like
//! signal, one packet per tick; every other member listens. Ticks run back to back on one
//! thread with synthetic clock values (20 ms apart), and the thread's own CPU time is read from
//! its schedstat (ns, through procfs). Per listener, the tick's packet is copied once, as the
//! endpoint will into its RTP buffer; SRTP and the socket are the endpoint's and not counted.

use std::time::{Duration, Instant};

use audiopus::coder::Encoder;
use audiopus::{Application, Bitrate, Channels, SampleRate};
use partyline_rooms::mixer::{EncoderConfig, MemberId, MixConfig, Rights, Room};

const FRAME: usize = 960;
const TICK: Duration = Duration::from_millis(20);

/// The main thread's CPU time so far (the measurement runs on it).
fn thread_cpu_time() -> Duration {
    let schedstat = procfs::process::Process::myself().and_then(|me| me.task_main_thread()?.schedstat());
    Duration::from_nanos(schedstat.map_or(0, |s| s.sum_exec_runtime))
}

/// One talker's packets: `frames` frames of three partials under a syllable envelope, encoded
/// as a browser would (32 kbit/s, FEC on).
fn talker_packets(frames: usize, pitch: f32) -> Result<Vec<Vec<u8>>, audiopus::Error> {
    let mut encoder = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip)?;
    encoder.set_bitrate(Bitrate::BitsPerSecond(32_000))?;
    encoder.set_inband_fec(true)?;
    encoder.set_packet_loss_perc(10)?;
    let mut output = [0u8; 1500];
    let mut packets = Vec::with_capacity(frames);
    for k in 0..frames {
        let frame: Vec<f32> = (0..FRAME)
            .map(|n| {
                let t = (k * FRAME + n) as f32 / 48_000.0;
                let envelope = 0.6 + 0.4 * (std::f32::consts::TAU * 3.0 * t).sin();
                let partial = |f: f32, a: f32| a * (std::f32::consts::TAU * f * t).sin();
                envelope * (partial(pitch, 0.2) + partial(pitch * 3.0, 0.1) + partial(pitch * 6.5, 0.05))
            })
            .collect();
        let length = encoder.encode_float(&frame, &mut output)?;
        packets.push(output[..length].to_vec());
    }
    Ok(packets)
}

/// One measured configuration.
struct Cost {
    per_tick: Duration,
    encodes_per_tick: u32,
}

fn measure(
    listeners: u64,
    talkers: u64,
    ticks: usize,
    encoder: EncoderConfig,
) -> Result<Cost, Box<dyn std::error::Error>> {
    let mut room = Room::new(MixConfig { encoder, ..MixConfig::default() })?;
    for id in 0..talkers {
        room.join(MemberId(id), Rights { talk: true, listen: true })?;
        room.set_talking(MemberId(id), true)?;
    }
    for id in talkers..talkers + listeners {
        room.join(MemberId(id), Rights { talk: false, listen: true })?;
    }
    let voices: Vec<Vec<Vec<u8>>> =
        (0..talkers).map(|t| talker_packets(250, 180.0 + 70.0 * t as f32)).collect::<Result<_, _>>()?;
    let mut rtp = vec![0u8; 1500];
    let start = Instant::now();
    let mut run = |range: std::ops::Range<usize>, room: &mut Room| -> Result<(), Box<dyn std::error::Error>> {
        for tick in range {
            let now = start + TICK * tick as u32;
            for (talker, voice) in voices.iter().enumerate() {
                let payload = &voice[tick % voice.len()];
                let timestamp = (tick * FRAME) as u32;
                room.receive(MemberId(talker as u64), tick as u16, timestamp, payload, now)?;
            }
            room.tick(now)?;
            for delivery in room.deliveries() {
                rtp[12..12 + delivery.packet.len()].copy_from_slice(delivery.packet);
            }
        }
        Ok(())
    };
    run(0..50, &mut room)?; // the jitter buffers start and the encoders warm up
    let (before, started) = (thread_cpu_time(), Instant::now());
    run(50..50 + ticks, &mut room)?;
    let (spent, elapsed) = (thread_cpu_time() - before, started.elapsed());
    // The kernel adds a running thread's time at its scheduler ticks (4 ms): below a few,
    // the wall clock of this single thread is the better figure.
    let spent = if spent < Duration::from_millis(40) { elapsed } else { spent };
    Ok(Cost { per_tick: spent / ticks as u32, encodes_per_tick: room.stats().last_tick_encodes })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let ticks: usize = args.next().map(|t| t.parse()).transpose()?.unwrap_or(1_500);
    let complexity: Option<u8> = args.next().map(|c| c.parse()).transpose()?;
    let encoder = EncoderConfig { complexity, ..EncoderConfig::default() };
    let default = Encoder::new(SampleRate::Hz48000, Channels::Mono, Application::Voip)?.complexity()?;
    let shown = complexity.map_or(format!("{default} (libopus's default)"), |c| c.to_string());
    println!("{ticks} ticks of 20 ms per row, Opus 32 kbit/s FEC on, complexity {shown}; one thread's CPU time");
    println!(
        "{:>9} {:>7} {:>8} {:>10} {:>13} {:>18} {:>22}",
        "listeners", "talkers", "encodes", "µs/tick", "µs/listener", "listeners/core", "four-line users/core"
    );
    let idle = EncoderConfig { idle_after_silent_frames: Some(10), ..encoder };
    let rows =
        [8u64, 50, 150, 600].into_iter().flat_map(|listeners| [(listeners, 1, encoder), (listeners, 2, encoder)]);
    // A room nobody talks in, encoding its silence, and idling in it.
    let silent = [(50, 0, encoder), (50, 0, idle)];
    for (listeners, talkers, encoder) in rows.chain(silent) {
        let cost = measure(listeners, talkers, ticks, encoder)?;
        let members = listeners + talkers;
        let micros = cost.per_tick.as_secs_f64() * 1e6;
        // One core runs 20 ms / cost such rooms; a four-line user is a member of four.
        let rooms_per_core = TICK.as_secs_f64() / cost.per_tick.as_secs_f64();
        println!(
            "{listeners:>9} {talkers:>7} {:>8} {micros:>10.1} {:>13.3} {:>18.0} {:>22.0}{}",
            cost.encodes_per_tick,
            micros / members as f64,
            rooms_per_core * members as f64,
            rooms_per_core * members as f64 / 4.0,
            if encoder.idle_after_silent_frames.is_some() { "  (idling in silence)" } else { "" },
        );
    }
    Ok(())
}
