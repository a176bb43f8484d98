//! The whole audio path, all real and driven through control's API only: a private dbus-daemon,
//! PulseAudio null sinks as the sound cards, Janus (ICE on `pl0`), partyline-control and
//! partyline-bridged. A sine on input channel 0 of the input card → server audio user A →
//! group X's room → user B → output channel 1 of the output card; B with no output → silence;
//! another capture device without restarting anything; a third user added without a gap in
//! A → B; bridged killed and restarted; Janus stopped and started again.
//!
//! Needs root and the network namespace of `scripts/netns-run` (DESIGN §6); it fails, not
//! skips, without `pl0`. Prints its figures (`AUDIO …` lines; `--nocapture` shows them).

use std::time::{Duration, Instant};

use partyline_testkit::SoundServer;
use partyline_testkit::audio::{RATE, Recording, Tone, channel, longest_dropout_ms, record, rms_db};
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::pulse::PulseServer;
use partyline_testkit::require_namespace;
use reqwest::StatusCode;
use serde_json::{Value, json};

use partyline_testkit::stack::{Stack, branch, joined};

/// A join takes well under a second with a release build; debug builds on a busy machine
/// are slower, and a retry after a fault waits for bridged's backoff (≤ 5 s).
const JOIN: Duration = Duration::from_secs(15);
/// After a fault, the tone counts as back from this long after the fault was seen (what was
/// already in the output's buffers plays out before).
const AFTER_FAULT_S: f64 = 0.1;
/// The longest gap A → B may show while a third user is added (two Opus packets).
const MAX_GAP_MS: f64 = 40.0;

/// B joined and receiving the room's mix.
fn a_captured(bridge: &Value) -> bool {
    branch(bridge, "A").and_then(|a| a["inputLevelDb"].as_f64()).is_some_and(|level| level > -20.0)
}

fn b_receives(bridge: &Value) -> bool {
    branch(bridge, "B").is_some_and(|b| b["state"] == "joined" && b["packetsReceived"].as_u64() > Some(25))
}

async fn send_ok(stack: &Stack, method: reqwest::Method, path: &str, body: Value, want: StatusCode) {
    let (status, answer) = stack.control.send(method, path, Some(body.clone())).await;
    assert_eq!(status, want, "{path} {body} → {answer}");
}

fn ms(since: Instant) -> u128 {
    since.elapsed().as_millis()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tone_crosses_the_whole_stack_through_reloads_and_faults() {
    require_namespace();
    let test_started = Instant::now();
    let pulse = PulseServer::start();
    for card in ["card_in", "card_in2", "card_out"] {
        pulse.add_card(card, RATE);
    }
    let _tone = Tone::play(&pulse, "card_in", 0, 1000);
    let _other_tone = Tone::play(&pulse, "card_in2", 0, 600);
    let bus = Bus::start();
    let mut stack = Stack::start_media("  - name: X\n", &bus).await;
    let pulse_env = pulse.server_address();
    let mut bridged = Bridged::start(&bus, &[("PULSE_SERVER", &pulse_env)]);
    let (control_pid, bridged_pid) = (stack.control.pid(), bridged.pid());
    stack.bridge_becomes("bridged seen by control", JOIN, |b| b["state"] == "idle").await;
    let post = reqwest::Method::POST;

    // The card, then A (input 0, no output) and B (input 1, output 1) in group X.
    let device = json!({ "inputDeviceId": "card_in.monitor", "outputDeviceId": "card_out", "sampleRate": RATE });
    send_ok(&stack, post.clone(), "/admin/audio/device", device, StatusCode::OK).await;
    let a = json!({ "name": "A", "group": "x", "inputChannel": 0, "outputChannel": null });
    let b = json!({ "name": "B", "group": "x", "inputChannel": 1, "outputChannel": 1 });
    let started = Instant::now();
    send_ok(&stack, post.clone(), "/admin/server-users", a, StatusCode::CREATED).await;
    send_ok(&stack, post.clone(), "/admin/server-users", b, StatusCode::CREATED).await;
    stack.bridge_becomes("A and B joined", JOIN, |b| joined(b, &["A", "B"])).await;
    println!("AUDIO A and B created → both joined: {} ms", ms(started));
    let bridge = stack.bridge_becomes("B receives the mix", JOIN, b_receives).await;
    assert_eq!(bridge["state"], "running", "{bridge}");
    // The participant is up as soon as Janus answers its first packet; the card's capture may
    // take longer to deliver its first block (PulseAudio resumes a suspended monitor source).
    stack.bridge_becomes("A's tone captured (input level over -20 dBFS)", JOIN, a_captured).await;
    println!("AUDIO A and B created → A's tone metered: {} ms", ms(started));

    // The tone on output channel 1 of the output card; every other channel silent.
    let samples = record(&pulse, "card_out.monitor", 1.0).await;
    let out1 = channel(&samples, 1);
    let (level, freq) = (rms_db(&out1), partyline_testkit::audio::frequency(&out1));
    println!("AUDIO output channel 1: {level:.1} dBFS at {freq:.0} Hz (sine of -6 dBFS in)");
    assert!(level > -30.0, "output channel 1 at {level:.1} dBFS: no tone\n{}", bridged.log());
    assert!((freq - 1000.0).abs() < 30.0, "output channel 1 at {freq:.0} Hz, not 1000 Hz");
    for k in [0, 2, 3, 7] {
        let level = rms_db(&channel(&samples, k));
        assert!(level < -60.0, "output channel {k} should be silent, is at {level:.1} dBFS");
    }

    // B with no output: nothing comes out.
    let generation = stack.bridge().await["generation"].as_u64();
    let no_output = json!({ "outputChannel": null });
    send_ok(&stack, reqwest::Method::PUT, "/admin/server-users/b", no_output, StatusCode::OK).await;
    stack
        .bridge_becomes("B rejoined without output", JOIN, |b| {
            b["generation"].as_u64() > generation && joined(b, &["A", "B"])
        })
        .await;
    // What was mixed before the change may still be on its way out (the playback's queue):
    // the first 100 ms are not judged.
    let samples = record(&pulse, "card_out.monitor", 0.6).await;
    let level = rms_db(&channel(&samples, 1)[RATE as usize / 10..]);
    println!("AUDIO B with no output: output channel 1 at {level:.1} dBFS");
    assert!(level < -60.0, "B has no output, yet output channel 1 is at {level:.1} dBFS");
    send_ok(&stack, reqwest::Method::PUT, "/admin/server-users/b", json!({ "outputChannel": 1 }), StatusCode::OK).await;
    stack.bridge_becomes("B with output again", JOIN, b_receives).await;

    // Another capture device: the pipeline is rebuilt in the running bridged, card_in2's 600 Hz
    // comes out.
    let recording = Recording::start(&pulse, "card_out.monitor");
    let started = Instant::now();
    let moved = json!({ "inputDeviceId": "card_in2.monitor", "outputDeviceId": "card_out" });
    send_ok(&stack, post.clone(), "/admin/audio/device", moved, StatusCode::OK).await;
    let at = recording.wait_tone("card_in2's tone after the device change", 1, 600.0, 0.0, JOIN).await;
    println!(
        "AUDIO device change → the new card's tone on output channel 1: {} ms (recording at {at:.2} s)",
        ms(started)
    );
    drop(recording);
    assert_eq!(stack.control.pid(), control_pid, "control was not restarted");
    assert_eq!(bridged.pid(), bridged_pid, "bridged was not restarted");
    let (_, config) = stack.control.get_json("/admin/audio/device").await;
    assert_eq!(config["device"]["inputDeviceId"], "card_in2.monitor", "{config}");

    // A third user while A → B plays: no gap in A → B.
    let recording = Recording::start(&pulse, "card_out.monitor");
    // The input too: a gap there is the tone player's (CPU starvation), not the bridge's.
    let input = Recording::start(&pulse, "card_in2.monitor");
    recording.wait_tone("A → B before C is added", 1, 600.0, 0.0, JOIN).await;
    let before = recording.seconds();
    let c = json!({ "name": "C", "group": "x", "inputChannel": 2, "outputChannel": 2 });
    let started = Instant::now();
    send_ok(&stack, post.clone(), "/admin/server-users", c, StatusCode::CREATED).await;
    stack.bridge_becomes("C joined", JOIN, |b| joined(b, &["A", "B", "C"])).await;
    let joined_after = ms(started);
    let span = recording.seconds() - before + 1.0;
    let samples = recording.finish_after(before + span).await;
    let out1 = channel(&samples, 1);
    let gap = longest_dropout_ms(&out1);
    let input_gap = longest_dropout_ms(&channel(&input.finish_after(0.0).await, 0));
    println!(
        "AUDIO C created → joined: {joined_after} ms; A → B across it: longest dropout {gap} ms over {span:.2} s \
         (input card: {input_gap} ms)"
    );
    assert!(rms_db(&out1) > -30.0, "no tone on output channel 1 while C was added");
    assert!(gap <= MAX_GAP_MS, "A → B dropped out for {gap} ms while C was added\n{}", bridged.log());

    // bridged killed: the test restarts it, control pushes the plan again, the tone is back.
    // One recording across the fault: a monitor stream that stays keeps the output card at a low
    // latency. (Left without any stream, a null sink renders 2 s blocks, and the first new
    // stream waits for the current block to end: up to 2 s of the test card's, not bridged's.)
    let recording = Recording::start(&pulse, "card_out.monitor");
    recording.wait_tone("the tone before bridged is killed", 1, 600.0, 0.0, JOIN).await;
    bridged.kill();
    stack.bridge_becomes("bridge absent", JOIN, |b| b["state"] == "absent").await;
    let gone_at = recording.seconds() + AFTER_FAULT_S;
    let started = Instant::now();
    bridged.restart();
    stack.bridge_becomes("the plan re-pushed and joined", JOIN, |b| joined(b, &["A", "B", "C"])).await;
    let joined_after = ms(started);
    recording.wait_tone("the tone after bridged's restart", 1, 600.0, gone_at, JOIN).await;
    println!("AUDIO bridged restarted → plan re-pushed, joined: {joined_after} ms, tone back: {} ms", ms(started));

    // Janus stopped: the branches retry, the bridge is degraded; Janus back (same ports and
    // secrets): control recreates the room and tokens, the branches rejoin, the tone is back.
    stack.janus.stop();
    let gone_at = recording.seconds() + AFTER_FAULT_S;
    let bridge = stack
        .bridge_becomes("degraded, branches retrying", JOIN, |b| {
            b["state"] == "degraded"
                && b["branches"].as_array().is_some_and(|v| v.iter().all(|b| b["state"] == "retrying"))
        })
        .await;
    println!(
        "AUDIO Janus stopped → bridge {}: {}",
        bridge["state"],
        branch(&bridge, "A").map_or(json!(null), |a| a["lastError"].clone())
    );
    let started = Instant::now();
    stack.janus.restart();
    stack
        .bridge_becomes("recovered after Janus restarted", JOIN, |b| {
            b["state"] == "running" && joined(b, &["A", "B", "C"])
        })
        .await;
    let joined_after = ms(started);
    recording.wait_tone("the tone after Janus restarted", 1, 600.0, gone_at, JOIN).await;
    println!("AUDIO Janus restarted → running, joined: {joined_after} ms, tone back: {} ms", ms(started));
    drop(recording);
    println!("AUDIO whole test: {:.1} s", test_started.elapsed().as_secs_f64());
}
