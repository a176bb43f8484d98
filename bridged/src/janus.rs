//! A small client of Janus's HTTP API (the plugin API, not the admin API): one session with one
//! AudioBridge handle per server audio user, its long poll and its keep-alive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// How long a plain request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Janus holds a long poll for 30 s when there is nothing to say.
const POLL_TIMEOUT: Duration = Duration::from_secs(45);
/// The plugin the handle attaches to.
const AUDIOBRIDGE: &str = "janus.plugin.audiobridge";

#[derive(Debug, Clone, thiserror::Error)]
pub enum JanusError {
    #[error("Janus unreachable at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Janus refused: {reason} (code {code})")]
    Refused { code: i64, reason: String },
    #[error("unexpected answer from Janus: {0}")]
    Protocol(String),
}

/// One Janus session with an AudioBridge handle.
#[derive(Debug)]
pub struct Session {
    http: reqwest::Client,
    url: String,
    token: String,
    pub id: u64,
    pub handle: u64,
    transaction: AtomicU64,
}

impl Session {
    /// Creates a session with `token` and attaches the AudioBridge plugin.
    pub async fn open(http: &reqwest::Client, url: &str, token: &str) -> Result<Session, JanusError> {
        let mut session = Session {
            http: http.clone(),
            url: url.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            id: 0,
            handle: 0,
            transaction: AtomicU64::new(1),
        };
        let created = session.post("", json!({"janus": "create"})).await?;
        session.id = data_id(&created)?;
        let attached =
            session.post(&format!("/{}", session.id), json!({"janus": "attach", "plugin": AUDIOBRIDGE})).await?;
        session.handle = data_id(&attached)?;
        Ok(session)
    }

    /// A synchronous AudioBridge request (`exists`, `listparticipants`, …): the plugin's `data`.
    /// A plugin error (`error_code`) is a [`JanusError::Refused`].
    pub async fn request(&self, body: Value) -> Result<Value, JanusError> {
        let answer = self.post(&self.handle_path(), json!({"janus": "message", "body": body})).await?;
        let data = answer["plugindata"]["data"].clone();
        plugin_error(&data)?;
        Ok(data)
    }

    /// An asynchronous AudioBridge request (`join`, `configure`): Janus acks, the result comes
    /// on the long poll. Returns the transaction id.
    pub async fn send(&self, body: Value, jsep: Option<Value>) -> Result<String, JanusError> {
        let mut message = json!({"janus": "message", "body": body});
        if let Some(jsep) = jsep {
            message["jsep"] = jsep;
        }
        let transaction = self.next_transaction();
        message["transaction"] = json!(transaction);
        self.post(&self.handle_path(), message).await?;
        Ok(transaction)
    }

    /// Keeps the session alive (Janus drops it after 60 s without a request).
    pub async fn keepalive(&self) -> Result<(), JanusError> {
        self.post(&format!("/{}", self.id), json!({"janus": "keepalive"})).await.map(drop)
    }

    /// Destroys the session (the participant leaves its room).
    pub async fn destroy(&self) -> Result<(), JanusError> {
        self.post(&format!("/{}", self.id), json!({"janus": "destroy"})).await.map(drop)
    }

    /// A poller of the session's events, to be moved into its own task.
    pub fn poller(&self) -> Poller {
        Poller { http: self.http.clone(), url: format!("{}/{}?maxev=10&token={}", self.url, self.id, self.token) }
    }

    fn handle_path(&self) -> String {
        format!("/{}/{}", self.id, self.handle)
    }

    fn next_transaction(&self) -> String {
        format!("pl{}", self.transaction.fetch_add(1, Ordering::Relaxed))
    }

    async fn post(&self, path: &str, mut body: Value) -> Result<Value, JanusError> {
        if body.get("transaction").is_none() {
            body["transaction"] = json!(self.next_transaction());
        }
        body["token"] = json!(self.token);
        let url = format!("{}{path}", self.url);
        let response = self
            .http
            .post(&url)
            .timeout(REQUEST_TIMEOUT)
            .json(&body)
            .send()
            .await
            .map_err(|e| unreachable(&self.url, &e))?;
        let answer: Value = response.json().await.map_err(|e| unreachable(&self.url, &e))?;
        janus_error(&answer)?;
        Ok(answer)
    }
}

/// The long poll of one session.
#[derive(Debug, Clone)]
pub struct Poller {
    http: reqwest::Client,
    url: String,
}

impl Poller {
    /// Waits for the next events (an array; a `keepalive` when Janus had nothing to say).
    pub async fn next(&self) -> Result<Vec<Value>, JanusError> {
        let response =
            self.http.get(&self.url).timeout(POLL_TIMEOUT).send().await.map_err(|e| unreachable(&self.url, &e))?;
        let answer: Value = response.json().await.map_err(|e| unreachable(&self.url, &e))?;
        match answer {
            Value::Array(events) => {
                for event in &events {
                    janus_error(event)?;
                }
                Ok(events)
            }
            other => {
                janus_error(&other)?;
                Ok(vec![other])
            }
        }
    }
}

fn unreachable(url: &str, error: &reqwest::Error) -> JanusError {
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        reason = format!("{reason}: {inner}");
        source = inner.source();
    }
    let base = url.split('?').next().unwrap_or(url);
    JanusError::Unreachable { url: base.to_owned(), reason }
}

fn janus_error(answer: &Value) -> Result<(), JanusError> {
    if answer["janus"] == "error" {
        return Err(JanusError::Refused {
            code: answer["error"]["code"].as_i64().unwrap_or(0),
            reason: answer["error"]["reason"].as_str().unwrap_or("no reason given").to_owned(),
        });
    }
    Ok(())
}

/// AudioBridge errors come as `"janus":"success"`/`"event"` with `error_code` in the data.
pub fn plugin_error(data: &Value) -> Result<(), JanusError> {
    if let Some(code) = data["error_code"].as_i64() {
        return Err(JanusError::Refused {
            code,
            reason: data["error"].as_str().unwrap_or("no reason given").to_owned(),
        });
    }
    Ok(())
}

fn data_id(answer: &Value) -> Result<u64, JanusError> {
    answer["data"]["id"].as_u64().ok_or_else(|| JanusError::Protocol(format!("no data.id in {answer}")))
}
