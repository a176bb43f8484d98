//! The live event bus: one ordered sequence of typed events (users joining and leaving lines,
//! users talking, calls, config changes, the states of bridged and of the link to Janus, the
//! log's warnings and errors) for `GET /api/admin/events`, so that the admin UI and control
//! surfaces learn of a change at once instead of at their next poll.
//!
//! Every event gets the next sequence id and goes into a ring of the last [`RING`] events, from
//! which a client that reconnects with `Last-Event-ID` resumes without a loss; a client whose
//! last id has left the ring (or is from an earlier run of control) gets a `reset` event first
//! and re-reads the state. Publishing never waits for a client: each client has a buffer of
//! [`CLIENT_BUFFER`] events, and a client that lets it fill is cut (its stream ends with an
//! `overflow` event), counted, and logged.
//!
//! Publishing must not log (the log layer publishes warnings through here).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::response::sse;
use futures_util::{Stream, StreamExt as _};
use partyline_shared::bridge::{BridgeState, PtpState};
use partyline_shared::config::DIRECT_ROOM_PREFIX;
use partyline_shared::sync::lock;
use serde::Serialize;

use crate::links::LinkQuality;
use tokio::sync::{broadcast, mpsc};

mod talk;
pub use talk::LineTalk;
use talk::TalkClock;

/// Events kept for resuming.
pub const RING: usize = 1024;
/// Events a client may have unread before it is cut.
pub const CLIENT_BUFFER: usize = 256;

/// One event, as `data:` of the stream (its `event:` is the `type`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum LiveEvent {
    /// A user joined a line (its group's room).
    UserJoined { identity: String, username: String, group_id: String },
    /// A user left a line.
    UserLeft { identity: String, username: String, group_id: String, why: String },
    /// A user on a line started talking: Janus heard its voice (not merely its talk key on).
    /// Ends with `stoppedTalking`, or with `userLeft` when the user leaves while talking.
    Talking { identity: String, username: String, group_id: String },
    /// A user on a line stopped talking.
    StoppedTalking { identity: String, username: String, group_id: String },
    /// A crew member pressed Call on a line.
    Call { group_id: String, from: String, identity: String },
    /// A person key opened a direct line (`groupId`: its room) from `caller` to `callee`.
    DirectOpened { group_id: String, caller: String, callee: String },
    /// A direct line closed: one end left, or the admin closed it.
    DirectClosed { group_id: String, why: String },
    /// The config changed, through the API (`what` names the change) or on disk.
    ConfigChanged { what: String },
    /// partyline-bridged's state changed.
    BridgeState { state: BridgeViewState, message: String },
    /// bridged's PTP follower (AES67) changed state or grandmaster: `lost` is a warning (the
    /// clock runs free, audio goes on), `locked` again after.
    PtpState { state: PtpState, grandmaster: String },
    /// The link to Janus changed state (`message`: why it is down, empty when up).
    JanusState { state: JanusState, message: String },
    /// One Janus node of the pool changed state (`message`: why it is down, empty when up).
    NodeState { node: String, state: JanusState, message: String },
    /// The link of a crew member's line was judged anew (`quality`: good, degraded or poor),
    /// from the figures its panel measures.
    LinkChanged {
        identity: String,
        username: String,
        group_id: String,
        quality: LinkQuality,
        loss_percent: f32,
        jitter_ms: f32,
        rtt_ms: Option<f32>,
    },
    /// A crew member's session left a node that was lost or removed: its panel joins again
    /// by itself on a live node.
    SessionMoved { identity: String, username: String, node: String },
    /// A warning or an error of control's log.
    Log { level: String, message: String, source: String },
}

impl LiveEvent {
    /// The SSE event name: the serde tag.
    fn name(&self) -> &'static str {
        match self {
            LiveEvent::UserJoined { .. } => "userJoined",
            LiveEvent::UserLeft { .. } => "userLeft",
            LiveEvent::Talking { .. } => "talking",
            LiveEvent::StoppedTalking { .. } => "stoppedTalking",
            LiveEvent::Call { .. } => "call",
            LiveEvent::DirectOpened { .. } => "directOpened",
            LiveEvent::DirectClosed { .. } => "directClosed",
            LiveEvent::ConfigChanged { .. } => "configChanged",
            LiveEvent::BridgeState { .. } => "bridgeState",
            LiveEvent::PtpState { .. } => "ptpState",
            LiveEvent::JanusState { .. } => "janusState",
            LiveEvent::NodeState { .. } => "nodeState",
            LiveEvent::LinkChanged { .. } => "linkChanged",
            LiveEvent::SessionMoved { .. } => "sessionMoved",
            LiveEvent::Log { .. } => "log",
        }
    }
}

/// The link to Janus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JanusState {
    /// Not tried yet.
    #[default]
    Unknown,
    /// In step with the config.
    Up,
    /// Unreachable or refusing.
    Down,
    /// A secret is missing.
    Unconfigured,
}

impl fmt::Display for JanusState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JanusState::Unknown => "unknown",
            JanusState::Up => "up",
            JanusState::Down => "down",
            JanusState::Unconfigured => "unconfigured",
        })
    }
}

/// bridged's state as control sees it: control's own view of the link, or bridged's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BridgeViewState {
    /// Not asked yet.
    #[default]
    Unknown,
    /// No D-Bus connection.
    Unreachable,
    /// partyline-bridged is not on the bus.
    Absent,
    /// Janus's secrets are missing: no plan can be made.
    Unconfigured,
    /// bridged's own states.
    Idle,
    Running,
    Degraded,
    Error,
}

impl From<BridgeState> for BridgeViewState {
    fn from(state: BridgeState) -> Self {
        match state {
            BridgeState::Idle => BridgeViewState::Idle,
            BridgeState::Running => BridgeViewState::Running,
            BridgeState::Degraded => BridgeViewState::Degraded,
            BridgeState::Error => BridgeViewState::Error,
        }
    }
}

impl fmt::Display for BridgeViewState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BridgeViewState::Unknown => "unknown",
            BridgeViewState::Unreachable => "unreachable",
            BridgeViewState::Absent => "absent",
            BridgeViewState::Unconfigured => "unconfigured",
            BridgeViewState::Idle => "idle",
            BridgeViewState::Running => "running",
            BridgeViewState::Degraded => "degraded",
            BridgeViewState::Error => "error",
        })
    }
}

/// An event with its id, serialized once for every client.
#[derive(Debug, Clone)]
pub struct Published {
    id: u64,
    name: &'static str,
    data: Arc<str>,
}

impl Published {
    /// Its SSE name (`userJoined`, `talking`, …).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its JSON (`{"type":…,…}`), as every client gets it.
    pub fn data(&self) -> &str {
        &self.data
    }

    /// Whether it may change a panel's people (person keys, direct lines, reply): joins and
    /// leaves, direct lines, the config, and talk on a direct line (which moves a reply) but not
    /// on a group's (the bulk of all events, which changes no one's people).
    /// Whether it may change who is on a line or who talks there (`event: members`).
    pub fn changes_members(&self) -> bool {
        matches!(self.name, "userJoined" | "userLeft" | "talking" | "stoppedTalking" | "sessionMoved")
    }

    pub fn changes_people(&self) -> bool {
        match self.name {
            "userJoined" | "userLeft" | "directOpened" | "directClosed" | "configChanged" | "sessionMoved" => true,
            "talking" => self.data.contains(&format!("\"groupId\":\"{DIRECT_ROOM_PREFIX}")),
            _ => false,
        }
    }

    fn sse(&self) -> sse::Event {
        sse::Event::default().id(self.id.to_string()).event(self.name).data(&*self.data)
    }
}

#[derive(Debug)]
struct Ring {
    last_id: u64,
    events: VecDeque<Published>,
}

#[derive(Debug)]
struct Inner {
    ring: Mutex<Ring>,
    sender: broadcast::Sender<Published>,
    clients_cut: AtomicU64,
    /// Clients of the event stream now (their pumps running).
    clients: AtomicU64,
    talk: TalkClock,
}

/// The bus; cheap to clone.
#[derive(Debug, Clone)]
pub struct EventBus(Arc<Inner>);

impl Default for EventBus {
    fn default() -> Self {
        // The broadcast only hands events to the clients' pumps, which move them on at once:
        // its capacity only has to cover a burst while a pump is scheduled.
        let (sender, _) = broadcast::channel(RING);
        EventBus(Arc::new(Inner {
            ring: Mutex::new(Ring { last_id: 0, events: VecDeque::with_capacity(RING) }),
            sender,
            clients_cut: AtomicU64::new(0),
            clients: AtomicU64::new(0),
            talk: TalkClock::default(),
        }))
    }
}

/// What `Last-Event-ID` resumes from, and what the stream starts with.
#[derive(Debug)]
pub struct Subscription {
    /// The client's last id is gone from the ring: it must re-read the state.
    missed: bool,
    backlog: Vec<Published>,
    receiver: broadcast::Receiver<Published>,
}

/// Figures for `/admin/stats`.
#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventStats {
    /// Clients of the event stream now.
    pub clients: u64,
    /// Clients cut since start because they did not read fast enough.
    pub clients_cut: u64,
    /// The id of the newest event.
    pub last_id: u64,
}

impl EventBus {
    /// Sends `event` to every client and keeps it for resuming.
    pub fn publish(&self, event: &LiveEvent) {
        self.0.talk.observe(event, Instant::now());
        let Ok(data) = serde_json::to_string(event) else { return };
        let mut ring = lock(&self.0.ring);
        ring.last_id += 1;
        let published = Published { id: ring.last_id, name: event.name(), data: data.into() };
        if ring.events.len() == RING {
            ring.events.pop_front();
        }
        ring.events.push_back(published.clone());
        // Under the lock, so a new client's backlog and its live events neither overlap nor
        // leave a gap. No client is not an error.
        let _ = self.0.sender.send(published);
    }

    /// The events published from now on, for a watcher inside control (no backlog, no ring).
    pub fn watch(&self) -> broadcast::Receiver<Published> {
        self.0.sender.subscribe()
    }

    /// A new client, resuming after `last_id` when it gives one.
    pub fn subscribe(&self, last_id: Option<u64>) -> Subscription {
        let ring = lock(&self.0.ring);
        let receiver = self.0.sender.subscribe();
        let Some(last_id) = last_id else { return Subscription { missed: false, backlog: Vec::new(), receiver } };
        let oldest_kept = ring.events.front().map_or(ring.last_id + 1, |e| e.id);
        // An id past the newest is from an earlier run of control: its events are gone too.
        let missed = last_id + 1 < oldest_kept || last_id > ring.last_id;
        let backlog =
            if missed { Vec::new() } else { ring.events.iter().filter(|e| e.id > last_id).cloned().collect() };
        Subscription { missed, backlog, receiver }
    }

    /// The talk on every line talked on since control started, as of `now`.
    pub fn talk(&self, now: Instant) -> Vec<LineTalk> {
        self.0.talk.lines(now)
    }

    pub fn stats(&self) -> EventStats {
        EventStats {
            clients: self.0.clients.load(Ordering::Relaxed),
            clients_cut: self.0.clients_cut.load(Ordering::Relaxed),
            last_id: lock(&self.0.ring).last_id,
        }
    }

    /// The SSE stream of `subscription`: `reset` if the client missed events, the backlog, then
    /// live events; `overflow` and the end if the client falls [`CLIENT_BUFFER`] events behind.
    pub fn stream(&self, subscription: Subscription) -> impl Stream<Item = Result<sse::Event, Infallible>> + use<> {
        let Subscription { missed, backlog, receiver } = subscription;
        let (sender, mut events) = mpsc::channel(CLIENT_BUFFER);
        let cut = Arc::new(AtomicBool::new(false));
        tokio::spawn(pump(receiver, sender, Arc::clone(&cut), Arc::clone(&self.0)));
        let reset = missed.then(|| {
            Ok(sse::Event::default().event("reset").data(r#"{"reason":"events were missed: read the state again"}"#))
        });
        let backlog = backlog.into_iter().map(|e| Ok(e.sse()));
        let live = futures_util::stream::poll_fn(move |cx| events.poll_recv(cx)).map(|e: Published| Ok(e.sse()));
        let overflow =
            futures_util::stream::once(async move { cut.load(Ordering::Relaxed) }).filter_map(|cut| async move {
                cut.then(|| {
                    Ok(sse::Event::default().event("overflow").data(r#"{"reason":"the client read too slowly"}"#))
                })
            });
        futures_util::stream::iter(reset.into_iter().chain(backlog)).chain(live).chain(overflow)
    }
}

/// Moves events from the bus to one client's buffer until the client goes or falls behind.
async fn pump(
    bus: broadcast::Receiver<Published>,
    client: mpsc::Sender<Published>,
    cut: Arc<AtomicBool>,
    inner: Arc<Inner>,
) {
    // Counted here, not as the broadcast's receivers: control's own watchers (the journal, the
    // panels' session streams) hold receivers too.
    inner.clients.fetch_add(1, Ordering::Relaxed);
    relay(bus, &client, &cut, &inner).await;
    inner.clients.fetch_sub(1, Ordering::Relaxed);
}

async fn relay(
    mut bus: broadcast::Receiver<Published>,
    client: &mpsc::Sender<Published>,
    cut: &AtomicBool,
    inner: &Inner,
) {
    loop {
        let event = tokio::select! {
            () = client.closed() => return,
            event = bus.recv() => event,
        };
        let full = match event {
            Ok(event) => client.try_send(event).is_err_and(|e| matches!(e, mpsc::error::TrySendError::Full(_))),
            Err(broadcast::error::RecvError::Lagged(_)) => true,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if full {
            cut.store(true, Ordering::Relaxed);
            inner.clients_cut.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(buffer = CLIENT_BUFFER, "an event stream client fell too far behind: its stream is cut");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed(what: &str) -> LiveEvent {
        LiveEvent::ConfigChanged { what: what.into() }
    }

    fn ids(subscription: &Subscription) -> Vec<u64> {
        subscription.backlog.iter().map(|e| e.id).collect()
    }

    #[test]
    fn events_are_numbered_and_serialized_with_their_type() {
        let bus = EventBus::default();
        let mut live = bus.subscribe(None).receiver;
        bus.publish(&changed("create group A"));
        let event = live.try_recv().expect("sent");
        assert_eq!((event.id, event.name), (1, "configChanged"));
        assert_eq!(&*event.data, r#"{"type":"configChanged","what":"create group A"}"#);
        let joined = LiveEvent::UserJoined { identity: "a-1".into(), username: "A".into(), group_id: "x".into() };
        bus.publish(&joined);
        let event = live.try_recv().expect("sent");
        assert_eq!(event.name, "userJoined");
        assert_eq!(&*event.data, r#"{"type":"userJoined","identity":"a-1","username":"A","groupId":"x"}"#);
    }

    #[test]
    fn only_what_may_change_a_panel_s_people_wakes_the_panels() {
        let bus = EventBus::default();
        let mut live = bus.watch();
        let talking =
            |group: &str| LiveEvent::Talking { identity: "a-1".into(), username: "A".into(), group_id: group.into() };
        for event in [talking("stage"), talking("direct-0a1b"), changed("x")] {
            bus.publish(&event);
        }
        let wakes: Vec<bool> = (0..3).map(|_| live.try_recv().expect("sent").changes_people()).collect();
        assert_eq!(wakes, [false, true, true], "talk on a group's line changes no one's people");
    }

    #[test]
    fn every_event_is_named_by_its_type() {
        let who = || ("a-1".to_owned(), "A".to_owned(), "x".to_owned());
        let (identity, username, group_id) = who();
        let talking = LiveEvent::Talking { identity, username, group_id };
        let (identity, username, group_id) = who();
        let stopped = LiveEvent::StoppedTalking { identity, username, group_id };
        let janus = LiveEvent::JanusState { state: JanusState::Down, message: "unreachable".into() };
        let bridge = LiveEvent::BridgeState { state: BridgeViewState::Absent, message: String::new() };
        let log = LiveEvent::Log { level: "warn".into(), message: "m".into(), source: "s".into() };
        for event in [talking, stopped, janus, bridge, log, changed("c")] {
            let json = serde_json::to_value(&event).expect("json");
            assert_eq!(json["type"], event.name(), "{json}");
        }
    }

    #[test]
    fn resume_gives_what_came_after_the_last_id() {
        let bus = EventBus::default();
        for i in 0..5 {
            bus.publish(&changed(&i.to_string()));
        }
        let resumed = bus.subscribe(Some(2));
        assert!(!resumed.missed);
        assert_eq!(ids(&resumed), [3, 4, 5]);
        let current = bus.subscribe(Some(5));
        assert!(!current.missed && current.backlog.is_empty());
        assert!(bus.subscribe(Some(9)).missed, "an id from an earlier run");
    }

    #[test]
    fn resume_past_the_ring_says_so() {
        let bus = EventBus::default();
        for i in 0..RING + 10 {
            bus.publish(&changed(&i.to_string()));
        }
        let oldest = (RING + 10 - RING + 1) as u64;
        let just_in = bus.subscribe(Some(oldest - 1));
        assert!(!just_in.missed);
        assert_eq!(just_in.backlog.len(), RING);
        assert!(bus.subscribe(Some(oldest - 2)).missed);
    }

    #[tokio::test]
    async fn a_client_that_does_not_read_is_cut_and_counted_and_others_go_on() {
        let bus = EventBus::default();
        let slow = bus.stream(bus.subscribe(None));
        let mut fast = Box::pin(bus.stream(bus.subscribe(None)));
        for i in 0..CLIENT_BUFFER + 50 {
            bus.publish(&changed(&i.to_string()));
            // The fast client reads everything as it comes.
            assert!(fast.next().await.is_some());
            tokio::task::yield_now().await;
        }
        let cut = async {
            while bus.stats().clients_cut == 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), cut).await.expect("the slow client is cut");
        // The slow client gets what its buffer held, then `overflow`, then the end.
        let all: Vec<_> = slow.collect().await;
        assert_eq!(all.len(), CLIENT_BUFFER + 1);
        let last = format!("{:?}", all.last().expect("events"));
        assert!(last.contains("overflow"), "{last}");
        assert_eq!(bus.stats().clients, 1, "the fast client only");
    }
}
