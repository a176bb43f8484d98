//! `GET /janus`: the browser's WebSocket to Janus, proxied to Janus's WebSocket transport
//! (`janus.wsUrl`, loopback), so that a crew member's phone needs one origin, one port and one
//! certificate. Signalling only: media goes browser ⇄ Janus over ICE, not through here.
//!
//! The proxy speaks for the panel, not for Janus: what a browser sends must be on the panel's
//! allow list ([`policy`]), bound to one crew member's token, lines and identity; anything else
//! closes the connection with the reason (close code 1008) and a warning naming the member.
//! What goes on to Janus is the request as the allow list parsed it, serialized again. The
//! upgrade must come from this origin (a page elsewhere cannot open it with a visitor's token),
//! and the connection closes when its crew member is removed from the registry (disconnected by
//! the admin, expired, its groups deleted): Janus then ends every session opened through it
//! (its WebSocket transport destroys a closed connection's sessions). An admin's disconnect
//! closes with a code of its own ([`CLOSE_DISCONNECTED`]): the panel must not rejoin by itself,
//! and Janus's kick event, which says the same, may arrive after the close.

mod policy;
mod requests;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{self, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_tungstenite::tungstenite::{self as ts, client::IntoClientRequest, http::HeaderValue};

use crate::api::ApiError;
use crate::state::AppState;
use crate::users::{Ending, Removal, Users};
use partyline_shared::janus::prebuffer_packets;
use policy::{Policy, Priming, Refusal};

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
/// Close code (private use, RFC 6455 §7.4.2) for a crew member the admin disconnected: its
/// panel shows "Disconnected by the admin" and does not rejoin. The join page holds the same
/// number.
pub const CLOSE_DISCONNECTED: u16 = 4001;
/// Close code "service restart" (RFC 6455 §7.4.1), sent when the member's Janus node was lost
/// or removed: the panel joins again at once and is placed on a live node.
const CLOSE_MOVED: u16 = 1012;
/// A close frame's reason is at most 123 bytes (RFC 6455 §5.5).
const MAX_REASON: usize = 123;
/// A browser that sends nothing for this long is gone: a panel sends a keep-alive every 25 s
/// (janus.js), and Janus itself ends a session silent for 60 s.
const BROWSER_SILENCE: Duration = Duration::from_secs(60);

pub fn routes() -> Router<AppState> {
    Router::new().route("/janus", get(upgrade))
}

async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    check_origin(&headers, state.tls())?;
    let ws = ws.map_err(|e| {
        ApiError::BadRequest(format!("/janus is a WebSocket (subprotocol {PROTOCOL}): {}", e.body_text()))
    })?;
    // Read per connection, so a config reload takes effect for the next client.
    let config = state.config.current();
    let janus = Arc::clone(&state.janus);
    let priming = Priming { rooms: prebuffer_packets(config.audio.jitter_buffer_ms.get()) };
    let policy = Policy::new(config.audio.opus_complexity.get(), priming);
    // Subscribed before the first request can bind the connection: no removal is missed.
    let removals = state.users.subscribe_removals();
    let users = Arc::clone(&state.users);
    Ok(ws
        .protocols([PROTOCOL])
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| relay(socket, janus, users, removals, policy))
        .into_response())
}

/// A browser sends the `Origin` of the page opening a WebSocket; it must be this origin. A
/// client that is no browser sends none (and could send any): nothing to check there, since
/// the Origin protects a browser's visitor from a foreign page, not the server from a client.
fn check_origin(headers: &HeaderMap, tls: bool) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let scheme = if tls { "https" } else { "http" };
    let this = format!("{scheme}://{host}");
    if origin.to_str().is_ok_and(|origin| origin.eq_ignore_ascii_case(&this)) {
        return Ok(());
    }
    let shown: String = String::from_utf8_lossy(origin.as_bytes()).chars().take(100).collect();
    tracing::warn!(origin = shown, "WebSocket proxy: an upgrade from a foreign page refused");
    Err(ApiError::Denied {
        code: "foreign_origin",
        message: format!("/janus is for this origin's pages ({this}), not {shown:?}"),
    })
}

/// How a relay ended.
#[derive(Debug)]
enum End {
    /// The browser closed (its close frame, if any) or went away.
    Browser(Option<ws::CloseFrame>),
    /// Janus closed (its close frame, if any) or went away.
    Janus(Option<ts::protocol::CloseFrame>),
    /// The browser sent what the panel never sends.
    Refused(Refusal),
    /// The connection's crew member was removed from the registry.
    Removed(Ending),
    /// The browser sent nothing for [`BROWSER_SILENCE`].
    Silent,
}

/// Connects to Janus and relays until either side closes, the browser sends what a panel
/// does not, or the crew member is removed. The first request names the crew member, and so
/// the Janus node its session is placed on: only then is Janus connected.
async fn relay(
    browser: WebSocket,
    janus: Arc<crate::janus::Janus>,
    users: Arc<Users>,
    removals: broadcast::Receiver<Removal>,
    mut policy: Policy,
) {
    let (mut browser_tx, mut browser_rx) = browser.split();
    let (end, janus_tx) = match first_request(&mut browser_rx, &users, &mut policy).await {
        Err(end) => (end, None),
        Ok(request) => {
            let url = janus.ws_url_for(policy.bound().map(|b| b.identity.as_str()));
            match connect(&url).await {
                Ok(upstream) => {
                    let (mut janus_tx, janus_rx) = upstream.split();
                    let end = if janus_tx.send(ts::Message::text(request)).await.is_err() {
                        End::Janus(None)
                    } else {
                        let sides =
                            Sides { browser_tx: &mut browser_tx, browser_rx, janus_tx: &mut janus_tx, janus_rx };
                        relay_until_end(sides, &users, removals, &mut policy).await
                    };
                    (end, Some(janus_tx))
                }
                Err(e) => {
                    tracing::warn!(url, error = %e, "WebSocket proxy: cannot reach Janus");
                    let _ = browser_tx.send(close(CLOSE_UNAVAILABLE, "cannot reach the media server (Janus)")).await;
                    return;
                }
            }
        }
    };
    let to_janus = finish(end, &policy, &mut browser_tx).await;
    if let (Some(mut janus_tx), Some(frame)) = (janus_tx, to_janus) {
        let _ = janus_tx.send(ts::Message::Close(frame)).await;
    }
}

/// The browser's first request, checked (it binds the connection to a crew member).
async fn first_request(browser_rx: &mut BrowserRx, users: &Users, policy: &mut Policy) -> Result<String, End> {
    let first = async {
        loop {
            match browser_rx.next().await {
                Some(Ok(ws::Message::Text(text))) => {
                    return policy.check(text.as_bytes(), |t| users.by_token(t)).map_err(End::Refused);
                }
                Some(Ok(ws::Message::Binary(_))) => return Err(End::Refused(Refusal("a binary frame".into()))),
                Some(Ok(ws::Message::Close(frame))) => return Err(End::Browser(frame)),
                Some(Ok(ws::Message::Ping(_) | ws::Message::Pong(_))) => {}
                Some(Err(_)) | None => return Err(End::Browser(None)),
            }
        }
    };
    // A panel's first request (janus.js's `create`) follows the upgrade at once: a connection
    // that has not said who it is within the listener's idle time is gone, not a keep-alive.
    tokio::time::timeout(crate::linger::IDLE_TIMEOUT, first).await.unwrap_or(Err(End::Silent))
}

type BrowserRx = futures_util::stream::SplitStream<WebSocket>;
type BrowserTx = futures_util::stream::SplitSink<WebSocket, ws::Message>;
type JanusTx = futures_util::stream::SplitSink<Upstream, ts::Message>;

/// The two connections a relay joins.
struct Sides<'a> {
    browser_tx: &'a mut BrowserTx,
    browser_rx: BrowserRx,
    janus_tx: &'a mut JanusTx,
    janus_rx: futures_util::stream::SplitStream<Upstream>,
}

/// Relays both ways until one of the ends of [`End`].
async fn relay_until_end(
    sides: Sides<'_>,
    users: &Users,
    mut removals: broadcast::Receiver<Removal>,
    policy: &mut Policy,
) -> End {
    let Sides { browser_tx, mut browser_rx, janus_tx, mut janus_rx } = sides;
    let silence = tokio::time::sleep(BROWSER_SILENCE);
    tokio::pin!(silence);
    loop {
        tokio::select! {
            message = browser_rx.next() => {
                silence.as_mut().reset(tokio::time::Instant::now() + BROWSER_SILENCE);
                match message {
                    Some(Ok(ws::Message::Text(text))) => match policy.check(text.as_bytes(), |t| users.by_token(t)) {
                        Ok(request) => {
                            if janus_tx.send(ts::Message::text(request)).await.is_err() {
                                break End::Janus(None);
                            }
                        }
                        Err(refusal) => break End::Refused(refusal),
                    },
                    Some(Ok(ws::Message::Binary(_))) => break End::Refused(Refusal("a binary frame".into())),
                    Some(Ok(ws::Message::Close(frame))) => break End::Browser(frame),
                    // Answered by each side's own WebSocket library, not relayed.
                    Some(Ok(ws::Message::Ping(_) | ws::Message::Pong(_))) => {}
                    Some(Err(_)) | None => break End::Browser(None),
                }
            },
            () = &mut silence => break End::Silent,
            message = janus_rx.next() => match message {
                Some(Ok(ts::Message::Text(text))) => {
                    policy.observe(&text);
                    if browser_tx.send(ws::Message::Text(text.as_str().into())).await.is_err() {
                        break End::Browser(None);
                    }
                }
                Some(Ok(ts::Message::Close(frame))) => break End::Janus(frame),
                // Janus sends no binary frames; pings are answered by the library.
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break End::Janus(None),
            },
            removed = removals.recv() => {
                let Some(bound) = policy.bound() else { continue };
                let gone = match removed {
                    Ok(removal) => (removal.identity == bound.identity).then_some(removal.ending),
                    // Why is lost with the message: the panel may rejoin, and a disconnected
                    // member's new token is refused if it was banned.
                    Err(RecvError::Lagged(_)) => users.get(&bound.identity).is_none().then_some(Ending::Ended),
                    // The registry outlives every connection (this one holds it).
                    Err(RecvError::Closed) => Some(Ending::Ended),
                };
                if let Some(ending) = gone {
                    break End::Removed(ending);
                }
            }
        }
    }
}

/// Tells the browser why the relay ended (and the log, where that is news); what to tell Janus,
/// if anything.
async fn finish(end: End, policy: &Policy, browser_tx: &mut BrowserTx) -> Option<Option<ts::protocol::CloseFrame>> {
    let (identity, username) = policy.bound().map_or(("", ""), |b| (b.identity.as_str(), b.username.as_str()));
    // Janus ends the sessions of a connection that closes (its transport is gone).
    let to_janus = match end {
        End::Browser(frame) => frame.as_ref().map(upstream_frame),
        End::Janus(frame) => {
            let frame = frame.as_ref().map_or_else(
                || ws::CloseFrame {
                    code: CLOSE_UNAVAILABLE,
                    reason: "the media server (Janus) closed the connection".into(),
                },
                browser_frame,
            );
            let _ = browser_tx.send(ws::Message::Close(Some(frame))).await;
            return None;
        }
        End::Refused(Refusal(why)) => {
            let why = bounded(&why);
            tracing::warn!(
                identity,
                username,
                refused = why,
                "WebSocket proxy: a request a panel never sends; connection closed"
            );
            let _ = browser_tx.send(close(CLOSE_POLICY, &why)).await;
            None
        }
        End::Silent => {
            tracing::info!(
                identity,
                username,
                "WebSocket proxy: nothing from the browser in time (10 s for its first request, then a minute); connection closed"
            );
            let _ = browser_tx.send(close(CLOSE_POLICY, "nothing received in time")).await;
            None
        }
        End::Removed(ending) => {
            tracing::info!(identity, username, ?ending, "WebSocket proxy: the session ended; connection closed");
            let frame = match ending {
                Ending::Disconnected => close(CLOSE_DISCONNECTED, "the session ended: disconnected by the admin"),
                Ending::Ended => close(CLOSE_POLICY, "the session ended (left, expired, or its lines gone)"),
                Ending::Moved => close(CLOSE_MOVED, "the media server node was lost: join again"),
            };
            let _ = browser_tx.send(frame).await;
            None
        }
    };
    Some(to_janus)
}

fn close(code: u16, reason: &str) -> ws::Message {
    ws::Message::Close(Some(ws::CloseFrame { code, reason: bounded(reason).into() }))
}

/// `text` cut to what a close frame's reason holds, at a character boundary.
fn bounded(text: &str) -> String {
    let mut end = text.len().min(MAX_REASON);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
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
    fn only_this_origin_or_none_may_upgrade() {
        let headers = |origin: Option<&str>| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, "intercom.local:8443".parse().expect("host"));
            if let Some(origin) = origin {
                headers.insert(header::ORIGIN, origin.parse().expect("origin"));
            }
            headers
        };
        assert!(check_origin(&headers(None), true).is_ok(), "no browser, no Origin");
        assert!(check_origin(&headers(Some("https://intercom.local:8443")), true).is_ok());
        assert!(check_origin(&headers(Some("HTTPS://Intercom.local:8443")), true).is_ok(), "case-insensitive");
        for foreign in ["https://evil.example", "http://intercom.local:8443", "https://intercom.local", "null"] {
            let refused = check_origin(&headers(Some(foreign)), true).expect_err(foreign);
            assert_eq!(refused.code(), "foreign_origin");
        }
    }

    #[test]
    fn a_close_reason_is_cut_to_123_bytes_at_a_character() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(100);
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_REASON && long.starts_with(&cut) && !cut.is_empty());
    }
}
