//! One Janus session over control's `/janus` proxy, speaking as janus.js does: every request
//! carries a transaction and the session's token; answers are matched by transaction, and what
//! Janus says on its own about a handle (a kick, a hangup) goes to the session's owner.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::control_api::JanusSocket;

/// AudioBridge, the plugin every line attaches to.
const PLUGIN: &str = "janus.plugin.audiobridge";
/// Janus ends a session after 60 s without a request; janus.js keeps it alive every 25 s.
const KEEPALIVE: Duration = Duration::from_secs(25);
/// How long an answer may take (a join with ICE gathering on a busy box included).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, thiserror::Error)]
pub enum JanusError {
    /// The WebSocket ended (the proxy's close reason, when it gave one).
    #[error("the /janus connection ended: {0}")]
    Closed(String),
    /// Janus (or AudioBridge) answered with an error.
    #[error("Janus error {code}: {reason}")]
    Refused { code: i64, reason: String },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl JanusError {
    /// AudioBridge's or Janus's error code, if it answered with one.
    pub fn code(&self) -> Option<i64> {
        match self {
            JanusError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Something Janus said about one of the session's handles without being asked.
#[derive(Debug, Clone)]
pub struct HandleEvent {
    pub handle: u64,
    pub message: Value,
}

/// Which message of its transaction answers a request: Janus acks every request, and sends
/// the answer after the ack, except to a keep-alive or a trickle, which the ack answers. The
/// transaction's first letter says which (a message carries nothing else to tell).
#[derive(Debug, Clone, Copy)]
enum Answer {
    AfterAck,
    Ack,
}

impl Answer {
    fn prefix(self) -> char {
        match self {
            Answer::AfterAck => 't',
            Answer::Ack => 'a',
        }
    }
}

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// A Janus session of one simulated panel.
#[derive(Debug)]
pub struct JanusSession {
    id: u64,
    token: String,
    outgoing: mpsc::UnboundedSender<Message>,
    waiters: Waiters,
    closed: Arc<Mutex<Option<String>>>,
    next_transaction: AtomicU64,
    tasks: Vec<JoinHandle<()>>,
    /// Set by [`JanusSession::abandon`]: reading and writing stop, the connection stays open.
    frozen: watch::Sender<bool>,
}

impl JanusSession {
    /// Creates a Janus session on `socket` with `token`; the receiver gets the handles' events.
    pub async fn create(
        socket: JanusSocket,
        token: &str,
    ) -> Result<(JanusSession, mpsc::UnboundedReceiver<HandleEvent>), JanusError> {
        let (mut sink, mut stream) = socket.split();
        let (outgoing, mut to_send) = mpsc::unbounded_channel::<Message>();
        let (events_tx, events) = mpsc::unbounded_channel();
        let waiters: Waiters = Arc::default();
        let closed: Arc<Mutex<Option<String>>> = Arc::default();
        let (frozen, mut writer_frozen) = watch::channel(false);
        let writer = tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    message = to_send.recv() => Some(message),
                    _ = writer_frozen.wait_for(|frozen| *frozen) => None,
                };
                match message {
                    None => hold_forever(sink).await,
                    Some(Some(message)) => {
                        if sink.send(message).await.is_err() {
                            break;
                        }
                    }
                    Some(None) => break,
                }
            }
            let _ = sink.close().await;
        });
        let reader = {
            let (waiters, closed, mut reader_frozen) = (waiters.clone(), closed.clone(), frozen.subscribe());
            tokio::spawn(async move {
                let reason = loop {
                    let next = tokio::select! {
                        next = stream.next() => Some(next),
                        _ = reader_frozen.wait_for(|frozen| *frozen) => None,
                    };
                    let Some(next) = next else { hold_forever(stream).await };
                    match next {
                        Some(Ok(Message::Text(text))) => dispatch(&text, &waiters, &events_tx),
                        Some(Ok(Message::Close(frame))) => {
                            break frame.map_or_else(|| "closed".to_owned(), |f| format!("{} {}", f.code, f.reason));
                        }
                        Some(Ok(_)) => {}
                        Some(Err(error)) => break error.to_string(),
                        None => break "closed".to_owned(),
                    }
                };
                *lock(&closed) = Some(reason);
                // Dropping the waiters' senders wakes every caller with the close.
                lock(&waiters).clear();
            })
        };
        let mut session = JanusSession {
            id: 0,
            token: token.to_owned(),
            outgoing,
            waiters,
            closed,
            next_transaction: AtomicU64::new(0),
            tasks: vec![writer, reader],
            frozen,
        };
        let created = session.call(json!({"janus": "create"})).await?;
        session.id = created["data"]["id"].as_u64().ok_or_else(|| unexpected(&created))?;
        session.tasks.push(session.keepalive());
        Ok((session, events))
    }

    /// A keep-alive every 25 s while the session lives.
    fn keepalive(&self) -> JoinHandle<()> {
        let (outgoing, token, id) = (self.outgoing.clone(), self.token.clone(), self.id);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(KEEPALIVE);
            every.tick().await;
            for n in 0.. {
                every.tick().await;
                let transaction = format!("{}{n}", Answer::Ack.prefix());
                let request =
                    json!({"janus": "keepalive", "session_id": id, "token": token, "transaction": transaction});
                if outgoing.send(Message::text(request.to_string())).is_err() {
                    break;
                }
            }
        })
    }

    /// A handle on AudioBridge, opaque id = the participant's identity (as janus.js sets it).
    pub async fn attach(&self, opaque_id: &str) -> Result<u64, JanusError> {
        let attached = self.call(json!({"janus": "attach", "plugin": PLUGIN, "opaque_id": opaque_id})).await?;
        attached["data"]["id"].as_u64().ok_or_else(|| unexpected(&attached))
    }

    /// An AudioBridge request on `handle` (with an SDP offer for a join); returns the plugin's
    /// answer (`plugindata.data`) and the JSEP that came with it.
    pub async fn message(
        &self,
        handle: u64,
        body: Value,
        jsep: Option<Value>,
    ) -> Result<(Value, Option<Value>), JanusError> {
        let mut request = json!({"janus": "message", "handle_id": handle, "body": body});
        if let Some(jsep) = jsep {
            request["jsep"] = jsep;
        }
        let mut answer = self.call(request).await?;
        let data = answer["plugindata"]["data"].take();
        if let Some(code) = data["error_code"].as_i64() {
            return Err(JanusError::Refused { code, reason: data["error"].as_str().unwrap_or_default().to_owned() });
        }
        let jsep = answer.get_mut("jsep").map(Value::take);
        Ok((data, jsep))
    }

    /// The end of this handle's ICE candidates (the offer carried them all).
    pub async fn trickle_completed(&self, handle: u64) -> Result<(), JanusError> {
        let trickle = json!({"janus": "trickle", "handle_id": handle, "candidate": {"completed": true}});
        self.request(trickle, Answer::Ack).await.map(drop)
    }

    /// Ends the session as a panel that leaves does (janus.js's `destroy`).
    pub async fn destroy(&self) -> Result<(), JanusError> {
        self.call(json!({"janus": "destroy"})).await.map(drop)
    }

    /// Sends `request` and waits for its answer: the first message of its transaction other
    /// than an `ack`.
    async fn call(&self, request: Value) -> Result<Value, JanusError> {
        self.request(request, Answer::AfterAck).await
    }

    /// Sends `request` with a transaction, the token and the session, and waits for `answer`.
    async fn request(&self, mut request: Value, answer: Answer) -> Result<Value, JanusError> {
        let transaction = format!("{}{}", answer.prefix(), self.next_transaction.fetch_add(1, Ordering::Relaxed));
        request["transaction"] = json!(transaction);
        request["token"] = json!(self.token);
        if self.id != 0 {
            request["session_id"] = json!(self.id);
        }
        let (reply, answer) = oneshot::channel();
        lock(&self.waiters).insert(transaction.clone(), reply);
        if let Some(reason) = lock(&self.closed).clone() {
            return Err(JanusError::Closed(reason));
        }
        let _ = self.outgoing.send(Message::text(request.to_string()));
        let answer = match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => return Err(JanusError::Closed(lock(&self.closed).clone().unwrap_or_default())),
            Err(_) => {
                lock(&self.waiters).remove(&transaction);
                return Err(JanusError::Timeout(ANSWER_TIMEOUT));
            }
        };
        if answer["janus"] == "error" {
            let error = &answer["error"];
            let reason = error["reason"].as_str().unwrap_or_default().to_owned();
            return Err(JanusError::Refused { code: error["code"].as_i64().unwrap_or_default(), reason });
        }
        Ok(answer)
    }

    /// Why the connection closed (close code and reason), once it has.
    pub fn closed(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    /// Stops talking to Janus without a word, as a phone that drops off the network: no
    /// keep-alive, nothing read or written, the connection left open; the session is left to
    /// control's and Janus's timeouts. Holds on until the session is dropped.
    pub fn abandon(&mut self) {
        let _ = self.frozen.send(true);
        if let Some(keepalive) = self.tasks.get(2) {
            keepalive.abort();
        }
    }
}

/// Keeps a half of the WebSocket open and untouched until the task is aborted.
async fn hold_forever<T>(half: T) -> ! {
    let _held = half;
    std::future::pending().await
}

impl Drop for JanusSession {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Routes one message from Janus: an answer to its caller, an event about a handle to the owner.
fn dispatch(text: &str, waiters: &Waiters, events: &mpsc::UnboundedSender<HandleEvent>) {
    let Ok(message) = serde_json::from_str::<Value>(text) else { return };
    if let Some(transaction) = message["transaction"].as_str() {
        if message["janus"] == "ack" && !transaction.starts_with(Answer::Ack.prefix()) {
            return;
        }
        if let Some(waiter) = lock(waiters).remove(transaction) {
            let _ = waiter.send(message);
            return;
        }
    }
    if let Some(handle) = message["sender"].as_u64() {
        let _ = events.send(HandleEvent { handle, message });
    }
}

fn unexpected(answer: &Value) -> JanusError {
    JanusError::Refused { code: 0, reason: format!("unexpected answer {answer}") }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
