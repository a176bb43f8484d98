//! Device listing against a real PulseAudio started by the test, and the fallbacks when no sound
//! server answers (refused connection, or a server that never replies).

use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::support::Control;
use partyline_testkit::pulse::PulseServer;

/// The sound card of the tests (design section 6): two 8-channel null sinks, one standing for the
/// card's outputs and one whose monitor feeds a remapped source standing for its inputs.
fn pulse_with_a_card() -> PulseServer {
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
    assert_eq!(devices["defaultInput"], "card_mic", "{devices:#}");
    assert!(matches!(devices["defaultOutput"].as_str(), Some("card_out" | "card_in")), "{devices:#}");
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
