//! The original system's clients: every route its admin pages and scripts read, read as they
//! read it (the field names and types they use), against the real binary. partyline's own
//! fields may stand beside them; none of these may be missing or change type.

#[cfg(feature = "services")]
use std::time::Duration;

#[cfg(feature = "services")]
use partyline_testkit::SoundServer;
#[cfg(feature = "services")]
use partyline_testkit::janus::Probe;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[cfg(feature = "services")]
use crate::devices::pulse_with_a_card;
#[cfg(feature = "services")]
use crate::support::wait_for;
use crate::support::{Control, parse_config};
#[cfg(feature = "services")]
use partyline_testkit::stack::Stack;

#[cfg(feature = "services")]
const SOON: Duration = Duration::from_secs(10);

fn number(value: &Value, what: &str) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("{what} is a number: {value}"))
}

#[cfg(feature = "services")]
/// One device as the original page reads it: `{id, name, maxInputChannels, maxOutputChannels,
/// defaultSampleRate, hostAPIName, isDefault: {input, output}}`.
fn assert_original_device(device: &Value) {
    assert!(device["id"].as_str().is_some_and(|id| !id.is_empty()), "id: {device}");
    assert!(device["name"].as_str().is_some_and(|n| !n.is_empty() && !n.starts_with("Input:")), "name: {device}");
    for key in ["maxInputChannels", "maxOutputChannels", "defaultSampleRate"] {
        number(&device[key], key);
    }
    assert_eq!(device["hostAPIName"], "PulseAudio", "{device}");
    assert!(device["isDefault"]["input"].is_boolean() && device["isDefault"]["output"].is_boolean(), "{device}");
}

#[cfg(feature = "services")]
#[tokio::test]
async fn the_original_page_lists_and_picks_sound_cards() {
    let pulse = pulse_with_a_card();
    let control = Control::builder().env("PULSE_SERVER", &pulse.server_address()).start().await;

    let (status, body) = control.get_json("/admin/audio/devices").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let devices = body["devices"].as_array().expect("devices");
    devices.iter().for_each(assert_original_device);
    // The page's own filters.
    let inputs: Vec<&Value> = devices.iter().filter(|d| number(&d["maxInputChannels"], "in") > 0.0).collect();
    let outputs: Vec<&Value> = devices.iter().filter(|d| number(&d["maxOutputChannels"], "out") > 0.0).collect();
    let ids =
        |list: &[&Value]| list.iter().map(|d| d["id"].as_str().unwrap_or_default().to_owned()).collect::<Vec<_>>();
    assert_eq!(ids(&inputs), ["card_mic"], "inputs, without monitors: {body:#}");
    assert_eq!(ids(&outputs), ["card_out", "card_in"], "{body:#}");
    assert_eq!((&inputs[0]["maxInputChannels"], &inputs[0]["maxOutputChannels"]), (&json!(2), &json!(0)));
    assert_eq!((&outputs[0]["maxOutputChannels"], &outputs[0]["defaultSampleRate"]), (&json!(8), &json!(48_000)));
    // The defaults are device objects (or null), the same as their entries in the list.
    for (key, direction) in [("defaultInput", "input"), ("defaultOutput", "output")] {
        let default = &body[key];
        if !default.is_null() {
            assert_eq!(default["isDefault"][direction], true, "{key}: {default}");
            assert!(devices.contains(default), "{key} is one of the devices: {default}");
        }
    }
    assert!(!body["defaultOutput"].is_null(), "PulseAudio has a default sink: {body:#}");

    // Picking a card as the page does: the ids it listed, its sample rate and buffer size.
    let pick =
        json!({ "inputDeviceId": "card_mic", "outputDeviceId": "card_out", "sampleRate": 48_000, "bufferSize": 256 });
    let (status, body) = control.post_json("/admin/audio/device", pick).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for body in [body, control.get_json("/admin/audio/device").await.1] {
        let device = &body["device"];
        assert_eq!((&device["inputDeviceId"], &device["outputDeviceId"]), (&json!("card_mic"), &json!("card_out")));
        assert_eq!((&device["inputChannels"], &device["outputChannels"]), (&json!(2), &json!(8)), "{device}");
        assert_eq!(device["inputDeviceName"], inputs[0]["name"], "{device}");
        assert_eq!(device["outputDeviceName"], outputs[0]["name"], "{device}");
    }
    assert!(!control.config_text().contains("bufferSize"), "the buffer size is not kept");

    // The sound server's defaults (null ids) are described too.
    let (_, body) = control.post_json("/admin/audio/device", json!({ "outputDeviceId": null })).await;
    let default_output = control.get_json("/admin/audio/devices").await.1["defaultOutput"].clone();
    assert_eq!(body["device"]["outputChannels"], default_output["maxOutputChannels"], "{body}");
    assert_eq!(body["device"]["outputDeviceName"], default_output["name"], "{body}");
}

#[tokio::test]
async fn groups_stats_and_logs_read_as_the_original_page_reads_them() {
    let control = Control::start().await;
    for body in [json!({ "name": "Stage Left" }), json!({ "name": "FOH", "audioBitrate": 96 })] {
        assert_eq!(control.post_json("/admin/groups", body).await.0, StatusCode::CREATED);
    }
    let bitrates = async || {
        let (_, body) = control.get_json("/admin/groups").await;
        body["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .map(|g| (g["audioBitrate"].clone(), g["followsDefaultBitrate"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(bitrates().await, [(json!(64), json!(true)), (json!(96), json!(false))], "the effective bitrates");
    assert_eq!(control.put_json("/admin/config/audio", json!({ "defaultBitrate": 80 })).await.0, StatusCode::OK);
    assert_eq!(bitrates().await, [(json!(80), json!(true)), (json!(96), json!(false))], "follows the default");
    let on_disk = parse_config(&control.config_text());
    assert_eq!(on_disk.groups[0].audio_bitrate, None, "writes unchanged: the file still says 'follow the default'");
    // The original page's group form, saved unchanged, sends the bitrate it shows back.
    let unchanged = json!({ "name": "Stage Left", "audioBitrate": 80 });
    assert_eq!(control.put_json("/admin/groups/stage-left", unchanged).await.0, StatusCode::OK);
    assert_eq!(control.put_json("/admin/config/audio", json!({ "defaultBitrate": 64 })).await.0, StatusCode::OK);
    let followed = [(json!(64), json!(true)), (json!(96), json!(false))];
    assert_eq!(bitrates().await, followed, "a form saved unchanged still follows the default");
    assert_eq!(control.put_json("/admin/groups/stage-left", json!({ "audioBitrate": 72 })).await.0, StatusCode::OK);
    assert_eq!(bitrates().await[0], (json!(72), json!(false)), "another value pins it");

    let (status, stats) = control.get_json("/admin/stats").await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    let memory = &stats["memory"];
    let mib = number(&memory["heapUsed"], "heapUsed") / 1024.0 / 1024.0;
    assert!(mib > 0.0 && mib < 1024.0, "heapUsed in MB, as the page computes it: {mib} ({memory})");
    assert!(number(&memory["heapTotal"], "heapTotal") >= number(&memory["heapUsed"], "heapUsed"), "{memory}");
    number(&memory["external"], "external");
    assert!(number(&memory["rss"], "rss") > number(&memory["heapUsed"], "heapUsed"), "{memory}");
    assert!(stats["audioStats"].is_object(), "audioStats: {stats}");

    let (_, logs) = control.get_json("/admin/logs?limit=1000").await;
    let logs = logs["logs"].as_array().expect("logs");
    assert!(logs.iter().all(|entry| entry["meta"].is_object() && entry.get("fields").is_none()), "meta: {logs:?}");
    let created = logs.iter().find(|e| e["meta"]["change"].as_str().is_some_and(|c| c.contains("Stage Left")));
    assert!(created.is_some(), "the change's details are in meta: {logs:?}");
}

#[cfg(feature = "services")]
async fn issue_token(control: &Control, username: &str, group: &str) -> (String, String) {
    let (status, body) = control.post_json("/token", json!({ "username": username, "groupId": group })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let field = |key: &str| body[key].as_str().expect(key).to_owned();
    (field("token"), field("participantIdentity"))
}

#[cfg(feature = "services")]
async fn listed(control: &Control, query: &str) -> Vec<(String, String)> {
    let (status, body) = control.get_json(&format!("/admin/users{query}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let users = body["users"].as_array().expect("users");
    assert_eq!(body["count"], users.len(), "{body}");
    users
        .iter()
        .map(|u| {
            (u["username"].as_str().unwrap_or_default().to_owned(), u["state"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

#[cfg(feature = "services")]
#[tokio::test]
async fn users_are_the_connected_ones_unless_asked_for_more() {
    let stack = Stack::start("  - name: Stage\n").await;
    let control = &stack.control;
    let (alice_token, alice) = issue_token(control, "Alice", "stage").await;
    issue_token(control, "Bob", "stage").await;
    assert_eq!(listed(control, "").await, [], "nobody has joined: nobody is connected");

    let probe = Probe::open(&stack.janus, &alice_token).await.expect("session");
    probe.join("stage", &alice, "Alice").await.expect("join");
    wait_for("Alice connected", SOON, async || (!listed(control, "").await.is_empty()).then_some(())).await;
    let connected = || ("Alice".to_owned(), "connected".to_owned());
    let pending = || ("Bob".to_owned(), "pending".to_owned());
    assert_eq!(listed(control, "").await, [connected()]);
    assert_eq!(listed(control, "?state=connected").await, [connected()]);
    assert_eq!(listed(control, "?state=pending").await, [pending()]);
    let mut all = listed(control, "?state=all").await;
    all.sort();
    assert_eq!(all, [connected(), pending()]);
    let (_, body) = control.get_json("/admin/users").await;
    let since = body["users"][0]["connectedAt"].as_str().expect("a connected user has connectedAt");
    let year = time::OffsetDateTime::now_utc().year().to_string();
    assert!(since.starts_with(&year) && since.contains('T'), "an RFC 3339 time of now, not 1970: {since}");

    let (status, body) = control.get_json("/admin/users?state=gone").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("state")), "names the parameter: {body}");
}

#[cfg(feature = "services")]
async fn health(control: &Control) -> (StatusCode, Value) {
    let response = reqwest::get(control.url("/health")).await.expect("GET /api/health");
    let status = response.status();
    (status, response.json().await.expect("JSON"))
}

#[cfg(feature = "services")]
#[tokio::test]
async fn health_says_whether_partyline_carries_audio() {
    // No Janus secrets: no room can exist.
    let control = Control::start().await;
    let (status, body) = health(&control).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["code"], "unavailable", "the API's error body: {body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(error.contains("Janus") && error.contains("unconfigured"), "names what stops it: {body}");
    assert!(!body.to_string().contains(&control.token), "no secret in the answer");
    drop(control);

    // Janus up, no server audio users: the crew can talk, bridged does not matter.
    let stack = Stack::start("  - name: Stage\n").await;
    let (status, body) = health(&stack.control).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!((&body["status"], &body["janus"], &body["problems"]), (&json!("ok"), &json!("up"), &json!([])));
    assert!(number(&body["uptime"], "uptime") >= 0.0 && body["timestamp"].is_string(), "{body}");

    // Janus gone: 503 as soon as control notices.
    stack.janus.kill();
    wait_for("health says Janus is down", SOON, async || {
        let (status, body) = health(&stack.control).await;
        let says_down = body["error"].as_str().is_some_and(|e| e.contains("Janus) is down"));
        (status == StatusCode::SERVICE_UNAVAILABLE && says_down).then_some(())
    })
    .await;
    drop(stack);

    // Server audio users configured but no partyline-bridged: the card is cut off.
    let stack = Stack::start_custom(
        partyline_testkit::janus::Janus::builder(),
        "  - name: Stage\n",
        "server_audio_users:\n  - name: Desk\n    group: stage\n    input_channel: 0\n",
        &[],
    )
    .await;
    let (status, body) = health(&stack.control).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(error.contains("partyline-bridged") && !error.contains("Janus"), "only the bridge is missing: {body}");
}
