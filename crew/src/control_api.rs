//! control's public routes, as the panel uses them: `POST /api/token`, the session's event
//! stream, the panel's state reports, and the `/janus` WebSocket on the same origin.

use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use partyline_shared::config::MediaEngine;

use crate::tls::TlsCheck;

/// The WebSocket to Janus through control's proxy.
pub type JanusSocket = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// A request or a connection to control that did not work.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// control answered with an error status and its JSON error body.
    #[error("{path}: {status} {body}")]
    Refused { path: &'static str, status: u16, body: String },
    #[error("{path}: {source}")]
    Http {
        path: &'static str,
        #[source]
        source: reqwest::Error,
    },
    #[error("/janus: {0}")]
    WebSocket(#[from] tokio_tungstenite::tungstenite::Error),
    #[error("{0}")]
    Url(String),
}

/// What a simulated panel asks `POST /api/token` for: a position's lines, or groups to listen
/// and talk on (the join page's two forms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Lines {
    Position { position: String },
    Groups { listen: Vec<String>, talk: Vec<String> },
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TokenRequest<'a> {
    username: &'a str,
    #[serde(flatten)]
    lines: &'a Lines,
    #[serde(skip_serializing_if = "Option::is_none")]
    pin: Option<&'a str>,
    /// A panel joining again: its previous token and panel key, which it keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    resume: Option<Resume<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Resume<'a> {
    token: &'a str,
    panel_key: &'a str,
}

/// One line of the token's answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    pub group_id: String,
    pub name: String,
    pub listen: bool,
    pub talk: bool,
    pub room_name: String,
}

/// `POST /api/token`'s answer, the part a panel uses.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    pub token: String,
    pub participant_identity: String,
    /// The panel's remote control key (kept by a panel that joins again).
    pub panel_key: String,
    pub lines: Vec<Line>,
    /// Where the panel's media goes: Janus's rooms (through `/janus`) or partyline's own.
    pub engine: MediaEngine,
    /// STUN servers and the relay, with credentials that expire (none on a LAN-only install).
    #[serde(default)]
    pub ice_servers: Vec<IceServer>,
}

/// One of the token answer's `iceServers`, as a browser's `RTCIceServer`.
#[derive(Debug, Clone, Deserialize)]
pub struct IceServer {
    pub urls: Vec<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub credential: Option<String>,
}

/// A line's state as the panel reports it (`POST /api/session/state`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LineReport {
    pub group_id: String,
    pub listen: bool,
    pub volume: u8,
    /// `off` or `latched` (the crew's keys latch).
    pub talk: &'static str,
    pub active: bool,
    pub talkers: Vec<String>,
}

#[derive(Debug, Serialize)]
struct MediaOffer<'a> {
    token: &'a str,
    offer: &'a str,
}

#[derive(Debug, Deserialize)]
struct MediaAnswer {
    answer: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TalkKey<'a> {
    token: &'a str,
    group_id: &'a str,
    talking: bool,
}

#[derive(Debug, Serialize)]
struct StateReport<'a> {
    token: &'a str,
    lines: &'a [LineReport],
}

/// control's origin, and clients that check its certificate as told.
#[derive(Debug, Clone)]
pub struct ControlApi {
    origin: String,
    http: reqwest::Client,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl ControlApi {
    /// `server` is the origin the panel is loaded from (`https://HOST:PORT`; `http://` in labs).
    pub fn new(server: &str, check: &TlsCheck) -> Result<ControlApi, ApiError> {
        let origin = server.trim_end_matches('/').to_owned();
        if !origin.starts_with("https://") && !origin.starts_with("http://") {
            return Err(ApiError::Url(format!("{server}: the server is an http:// or https:// origin")));
        }
        // reqwest is built without a crypto provider of its own: the process's, installed here
        // whether or not this origin speaks TLS (reqwest wants one either way).
        partyline_shared::crypto::install_provider();
        let tls = origin.starts_with("https://").then(|| check.client_config());
        let mut http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(20));
        if let Some(config) = &tls {
            http = http.use_preconfigured_tls((**config).clone());
        }
        let http = http.build().map_err(|source| ApiError::Http { path: "client", source })?;
        Ok(ControlApi { origin, http, tls })
    }

    /// `POST /api/token`: a session's token and lines.
    pub async fn token(&self, username: &str, lines: &Lines, pin: Option<&str>) -> Result<Credentials, ApiError> {
        self.token_again(username, lines, pin, None).await
    }

    /// [`Self::token`] for a panel joining again, as the page does after its connection was
    /// lost: with `previous` credentials, whose panel key it keeps.
    pub async fn token_again(
        &self,
        username: &str,
        lines: &Lines,
        pin: Option<&str>,
        previous: Option<&Credentials>,
    ) -> Result<Credentials, ApiError> {
        let resume = previous.map(|p| Resume { token: &p.token, panel_key: &p.panel_key });
        let body = TokenRequest { username, lines, pin, resume };
        let response = self.post("/api/token", &body).await?;
        response.json().await.map_err(|source| ApiError::Http { path: "/api/token", source })
    }

    /// `POST /api/session/state`: the panel's lines as it shows them.
    pub async fn report_state(&self, token: &str, lines: &[LineReport]) -> Result<(), ApiError> {
        self.post("/api/session/state", &StateReport { token, lines }).await.map(drop)
    }

    /// `POST /api/session/media` (partyline's own rooms): the panel's offer, one bundled peer
    /// connection for all its lines; returns the rooms' answer.
    pub async fn media(&self, token: &str, offer: &str) -> Result<String, ApiError> {
        const PATH: &str = "/api/session/media";
        let response = self.post(PATH, &MediaOffer { token, offer }).await?;
        let answer: MediaAnswer = response.json().await.map_err(|source| ApiError::Http { path: PATH, source })?;
        Ok(answer.answer)
    }

    /// `POST /api/session/talk` (partyline's own rooms): a talk key on or off.
    pub async fn talk(&self, token: &str, group_id: &str, talking: bool) -> Result<(), ApiError> {
        self.post("/api/session/talk", &TalkKey { token, group_id, talking }).await.map(drop)
    }

    async fn post(&self, path: &'static str, body: &impl Serialize) -> Result<reqwest::Response, ApiError> {
        let url = format!("{}{path}", self.origin);
        let response = self.http.post(url).json(body).send().await.map_err(|source| ApiError::Http { path, source })?;
        refused_unless_ok(path, response).await
    }

    /// Opens the session's event stream (`GET /api/session/events`) and reads it until it ends,
    /// as the panel keeps it open; returns how many events came.
    pub async fn follow_session_events(&self, token: &str) -> Result<u64, ApiError> {
        const PATH: &str = "/api/session/events";
        let url = format!("{}{PATH}", self.origin);
        let request = self.http.get(url).query(&[("token", token)]).timeout(Duration::from_secs(24 * 3600));
        let response = request.send().await.map_err(|source| ApiError::Http { path: PATH, source })?;
        let mut body = refused_unless_ok(PATH, response).await?.bytes_stream();
        let mut events = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|source| ApiError::Http { path: PATH, source })?;
            events += chunk.windows(7).filter(|w| w == b"event: ").count() as u64;
        }
        Ok(events)
    }

    /// control's `/janus` WebSocket with Janus's subprotocol and the panel's origin.
    pub async fn connect_janus(&self) -> Result<JanusSocket, ApiError> {
        let url = format!("{}/janus", self.origin.replacen("http", "ws", 1));
        let mut request = url.into_client_request()?;
        let headers = request.headers_mut();
        headers.insert("Sec-WebSocket-Protocol", HeaderValue::from_static("janus-protocol"));
        let origin = HeaderValue::from_str(&self.origin).map_err(|e| ApiError::Url(e.to_string()))?;
        headers.insert("Origin", origin);
        let connector = self.tls.clone().map(Connector::Rustls);
        let (socket, _) = tokio_tungstenite::connect_async_tls_with_config(request, None, true, connector).await?;
        Ok(socket)
    }
}

async fn refused_unless_ok(path: &'static str, response: reqwest::Response) -> Result<reqwest::Response, ApiError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().await.unwrap_or_default();
    Err(ApiError::Refused { path, status: status.as_u16(), body })
}
