//! Device listing against a real PulseAudio, a real PipeWire and ALSA devices of the test's own,
//! each started by the test, and the fallbacks when no sound server answers (refused connection,
//! or a server that never replies); control's pactl never starts a sound server.

use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use partyline_shared::card::CARD_CHANNEL_MAP;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Control, wait_for};
use partyline_testkit::SoundServer;
use partyline_testkit::alsa::{AlsaHome, fixed_channels_pcm};
use partyline_testkit::pipewire::PipeWireServer;
use partyline_testkit::pulse::PulseServer;
use partyline_testkit::sound_server::AUX_MAP;

/// How long the warning of a device selection may take (a listing is bounded by 2 s).
const LOG_TIMEOUT: Duration = Duration::from_secs(5);

/// The sound card of the tests (design section 6): two 8-channel null sinks, one standing for the
/// card's outputs and one whose monitor feeds a remapped source standing for its inputs.
pub fn pulse_with_a_card() -> PulseServer {
    let pulse = PulseServer::start();
    pulse.load_module("module-null-sink", "sink_name=card_out channels=8 rate=48000");
    pulse.load_module("module-null-sink", "sink_name=card_in channels=8 rate=48000");
    pulse.load_module(
        "module-remap-source",
        "source_name=card_mic master=card_in.monitor channels=2 \
         master_channel_map=aux0,aux1 channel_map=left,right",
    );
    pulse
}

async fn device_list(control: &Control) -> Value {
    let (status, body) = control.get_json("/admin/devices/list").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn entries<'a>(listing: &'a Value, direction: &str) -> &'a [Value] {
    listing[direction].as_array().map_or(&[], Vec::as_slice)
}

fn find<'a>(listing: &'a Value, direction: &str, identifier: &str) -> &'a Value {
    entries(listing, direction)
        .iter()
        .find(|entry| entry["identifier"] == identifier)
        .unwrap_or_else(|| panic!("no {identifier} in {direction}: {listing:#}"))
}

#[tokio::test]
async fn devices_come_from_pulseaudio_without_monitors() {
    let pulse = pulse_with_a_card();
    let control = Control::builder().env("PULSE_SERVER", &pulse.server_address()).start().await;

    let listing = device_list(&control).await;

    assert_eq!(listing["platform"], "pulseaudio", "{listing:#}");
    for name in ["card_out", "card_in"] {
        let sink = find(&listing, "outputs", name);
        assert_eq!(sink["channels"], 8, "{sink}");
        assert_eq!(sink["sampleRate"], 48_000, "{sink}");
        assert!(sink["description"].as_str().is_some_and(|d| d.starts_with("Output: ")), "{sink}");
    }
    let mic = find(&listing, "inputs", "card_mic");
    assert_eq!(mic["channels"], 2, "{mic}");
    assert_eq!(mic["sampleRate"], 48_000, "{mic}");
    assert!(mic["description"].as_str().is_some_and(|d| d.starts_with("Input: ")), "{mic}");
    // The monitor sources are loopbacks of the sinks, never offered as inputs.
    assert_eq!(entries(&listing, "inputs").len(), 1, "{listing:#}");
    assert!(!listing.to_string().contains(".monitor"), "{listing:#}");
    // PulseAudio picks the only real source as the default source, and one sink as default.
    assert_eq!(mic["isDefault"], true, "{mic}");
    let default_outputs = entries(&listing, "outputs").iter().filter(|e| e["isDefault"] == true);
    assert_eq!(default_outputs.count(), 1, "{listing:#}");

    // The other device route offers the same devices, with their direction and the defaults.
    let (status, devices) = control.get_json("/admin/audio/devices").await;
    assert_eq!(status, StatusCode::OK, "{devices}");
    let kinds: Vec<(&str, &str)> = devices["devices"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|d| Some((d["identifier"].as_str()?, d["kind"].as_str()?)))
        .collect();
    for expected in [("card_mic", "input"), ("card_out", "output"), ("card_in", "output")] {
        assert!(kinds.contains(&expected), "{expected:?} missing from {devices:#}");
    }
    assert_eq!(kinds.len(), 3, "{devices:#}");
    assert_eq!(devices["defaultInput"]["id"], "card_mic", "{devices:#}");
    assert!(matches!(devices["defaultOutput"]["id"].as_str(), Some("card_out" | "card_in")), "{devices:#}");
}

#[tokio::test]
async fn devices_come_from_pipewire_with_their_channels_and_rates() {
    let mut pipewire = PipeWireServer::start();
    pipewire.load_module("module-null-sink", "sink_name=card_out channels=8 rate=48000");
    pipewire.load_module("module-null-sink", "sink_name=card_in channels=6 rate=44100");
    pipewire.load_module(
        "module-remap-source",
        "source_name=card_mic master=card_in.monitor channels=2 master_channel_map=aux0,aux1",
    );
    pipewire.wait_for_default_sink("card_out");
    let control = Control::builder().env("PULSE_SERVER", &pipewire.server_address()).start().await;

    let listing = device_list(&control).await;

    assert_eq!(listing["platform"], "pipewire", "{listing:#}");
    for (name, channels, rate) in [("card_out", 8, 48_000), ("card_in", 6, 44_100)] {
        let sink = find(&listing, "outputs", name);
        assert_eq!((&sink["channels"], &sink["sampleRate"]), (&json!(channels), &json!(rate)), "{sink}");
    }
    let mic = find(&listing, "inputs", "card_mic");
    assert_eq!(mic["channels"], 2, "{mic}");
    // PipeWire's monitors are no inputs either.
    assert_eq!(entries(&listing, "inputs").len(), 1, "{listing:#}");
    assert_eq!(find(&listing, "outputs", "card_out")["isDefault"], true, "{listing:#}");
    let (_, devices) = control.get_json("/admin/audio/devices").await;
    assert_eq!(devices["defaultOutput"]["hostAPIName"], "PipeWire", "{devices:#}");
    assert_eq!(devices["defaultOutput"]["maxOutputChannels"], 8, "{devices:#}");
}

#[tokio::test]
async fn devices_come_from_alsa_with_their_channels_when_no_sound_server_answers() {
    // No card on a test machine: PCMs of the test's own with fixed channel counts stand in.
    let asoundrc = format!(
        "{}{}",
        fixed_channels_pcm("partyline_quad", 4, "Four-channel test device"),
        fixed_channels_pcm("partyline_six", 6, "Six-channel test device")
    );
    let alsa = AlsaHome::new(&asoundrc);
    let home = alsa.home().to_str().expect("a UTF-8 path");
    let control = Control::builder().env("HOME", home).start().await;

    let listing = device_list(&control).await;

    assert_eq!(listing["platform"], "alsa", "{listing:#}");
    for (id, channels) in [("alsa:partyline_quad", 4), ("alsa:partyline_six", 6)] {
        for direction in ["inputs", "outputs"] {
            let device = find(&listing, direction, id);
            assert_eq!(device["channels"], channels, "{device}");
            assert_eq!(device["sampleRate"], 48_000, "{device}");
        }
    }
    let quad = find(&listing, "outputs", "alsa:partyline_quad");
    assert_eq!(quad["description"], "Output: Four-channel test device (partyline_quad)", "{quad}");
    // Converters that take any channel count (null, the rate converters) and the bridges to
    // other sound systems are not devices.
    for direction in ["inputs", "outputs"] {
        let ids: Vec<&str> = entries(&listing, direction).iter().filter_map(|d| d["identifier"].as_str()).collect();
        assert_eq!(ids, ["alsa:partyline_quad", "alsa:partyline_six"], "{listing:#}");
    }

    let (_, devices) = control.get_json("/admin/audio/devices").await;
    assert!(devices["devices"].as_array().expect("devices").iter().all(|d| d["hostAPIName"] == "ALSA"), "{devices:#}");
    let (status, body) = control
        .post_json(
            "/admin/audio/device",
            json!({ "inputDeviceId": "alsa:partyline_six", "outputDeviceId": "alsa:partyline_quad" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((&body["device"]["inputChannels"], &body["device"]["outputChannels"]), (&json!(6), &json!(4)), "{body}");
    assert_eq!(body["device"]["inputDeviceName"], "Six-channel test device (partyline_six)", "{body}");
}

/// Runs control as user `nobody`, with no `PULSE_SERVER` and a client config of that user's
/// that asks for autospawn (as `/run/pulseaudio-enable-autospawn` does on a machine without
/// systemd): libpulse would start `PULSE_BINARY` (here a script that leaves a mark) to have a
/// server. Neither control's pactl nor alsa-lib inside control (its PulseAudio hook) may; the
/// listing falls back to ALSA.
#[tokio::test]
async fn pactl_never_starts_a_sound_server() {
    const NOBODY: u32 = 65_534;
    let dir = tempfile::Builder::new().prefix("partyline-autospawn-").tempdir_in("/tmp").expect("temp dir");
    let home = dir.path().join("home");
    // libpulse's runtime directory, which it would otherwise make in /tmp and leave there.
    let runtime = dir.path().join("run");
    std::fs::create_dir_all(home.join(".config/pulse")).expect("home");
    std::fs::create_dir(&runtime).expect("runtime dir");
    std::fs::write(home.join(".config/pulse/client.conf"), "autospawn = yes\n").expect("client.conf");
    let mark = dir.path().join("spawned");
    let binary = dir.path().join("pulseaudio");
    std::fs::write(&binary, format!("#!/bin/sh\necho \"$@\" >> {}\nexit 1\n", mark.display())).expect("script");
    std::fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    for path in [dir.path(), &runtime, &home, &home.join(".config"), &home.join(".config/pulse")] {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).expect("chown");
    }
    let (home, binary) = (home.to_str().expect("UTF-8"), binary.to_str().expect("UTF-8"));
    let control = Control::builder()
        .user(NOBODY, NOBODY)
        .env_remove("PULSE_SERVER")
        .env("XDG_RUNTIME_DIR", runtime.to_str().expect("UTF-8"))
        // The test's own temp dir may be closed to other users (scripts/netns-run's is).
        .env("TMPDIR", "/tmp")
        .env("HOME", home)
        .env("PULSE_BINARY", binary)
        .start()
        .await;

    let listing = device_list(&control).await;

    assert_fallback(&listing);
    let spawned = std::fs::read_to_string(&mark).unwrap_or_default();
    assert_eq!(spawned, "", "control's pactl started a sound server ({}):\n{}", mark.display(), control.log_text());
}

/// What every fallback must offer: a platform that says so and at least one device each way.
fn assert_fallback(listing: &Value) {
    let platform = listing["platform"].as_str().unwrap_or_default();
    assert!(matches!(platform, "alsa" | "fallback"), "{listing:#}");
    assert!(!entries(listing, "inputs").is_empty(), "{listing:#}");
    assert!(!entries(listing, "outputs").is_empty(), "{listing:#}");
}

#[tokio::test]
async fn falls_back_when_no_sound_server_listens() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nowhere = format!("unix:{}", dir.path().join("native").display());
    let control = Control::builder().env("PULSE_SERVER", &nowhere).start().await;

    assert_fallback(&device_list(&control).await);
}

#[tokio::test]
async fn a_hung_sound_server_times_out_into_the_fallback() {
    // A socket that accepts connections (the kernel's backlog) but never answers: pactl hangs.
    let dir = tempfile::Builder::new().tempdir_in("/tmp").expect("temp dir");
    let socket = dir.path().join("native");
    let _listener = UnixListener::bind(&socket).expect("bind the silent socket");
    let address = format!("unix:{}", socket.display());
    let control = Control::builder().env("PULSE_SERVER", &address).start().await;

    let started = Instant::now();
    let (listing, other_request) = tokio::join!(device_list(&control), async {
        // Give the listing a head start, then check the server still answers meanwhile.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let asked = Instant::now();
        let (status, body) = control.get_json("/openapi.json").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        asked.elapsed()
    });
    let elapsed = started.elapsed();

    assert_fallback(&listing);
    // The listing is bounded by its 2 s timeout, not by pactl, which would hang forever.
    assert!(elapsed >= Duration::from_millis(1_900), "answered in {elapsed:?}: {listing:#}");
    assert!(elapsed < Duration::from_secs(5), "answered in {elapsed:?}");
    assert!(other_request < Duration::from_secs(1), "blocked for {other_request:?}");
}

/// Log lines at `level` and above whose `device` field is `device`.
async fn device_logs(control: &Control, level: &str, device: &str) -> Vec<Value> {
    let (status, body) = control.get_json(&format!("/admin/logs?level={level}&limit=1000")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let logs = body["logs"].as_array().expect("logs");
    logs.iter().filter(|entry| entry["meta"]["device"] == device).cloned().collect()
}

#[tokio::test]
async fn inputs_not_in_card_order_get_a_note_and_a_warning_when_selected() {
    let pulse = PulseServer::start();
    // A pro card's input (channels without positions) and one in partyline's card order.
    pulse.load_module("module-null-source", &format!("source_name=pro_in channels=8 rate=48000 channel_map={AUX_MAP}"));
    pulse.load_module(
        "module-null-source",
        &format!("source_name=card_71 channels=8 rate=48000 channel_map={CARD_CHANNEL_MAP}"),
    );
    // An output with the pro map: playback keeps every channel whatever the map, so no note.
    pulse.add_card_with_map("pro_out", 48_000, AUX_MAP);
    let control = Control::builder()
        .env("PULSE_SERVER", &pulse.server_address())
        // The debug line of a selection that needs no warning tells the check is done.
        .env("RUST_LOG", "warn,partyline_control=debug")
        .start()
        .await;

    let listing = device_list(&control).await;
    let pro_in = find(&listing, "inputs", "pro_in");
    assert_eq!(pro_in["channelMap"], AUX_MAP, "{pro_in}");
    let note = pro_in["note"].as_str().unwrap_or_else(|| panic!("a note on pro_in: {pro_in}"));
    assert!(note.contains(AUX_MAP) && note.contains("remap source"), "{note}");
    let card_71 = find(&listing, "inputs", "card_71");
    assert_eq!(card_71["channelMap"], CARD_CHANNEL_MAP, "{card_71}");
    assert_eq!(card_71["note"], Value::Null, "{card_71}");
    let pro_out = find(&listing, "outputs", "pro_out");
    assert_eq!(pro_out["channelMap"], AUX_MAP, "{pro_out}");
    assert_eq!(pro_out["note"], Value::Null, "{pro_out}");
    // The other device route carries the same fields.
    let (_, devices) = control.get_json("/admin/audio/devices").await;
    let listed = devices["devices"].as_array().expect("devices").iter().find(|d| d["identifier"] == "pro_in");
    assert_eq!(listed.map(|d| &d["note"]), Some(&pro_in["note"]), "{devices:#}");

    // Selecting the card-order input: the check runs (debug line), no warning.
    let (status, body) = control.post_json("/admin/audio/device", json!({ "inputDeviceId": "card_71" })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_for("the check of card_71", LOG_TIMEOUT, async || {
        (!device_logs(&control, "debug", "card_71").await.is_empty()).then_some(())
    })
    .await;
    assert_eq!(device_logs(&control, "warn", "card_71").await, Vec::<Value>::new());

    // Selecting the pro input succeeds all the same, and warns once, naming it and the note.
    let (status, body) = control.post_json("/admin/audio/device", json!({ "inputDeviceId": "pro_in" })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["device"]["inputDeviceId"], "pro_in", "{body}");
    let warnings = wait_for("the warning about pro_in", LOG_TIMEOUT, async || {
        Some(device_logs(&control, "warn", "pro_in").await).filter(|logs| !logs.is_empty())
    })
    .await;
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    let warning = &warnings[0];
    assert_eq!(warning["level"], "warn", "{warning}");
    assert_eq!(warning["message"], format!("selected input device pro_in: {note}"), "{warning}");
    assert_eq!(warning["meta"]["note"], note, "{warning}");
    assert_eq!(warning["meta"]["channel_map"], AUX_MAP, "{warning}");
}
