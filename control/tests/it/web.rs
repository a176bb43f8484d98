//! The browser side of the one origin: the join page and its files, and the `/janus`
//! WebSocket proxy to a real Janus.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::support::{Control, LOOPBACK_PLAIN, http};
use partyline_testkit::janus::Janus;

/// What each file must be served as, and a piece of its content that proves it is the right one.
const FILES: &[(&str, &str, &str)] = &[
    ("/", "text/html; charset=utf-8", r#"<script type="module" src="/join.js">"#),
    ("/join.js", "text/javascript; charset=utf-8", "from '/vendor/janus.js'"),
    ("/common/style.css", "text/css; charset=utf-8", "prefers-color-scheme: dark"),
    ("/vendor/janus.js", "text/javascript; charset=utf-8", "export { Janus as default }"),
    ("/vendor/adapter.js", "text/javascript; charset=utf-8", "adapterFactory"),
];

#[tokio::test]
async fn the_join_page_and_its_files_are_served_with_their_types() {
    let control = Control::start().await;
    let client = http();
    for &(path, content_type, content) in FILES {
        let response = client.get(format!("{}{path}", control.origin)).send().await.expect("request");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers().clone();
        assert_eq!(headers[CONTENT_TYPE], content_type, "{path}");
        assert_eq!(headers[CACHE_CONTROL], "no-cache", "{path}");
        let body = response.text().await.expect("body");
        assert!(body.contains(content), "{path} should contain {content:?}");

        // The browser's copy is revalidated with the entity tag: 304, no body.
        let etag = headers[ETAG].clone();
        let again = client.get(format!("{}{path}", control.origin)).header(IF_NONE_MATCH, etag).send().await;
        let again = again.expect("request");
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
        assert!(again.bytes().await.expect("body").is_empty());
    }
}

#[tokio::test]
async fn the_page_only_loads_from_its_own_origin() {
    let control = Control::start().await;
    let response = http().get(&control.origin).send().await.expect("request");
    let csp = response.headers()["content-security-policy"].to_str().expect("ascii").to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    let page = response.text().await.expect("body");
    assert!(!page.contains("http://") && !page.contains("https://"), "the page names no other origin");
}

#[tokio::test]
async fn a_plain_get_of_the_proxy_is_a_json_error() {
    let control = Control::start().await;
    let response = http().get(format!("{}/janus", control.origin)).send().await.expect("request");
    let (status, body) = crate::support::read(response).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "bad_request", "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("janus-protocol")), "{body}");
}

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
