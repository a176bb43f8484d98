//! Media end to end: a private PulseAudio as the sound card, a real Janus, the real bridged
//! (harnesses: `partyline-testkit`). Needs root and must run inside a network namespace holding
//! `pl0` (DESIGN §6: Janus offers no loopback candidate):
//! `scripts/netns-run cargo test -p partyline-bridged --test media`.

use std::time::{Duration, Instant};

use partyline_shared::bridge::{BranchState, BridgeProxy, BridgeState, Plan, PlanUser, Status};
use partyline_testkit::alsa::{AlsaHome, raw_tail};
use partyline_testkit::audio::{Recording, Tone, channel, frequency, longest_dropout_ms, rms_db};
use partyline_testkit::dbus::{Bridged, Bus, wait_status};
use partyline_testkit::janus::Janus;
use partyline_testkit::pulse::{AUX_MAP, PulseServer};
use partyline_testkit::{ICE_ADDRESS, ICE_IFACE, require_namespace};

const RATE: u32 = partyline_testkit::audio::RATE;
const JOIN_WAIT: Duration = Duration::from_secs(20);

async fn record(pulse: &PulseServer, seconds: f64) -> Vec<f32> {
    partyline_testkit::audio::record(pulse, "card_out.monitor", seconds).await
}

fn user(name: &str, input: u8, output: Option<u8>, token: &str) -> PlanUser {
    PlanUser {
        name: name.into(),
        identity: format!("srv-{name}"),
        room: "x".into(),
        token: token.into(),
        input_channel: input,
        output_channel: output,
        bitrate_kbps: 64,
    }
}

fn all_joined(status: &Status, n: usize) -> bool {
    status.branches.len() == n && status.branches.iter().all(|b| b.state == BranchState::Joined)
}

async fn apply_and_wait(proxy: &BridgeProxy<'_>, plan: &Plan, what: &str) -> Duration {
    let started = Instant::now();
    let generation = proxy.apply(plan).await.unwrap_or_else(|e| panic!("Apply ({what}): {e:?}"));
    wait_status(proxy, JOIN_WAIT, what, |s| s.generation == generation && all_joined(s, plan.users.len())).await;
    started.elapsed()
}

/// Janus with room `x` (prebuffering 2, as control makes of jitterBufferMs 40) admitting
/// `tokens`, a private bus, and bridged on it using `pulse`.
async fn media_stack(pulse: &PulseServer, tokens: &[&str]) -> (Janus, Bus, Bridged, BridgeProxy<'static>) {
    let janus = Janus::builder().ice_iface(ICE_IFACE).start();
    for token in tokens {
        janus.add_token(token).await;
    }
    janus.create_room("x", 2).await;
    let bus = Bus::start();
    let bridged = Bridged::start(&bus, &[("PULSE_SERVER", &pulse.server_address())]);
    let proxy = bus.bridge().await;
    (janus, bus, bridged, proxy)
}

/// The plan: capture `card_in.monitor`, play `card_out`, at `janus`, with `users`.
fn plan(janus: &Janus, users: Vec<PlanUser>) -> Plan {
    Plan {
        input_device: "card_in.monitor".into(),
        output_device: "card_out".into(),
        device_sample_rate: RATE,
        janus_url: janus.url().into(),
        ice_addresses: vec![ICE_ADDRESS.into()],
        latency_ms: 40,
        users,
    }
}

/// Waits until B receives the room's mix (and returns the status).
async fn b_receives(proxy: &BridgeProxy<'_>, what: &str) -> Status {
    wait_status(proxy, JOIN_WAIT, what, |s| s.branches.iter().any(|br| br.name == "b" && br.packets_received > 50))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tone_through_janus_onto_the_output_channel() {
    require_namespace();
    let pulse = PulseServer::start();
    for sink in ["card_in", "card_in2", "card_out"] {
        pulse.add_card(sink, RATE);
    }
    let (janus, _bus, bridged, proxy) = media_stack(&pulse, &["tok-a", "tok-b", "tok-c"]).await;
    let _tone = Tone::play(&pulse, "card_in", 0, 1000);
    let _other_tone = Tone::play(&pulse, "card_in2", 0, 600);

    // A (input 0, no output) and B (input 1, silent; output 1) in room x: A's tone on output 1.
    let a = user("a", 0, None, "tok-a");
    let b = user("b", 1, Some(1), "tok-b");
    let plan = plan(&janus, vec![a.clone(), b.clone()]);
    let took = apply_and_wait(&proxy, &plan, "A and B joined").await;
    println!("BENCH first plan (pipeline + 2 branches) Apply -> joined (media up): {} ms", took.as_millis());
    let status = b_receives(&proxy, "B receives").await;
    assert_eq!(status.state, BridgeState::Running, "{status:#?}");
    wait_status(&proxy, JOIN_WAIT, "A hears its input", |s| {
        s.branches.iter().any(|br| br.name == "a" && br.input_level_db > -20.0)
    })
    .await;
    let samples = record(&pulse, 1.5).await;
    let out1 = channel(&samples, 1);
    let tail = &out1[out1.len() / 3..];
    let (level, freq) = (rms_db(tail), frequency(tail));
    println!("output channel 1: {level:.1} dBFS, {freq:.0} Hz, longest dropout {} ms", longest_dropout_ms(tail));
    assert!(level > -30.0, "output channel 1 is {level:.1} dBFS: no tone{}", bridged.log());
    assert!((freq - 1000.0).abs() < 30.0, "output channel 1 at {freq:.0} Hz, not 1000 Hz");
    for k in [0, 2, 7] {
        let level = rms_db(&channel(&samples, k));
        assert!(level < -60.0, "output channel {k} should be silent, is {level:.1} dBFS");
    }

    // B with no output: nothing comes out.
    let b_silent = PlanUser { output_channel: None, ..b.clone() };
    let silent_plan = Plan { users: vec![a.clone(), b_silent], ..plan.clone() };
    let took = apply_and_wait(&proxy, &silent_plan, "B rejoined without output").await;
    println!("BENCH one branch changed Apply -> joined: {} ms", took.as_millis());
    let samples = record(&pulse, 0.6).await;
    let level = rms_db(&channel(&samples, 1));
    assert!(level < -60.0, "B has no output, yet channel 1 is at {level:.1} dBFS");

    // B's output back, then C added while recording: A -> B keeps flowing without a gap.
    apply_and_wait(&proxy, &plan, "B with output again").await;
    b_receives(&proxy, "B receives again").await;
    let recording = Recording::start(&pulse, "card_out.monitor");
    recording.wait_until(0.5).await;
    let c = user("c", 2, Some(2), "tok-c");
    let with_c = Plan { users: vec![a.clone(), b.clone(), c], ..plan.clone() };
    let took = apply_and_wait(&proxy, &with_c, "C joined").await;
    println!("BENCH branch added Apply -> joined (media up): {} ms", took.as_millis());
    let recorded_at_join = recording.seconds();
    let samples = recording.finish_after(recorded_at_join + 1.0).await;
    let out1 = channel(&samples, 1);
    let dropout = longest_dropout_ms(&out1);
    println!("output channel 1 across adding C: longest dropout {dropout} ms over {:.2} s", recorded_at_join + 1.0);
    assert!(rms_db(&out1) > -30.0, "no tone while C was added");
    assert!(dropout <= 40.0, "A -> B dropped out for {dropout} ms while C was added");

    // Another input device: everything is rebuilt, the 600 Hz of card_in2 comes out.
    let moved = Plan { input_device: "card_in2.monitor".into(), ..with_c.clone() };
    let took = apply_and_wait(&proxy, &moved, "rebuilt on card_in2").await;
    println!("BENCH device change (rebuild, 3 branches) Apply -> joined: {} ms", took.as_millis());
    b_receives(&proxy, "B receives after the rebuild").await;
    // The room's mix may still carry a few frames of the old capture: wait (bounded) for 600 Hz.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let samples = record(&pulse, 0.5).await;
        let out1 = channel(&samples, 1);
        let (level, freq) = (rms_db(&out1), frequency(&out1));
        println!("after the device change: output channel 1 at {level:.1} dBFS, {freq:.0} Hz");
        if level > -30.0 && (freq - 600.0).abs() < 30.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the device change channel 1 is at {freq:.0} Hz, {level:.1} dBFS, not 600 Hz"
        );
    }
    drop(bridged);
}

/// A playback device whose PulseAudio channel map is `aux0…aux7` (ALSA's multichannel and
/// pro-audio profiles): output channel 5 lands on the device's channel 5, not on silence
/// (PulseAudio matches positions by name, and the 7.1 positions bridged uses inside its
/// pipeline name none of the device's channels; README, "Channel order").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_channel_is_the_device_channel_on_an_aux_card() {
    require_namespace();
    let pulse = PulseServer::start();
    pulse.add_card("card_in", RATE);
    pulse.add_card_with_map("card_out", RATE, AUX_MAP);
    let (janus, _bus, bridged, proxy) = media_stack(&pulse, &["tok-a", "tok-b"]).await;
    let _tone = Tone::play(&pulse, "card_in", 0, 1000);
    let users = vec![user("a", 0, None, "tok-a"), user("b", 1, Some(5), "tok-b")];
    apply_and_wait(&proxy, &plan(&janus, users), "A and B joined").await;
    b_receives(&proxy, "B receives").await;
    // Recorded with the device's own map, so PulseAudio copies by index.
    let samples = Recording::start_with_map(&pulse, "card_out.monitor", AUX_MAP).finish_after(1.5).await;
    let levels: Vec<String> = (0..8).map(|k| format!("{k}: {:.1}", rms_db(&channel(&samples, k)))).collect();
    println!("aux card, dBFS per device channel: {}", levels.join(", "));
    let out5 = channel(&samples, 5);
    let tail = &out5[out5.len() / 3..];
    let (level, freq) = (rms_db(tail), frequency(tail));
    assert!(level > -30.0, "device channel 5 is {level:.1} dBFS: no tone ({}){}", levels.join(", "), bridged.log());
    assert!((freq - 1000.0).abs() < 30.0, "device channel 5 at {freq:.0} Hz, not 1000 Hz");
    for k in [0, 1, 2, 3, 4, 6, 7] {
        let level = rms_db(&channel(&samples, k));
        assert!(level < -60.0, "device channel {k} should be silent, is {level:.1} dBFS");
    }
    drop(bridged);
}

/// ALSA devices selected by `alsa:` ids are opened directly (alsasrc/alsasink), and card channel
/// k is device channel k both ways. The devices are ALSA `file` PCMs of the test's own: the
/// input plays a FIFO with a 1000 Hz tone on device channel 2 only, the output writes every
/// device channel to a file; each is paced by a PulseAudio null device behind it (the only
/// clock a machine without a card has), which sees none of the data. A (input 2) and B (output
/// 5) share room x: the tone must come out on device channel 5 alone. Without bridged's
/// reordering ALSA's 7.1 order would put it on card input 4 (A silent) and play card output 5
/// on device channel 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alsa_devices_open_directly_and_keep_every_channel_number() {
    require_namespace();
    let pulse = PulseServer::start();
    pulse.add_card("clock_in", RATE);
    pulse.add_card("clock_out", RATE);
    let server = pulse.server_address();
    let home = AlsaHome::new("");
    let fifo = home.tone_fifo("in.fifo", 2, 1000);
    let out = home.file("out.raw");
    let asoundrc = format!(
        "pcm.partyline_in {{\n    type file\n    slave.pcm {{ type pulse; server \"{server}\"; device \"clock_in.monitor\" }}\n    \
         file \"/dev/null\"\n    infile \"{}\"\n    format \"raw\"\n}}\n\
         pcm.partyline_out {{\n    type file\n    slave.pcm {{ type pulse; server \"{server}\"; device \"clock_out\" }}\n    \
         file \"{}\"\n    format \"raw\"\n}}\n",
        fifo.display(),
        out.display()
    );
    std::fs::write(home.home().join(".asoundrc"), asoundrc).expect("write .asoundrc");
    let janus = Janus::builder().ice_iface(ICE_IFACE).start();
    for token in ["tok-a", "tok-b"] {
        janus.add_token(token).await;
    }
    janus.create_room("x", 2).await;
    let bus = Bus::start();
    let home_dir = home.home().to_str().expect("a UTF-8 path");
    // No PULSE_SERVER: two alsa: ids never ask a sound server.
    let bridged = Bridged::start(&bus, &[("HOME", home_dir), ("PULSE_SERVER", "unix:/nonexistent/none")]);
    let proxy = bus.bridge().await;
    let users = vec![user("a", 2, None, "tok-a"), user("b", 1, Some(5), "tok-b")];
    let plan = Plan {
        input_device: "alsa:partyline_in".into(),
        output_device: "alsa:partyline_out".into(),
        ..plan(&janus, users)
    };
    apply_and_wait(&proxy, &plan, "A and B joined on the ALSA devices").await;
    let status = b_receives(&proxy, "B receives").await;
    assert_eq!(status.state, BridgeState::Running, "{status:#?}{}", bridged.log());
    wait_status(&proxy, JOIN_WAIT, "A hears device channel 2", |s| {
        s.branches.iter().any(|br| br.name == "a" && br.input_level_db > -20.0)
    })
    .await;
    // What the output device was given over the last second, once the tone arrived (bounded:
    // the assertions below say what it was otherwise).
    let deadline = Instant::now() + Duration::from_secs(10);
    let samples = loop {
        let samples = raw_tail(&out, 1.0);
        let out5 = channel(&samples, 5);
        let last_half_second = &out5[out5.len().saturating_sub(RATE as usize / 2)..];
        if rms_db(last_half_second) > -30.0 || Instant::now() > deadline {
            break samples;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let levels: Vec<String> = (0..8).map(|k| format!("{k}: {:.1}", rms_db(&channel(&samples, k)))).collect();
    println!("ALSA output device, dBFS per device channel: {}", levels.join(", "));
    let out5 = channel(&samples, 5);
    let (level, freq) = (rms_db(&out5), frequency(&out5));
    assert!(level > -30.0, "device channel 5 is {level:.1} dBFS: no tone ({}){}", levels.join(", "), bridged.log());
    assert!((freq - 1000.0).abs() < 30.0, "device channel 5 at {freq:.0} Hz, not 1000 Hz");
    for k in [0, 1, 2, 3, 4, 6, 7] {
        let level = rms_db(&channel(&samples, k));
        assert!(level < -60.0, "device channel {k} should be silent, is {level:.1} dBFS ({})", levels.join(", "));
    }
    drop(bridged);
}
