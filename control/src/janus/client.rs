//! A small client of Janus's HTTP API (plugin API and admin API). Requests are short and on
//! loopback; every call is bounded by [`REQUEST_TIMEOUT`].

use std::time::Duration;

use partyline_shared::janus::{AUDIOBRIDGE, AudioBridgeReply, AudioBridgeRequest, Envelope, Request, Response, codes};
use serde_json::Value;

/// Longest wait for one answer of Janus (on loopback it answers in about a millisecond).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a request to Janus failed.
#[derive(Debug, thiserror::Error)]
pub enum JanusError {
    #[error("Janus is unreachable at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Janus refused the request ({code}): {reason}")]
    Refused { code: i64, reason: String },
    #[error("AudioBridge refused the request ({code}): {reason}")]
    Plugin { code: i64, reason: String },
    #[error("unexpected answer from Janus: {0}")]
    Protocol(String),
    #[error("{0}")]
    NotConfigured(&'static str),
}

impl JanusError {
    /// Errors after which the session must be created again (Janus restarted or went away).
    pub fn loses_session(&self) -> bool {
        match self {
            JanusError::Unreachable { .. } | JanusError::Protocol(_) => true,
            JanusError::Refused { code, .. } => *code == codes::NO_SUCH_SESSION || *code == codes::UNAUTHORIZED,
            JanusError::Plugin { .. } | JanusError::NotConfigured(_) => false,
        }
    }

    pub fn plugin_code(&self) -> Option<i64> {
        match self {
            JanusError::Plugin { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A session with a handle on the AudioBridge, identified by control's own token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    pub session: u64,
    pub handle: u64,
}

#[derive(Debug, Clone)]
pub struct JanusHttp {
    http: reqwest::Client,
}

impl JanusHttp {
    pub fn new() -> Self {
        // reqwest needs a process-wide TLS provider; the binary installs ring at start, and
        // this covers embedders (the fuzz harness). An error means one is already installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Self { http }
    }

    fn envelope<'a>(token: Option<&'a str>, admin_secret: Option<&'a str>, request: Request<'a>) -> Envelope<'a> {
        Envelope { transaction: transaction_id(), token, admin_secret, request }
    }

    async fn post(&self, url: &str, envelope: &Envelope<'_>) -> Result<Response, JanusError> {
        let unreachable = |e: reqwest::Error| JanusError::Unreachable { url: url.to_owned(), reason: e.to_string() };
        let response = self.http.post(url).json(envelope).send().await.map_err(unreachable)?;
        let response: Response = response.json().await.map_err(|e| JanusError::Protocol(e.to_string()))?;
        match (response.janus.as_str(), &response.error) {
            ("error", Some(error)) => Err(JanusError::Refused { code: error.code, reason: error.reason.clone() }),
            ("error", None) => Err(JanusError::Protocol("error without details".into())),
            _ => Ok(response),
        }
    }

    /// `GET /janus/info`: version and plugins; needs no token.
    pub async fn info(&self, api_url: &str) -> Result<Value, JanusError> {
        let url = format!("{api_url}/info");
        let unreachable = |e: reqwest::Error| JanusError::Unreachable { url: url.clone(), reason: e.to_string() };
        let response = self.http.get(&url).send().await.map_err(unreachable)?;
        response.json().await.map_err(|e| JanusError::Protocol(e.to_string()))
    }

    /// A new session and a handle on the AudioBridge.
    pub async fn open(&self, api_url: &str, token: &str) -> Result<Handle, JanusError> {
        let created = self.post(api_url, &Self::envelope(Some(token), None, Request::Create)).await?;
        let session = id_of(&created)?;
        let attach = Request::Attach { plugin: AUDIOBRIDGE };
        let attached = self.post(&format!("{api_url}/{session}"), &Self::envelope(Some(token), None, attach)).await?;
        Ok(Handle { session, handle: id_of(&attached)? })
    }

    /// A synchronous AudioBridge request.
    pub async fn audiobridge(
        &self,
        api_url: &str,
        at: Handle,
        token: &str,
        body: AudioBridgeRequest,
    ) -> Result<AudioBridgeReply, JanusError> {
        let url = format!("{api_url}/{}/{}", at.session, at.handle);
        let response = self.post(&url, &Self::envelope(Some(token), None, Request::Message { body })).await?;
        let data = response.plugindata.ok_or_else(|| JanusError::Protocol("no plugindata".into()))?.data;
        let reply: AudioBridgeReply = serde_json::from_value(data).map_err(|e| JanusError::Protocol(e.to_string()))?;
        match reply.error_code {
            Some(code) => Err(JanusError::Plugin { code, reason: reply.error.unwrap_or_default() }),
            None => Ok(reply),
        }
    }

    /// Admin API: allows `token` to use the AudioBridge (idempotent).
    pub async fn add_token(&self, admin_url: &str, secret: &str, token: &str) -> Result<(), JanusError> {
        let request = Request::AddToken { new_token: token, plugins: vec![AUDIOBRIDGE] };
        self.post(admin_url, &Self::envelope(None, Some(secret), request)).await.map(drop)
    }

    /// Admin API: revokes `token`. An unknown token is not an error (the goal is reached).
    pub async fn remove_token(&self, admin_url: &str, secret: &str, token: &str) -> Result<(), JanusError> {
        let request = Request::RemoveToken { old_token: token };
        match self.post(admin_url, &Self::envelope(None, Some(secret), request)).await {
            Err(JanusError::Refused { code: 490, .. }) => Ok(()),
            other => other.map(drop),
        }
    }
}

impl Default for JanusHttp {
    fn default() -> Self {
        Self::new()
    }
}

fn id_of(response: &Response) -> Result<u64, JanusError> {
    response.data.as_ref().and_then(|d| d["id"].as_u64()).ok_or_else(|| JanusError::Protocol("no id in answer".into()))
}

fn transaction_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("pl-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}
