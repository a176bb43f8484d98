//! The client of Janus's HTTP API both daemons use: control for its rooms and stored tokens,
//! bridged for its server audio users' participants. A [`Client`] opens [`Session`]s (a session
//! with one AudioBridge handle, identified by a stored token) and speaks the admin API; a
//! session makes AudioBridge requests, keeps itself alive, and hands out its long poll
//! ([`Poller`]).
//!
//! (testkit has its own raw-JSON client of these APIs on purpose: a test oracle must not share
//! the code it checks.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{
    AUDIOBRIDGE, AudioBridgeReply, AudioBridgeRequest, Envelope, JanusError, Jsep, Request, Response, ServerInfo,
    SessionEvent, codes,
};

/// Janus holds a long poll for 30 s when it has nothing to say (then answers `keepalive`).
const POLL_TIMEOUT: Duration = Duration::from_secs(45);
/// The most events one long poll returns.
const POLL_MAX_EVENTS: &str = "10";

/// An HTTP client of Janus; cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
}

impl Client {
    /// Every request but the long poll is bounded by `timeout`. Needs the process's TLS
    /// provider (`crate::crypto::install_provider`): without one this fails.
    pub fn new(timeout: Duration) -> Result<Client, reqwest::Error> {
        // No proxy: Janus is on loopback or on the venue's network, never behind a proxy.
        let http = reqwest::Client::builder().timeout(timeout).no_proxy().build()?;
        Ok(Client { http })
    }

    /// `GET /janus/info`: the version; needs no token.
    pub async fn info(&self, api_url: &str) -> Result<ServerInfo, JanusError> {
        let url = format!("{}/info", api_url.trim_end_matches('/'));
        let response = self.http.get(&url).send().await.map_err(|e| unreachable(&url, &e))?;
        parse(&url, response).await
    }

    /// A new session with `token` and a handle on the AudioBridge.
    pub async fn open(&self, api_url: &str, token: &str) -> Result<Session, JanusError> {
        let url = api_url.trim_end_matches('/').to_owned();
        let created = self.post(&url, &envelope(Some(token), None, Request::Create)).await?;
        let id = id_of(&created)?;
        let attach = Request::Attach { plugin: AUDIOBRIDGE };
        let attached = self.post(&format!("{url}/{id}"), &envelope(Some(token), None, attach)).await?;
        let handle = id_of(&attached)?;
        Ok(Session { client: self.clone(), url, token: token.to_owned(), id, handle })
    }

    /// Admin API: allows `token` to use the AudioBridge (idempotent).
    pub async fn add_token(&self, admin_url: &str, secret: &str, token: &str) -> Result<(), JanusError> {
        let request = Request::AddToken { new_token: token, plugins: vec![AUDIOBRIDGE] };
        self.post(admin_url, &envelope(None, Some(secret), request)).await.map(drop)
    }

    /// Admin API: revokes `token`. An unknown token is not an error (the goal is reached).
    pub async fn remove_token(&self, admin_url: &str, secret: &str, token: &str) -> Result<(), JanusError> {
        let request = Request::RemoveToken { old_token: token };
        match self.post(admin_url, &envelope(None, Some(secret), request)).await {
            Err(JanusError::Refused { code: codes::TOKEN_NOT_FOUND, .. }) => Ok(()),
            other => other.map(drop),
        }
    }

    /// One request; an answer whose `janus` is `error` is a [`JanusError::Refused`].
    async fn post(&self, url: &str, envelope: &Envelope<'_>) -> Result<Response, JanusError> {
        let response = self.http.post(url).json(envelope).send().await.map_err(|e| unreachable(url, &e))?;
        let response: Response = parse(url, response).await?;
        match (response.janus.as_str(), &response.error) {
            ("error", Some(error)) => Err(error.clone().into()),
            ("error", None) => Err(JanusError::Protocol("an error without details".into())),
            _ => Ok(response),
        }
    }
}

/// A Janus session with a handle on the AudioBridge, opened with a stored token. Cloning it
/// does not open another.
#[derive(Debug, Clone)]
pub struct Session {
    client: Client,
    url: String,
    token: String,
    id: u64,
    handle: u64,
}

impl Session {
    /// The API URL the session lives at.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Janus's id of the session.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A synchronous AudioBridge request (`create`, `exists`, `listparticipants`, `kick`, …):
    /// the plugin's answer, or its error as a [`JanusError::Plugin`].
    pub async fn audiobridge(&self, body: AudioBridgeRequest) -> Result<AudioBridgeReply, JanusError> {
        let response = self.post(&self.handle_url(), Request::Message { body, jsep: None }, None).await?;
        let data = response.plugindata.ok_or_else(|| JanusError::Protocol("no plugindata".into()))?.data;
        let reply: AudioBridgeReply = serde_json::from_value(data).map_err(|e| JanusError::Protocol(e.to_string()))?;
        reply.checked()
    }

    /// An asynchronous AudioBridge request (`join` with its session description, `configure`):
    /// Janus acks, and the result comes on the long poll as an event carrying the returned
    /// transaction id.
    pub async fn send(&self, body: AudioBridgeRequest, jsep: Option<Jsep>) -> Result<String, JanusError> {
        let transaction = transaction_id();
        let request = Request::Message { body, jsep };
        self.post(&self.handle_url(), request, Some(transaction.clone())).await?;
        Ok(transaction)
    }

    /// Keeps the session alive (Janus drops a session after 60 s without a request).
    pub async fn keepalive(&self) -> Result<(), JanusError> {
        self.post(&self.session_url(), Request::Keepalive, None).await.map(drop)
    }

    /// Ends the session: its participant leaves the room.
    pub async fn destroy(&self) -> Result<(), JanusError> {
        self.post(&self.session_url(), Request::Destroy, None).await.map(drop)
    }

    /// The session's long poll, to be moved into a task of its own: a pending poll must never
    /// be dropped, since the events Janus handed to it would be lost.
    pub fn poller(&self) -> Poller {
        Poller { http: self.client.http.clone(), url: self.session_url(), token: self.token.clone() }
    }

    fn session_url(&self) -> String {
        format!("{}/{}", self.url, self.id)
    }

    fn handle_url(&self) -> String {
        format!("{}/{}/{}", self.url, self.id, self.handle)
    }

    async fn post(&self, url: &str, request: Request<'_>, transaction: Option<String>) -> Result<Response, JanusError> {
        let mut envelope = envelope(Some(&self.token), None, request);
        if let Some(transaction) = transaction {
            envelope.transaction = transaction;
        }
        self.client.post(url, &envelope).await
    }
}

/// The long poll of one session.
#[derive(Debug, Clone)]
pub struct Poller {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Poller {
    /// Waits for the next events (a [`SessionEvent::Keepalive`] when Janus had nothing to say
    /// for 30 s). An `error` event (the session is gone) is a [`JanusError::Refused`].
    pub async fn next(&self) -> Result<Vec<SessionEvent>, JanusError> {
        let query = [("maxev", POLL_MAX_EVENTS), ("token", self.token.as_str())];
        let request = self.http.get(&self.url).query(&query).timeout(POLL_TIMEOUT);
        let response = request.send().await.map_err(|e| unreachable(&self.url, &e))?;
        let answer: Value = parse(&self.url, response).await?;
        events(answer)
    }
}

/// The events of one long poll's answer: an array of them, or one.
fn events(answer: Value) -> Result<Vec<SessionEvent>, JanusError> {
    let answers = match answer {
        Value::Array(events) => events,
        one => vec![one],
    };
    answers
        .into_iter()
        .map(|event| match serde_json::from_value(event) {
            Ok(SessionEvent::Error { error }) => Err(error.into()),
            Ok(event) => Ok(event),
            Err(e) => Err(JanusError::Protocol(format!("an event: {e}"))),
        })
        .collect()
}

fn envelope<'a>(token: Option<&'a str>, admin_secret: Option<&'a str>, request: Request<'a>) -> Envelope<'a> {
    Envelope { transaction: transaction_id(), token, admin_secret, request }
}

/// A transaction id unique in this process: an asynchronous request's result is recognised by it.
fn transaction_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("pl-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The body of `response` as `T`: unreadable is unreachable, unparsable a protocol error.
async fn parse<T: DeserializeOwned>(url: &str, response: reqwest::Response) -> Result<T, JanusError> {
    let body = response.bytes().await.map_err(|e| unreachable(url, &e))?;
    serde_json::from_slice(&body).map_err(|e| JanusError::Protocol(e.to_string()))
}

/// Why `url` could not be reached, with every cause (reqwest's own message alone says little:
/// "error sending request").
fn unreachable(url: &str, error: &reqwest::Error) -> JanusError {
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        reason = format!("{reason}: {inner}");
        source = inner.source();
    }
    JanusError::Unreachable { url: url.to_owned(), reason }
}

fn id_of(response: &Response) -> Result<u64, JanusError> {
    response
        .data
        .as_ref()
        .and_then(|d| d["id"].as_u64())
        .ok_or_else(|| JanusError::Protocol("no id in the answer".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::janus::{ErrorDetail, JsepType, PluginData, PluginEvent};
    use serde_json::json;

    #[test]
    fn a_long_poll_answer_is_one_event_or_several_and_an_error_event_fails_it() {
        let one = events(json!({"janus": "keepalive"})).expect("one event");
        assert_eq!(one, [SessionEvent::Keepalive]);
        let several = events(json!([
            {"janus": "webrtcup", "session_id": 1, "sender": 2},
            {"janus": "media", "session_id": 1, "sender": 2, "mid": "0", "type": "audio", "receiving": true},
            {"janus": "slowlink", "session_id": 1, "sender": 2, "uplink": true, "lost": 3},
            {"janus": "event", "session_id": 1, "sender": 2, "transaction": "pl-7",
             "plugindata": {"plugin": AUDIOBRIDGE, "data": {"audiobridge": "joined", "room": "r", "id": "server-a",
                                                             "participants": []}},
             "jsep": {"type": "answer", "sdp": "v=0\r\n"}}
        ]))
        .expect("events");
        let joined =
            AudioBridgeReply { audiobridge: "joined".into(), room: Some("r".into()), ..AudioBridgeReply::default() };
        assert_eq!(
            several,
            [
                SessionEvent::Webrtcup,
                SessionEvent::Media { receiving: Some(true) },
                SessionEvent::Other,
                SessionEvent::Event(Box::new(PluginEvent {
                    transaction: Some("pl-7".into()),
                    plugindata: Some(PluginData { plugin: AUDIOBRIDGE.into(), data: joined }),
                    jsep: Some(Jsep { kind: JsepType::Answer, sdp: "v=0\r\n".into() }),
                })),
            ]
        );
        let gone = events(json!([{"janus": "keepalive"},
                                 {"janus": "error", "error": {"code": 458, "reason": "No such session"}}]));
        assert_eq!(gone, Err(ErrorDetail { code: 458, reason: "No such session".into() }.into()));
        assert!(gone.expect_err("an error").loses_session());
        assert!(matches!(events(json!({"janus": "event", "plugindata": 3})), Err(JanusError::Protocol(_))));
    }

    #[test]
    fn transaction_ids_are_unique() {
        let (a, b) = (transaction_id(), transaction_id());
        assert_ne!(a, b);
    }
}
