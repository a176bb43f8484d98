//! What the test card alone makes of the tone latency (`bench/card-loop`, BENCHMARKS.md "Audio"):
//! bench_audio's ticks through bridged's card path with no Janus at all. A private PulseAudio
//! card (`card_in`, `card_out`, null sinks as in every test); a GStreamer pipeline shaped like
//! bridged's card side reads channel 0 of `card_in.monitor` (pulsesrc 20/10 ms), encodes it as
//! bridged does (Opus, 20 ms frames, low delay), sends it as RTP over UDP on 127.0.0.1 where
//! Janus would be, and receives it into an `rtpjitterbuffer`, `opusdec`, `audiomixer` (10 ms
//! blocks) and `pulsesink` (30/10 ms, no processing deadline) onto `card_out`; measured with
//! [`TickRecorder`], as bench_audio does. Each run is a fresh pipeline start.
//!
//!   bench_card_loop [--runs N] [--jitter-ms MS] [--slack-ms MS]
//!
//! `--jitter-ms` is the jitter buffer (bridge.jitterBufferMs, default 20), `--slack-ms` the
//! mixer's allowance on top of it (bridged's MIX_SLACK_MS, default 10). Prints a markdown list.

use std::net::UdpSocket;
use std::process::Child;
use std::time::Duration;

use partyline_testkit::SoundServer;
use partyline_testkit::audio::{RATE, TickRecorder, gst_launch};
use partyline_testkit::bench::median;
use partyline_testkit::pulse::PulseServer;

/// The card side's first seconds on a null sink (bridged/README.md): the measurement waits
/// them out, as bench_audio's `CARD_SETTLE` does.
const CARD_SETTLE: Duration = Duration::from_secs(4);
/// Long enough for 20 ticks.
const TICKS_LENGTH: Duration = Duration::from_secs(6);

/// bridged's card side with a UDP loop in Janus's place.
fn card_loop(pulse: &PulseServer, port: u16, jitter_ms: u64, slack_ms: u64) -> Child {
    let card = format!("audio/x-raw,format=F32LE,channels=8,rate={RATE},channel-mask=(bitmask)0xc3f");
    let pick0 =
        "mix-matrix=<<(float)1.0,(float)0.0,(float)0.0,(float)0.0,(float)0.0,(float)0.0,(float)0.0,(float)0.0>>";
    let rtp = "application/x-rtp,media=audio,encoding-name=OPUS,clock-rate=48000,payload=96";
    let mixer_latency = (jitter_ms + slack_ms) * 1_000_000;
    let pipeline = format!(
        "pulsesrc device=card_in.monitor buffer-time=20000 latency-time=10000 ! {card} \
         ! queue max-size-time=60000000 leaky=downstream ! audioconvert {pick0} ! audio/x-raw,format=S16LE,channels=1 \
         ! opusenc frame-size=20 audio-type=restricted-lowdelay bitrate=64000 ! rtpopuspay \
         ! udpsink host=127.0.0.1 port={port} sync=false async=false \
         udpsrc address=127.0.0.1 port={port} caps={rtp} ! rtpjitterbuffer latency={jitter_ms} ! rtpopusdepay \
         ! opusdec plc=true ! audio/x-raw,format=S16LE,channels=1,rate=48000 ! audioconvert ! {card} ! mixer. \
         audiotestsrc wave=silence is-live=true samplesperbuffer=480 ! {card} \
         ! audiomixer name=mixer output-buffer-duration=10000000 min-upstream-latency={mixer_latency} start-time-selection=first \
         ! {card} ! pulsesink device=card_out buffer-time=30000 latency-time=10000 processing-deadline=0"
    );
    gst_launch(pulse, &pipeline)
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()).map(|a| a.port()).expect("a free UDP port")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (mut runs, mut jitter_ms, mut slack_ms) = (5usize, 20u64, 10u64);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--runs" => runs = value.parse().expect("--runs N"),
            "--jitter-ms" => jitter_ms = value.parse().expect("--jitter-ms MS"),
            "--slack-ms" => slack_ms = value.parse().expect("--slack-ms MS"),
            other => panic!("unknown option {other} (--runs, --jitter-ms, --slack-ms)"),
        }
    }
    let pulse = PulseServer::start();
    for card in ["card_in", "card_out"] {
        pulse.add_card(card, RATE);
    }
    println!("### Card loop (no Janus): jitter buffer {jitter_ms} ms, mixer slack {slack_ms} ms\n");
    let mut medians = Vec::new();
    for run in 1..=runs {
        let recorder = TickRecorder::start(&pulse, 0, 0);
        let mut path = card_loop(&pulse, free_udp_port(), jitter_ms, slack_ms);
        tokio::time::sleep(CARD_SETTLE).await;
        let ticks = recorder.ticks_through(&pulse, TICKS_LENGTH).await;
        let _ = path.kill();
        let _ = path.wait();
        let mut heard: Vec<f64> = ticks.iter().flatten().copied().collect();
        heard.sort_by(f64::total_cmp);
        match median(&heard) {
            Some(m) => {
                let (low, high) = (heard[0], heard[heard.len() - 1]);
                println!(
                    "- run {run}: median {m:.0} ms (min {low:.0}, max {high:.0}), {} of {} ticks heard",
                    heard.len(),
                    ticks.len()
                );
                medians.push(m);
            }
            None => println!("- run {run}: no tick heard ({} played)", ticks.len()),
        }
    }
    medians.sort_by(f64::total_cmp);
    if let Some(m) = median(&medians) {
        let all: Vec<String> = medians.iter().map(|m| format!("{m:.0}")).collect();
        println!("- median of the run medians: {m:.0} ms (runs: {})", all.join(", "));
    }
}
