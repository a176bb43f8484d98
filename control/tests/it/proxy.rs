//! The `/janus` WebSocket proxy to a real Janus (the packaged settings): it relays what a panel
//! sends and nothing else. Each way around the panel that a crew member holding a token could
//! take by speaking Janus's protocol directly is tried here as such a person would, through
//! control's real proxy: a foreign identity, a second JSON value in a frame, an unmute on a
//! listen-only line, recording, listing rooms, a page of another origin, and a session kept
//! alive after the admin's disconnect.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::support::{Control, LOOPBACK_PLAIN, wait_for};
use partyline_testkit::janus::{Janus, Probe};
use partyline_testkit::janus_proxy::{RawPanel, next, open_proxy};
use partyline_testkit::stack::Stack;

const SOON: Duration = Duration::from_secs(10);
const GROUPS: &str = "  - name: Stage Left\n  - name: FOH\n";

/// A close frame from the proxy naming Janus as the problem.
fn assert_closed_for_janus(message: &Message) {
    let Message::Close(Some(frame)) = message else { panic!("expected a close frame with a reason, got {message:?}") };
    assert_eq!(frame.code, CloseCode::Error, "{frame:?}");
    assert!(frame.reason.contains("Janus"), "the reason names Janus: {frame:?}");
}

/// A token for `body`: (token, identity).
async fn issue(control: &Control, body: Value) -> (String, String) {
    let (status, answer) = control.post_json("/token", body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let field = |key: &str| answer[key].as_str().unwrap_or_else(|| panic!("{key} in {answer}")).to_owned();
    (field("token"), field("participantIdentity"))
}

/// The warning that the proxy refused `identity`'s request, within 5 s.
async fn refusal_logged(control: &Control, identity: &str, what: &str) {
    wait_for("the refusal's warning", Duration::from_secs(5), async || {
        let (_, logs) = control.get_json("/admin/logs?level=warn&limit=1000").await;
        logs["logs"]
            .as_array()?
            .iter()
            .any(|l| {
                let text = l.to_string();
                l["message"].as_str().is_some_and(|m| m.contains("a request a panel never sends"))
                    && text.contains(identity)
                    && text.contains(what)
            })
            .then_some(())
    })
    .await;
}

/// The ids in `room`, as Janus lists them.
async fn participants(observer: &Probe, room: &str) -> Vec<String> {
    observer.participants(room).await.unwrap_or_else(|code| panic!("listparticipants {room}: {code}"))
}

#[tokio::test]
async fn the_proxy_relays_a_panel_and_closes_with_a_reason_when_janus_is_gone() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let (token, identity) =
        issue(control, json!({"username": "Ana", "listen": ["stage-left", "foh"], "talk": ["foh"]})).await;
    // Everything a panel sends, in a panel's order (joins without SDP, which Janus takes too).
    let mut panel = RawPanel::open(control, &token).await;
    let stage = panel.attach(&identity).await;
    let foh = panel.attach(&identity).await;
    panel.joined(stage, "stage-left", &identity, true).await;
    panel.joined(foh, "foh", &identity, true).await;
    let observer = Probe::admin(&stack.janus).await;
    assert_eq!(participants(&observer, "stage-left").await, std::slice::from_ref(&identity));
    let listed = observer.audiobridge(json!({"request": "listparticipants", "room": "foh"})).await.expect("list");
    assert_eq!(listed["participants"][0]["display"], "Ana", "the registered name, whatever the page said: {listed}");
    let unmuted = panel.call(RawPanel::message(foh, json!({"request": "configure", "muted": false}))).await;
    assert_eq!(unmuted["plugindata"]["data"]["result"], "ok", "{unmuted}");
    assert_eq!(panel.call(json!({"janus": "keepalive"})).await["janus"], "ack");
    let left = panel.call(RawPanel::message(foh, json!({"request": "leave"}))).await;
    assert_eq!(left["plugindata"]["data"]["audiobridge"], "left", "{left}");
    assert_eq!(panel.call(json!({"janus": "detach", "handle_id": foh})).await["janus"], "success");
    // The panel's own end: its session destroyed, after which control, told that Ana left her
    // last line, ends the connection too.
    let session = panel.session;
    let (_, destroy) = panel.complete(json!({"janus": "destroy"}));
    panel.send_text(destroy.to_string()).await;
    wait_for("Ana's session gone from Janus", SOON, async || {
        let sessions = stack.janus.admin(json!({"janus": "list_sessions"})).await;
        (!sessions["sessions"].as_array()?.contains(&json!(session))).then_some(())
    })
    .await;

    // A browser's close goes through; the connection ends cleanly.
    let mut closing = open_proxy(control, Some(&control.origin)).await;
    closing.close(None).await.expect("close");
    let ended = tokio::time::timeout(SOON, async {
        while let Some(Ok(message)) = closing.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    });
    ended.await.expect("the proxy answers the close");

    // Janus goes away under an open connection: the browser is told why.
    let (token, _) = issue(control, json!({"username": "Bo", "groupId": "stage-left"})).await;
    let mut panel = RawPanel::open(control, &token).await;
    stack.janus.stop();
    assert_closed_for_janus(&next(&mut panel.socket).await);

    // And a new connection while Janus is down is closed at its first request (which names
    // the crew member, and so the node to relay to), with the reason and a log line.
    let mut socket = open_proxy(control, None).await;
    let create = json!({"janus": "create", "transaction": "c", "token": token});
    socket.send(Message::text(create.to_string())).await.expect("sent");
    assert_closed_for_janus(&next(&mut socket).await);
    assert!(matches!(socket.next().await, None | Some(Err(tungstenite::Error::ConnectionClosed))));
    wait_for("the warn log", Duration::from_secs(5), async || {
        control.log_text().lines().any(|l| l.contains("WARN") && l.contains("cannot reach Janus")).then_some(())
    })
    .await;
}

/// A token for one group cannot pass for another participant: not as the card of another group
/// (`card:B`, which control used to leave alone whatever the room), nor as anyone else. Through
/// the proxy the join never reaches Janus; straight to Janus (were the proxy bypassed), control
/// kicks it.
#[tokio::test]
async fn a_crew_token_cannot_join_under_another_identity() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let observer = Probe::admin(&stack.janus).await;
    let (token, identity) = issue(control, json!({"username": "Eve", "groupId": "stage-left"})).await;
    for foreign in ["card:foh", "card:stage-left", "someone-else-1"] {
        let mut panel = RawPanel::open(control, &token).await;
        let handle = panel.attach(&identity).await;
        let frame = panel.refused(panel.join(handle, "stage-left", foreign, true)).await;
        assert!(frame.reason.contains("identity"), "{foreign}: {frame:?}");
        refusal_logged(control, &identity, "identity").await;
        assert!(!participants(&observer, "stage-left").await.contains(&foreign.to_owned()), "{foreign} in the room");
    }

    // Around the proxy: Janus takes the join, control kicks the stranger.
    let direct = Probe::open(&stack.janus, &token).await.expect("a session with Eve's token");
    direct.join_result("stage-left", "card:foh", "FOH").await.expect("Janus takes the join");
    wait_for("card:foh kicked from Stage Left", SOON, async || {
        (!participants(&observer, "stage-left").await.contains(&"card:foh".to_owned())).then_some(())
    })
    .await;
    assert!(control.log_text().contains("a participant joined under an identity not issued for this room: kicked"));
}

/// Janus's WebSocket transport reads several JSON values from one frame; the proxy takes a frame
/// as one request, so a second value (here a plain-RTP join, which would make Janus send the
/// room's mix to any address) never reaches Janus.
#[tokio::test]
async fn a_second_json_value_in_a_frame_is_refused() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let (token, identity) = issue(control, json!({"username": "Eve", "groupId": "stage-left"})).await;
    let mut panel = RawPanel::open(control, &token).await;
    let handle = panel.attach(&identity).await;
    let (_, harmless) = panel.complete(json!({"janus": "keepalive"}));
    let (_, smuggled) = panel.complete(RawPanel::message(
        handle,
        json!({"request": "join", "room": "stage-left",
        "id": identity, "display": "Eve", "muted": true, "token": token,
        "rtp": {"ip": "192.0.2.7", "port": 9, "payload_type": 111}}),
    ));
    let frame = panel.refused_text(format!("{harmless}{smuggled}")).await;
    assert!(frame.reason.contains("not a request a panel sends"), "{frame:?}");
    refusal_logged(control, &identity, "not a request").await;
    let observer = Probe::admin(&stack.janus).await;
    assert!(participants(&observer, "stage-left").await.is_empty(), "nobody joined");

    // Alone in its frame, the plain-RTP join is refused too.
    let mut panel = RawPanel::open(control, &token).await;
    let handle = panel.attach(&identity).await;
    let frame = panel.refused(smuggled_join(handle, &identity, &token)).await;
    assert!(frame.reason.contains("rtp"), "the reason names the field: {frame:?}");
}

fn smuggled_join(handle: u64, identity: &str, token: &str) -> Value {
    RawPanel::message(
        handle,
        json!({"request": "join", "room": "stage-left", "id": identity, "display": "Eve",
        "muted": true, "token": token, "rtp": {"ip": "192.0.2.7", "port": 9, "payload_type": 111}}),
    )
}

/// A listen-only line stays muted in its room whatever its client sends: an unmuted join and
/// an unmute are refused, and Janus keeps the participant muted.
#[tokio::test]
async fn a_listen_only_line_cannot_unmute() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let observer = Probe::admin(&stack.janus).await;
    let listen_only = json!({"username": "Lou", "listen": ["foh"], "talk": []});
    let (token, identity) = issue(control, listen_only.clone()).await;
    let mut panel = RawPanel::open(control, &token).await;
    let handle = panel.attach(&identity).await;
    let frame = panel.refused(panel.join(handle, "foh", &identity, false)).await;
    assert!(frame.reason.contains("listen-only"), "{frame:?}");

    let (token, identity) = issue(control, listen_only).await;
    let mut panel = RawPanel::open(control, &token).await;
    let handle = panel.attach(&identity).await;
    panel.joined(handle, "foh", &identity, true).await;
    let frame = panel.refused(RawPanel::message(handle, json!({"request": "configure", "muted": false}))).await;
    assert!(frame.reason.contains("may not talk"), "{frame:?}");
    refusal_logged(control, &identity, "may not talk").await;
    let listed = observer.audiobridge(json!({"request": "listparticipants", "room": "foh"})).await.expect("list");
    let unmuted = listed["participants"].as_array().into_iter().flatten().any(|p| p["muted"] == false);
    assert!(!unmuted, "nobody unmuted in FOH: {listed}");

    // Around the proxy: Janus obeys the participant's own unmute, control mutes it again.
    let (token, identity) = issue(control, json!({"username": "Lou", "listen": ["foh"], "talk": []})).await;
    let direct = Probe::open(&stack.janus, &token).await.expect("a session with Lou's token");
    direct.join_result("foh", &identity, "Lou").await.expect("joined");
    direct.audiobridge(json!({"request": "configure", "muted": false})).await.expect("configure");
    wait_for("Lou muted again in FOH", SOON, async || {
        let listed = observer.audiobridge(json!({"request": "listparticipants", "room": "foh"})).await.ok()?;
        let lou = listed["participants"].as_array()?.iter().find(|p| p["id"] == identity.as_str())?.clone();
        (lou["muted"] == true && control.log_text().contains("unmuted itself on a listen-only line")).then_some(())
    })
    .await;
}

/// Recording is the admin's: a crew member cannot make Janus write a file.
#[tokio::test]
async fn a_crew_member_cannot_make_janus_record() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let (token, identity) = issue(control, json!({"username": "Eve", "groupId": "stage-left"})).await;
    let mut panel = RawPanel::open(control, &token).await;
    let handle = panel.attach(&identity).await;
    panel.joined(handle, "stage-left", &identity, true).await;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("crew-recording");
    let record = json!({"request": "configure", "muted": true, "record": true, "filename": file.display().to_string()});
    let frame = panel.refused(RawPanel::message(handle, record)).await;
    assert!(frame.reason.contains("unknown field"), "{frame:?}");
    refusal_logged(control, &identity, "unknown field").await;
    // A recording's file is created when it starts and closed when its participant leaves,
    // which the closed connection makes it do.
    let observer = Probe::admin(&stack.janus).await;
    wait_for("Eve out of the room", SOON, async || {
        participants(&observer, "stage-left").await.is_empty().then_some(())
    })
    .await;
    let written: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").collect();
    assert!(written.is_empty(), "Janus wrote {written:?}");
}

/// Listing rooms and their participants is the admin's too.
#[tokio::test]
async fn a_crew_member_cannot_list_rooms_or_their_participants() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let (token, identity) = issue(control, json!({"username": "Eve", "groupId": "stage-left"})).await;
    for body in [json!({"request": "list"}), json!({"request": "listparticipants", "room": "foh"})] {
        let mut panel = RawPanel::open(control, &token).await;
        let handle = panel.attach(&identity).await;
        let frame = panel.refused(RawPanel::message(handle, body.clone())).await;
        assert!(frame.reason.contains("not a request a panel sends"), "{body}: {frame:?}");
    }
    refusal_logged(control, &identity, "not a request").await;
}

/// A page of another origin cannot open `/janus` (with its visitor's browser and token).
#[tokio::test]
async fn only_this_origin_s_pages_open_the_proxy() {
    let janus = Janus::start();
    let config = format!("{LOOPBACK_PLAIN}{}", janus.config_yaml());
    let control = Control::builder().config(Some(&config)).start().await;
    let url = format!("{}/janus", control.origin.replacen("http", "ws", 1));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static("janus-protocol"));
    request.headers_mut().insert("Origin", HeaderValue::from_static("https://evil.example"));
    let Err(tungstenite::Error::Http(response)) = tokio_tungstenite::connect_async(request).await else {
        panic!("a foreign page's upgrade went through");
    };
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let body: Value = serde_json::from_slice(response.body().as_deref().unwrap_or_default()).expect("JSON error body");
    assert_eq!(body["code"], "foreign_origin", "{body}");
    wait_for("the warning", Duration::from_secs(5), async || {
        control.log_text().contains("an upgrade from a foreign page refused").then_some(())
    })
    .await;
    // This origin's own page, and a client with no Origin (no browser), may.
    open_proxy(&control, Some(&control.origin)).await;
    open_proxy(&control, None).await;
}

/// The admin's disconnect ends the member's Janus session, not only its token: the proxy closes
/// the connection (Janus destroys a closed connection's sessions), so a fresh token from the
/// open route cannot keep the old session, and its participant, alive.
#[tokio::test]
async fn a_disconnect_ends_the_janus_session() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let observer = Probe::admin(&stack.janus).await;
    let (token, identity) = issue(control, json!({"username": "Eve", "groupId": "stage-left"})).await;
    let mut panel = RawPanel::open(control, &token).await;
    let handle = panel.attach(&identity).await;
    panel.joined(handle, "stage-left", &identity, true).await;
    let session = panel.session;
    let sessions = async || stack.janus.admin(json!({"janus": "list_sessions"})).await["sessions"].clone();
    assert!(sessions().await.as_array().expect("sessions").contains(&json!(session)));

    let (status, body) = control.delete(&format!("/admin/users/{identity}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The next thing the connection carries is its close, whatever Eve sends meanwhile with a
    // token she asks for again.
    let (fresh, _) = issue(control, json!({"username": "Eve again", "groupId": "stage-left"})).await;
    let keepalive = json!({"janus": "keepalive", "transaction": "k", "token": fresh, "session_id": session});
    let _ = panel.socket.send(Message::text(keepalive.to_string())).await;
    // Janus's kick event may come first; then nothing but the close.
    let frame = loop {
        match next(&mut panel.socket).await {
            Message::Close(Some(frame)) => break frame,
            Message::Text(text) => {
                let event: Value = serde_json::from_str(&text).expect("JSON");
                assert_ne!(event["transaction"], "k", "the keep-alive went through: {event}");
            }
            other => panic!("expected the proxy's close, got {other:?}"),
        }
    };
    // Its own close code: the join page shows "Disconnected by the admin" and stays out even
    // when this close overtakes Janus's kick event (they travel on different connections).
    assert_eq!(u16::from(frame.code), 4001, "{frame:?}");
    assert!(frame.reason.contains("disconnected by the admin"), "{frame:?}");
    wait_for("Eve's Janus session destroyed", SOON, async || {
        (!sessions().await.as_array().expect("sessions").contains(&json!(session))).then_some(())
    })
    .await;
    assert!(!participants(&observer, "stage-left").await.contains(&identity), "Eve is out of the room");
}
