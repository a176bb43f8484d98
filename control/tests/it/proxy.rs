//! The `/janus` WebSocket proxy to a real Janus: it relays, and closes with a reason when Janus
//! is gone.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::support::{Control, LOOPBACK_PLAIN};
use partyline_testkit::janus::Janus;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens `{origin}/janus` as a browser does (subprotocol `janus-protocol`) and checks the
/// proxy answers with that subprotocol.
async fn open_proxy(control: &Control) -> Socket {
    let url = format!("{}/janus", control.origin.replacen("http", "ws", 1));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static("janus-protocol"));
    let (socket, response) = tokio_tungstenite::connect_async(request).await.expect("WebSocket upgrade of /janus");
    assert_eq!(response.headers()["sec-websocket-protocol"], "janus-protocol");
    socket
}

/// The next message other than ping/pong, within 10 s.
async fn next(socket: &mut Socket) -> Message {
    let read = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(message)) => return message,
                other => panic!("socket ended without a message: {other:?}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read).await.expect("a message within 10 s")
}

async fn info(socket: &mut Socket, transaction: &str) -> Value {
    let request = json!({"janus": "info", "transaction": transaction}).to_string();
    socket.send(Message::text(request)).await.expect("send");
    let Message::Text(text) = next(socket).await else { panic!("expected a text frame") };
    serde_json::from_str(&text).expect("JSON from Janus")
}

/// A close frame from the proxy naming Janus as the problem.
fn assert_closed_for_janus(message: &Message) {
    let Message::Close(Some(frame)) = message else { panic!("expected a close frame with a reason, got {message:?}") };
    assert_eq!(frame.code, CloseCode::Error, "{frame:?}");
    assert!(frame.reason.contains("Janus"), "the reason names Janus: {frame:?}");
}

#[tokio::test]
async fn the_proxy_relays_janus_and_closes_with_a_reason_when_janus_is_gone() {
    let janus = Janus::start();
    let config = format!("{LOOPBACK_PLAIN}{}", janus.config_yaml());
    let control = Control::builder().config(Some(&config)).start().await;

    let mut socket = open_proxy(&control).await;
    let answer = info(&mut socket, "t1").await;
    assert_eq!(answer["janus"], "server_info", "{answer}");
    assert_eq!(answer["transaction"], "t1");
    assert_eq!(answer["version_string"], "1.1.2");
    // Several messages on one connection, in order.
    assert_eq!(info(&mut socket, "t2").await["transaction"], "t2");

    // A browser's close goes through; the connection ends cleanly.
    let mut closing = open_proxy(&control).await;
    closing.close(None).await.expect("close");
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(message)) = closing.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    });
    ended.await.expect("the proxy answers the close");

    // Janus goes away under an open connection: the browser is told why.
    janus.stop();
    assert_closed_for_janus(&next(&mut socket).await);

    // And a new connection while Janus is down is closed at once, with the reason and a log line.
    let mut socket = open_proxy(&control).await;
    assert_closed_for_janus(&next(&mut socket).await);
    assert!(matches!(socket.next().await, None | Some(Err(tungstenite::Error::ConnectionClosed))));
    crate::support::wait_for("the warn log", Duration::from_secs(5), async || {
        control.log_text().lines().any(|l| l.contains("WARN") && l.contains("cannot reach Janus")).then_some(())
    })
    .await;
}

/// Rooms admit plain-RTP participants (bridged's); a browser asking for one through the proxy
/// is cut off before Janus sees the request: otherwise any crew token could make Janus send a
/// room's mix to any address.
#[tokio::test]
async fn a_request_for_a_plain_rtp_participant_is_refused_and_logged() {
    let janus = Janus::start();
    let config = format!("{LOOPBACK_PLAIN}{}", janus.config_yaml());
    let control = Control::builder().config(Some(&config)).start().await;

    let mut socket = open_proxy(&control).await;
    assert_eq!(info(&mut socket, "t1").await["janus"], "server_info");
    let join = json!({"janus": "message", "transaction": "t2", "session_id": 1, "handle_id": 2,
                      "body": {"request": "join", "room": "foh",
                               "rtp": {"ip": "192.0.2.7", "port": 9, "payload_type": 111}}});
    socket.send(Message::text(join.to_string())).await.expect("send");
    let Message::Close(Some(frame)) = next(&mut socket).await else { panic!("expected a close frame") };
    assert_eq!(frame.code, CloseCode::Policy, "{frame:?}");
    assert!(frame.reason.contains("plain-RTP"), "the reason says what was refused: {frame:?}");
    crate::support::wait_for("the warn log", Duration::from_secs(5), async || {
        control.log_text().lines().any(|l| l.contains("WARN") && l.contains("plain-RTP")).then_some(())
    })
    .await;
    // Others are not affected.
    let mut other = open_proxy(&control).await;
    assert_eq!(info(&mut other, "t3").await["transaction"], "t3");
}
