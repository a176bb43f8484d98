//! AES67 one way and a local card the other, on two clocks, for real: a console's stream on a
//! grandmaster whose clock runs 50 ppm slow against the host (`ptp-grandmaster`, the tests'
//! own: `ptp4l`'s time here is the host's), played by partyline on a PulseAudio null sink (on
//! the host's clock), through the local matrix (server user Console on input 3, Desk on output
//! 3, one group). The console's media clock offset is not zero, as Dante's are not.
//!
//! What is held: the playback is resampled to the capture's pace (`bridged/src/drift.rs`:
//! bridged logs the drift it makes up once the controller is at work), and Desk's output carries
//! the tone at its level over the next 20 s. Printed, not judged: the drift's value, the playback
//! queue's glitches, dropouts and breaks in the tone (`audio::worst_break`). Now and then the
//! receive loses a block to a stall of the machine (a 5–20 ms hole, and the queue then runs dry
//! or trims the burst after it), which is the receive's matter, not the resampler's; the
//! resampler's own behaviour (no glitch, a steady latency, the drift's estimate) is held by
//! `drift.rs`'s tests on simulated clocks. Without the resampler no drift is logged and the test
//! fails there.
//! Needs root, `scripts/netns-run`'s namespace and PulseAudio. Prints its figures (`AES67 …`
//! lines).

use std::time::Duration;

use partyline_shared::aes67::Aes67Stream;
use partyline_testkit::SoundServer;
use partyline_testkit::aes67::{CONSOLE_NAME, Console, Grandmaster};
use partyline_testkit::audio::{RATE, Recording, channel, longest_dropout_ms, tone_db, worst_break};
use partyline_testkit::pulse::PulseServer;
use partyline_testkit::{require_namespace, wait_for};
use reqwest::StatusCode;
use serde_json::json;

use crate::serial::alone::aes67_media::{aes67, settings};
use partyline_testkit::stack::joined;

use crate::serial::alone::aes67_rig::on_the_network;

const SLOW: Duration = Duration::from_secs(30);
/// The grandmaster's clock against the host's: slower, as a crystal at the edge of its spec.
const DRIFT_PPM: f64 = -50.0;
/// The console's media clock offset (`mediaclk:direct=`).
const OFFSET: u32 = 2_654_435_769;
/// The receive's latency, ms.
const RECEIVE_LATENCY_MS: u32 = 10;
const TONE_HZ: f64 = 1000.0;
const TONE_DBFS: f64 = -20.0;
/// What bridged logs as the drift it makes up.
const DRIFT_LOG: &str = "the playback follows the capture's clock: the capture runs ";

/// Every drift bridged logged, in ppm, in order.
fn drifts_logged(log: &str) -> Vec<f64> {
    log.lines().filter_map(|line| line.split_once(DRIFT_LOG)?.1.split_whitespace().next()?.parse().ok()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_card_s_playback_follows_a_console_on_a_clock_of_its_own() {
    require_namespace();
    let pulse = PulseServer::start();
    pulse.add_card("card_out", RATE);
    let console = Console::builder().tone(3, TONE_HZ, TONE_DBFS).media_clock_offset(OFFSET);
    let off_the_host = |net: &_| Grandmaster::start_off_the_host(net, 1, 128, DRIFT_PPM);
    let pulse_server = pulse.server_address();
    let rig = on_the_network(off_the_host, console, "  - name: Stage\n", &[("PULSE_SERVER", &pulse_server)]).await;
    let (stack, control, bridged) = (&rig.stack, &rig.stack.control, &rig.bridged);
    let sdp = wait_for("the console's stream listed", SLOW, async || {
        let announced = aes67(stack).await["announced"].as_array().cloned().unwrap_or_default();
        let console = announced.into_iter().find(|a| a["stream"]["name"] == CONSOLE_NAME)?;
        console["sdp"].as_str().map(str::to_owned)
    })
    .await;
    let stream = Aes67Stream::parse(&sdp).expect("the console's SDP reads");
    assert_eq!(stream.media_clock_offset, OFFSET, "{sdp}");
    // A receive latency with room for the machine's stalls: what is judged here is the playback
    // between the two clocks.
    let mut receive = settings(Some(&sdp));
    receive["receiveLatencyMs"] = json!(RECEIVE_LATENCY_MS);
    assert_eq!(control.put_json("/admin/config/aes67", receive).await.0, StatusCode::OK);
    let device = json!({ "inputDeviceId": "aes67", "outputDeviceId": "card_out", "sampleRate": RATE });
    assert_eq!(control.post_json("/admin/audio/device", device).await.0, StatusCode::OK);
    for (name, input, output) in [("Console", 2, None), ("Desk", 5, Some(2))] {
        let user = json!({ "name": name, "group": "stage", "inputChannel": input, "outputChannel": output });
        assert_eq!(control.post_json("/admin/server-users", user).await.0, StatusCode::CREATED);
    }
    stack.bridge_becomes("Console and Desk joined", SLOW, |b| joined(b, &["Console", "Desk"])).await;

    // The controller at work: it logs the drift it makes up once that moves by 10 ppm.
    let recording = Recording::start(&pulse, "card_out.monitor");
    recording.wait_tone("the console's tone on Desk's output", 2, TONE_HZ, 0.0, SLOW).await;
    wait_for("the drift made up, logged", Duration::from_secs(60), async || {
        (!drifts_logged(&bridged.log()).is_empty()).then_some(())
    })
    .await;

    // Then 20 s of it.
    let (log_mark, from) = (bridged.log().len(), recording.seconds());
    let samples = recording.finish_after(from + 20.0).await;
    let desk = channel(&samples[(from * f64::from(RATE)) as usize * 8..], 2);
    let (level, broken, dropout) = (tone_db(&desk, TONE_HZ), worst_break(&desk, TONE_HZ), longest_dropout_ms(&desk));
    let log = bridged.log();
    let glitches: Vec<&str> = log[log_mark..].lines().filter(|l| l.contains("the card's playback queue")).collect();
    println!(
        "AES67 console on a clock {DRIFT_PPM:+} ppm off → local card: drift made up (logged, ppm) {:?}; 20 s at {level:.2} dBFS, worst break {broken:.5}, longest dropout {dropout} ms, queue glitches {}",
        drifts_logged(&log),
        glitches.len()
    );
    assert!((level - TONE_DBFS).abs() <= 1.0, "Desk's output at {level:.2} dBFS for {TONE_DBFS} dBFS sent");
}
