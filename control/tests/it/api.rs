//! Every admin route: its success shape and each error status, always with the JSON error body.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{Control, http, parse_config, read};

fn assert_error(status: StatusCode, body: &Value, want: StatusCode, code: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{body}");
}

#[tokio::test]
async fn admin_routes_need_the_bearer_token() {
    let control = Control::start().await;
    let client = http();
    for (method, path) in [
        (Method::GET, "/admin/groups"),
        (Method::POST, "/admin/groups"),
        (Method::GET, "/admin/config"),
        (Method::GET, "/admin/logs"),
        (Method::GET, "/admin/stats"),
        (Method::GET, "/admin/no-such-route"),
    ] {
        for auth in [None, Some("Bearer wrong"), Some("Basic abc"), Some("Bearer ")] {
            let mut request = client.request(method.clone(), control.url(path));
            if let Some(auth) = auth {
                request = request.header("authorization", auth);
            }
            let (status, body) = read(request.send().await.expect("sent")).await;
            assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
        }
    }
    assert!(!control.log_text().contains(&control.token), "the token is never logged");
    assert!(parse_config(&control.config_text()).groups.is_empty());
}

#[tokio::test]
async fn bad_bodies_get_clear_errors_and_change_nothing() {
    let control = Control::start().await;
    let before = control.config_text();
    let raw = |body: &'static str, content_type: Option<&'static str>| {
        let mut request = control.request(Method::POST, "/admin/groups").body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        request
    };
    let json_type = Some("application/json");
    let cases: Vec<(reqwest::RequestBuilder, StatusCode, &str, &str)> = vec![
        (raw("{\"name\": ", json_type), StatusCode::BAD_REQUEST, "bad_request", "EOF"),
        (raw("{\"name\": 7}", json_type), StatusCode::BAD_REQUEST, "bad_request", "name"),
        (raw("{\"name\": \"A\", \"id\": \"a\"}", json_type), StatusCode::BAD_REQUEST, "bad_request", "id"),
        (
            raw("{\"name\": \"A\", \"audioBitrate\": 5000}", json_type),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "audioBitrate",
        ),
        (raw("{}", json_type), StatusCode::BAD_REQUEST, "bad_request", "name"),
        (raw("[]", json_type), StatusCode::BAD_REQUEST, "bad_request", "invalid"),
        (raw("{\"name\": \"A\"}", None), StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", "Content-Type"),
        (
            raw("name=A", Some("application/x-www-form-urlencoded")),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "JSON",
        ),
    ];
    for (request, want, code, mentions) in cases {
        let (status, body) = read(request.send().await.expect("sent")).await;
        assert_error(status, &body, want, code);
        assert!(body["error"].as_str().is_some_and(|e| e.contains(mentions)), "error mentions {mentions:?}: {body}");
    }
    let huge = format!("{{\"name\": \"{}\"}}", "x".repeat(70 * 1024));
    let response = control.request(Method::POST, "/admin/groups").header("content-type", "application/json").body(huge);
    let (status, body) = read(response.send().await.expect("sent")).await;
    assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    let long_name = "n".repeat(65);
    let (status, body) = control.post_json("/admin/groups", json!({ "name": long_name })).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "bad_request");

    assert_eq!(control.config_text(), before, "nothing changed on disk");
    assert!(control.group_ids().await.is_empty(), "nothing changed in memory");
    let (_, logs) = control.get_json("/admin/logs?level=warn").await;
    let refused = logs["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .filter(|l| l["message"].as_str().is_some_and(|m| m.starts_with("refused request")))
        .count();
    assert!(refused >= 10, "every refused write is logged: {refused}");
}

#[tokio::test]
async fn unmounted_paths_are_json_404_and_routing_does_not_exist() {
    let control = Control::start().await;
    for (method, path) in [
        (Method::GET, "/admin/audio/routing"),
        (Method::POST, "/admin/audio/routing"),
        (Method::GET, "/admin/admin/groups"),
    ] {
        let (status, body) = control.send(method.clone(), path, None).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "route_not_found");
        assert_eq!(body["error"], format!("Route not found: {method} /api{path}"));
    }
    let (status, body) = read(http().get(format!("{}/nowhere", control.origin)).send().await.expect("sent")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "route_not_found");
    let (status, body) = control.delete("/admin/groups").await;
    assert_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
}

#[tokio::test]
async fn audio_settings_device_and_channel_names() {
    let control = Control::start().await;
    let (status, body) =
        control.put_json("/admin/config/audio", json!({ "defaultBitrate": 96, "jitterBufferMs": 60 })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["audio"], json!({ "sampleRate": 48000, "defaultBitrate": 96, "jitterBufferMs": 60 }));
    let (status, body) = control.put_json("/admin/config/audio", json!({ "sampleRate": 44100 })).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "bad_request");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("sampleRate")), "{body}");

    let (status, body) = control.get_json("/admin/audio/device").await;
    assert_eq!((status, &body["device"]["inputDeviceId"]), (StatusCode::OK, &Value::Null));
    let select = json!({ "inputDeviceId": "card_in", "outputDeviceId": "card_out", "sampleRate": 44100 });
    // The selection, without what the sound server says of the devices (none runs here).
    let selection = |device: &Value| json!({ "inputDeviceId": device["inputDeviceId"], "outputDeviceId": device["outputDeviceId"], "sampleRate": device["sampleRate"] });
    let (status, body) = control.post_json("/admin/audio/device", select.clone()).await;
    assert_eq!((status, selection(&body["device"])), (StatusCode::OK, select), "{body}");
    let (status, body) = control.post_json("/admin/audio/device", json!({ "outputDeviceId": null })).await;
    assert_eq!(status, StatusCode::OK);
    let expected = json!({ "inputDeviceId": "card_in", "outputDeviceId": null, "sampleRate": 44100 });
    assert_eq!(selection(&body["device"]), expected);
    let (status, body) = control.post_json("/admin/audio/device", json!({ "inputDeviceId": "" })).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "bad_request");

    let (status, body) = control
        .put_json("/admin/audio/channels/names", json!({ "inputs": { "0": "  Stage mic ", "7": "Spare" } }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let inputs = &body["channelNames"]["inputs"];
    assert_eq!(inputs.as_object().expect("map").len(), 8, "all eight: {body}");
    assert_eq!((&inputs["0"], &inputs["7"], &inputs["3"]), (&json!("Stage mic"), &json!("Spare"), &json!("")));
    assert_eq!(body["channelNames"]["outputs"].as_object().expect("map").len(), 8);
    for (bad, named) in [
        (json!({ "inputs": { "8": "x" } }), "\"8\""),
        (json!({ "outputs": { "01": "x" } }), "\"01\""),
        (json!({ "inputs": { "0": "Stage mic", "5": "y".repeat(65) } }), "inputs: the name of channel \"5\" is longer"),
        (json!({ "inputs": { "0": 3 } }), "inputs"),
    ] {
        let (status, body) = control.put_json("/admin/audio/channels/names", bad.clone()).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "bad_request");
        assert!(body["error"].as_str().is_some_and(|e| e.contains(named)), "{bad}: names {named}: {body}");
    }
    let (_, body) = control.get_json("/admin/audio/channels/names").await;
    assert_eq!(body["channelNames"]["inputs"]["0"], "Stage mic");

    let on_disk = parse_config(&control.config_text());
    assert_eq!(on_disk.audio.default_bitrate.get(), 96);
    assert_eq!(on_disk.audio.device.input_device_id.as_deref(), Some("card_in"));
    assert_eq!(on_disk.audio.channel_names.inputs.0[7], "Spare");
}

#[tokio::test]
async fn config_is_shown_with_secrets_redacted() {
    let yaml = format!(
        "{}  adminToken: in-file-secret\njanus:\n  adminSecret: janus-secret\n  nodes:\n    - name: truck\n\
         \x20     url: http://127.0.0.1:1/janus\n      adminUrl: http://127.0.0.1:1/admin\n\
         \x20     wsUrl: ws://127.0.0.1:1\n      adminSecret: node-secret\n      roomAdminKey: node-key\n\
         groups:\n  - name: X\n\
         server_audio_users:\n  - name: FOH\n    group: x\n    input_channel: 2\n    output_channel: null\n",
        crate::support::LOOPBACK_PLAIN
    );
    let control = Control::builder().config(Some(&yaml)).env("PARTYLINE_ADMIN_TOKEN", "env-token").start().await;
    let (status, body) = control.get_json("/admin/config").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let text = body.to_string();
    for secret in ["in-file-secret", "janus-secret", "node-secret", "node-key"] {
        assert!(!text.contains(secret), "{secret} shown: {text}");
    }
    assert_eq!(body["janus"]["adminSecret"], "********");
    assert_eq!(body["janus"]["nodes"][0]["roomAdminKey"], "********");
    assert_eq!(body["audio"]["sampleRate"], 48000);
    // The file's snake_case keys of the server audio users do not leak into the API.
    assert!(!text.contains("server_audio_users") && !text.contains("input_channel"), "{text}");
    assert_eq!(
        body["serverAudioUsers"],
        json!([{ "id": "foh", "name": "FOH", "group": "x", "inputChannel": 2, "outputChannel": null, "ifb": null }])
    );
    assert!(!control.log_text().contains("env-token"));
}

#[tokio::test]
async fn logs_filter_by_level_and_sequence() {
    let control = Control::start().await;
    control.post_json("/admin/groups", json!({ "name": "Logged" })).await;
    control.post_json("/admin/groups", json!({ "name": "Logged" })).await; // 409: a warn line
    let (status, all) = control.get_json("/admin/logs?limit=1000").await;
    assert_eq!(status, StatusCode::OK, "{all}");
    let entries = all["logs"].as_array().expect("logs");
    assert_eq!(all["total"].as_u64(), Some(entries.len() as u64));
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().expect("seq")).collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "newest first: {seqs:?}");
    let first = &entries[0];
    for key in ["seq", "timestamp", "level", "message", "source", "meta"] {
        assert!(first.get(key).is_some(), "{key} in {first}");
    }
    assert!(entries.iter().any(
        |e| e["message"] == "config updated" && e["meta"]["change"].as_str().is_some_and(|c| c.contains("Logged"))
    ));

    let (_, warn) = control.get_json("/admin/logs?level=warn").await;
    let levels: Vec<&str> =
        warn["logs"].as_array().expect("logs").iter().map(|e| e["level"].as_str().expect("level")).collect();
    assert!(!levels.is_empty() && levels.iter().all(|l| *l == "warn" || *l == "error"), "{levels:?}");

    let newest = seqs[0];
    let (_, after) = control.get_json(&format!("/admin/logs?after={newest}")).await;
    assert_eq!(after["total"], 0, "{after}");
    let (_, limited) = control.get_json("/admin/logs?limit=1").await;
    assert_eq!(limited["logs"].as_array().expect("logs").len(), 1);

    for bad in ["limit=0", "limit=1001", "level=loud", "after=-1", "colour=red"] {
        let (status, body) = control.get_json(&format!("/admin/logs?{bad}")).await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "bad_request");
    }
}

#[tokio::test]
async fn stats_report_uptime_memory_and_missing_parts() {
    let control = Control::start().await;
    let (status, body) = control.get_json("/admin/stats").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["totalConnections"], 0);
    assert_eq!(body["activeConnections"], 0);
    assert!(body["uptime"].as_u64().is_some());
    let rss = body["memory"]["rss"].as_u64().expect("rss");
    assert!(rss > 1_000_000 && rss < 200_000_000, "plausible RSS in bytes: {rss}");
    assert!(body["memory"]["virtual"].as_u64().expect("virtual") >= rss);
    // No bridged in this test (and no system bus on a test machine).
    let bridge = body["bridge"]["state"].as_str().unwrap_or_default();
    assert!(["unreachable", "absent"].contains(&bridge), "{body}");
    assert_eq!(body["janus"]["state"], "unconfigured", "no Janus secrets in this test: {body}");
}

#[tokio::test]
async fn openapi_document_is_served_without_auth() {
    let control = Control::start().await;
    let (status, body) = read(http().get(control.url("/openapi.json")).send().await.expect("sent")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["paths"]["/api/admin/groups"]["post"].is_object(), "{body}");
}

/// A failure of the server (here a 503: no Janus to register a token with) is an error in the
/// log that says which request failed.
#[tokio::test]
async fn a_server_error_is_logged_with_its_method_and_path() {
    let control = Control::start().await;
    assert_eq!(control.post_json("/admin/groups", json!({ "name": "Stage" })).await.0, StatusCode::CREATED);
    let (status, body) = control.post_json("/token", json!({ "username": "Eve", "groupId": "stage" })).await;
    assert_error(status, &body, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    crate::support::wait_for("the error's log line", std::time::Duration::from_secs(5), async || {
        let log = control.log_text();
        log.lines()
            .any(|l| l.contains("ERROR") && l.contains("POST") && l.contains("/api/token") && l.contains("503"))
            .then_some(())
    })
    .await;
}
