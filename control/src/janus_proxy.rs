//! `GET /janus`: the browser's WebSocket to Janus, proxied to Janus's WebSocket transport
//! (`janus.wsUrl`, loopback), so that a crew member's phone needs one origin, one port and one
//! certificate. Signalling only: media goes browser ⇄ Janus over ICE, not through here.
//!
//! Frames are relayed as they come (text, and binary though Janus sends none); a close from
//! either side is passed on to the other. Janus's own token auth guards the API, so the proxy
//! adds no auth of its own, with one exception: a request asking for a plain-RTP participant
//! (`body.rtp`) closes the connection (policy violation). Rooms admit plain RTP for bridged's
//! participants, which reach Janus on loopback; through here a crew token could otherwise make
//! Janus send a room's mix to any address.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{self, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio_tungstenite::tungstenite::{self as ts, client::IntoClientRequest, http::HeaderValue};

use crate::api::ApiError;
use crate::app::AppState;

/// The WebSocket subprotocol of Janus's API; Janus refuses connections without it.
pub const PROTOCOL: &str = "janus-protocol";

/// Largest message relayed either way. Janus's biggest messages are SDPs (a few KiB); this
/// bounds what one client can make the proxy buffer.
pub const MAX_MESSAGE: usize = 256 * 1024;

/// How long the upstream connection may take: Janus is on loopback, so this only bites
/// when it hangs.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Close code "internal error" (RFC 6455 §7.4.1), sent when Janus cannot be reached or goes away.
const CLOSE_UNAVAILABLE: u16 = 1011;
/// Close code "policy violation" (RFC 6455 §7.4.1), sent for a request the proxy refuses.
const CLOSE_POLICY: u16 = 1008;

pub fn routes() -> Router<AppState> {
    Router::new().route("/janus", get(upgrade))
}

async fn upgrade(
    State(state): State<AppState>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let ws = ws.map_err(|e| {
        ApiError::BadRequest(format!("/janus is a WebSocket (subprotocol {PROTOCOL}): {}", e.body_text()))
    })?;
    // Read per connection, so a config reload takes effect for the next client.
    let url = state.config.current().janus.ws_url.clone();
    Ok(ws
        .protocols([PROTOCOL])
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| relay(socket, url))
        .into_response())
}

/// Connects to Janus and relays until either side closes.
async fn relay(mut browser: WebSocket, url: String) {
    let janus = match connect(&url).await {
        Ok(janus) => janus,
        Err(e) => {
            tracing::warn!(url, error = %e, "WebSocket proxy: cannot reach Janus");
            let reason = "cannot reach the media server (Janus)";
            let frame = ws::CloseFrame { code: CLOSE_UNAVAILABLE, reason: reason.into() };
            let _ = browser.send(ws::Message::Close(Some(frame))).await;
            return;
        }
    };
    let (mut browser_tx, mut browser_rx) = browser.split();
    let (mut janus_tx, mut janus_rx) = janus.split();
    // Whichever direction ends first decides; the other is dropped mid-message at worst,
    // which is fine on a connection being closed.
    tokio::select! {
        end = to_janus(&mut browser_rx, &mut janus_tx) => {
            let frame = match end {
                BrowserEnd::Closed(frame) => frame,
                BrowserEnd::Refused(reason) => {
                    tracing::warn!("WebSocket proxy: {reason}; connection closed");
                    let frame = ws::CloseFrame { code: CLOSE_POLICY, reason: reason.into() };
                    let _ = browser_tx.send(ws::Message::Close(Some(frame))).await;
                    None
                }
            };
            let _ = janus_tx.send(ts::Message::Close(frame.as_ref().map(upstream_frame))).await;
        }
        frame = to_browser(&mut janus_rx, &mut browser_tx) => {
            let frame = frame.unwrap_or_else(|| ws::CloseFrame {
                code: CLOSE_UNAVAILABLE,
                reason: "the media server (Janus) closed the connection".into(),
            });
            let _ = browser_tx.send(ws::Message::Close(Some(frame))).await;
        }
    }
}

type Upstream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(url: &str) -> Result<Upstream, ts::Error> {
    let mut request = url.into_client_request()?;
    request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static(PROTOCOL));
    let config =
        ts::protocol::WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE)).max_frame_size(Some(MAX_MESSAGE));
    let connecting = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(result) => result.map(|(stream, _response)| stream),
        Err(_) => Err(ts::Error::Io(std::io::ErrorKind::TimedOut.into())),
    }
}

/// How the browser's side of a relay ended.
#[derive(Debug)]
enum BrowserEnd {
    /// The browser closed (its close frame, if any) or either side failed.
    Closed(Option<ws::CloseFrame>),
    /// The browser sent a request the proxy does not relay: why.
    Refused(&'static str),
}

/// Relays browser → Janus until the browser closes, either side fails, or the browser asks
/// for something refused here ([`refusal`]).
async fn to_janus(
    from: &mut (impl Stream<Item = Result<ws::Message, axum::Error>> + Unpin),
    to: &mut (impl Sink<ts::Message> + Unpin),
) -> BrowserEnd {
    while let Some(Ok(message)) = from.next().await {
        let payload = match &message {
            ws::Message::Text(text) => text.as_bytes(),
            ws::Message::Binary(bytes) => bytes,
            ws::Message::Close(frame) => return BrowserEnd::Closed(frame.clone()),
            // Answered by each side's own WebSocket library, not relayed.
            ws::Message::Ping(_) | ws::Message::Pong(_) => continue,
        };
        if let Some(reason) = refusal(payload) {
            return BrowserEnd::Refused(reason);
        }
        let message = match message {
            ws::Message::Text(text) => ts::Message::text(text.as_str()),
            ws::Message::Binary(bytes) => ts::Message::Binary(bytes),
            _ => continue,
        };
        if to.send(message).await.is_err() {
            break;
        }
    }
    BrowserEnd::Closed(None)
}

/// Why a browser's request is not relayed, if it is not: a plugin message asking for a
/// plain-RTP participant. Anything that is not JSON goes on to Janus, which refuses it.
fn refusal(payload: &[u8]) -> Option<&'static str> {
    let request: serde_json::Value = serde_json::from_slice(payload).ok()?;
    request
        .get("body")
        .and_then(|body| body.get("rtp"))
        .map(|_| "plain-RTP participants are for partyline-bridged only")
}

/// Relays Janus → browser until Janus closes (its close frame, if any, is returned) or either
/// side fails.
async fn to_browser(
    from: &mut (impl Stream<Item = Result<ts::Message, ts::Error>> + Unpin),
    to: &mut (impl Sink<ws::Message> + Unpin),
) -> Option<ws::CloseFrame> {
    while let Some(Ok(message)) = from.next().await {
        let message = match message {
            ts::Message::Text(text) => ws::Message::Text(text.as_str().into()),
            ts::Message::Binary(bytes) => ws::Message::Binary(bytes),
            ts::Message::Close(frame) => return frame.as_ref().map(browser_frame),
            ts::Message::Ping(_) | ts::Message::Pong(_) | ts::Message::Frame(_) => continue,
        };
        if to.send(message).await.is_err() {
            break;
        }
    }
    None
}

fn upstream_frame(frame: &ws::CloseFrame) -> ts::protocol::CloseFrame {
    ts::protocol::CloseFrame { code: frame.code.into(), reason: frame.reason.as_str().into() }
}

fn browser_frame(frame: &ts::protocol::CloseFrame) -> ws::CloseFrame {
    ws::CloseFrame { code: frame.code.into(), reason: frame.reason.as_str().into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_for_plain_rtp_are_refused() {
        let join = |body: &str| format!(r#"{{"janus":"message","transaction":"t","body":{body}}}"#);
        let plain = join(r#"{"request":"join","room":"x","rtp":{"ip":"10.1.1.1","port":9,"payload_type":111}}"#);
        assert!(refusal(plain.as_bytes()).is_some());
        let configure = join(r#"{"request":"configure","rtp":{"ip":"10.1.1.1","port":9}}"#);
        assert!(refusal(configure.as_bytes()).is_some());
        let webrtc = join(r#"{"request":"join","room":"x","display":"rtp"}"#);
        assert_eq!(refusal(webrtc.as_bytes()), None);
        assert_eq!(refusal(br#"{"janus":"keepalive","session_id":1,"transaction":"k"}"#), None);
        assert_eq!(refusal(b"not json"), None);
    }
}
