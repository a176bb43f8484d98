//! A crew member speaking Janus's protocol through control's `/janus` WebSocket proxy in raw
//! JSON ([`RawPanel`]): what a panel's janus.js sends, or whatever someone going around the
//! panel sends. Raw on purpose, as [`crate::janus::Probe`] is: a client sharing the daemons'
//! message types would share their mistakes.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::control::Control;

pub type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens `{origin}/janus` as a browser does (subprotocol `janus-protocol`, and `origin` as the
/// page's Origin when given) and checks the proxy answers with that subprotocol.
pub async fn open_proxy(control: &Control, origin: Option<&str>) -> Socket {
    let url = format!("{}/janus", control.origin.replacen("http", "ws", 1));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static("janus-protocol"));
    if let Some(origin) = origin {
        request.headers_mut().insert("Origin", HeaderValue::from_str(origin).expect("origin"));
    }
    let (socket, response) = tokio_tungstenite::connect_async(request).await.expect("WebSocket upgrade of /janus");
    assert_eq!(response.headers()["sec-websocket-protocol"], "janus-protocol");
    socket
}

/// The next message other than ping/pong, within 10 s.
pub async fn next(socket: &mut Socket) -> Message {
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

/// A crew member speaking Janus's protocol through `/janus` in raw JSON, one request per frame:
/// what a panel's janus.js sends, or whatever someone going around the panel sends.
#[derive(Debug)]
pub struct RawPanel {
    pub socket: Socket,
    token: String,
    next_transaction: u64,
    pub session: u64,
}

impl RawPanel {
    /// Connected with a session under `token`.
    pub async fn open(control: &Control, token: &str) -> RawPanel {
        let socket = open_proxy(control, None).await;
        let mut panel = RawPanel { socket, token: token.to_owned(), next_transaction: 0, session: 0 };
        let created = panel.call(json!({"janus": "create"})).await;
        assert_eq!(created["janus"], "success", "{created}");
        panel.session = created["data"]["id"].as_u64().expect("session id");
        panel
    }

    /// `request` with a transaction, the panel's token and its session (once it has one).
    pub fn complete(&mut self, mut request: Value) -> (String, Value) {
        self.next_transaction += 1;
        let transaction = format!("t{}", self.next_transaction);
        request["transaction"] = json!(transaction);
        request["token"] = json!(self.token);
        if self.session != 0 && request.get("session_id").is_none() {
            request["session_id"] = json!(self.session);
        }
        (transaction, request)
    }

    /// Sends `request` and returns Janus's answer to it: the first message of its transaction
    /// that is not an `ack` (a keep-alive's answer is its `ack`).
    pub async fn call(&mut self, request: Value) -> Value {
        let keepalive = request["janus"] == "keepalive";
        let (transaction, request) = self.complete(request);
        self.send_text(request.to_string()).await;
        loop {
            let message = next(&mut self.socket).await;
            let Message::Text(text) = &message else { panic!("expected an answer to {request}, got {message:?}") };
            let answer: Value = serde_json::from_str(text).expect("JSON from Janus");
            if answer["transaction"] == transaction.as_str() && (keepalive || answer["janus"] != "ack") {
                return answer;
            }
        }
    }

    pub async fn send_text(&mut self, text: String) {
        self.socket.send(Message::text(text)).await.expect("send");
    }

    /// A handle on the AudioBridge.
    pub async fn attach(&mut self, identity: &str) -> u64 {
        let attached =
            self.call(json!({"janus": "attach", "plugin": "janus.plugin.audiobridge", "opaque_id": identity})).await;
        assert_eq!(attached["janus"], "success", "{attached}");
        attached["data"]["id"].as_u64().expect("handle id")
    }

    /// A request to the AudioBridge on `handle`.
    pub fn message(handle: u64, body: Value) -> Value {
        let mut message = json!({"janus": "message", "handle_id": handle});
        message["body"] = body;
        message
    }

    /// A panel's join (signalling only: no SDP, which Janus takes too).
    pub fn join(&self, handle: u64, room: &str, identity: &str, muted: bool) -> Value {
        let body = json!({"request": "join", "room": room, "id": identity, "display": "Someone", "muted": muted,
                          "token": self.token});
        RawPanel::message(handle, body)
    }

    /// Joins `room` and checks Janus says so.
    pub async fn joined(&mut self, handle: u64, room: &str, identity: &str, muted: bool) {
        let answer = self.call(self.join(handle, room, identity, muted)).await;
        assert_eq!(answer["plugindata"]["data"]["audiobridge"], "joined", "{answer}");
    }

    /// Sends `request` (as it is, with a transaction and the token) and returns the proxy's
    /// close frame; what Janus answered instead, if the request went through, is in the panic.
    pub async fn refused(&mut self, request: Value) -> CloseFrame {
        let (_, request) = self.complete(request);
        self.refused_text(request.to_string()).await
    }

    pub async fn refused_text(&mut self, text: String) -> CloseFrame {
        self.send_text(text).await;
        let mut answers = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(3), async {
            loop {
                match self.socket.next().await {
                    Some(Ok(Message::Close(frame))) => return frame,
                    Some(Ok(Message::Text(text))) => answers.push(text.to_string()),
                    Some(Ok(_)) => {}
                    other => panic!("the connection ended without a close frame: {other:?}"),
                }
            }
        })
        .await;
        let Ok(Some(frame)) = closed else { panic!("the proxy relayed it; Janus answered: {answers:?}") };
        assert_eq!(frame.code, CloseCode::Policy, "{frame:?}");
        frame
    }
}
