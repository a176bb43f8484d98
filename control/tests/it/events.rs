//! The admin's live event stream (`GET /api/admin/events`): changes reach a subscribed client
//! in order with increasing ids, `Last-Event-ID` resumes without a loss, an id that is gone gets
//! `reset`, and only the admin may listen. (Joins, leaves and calls need Janus: panel.rs and
//! the browser suites.)

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::Control;

/// One SSE event as a client reads it.
#[derive(Debug)]
struct SseEvent {
    id: Option<u64>,
    name: String,
    data: Value,
}

/// A client of the stream: reads events off the response as they arrive.
struct Subscriber {
    response: reqwest::Response,
    buffer: String,
}

impl Subscriber {
    async fn open(control: &Control, last_id: Option<u64>) -> Subscriber {
        let mut request = control.request(Method::GET, "/admin/events");
        if let Some(id) = last_id {
            request = request.header("last-event-id", id.to_string());
        }
        let response = request.send().await.expect("request");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Subscriber { response, buffer: String::new() }
    }

    /// The next event (keep-alive comments skipped), within `timeout`.
    async fn next(&mut self, timeout: Duration) -> SseEvent {
        tokio::time::timeout(timeout, async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..end + 2).collect();
                    if let Some(event) = parse(&block) {
                        return event;
                    }
                    continue;
                }
                let chunk = self.response.chunk().await.expect("stream").expect("the stream goes on");
                self.buffer.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
            }
        })
        .await
        .expect("an event within the timeout")
    }

    /// The next event named `name`, skipping others (log lines of the requests, …).
    async fn next_named(&mut self, name: &str) -> SseEvent {
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

async fn create_group(control: &Control, name: &str) {
    let (status, body) = control.post_json("/admin/groups", json!({ "name": name })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn config_changes_reach_a_subscriber_at_once_in_order() {
    let control = Control::start().await;
    let mut events = Subscriber::open(&control, None).await;
    let mut ids = Vec::new();
    for name in ["Alpha", "Beta"] {
        let sent = Instant::now();
        create_group(&control, name).await;
        let event = events.next_named("configChanged").await;
        let delay = sent.elapsed();
        assert_eq!(event.data["type"], "configChanged");
        assert!(event.data["what"].as_str().is_some_and(|w| w.contains(name)), "{:?}", event.data);
        // The bound is 200 ms to the admin's screen; the request itself is in this figure.
        assert!(delay < Duration::from_millis(200), "{name}: {delay:?}");
        println!("[events] group {name} created → event received: {delay:?}");
        ids.push(event.id.expect("an id"));
    }
    assert!(ids[0] < ids[1], "{ids:?}");
    // A warning of the log is an event too: a refused request logs one.
    let (status, _) = control.post_json("/admin/groups", json!({ "name": "alpha" })).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let warning = events.next_named("log").await;
    assert_eq!(warning.data["level"], "warn");
    assert!(warning.data["message"].as_str().is_some_and(|m| m.contains("refused")), "{:?}", warning.data);
}

#[tokio::test]
async fn last_event_id_resumes_without_a_loss_and_an_unknown_one_resets() {
    let control = Control::start().await;
    let mut events = Subscriber::open(&control, None).await;
    create_group(&control, "Alpha").await;
    let seen = events.next_named("configChanged").await.id.expect("an id");
    drop(events);
    // Meanwhile, disconnected:
    create_group(&control, "Beta").await;
    create_group(&control, "Gamma").await;
    let mut resumed = Subscriber::open(&control, Some(seen)).await;
    let mut missed = Vec::new();
    while missed.len() < 2 {
        let event = resumed.next(Duration::from_secs(5)).await;
        assert!(event.id.expect("an id") > seen, "nothing from before the last id");
        if event.name == "configChanged" {
            missed.push(event.data["what"].as_str().expect("what").to_owned());
        }
    }
    assert!(missed[0].contains("Beta") && missed[1].contains("Gamma"), "{missed:?}");

    // An id from an earlier run of control (or long gone): re-read the state.
    let mut reset = Subscriber::open(&control, Some(1_000_000)).await;
    assert_eq!(reset.next(Duration::from_secs(5)).await.name, "reset");
    let stats = control.get_json("/admin/stats").await.1;
    assert!(stats["events"]["clients"].as_u64().is_some_and(|n| n >= 1), "{stats}");
    assert_eq!(stats["events"]["clientsCut"], 0, "{stats}");
}

#[tokio::test]
async fn only_the_admin_may_listen() {
    let control = Control::start().await;
    let response = partyline_testkit::http().get(control.url("/admin/events")).send().await.expect("request");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

/// Every event the subscriber has read, for checking the ids of a whole run.
#[cfg(feature = "services")]
struct Recorder {
    events: Subscriber,
    ids: Vec<u64>,
}

#[cfg(feature = "services")]
impl Recorder {
    /// The next event named `name` whose data satisfies `check`, within `within`; what comes
    /// before it is skipped (but its id recorded).
    async fn until(&mut self, name: &str, within: Duration, check: impl Fn(&Value) -> bool) -> SseEvent {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {name} event within {within:?}");
            let event = self.events.next(left).await;
            self.ids.push(event.id.expect("an id"));
            if event.name == name && check(&event.data) {
                return event;
            }
        }
    }
}

/// The path through the whole stack: a group created, a user joining and talking, a
/// call, a bridged restart and a Janus restart each reach a subscribed client, in order, with
/// consecutive ids (nothing lost). Talking is real: a tone on the card's input channel of a
/// server audio user, heard by Janus's voice activity detection through bridged's RFC 6464
/// levels; silence again ends it.
#[cfg(feature = "services")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_stack_reaches_a_subscriber_in_order() {
    use partyline_testkit::audio::{RATE, Tone};
    use partyline_testkit::dbus::{Bridged, Bus};
    use partyline_testkit::janus::Janus;
    use partyline_testkit::pulse::PulseServer;
    use partyline_testkit::{ICE_ADDRESS, ICE_IFACE, require_namespace};

    use crate::janus::Stack;

    /// Joins and restarts with a debug build on a busy machine.
    const SLOW: Duration = Duration::from_secs(20);
    require_namespace();
    let pulse = PulseServer::start();
    for card in ["card_in", "card_out"] {
        pulse.add_card(card, RATE);
    }
    let bus = Bus::start();
    let mut stack = Stack::start_custom(
        Janus::builder().ice_iface(ICE_IFACE),
        "  - name: X\n",
        &format!("bridge:\n  iceAddresses: [{ICE_ADDRESS}]\n"),
        &[("PARTYLINE_BUS", &bus.address)],
    )
    .await;
    let mut bridged = Bridged::start(&bus, &[("PULSE_SERVER", &pulse.server_address())]);
    stack.bridge_becomes("bridged seen by control", SLOW, |b| b["state"] == "idle").await;
    let control = &stack.control;
    let mut events = Recorder { events: Subscriber::open(control, None).await, ids: Vec::new() };

    create_group(control, "Y").await;
    events.until("configChanged", SLOW, |d| d["what"].as_str().is_some_and(|w| w.contains('Y'))).await;

    let device = json!({ "inputDeviceId": "card_in.monitor", "outputDeviceId": "card_out", "sampleRate": RATE });
    let (status, body) = control.send(Method::POST, "/admin/audio/device", Some(device)).await;
    assert!(status.is_success(), "{body}");
    let a = json!({ "name": "A", "group": "x", "inputChannel": 0, "outputChannel": null });
    let (status, body) = control.post_json("/admin/server-users", a).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let is_a = |d: &Value| d["username"] == "A" && d["groupId"] == "x";
    let joined = events.until("userJoined", SLOW, is_a).await;
    let identity = joined.data["identity"].clone();

    // A's input carries a tone: A talks; silence again: A stops.
    let tone = Tone::play(&pulse, "card_in", 0, 1000);
    let started = Instant::now();
    let talking = events.until("talking", SLOW, is_a).await;
    println!("[events] tone on A's input → talking: {:?}", started.elapsed());
    assert_eq!(talking.data["identity"], identity);
    drop(tone);
    let stopped = Instant::now();
    events.until("stoppedTalking", SLOW, is_a).await;
    println!("[events] silence on A's input → stoppedTalking: {:?}", stopped.elapsed());

    let (status, ann) = control.post_json("/token", json!({ "username": "Ann", "groupId": "x" })).await;
    assert_eq!(status, StatusCode::OK, "{ann}");
    let (status, _) = control.post_json("/call", json!({ "token": ann["token"], "groupId": "x" })).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    events.until("call", SLOW, |d| d["from"] == "Ann" && d["groupId"] == "x").await;

    // bridged crashes and comes back: gone, then running A again.
    bridged.kill();
    events.until("bridgeState", SLOW, |d| d["state"] == "absent").await;
    bridged.restart();
    events.until("bridgeState", SLOW, |d| d["state"] == "running").await;

    // Janus stopped and started again: the link goes down and comes back up.
    stack.janus.stop();
    let down = events.until("janusState", SLOW, |d| d["state"] == "down").await;
    assert!(down.data["message"].as_str().is_some_and(|m| !m.is_empty()), "{:?}", down.data);
    stack.janus.restart();
    events.until("janusState", SLOW, |d| d["state"] == "up").await;

    let first = events.ids[0];
    let expected: Vec<u64> = (first..first + events.ids.len() as u64).collect();
    assert_eq!(events.ids, expected, "ids consecutive: nothing lost, nothing out of order");
}
