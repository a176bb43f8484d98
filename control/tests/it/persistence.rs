//! What survives a restart, what the file looks like, and legacy files.

use std::os::unix::fs::PermissionsExt;

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{Control, LOOPBACK_PLAIN, parse_config};

#[tokio::test]
async fn groups_survive_a_restart_and_ids_are_never_written() {
    let control = Control::start().await;
    for name in ["Stage Left", "Stage Right", "FOH"] {
        assert_eq!(
            control.post_json("/admin/groups", json!({ "name": name, "audioBitrate": 48 })).await.0,
            StatusCode::CREATED
        );
    }
    control.put_json("/admin/groups/stage-right", json!({ "name": "Scène Côté Cour" })).await;
    control.delete("/admin/groups/foh").await;
    let before = control.group_ids().await;

    let control = control.restart().await;
    assert_eq!(control.group_ids().await, before);
    assert_eq!(before, ["stage-left", "scene-cote-cour"]);
    let text = control.config_text();
    assert!(!text.lines().any(|l| l.trim_start().trim_start_matches("- ").starts_with("id:")), "no id keys:\n{text}");
    let mode = std::fs::metadata(control.config_path()).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    let token_mode = std::fs::metadata(control.dir().join("admin-token")).expect("stat").permissions().mode() & 0o777;
    assert_eq!(token_mode, 0o600);
}

/// The only test on the default listener (0.0.0.0:8443, HTTPS with a generated certificate):
/// in the services tier, which runs in a network namespace of its own (`scripts/netns-run`),
/// where nothing else holds the port.
#[cfg(feature = "services")]
#[tokio::test]
async fn a_missing_file_is_created_with_defaults_and_serves_https() {
    let control = Control::builder().config(None).start().await;
    assert_eq!(parse_config(&control.config_text()), partyline_shared::Config::default());
    assert_eq!(control.origin, "https://localhost:8443");
    let key_mode = std::fs::metadata(control.dir().join("tls-key.pem")).expect("key").permissions().mode() & 0o777;
    assert_eq!(key_mode, 0o600);

    let pem = std::fs::read(control.dir().join("tls-cert.pem")).expect("cert");
    partyline_shared::crypto::install_provider();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&pem).expect("pem")])
        .build()
        .expect("client");
    let response = client.get(control.url("/admin/groups")).bearer_auth(&control.token).send().await;
    let (status, body) = crate::support::read(response.expect("TLS handshake with the generated certificate")).await;
    assert_eq!((status, body), (StatusCode::OK, json!({ "groups": [] })));
}

const LEGACY: &str = "\
server:
  host: 127.0.0.1
  port: 0
  livekit:
    url: ws://old
audio:
  sampleRate: 44100
  channels: 2
  frameSize: 960
  device:
    sampleRate: 44100
    bufferSize: 512
groups:
  - id: stage-left
    name: Stage Left
    description: Old description
    channels: []
  - id: old-foh-id
    name: FOH
    channels: []
server_audio_users:
  - name: Desk
    group: stage-left
    input_channel: 2
    output_channel: null
logging:
  level: info
  logLatency: true
  logAudioStats: false
";

#[tokio::test]
async fn a_legacy_file_loads_and_the_next_save_drops_legacy_keys() {
    let dir = tempfile::tempdir().expect("dir");
    let config = LEGACY.replace("server:\n", "server:\n  tls: false\n  eventsListen: 127.0.0.1:0\n");
    std::fs::write(dir.path().join("partyline.yaml"), &config).expect("write");
    let control = Control::builder().config(Some(&config)).start().await;
    assert_eq!(control.group_ids().await, ["stage-left", "foh"]);
    let log = control.log_text();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("legacy keys accepted")).collect();
    assert_eq!(warnings.len(), 1, "one warn line:\n{log}");
    for key in [
        "server.host",
        "server.livekit",
        "audio.frameSize",
        "audio.device.bufferSize",
        "audio.sampleRate (44100 Hz: the rooms run at 48000 Hz)",
        "groups[].description",
        "logging.logLatency",
    ] {
        assert!(warnings[0].contains(key), "{key} named in {}", warnings[0]);
    }
    let (_, config) = control.get_json("/admin/config").await;
    assert_eq!(
        (&config["audio"]["sampleRate"], &config["audio"]["device"]["sampleRate"]),
        (&json!(48_000), &json!(44_100))
    );
    assert!(control.config_text().contains("description"), "nothing rewritten before a change");

    assert_eq!(control.post_json("/admin/groups", json!({ "name": "New" })).await.0, StatusCode::CREATED);
    let saved = control.config_text();
    // As keys (`bridge.transport` holds "port:" too).
    for key in [
        " host:",
        " port:",
        "livekit",
        "channels: 2",
        "frameSize",
        "bufferSize",
        "description",
        "id:",
        "logLatency",
        "logAudioStats",
    ] {
        assert!(!saved.contains(key), "{key} dropped:\n{saved}");
    }
    let saved = parse_config(&saved);
    assert_eq!((saved.audio.sample_rate.get(), saved.audio.device.sample_rate.get()), (48_000, 44_100));
    assert_eq!(saved.server_audio_users[0].input_channel.get(), 2);
    assert_eq!(saved.server_audio_users[0].output_channel, None);
    assert_eq!(saved.groups.len(), 3);
}

#[tokio::test]
async fn a_corrupt_file_stops_start_up_with_the_key_and_line() {
    for (text, mentions) in [
        (format!("{LOOPBACK_PLAIN}groups:\n  - name: A\n    colour: red\n"), vec!["colour", "line 7"]),
        (format!("{LOOPBACK_PLAIN}audio:\n  defaultBitrate: 9999\n"), vec!["9999", "line 6"]),
        // Not a rate the original system wrote either.
        (format!("{LOOPBACK_PLAIN}audio:\n  sampleRate: 12345\n"), vec!["12345", "line 6"]),
        (format!("{LOOPBACK_PLAIN}groups:\n  - name: A\n  - name: a\n"), vec!["groups[1].name", "collides"]),
        (format!("{LOOPBACK_PLAIN}groups: [\n"), vec!["partyline.yaml"]),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("partyline.yaml");
        std::fs::write(&path, &text).expect("write");
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_partyline-control"))
            .arg("--config")
            .arg(&path)
            .env("PARTYLINE_ADMIN_TOKEN", "t")
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(1), "refuses to start");
        let stderr = String::from_utf8_lossy(&output.stderr);
        for m in mentions {
            assert!(stderr.contains(m), "{m:?} in:\n{stderr}");
        }
        assert_eq!(std::fs::read_to_string(&path).expect("read"), text, "the file is left as it was");
    }
}
