//! A client of control's admin event stream (`GET /api/admin/events`, server-sent events), as
//! the tests read it.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::control::Control;

/// One SSE event as a client reads it.
#[derive(Debug)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub name: String,
    pub data: Value,
}

/// A client of the stream: reads events off the response as they arrive.
#[derive(Debug)]
pub struct Subscriber {
    response: reqwest::Response,
    buffer: String,
}

impl Subscriber {
    /// A subscriber from now on, or from after event `last_id` (`Last-Event-ID`).
    pub async fn open(control: &Control, last_id: Option<u64>) -> Subscriber {
        let mut request = control.request(Method::GET, "/admin/events");
        if let Some(id) = last_id {
            request = request.header("last-event-id", id.to_string());
        }
        Subscriber::from(request).await
    }

    /// A subscriber for longer than the test client's 30 s timeout of a whole request.
    pub async fn open_untimed(control: &Control) -> Subscriber {
        let client = reqwest::Client::builder().no_proxy().build().expect("client");
        Subscriber::from(client.get(control.url("/admin/events")).bearer_auth(&control.token)).await
    }

    async fn from(request: reqwest::RequestBuilder) -> Subscriber {
        let response = request.send().await.expect("request");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Subscriber { response, buffer: String::new() }
    }

    /// The next event (keep-alive comments skipped), within `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> SseEvent {
        let event = tokio::time::timeout(timeout, self.read_event()).await.expect("an event within the timeout");
        event.expect("the stream goes on")
    }

    /// The next event; `None` when the stream ends.
    pub async fn read_event(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse(&block) {
                    return Some(event);
                }
                continue;
            }
            let chunk = self.response.chunk().await.ok().flatten()?;
            self.buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
    }

    /// The next event named `name`, skipping others (log lines of the requests, …).
    pub async fn next_named(&mut self, name: &str) -> SseEvent {
        loop {
            let event = self.next(Duration::from_secs(5)).await;
            if event.name == name {
                return event;
            }
        }
    }
}

fn parse(block: &str) -> Option<SseEvent> {
    let (mut id, mut name, mut data) = (None, None, String::new());
    for line in block.lines() {
        match line.split_once(':').map(|(k, v)| (k, v.strip_prefix(' ').unwrap_or(v))) {
            Some(("id", v)) => id = v.parse().ok(),
            Some(("event", v)) => name = Some(v.to_owned()),
            Some(("data", v)) => data.push_str(v),
            _ => {}
        }
    }
    Some(SseEvent { id, name: name?, data: serde_json::from_str(&data).expect("data is JSON") })
}

/// Reads the `name` events (their data) from the session stream of `token` into a channel.
pub async fn session_events(
    control: &Control,
    token: &str,
    name: &'static str,
) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    let response = control
        .request(Method::GET, &format!("/session/events?token={token}"))
        .send()
        .await
        .expect("GET /session/events");
    assert_eq!(response.status(), StatusCode::OK);
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    let mut response = response;
    tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let event: String = text.drain(..end + 2).collect();
                // The stream also carries other events: the admin's state of each line, commands…
                if !event.lines().any(|l| l.strip_prefix("event: ") == Some(name)) {
                    continue;
                }
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) {
                    let _ = sender.send(serde_json::from_str::<Value>(data.trim()).unwrap_or(Value::Null));
                }
            }
        }
    });
    receiver
}
