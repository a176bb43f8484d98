//! AES67 network audio. Without services: the settings' API (a stream partyline cannot receive
//! is refused with its reason, and nothing changes on disk), and AES67 in the device list. With
//! services (`aes67_media`): the real thing in network namespaces.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::Control;

/// A Dante device's announcement in AES67 mode (its shape).
pub const CONSOLE_SDP: &str = "v=0\r\no=- 1311738121 1311738121 IN IP4 192.168.1.232\r\ns=Console aux 1-8\r\nc=IN IP4 239.69.83.67/32\r\nt=0 0\r\nm=audio 5004 RTP/AVP 97\r\na=recvonly\r\na=rtpmap:97 L24/48000/8\r\na=ptime:1\r\na=ts-refclk:ptp=IEEE1588-2008:00-1D-C1-FF-FE-0E-10-C4:0\r\na=mediaclk:direct=142217993\r\n";

fn settings(sdp: Option<&str>) -> Value {
    json!({ "interface": "eth1", "ptpDomain": 0, "receiveSdp": sdp, "receiveLatencyMs": 2,
            "send": { "name": "partyline", "port": 5004, "channels": 8 } })
}

#[tokio::test]
async fn a_stream_partyline_cannot_receive_is_refused_with_its_reason_and_changes_nothing() {
    let control = Control::start().await;
    let (status, body) = control.put_json("/admin/config/aes67", settings(Some(CONSOLE_SDP))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["settings"]["receiveSdp"], CONSOLE_SDP);
    let on_disk = control.config_text();
    assert!(on_disk.contains("aes67:") && on_disk.contains("Console aux 1-8"), "{on_disk}");

    let cases = [
        ("L24/48000/8", "L24/44100/8", "unsupported_rate"),
        ("L24/48000/8", "opus/48000/2", "unsupported_encoding"),
        ("L24/48000/8", "L24/48000/64", "bad_channels"),
        ("c=IN IP4 239.69.83.67/32", "c=IN IP4 192.168.1.232", "not_multicast"),
        ("a=ts-refclk:ptp=IEEE1588-2008:00-1D-C1-FF-FE-0E-10-C4:0", "a=ts-refclk:ntp=pool.ntp.org", "no_ptp_clock"),
        ("v=0", "hello", "bad_sdp"),
    ];
    for (from, to, code) in cases {
        let (status, body) =
            control.put_json("/admin/config/aes67", settings(Some(&CONSOLE_SDP.replace(from, to)))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{to}: {body}");
        assert_eq!(body["code"], code, "{to}: {body}");
        assert!(body["error"].as_str().is_some_and(|e| e.starts_with("receiveSdp: ")), "{body}");
        assert_eq!(control.config_text(), on_disk, "{to}: the file is untouched");
    }
    assert!(control.log_text().contains("receive SDP refused"), "a log line says why");

    // The section's other rules name their field.
    let mut bad = settings(None);
    bad["send"]["address"] = json!("239.70.0.1");
    let (status, body) = control.put_json("/admin/config/aes67", bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("audio.aes67.send.address")), "{body}");
    let (status, body) = control.put_json("/admin/config/aes67", json!({ "interface": 7 })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "wrong type: {body}");
    assert_eq!(control.config_text(), on_disk);

    // What the admin reads back: the settings, PTP off (no bridged here), no streams.
    let (status, view) = control.get_json("/admin/aes67").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(view["settings"]["receiveSdp"], CONSOLE_SDP, "{view}");
    assert_eq!(view["ptp"]["state"], "off", "{view}");
    assert_eq!(view["announced"], json!([]), "{view}");
}

#[tokio::test]
async fn aes67_is_a_device_each_way_once_the_media_network_is_set() {
    let control = Control::start().await;
    let aes67 = |listing: &Value, direction: &str| {
        listing[direction].as_array().and_then(|d| d.iter().find(|e| e["identifier"] == "aes67").cloned())
    };
    let (_, listing) = control.get_json("/admin/devices/list").await;
    assert_eq!(aes67(&listing, "inputs"), None, "off: no AES67 device");
    assert_eq!(control.put_json("/admin/config/aes67", settings(Some(CONSOLE_SDP))).await.0, StatusCode::OK);
    let (_, listing) = control.get_json("/admin/devices/list").await;
    let input = aes67(&listing, "inputs").expect("an AES67 input");
    assert_eq!((input["channels"].as_u64(), input["sampleRate"].as_u64()), (Some(8), Some(48_000)), "{input}");
    assert!(input["description"].as_str().is_some_and(|d| d.contains("Console aux 1-8")), "{input}");
    assert!(aes67(&listing, "outputs").is_some(), "{listing}");
    let device = json!({ "inputDeviceId": "aes67", "outputDeviceId": "aes67" });
    assert_eq!(control.post_json("/admin/audio/device", device).await.0, StatusCode::OK);
    assert!(control.config_text().contains("inputDeviceId: aes67"), "{}", control.config_text());
}
