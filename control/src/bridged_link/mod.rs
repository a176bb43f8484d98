//! The BridgeManager: tells partyline-bridged what to play, over D-Bus.
//!
//! It builds a [`Plan`] from the config in force and calls `Apply` whenever the plan changes
//! (config events) and whenever bridged (re)appears on the bus (NameOwnerChanged), since a
//! restarted bridged starts with nothing. It keeps bridged's status for `/admin/stats` and
//! forwards bridged's log lines into control's log. bridged keeps playing its last plan while
//! control is away.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use partyline_shared::Config;
use partyline_shared::backoff::Backoff;
use partyline_shared::bridge::{
    Aes67Status, BUS_NAME, BranchState, BranchStatus, BridgeProxy, BusChoice, CardStatus, ParticipantStatus, Plan,
    PlanAes67, PlanGroup, PlanIfb, PlanUser, Status,
};
use partyline_shared::config::{Aes67Config, Channel, Ifb, IfbDim, IfbProgram, MediaEngine, Transport};
use partyline_shared::sync::lock;
use serde::Serialize;
use tokio::sync::Notify;
use tokio::sync::broadcast::error::TryRecvError;

use crate::config::ConfigManager;
use crate::events::{BridgeViewState, EventBus, LiveEvent};
use crate::janus::{Janus, JanusError};

mod applies;
pub use applies::Applies;

/// How often the status is refreshed without a signal (bridged signals state changes only; the
/// branches' packet counters and input levels move all the time, and `/admin/stats` shows them
/// at most this old), and the retry pace of a refused plan.
const REFRESH: Duration = Duration::from_secs(1);
/// The pauses between attempts to connect to the bus, while it is missing.
const BUS_RETRY: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(5));

/// bridged as `/admin/stats` shows it.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BridgeView {
    pub state: BridgeViewState,
    /// Generation of the plan bridged plays.
    pub generation: u64,
    pub message: String,
    /// One per server audio user.
    pub branches: Vec<BranchStatus>,
    /// The card's participant in each room that has server audio users.
    pub participants: Vec<ParticipantStatus>,
    /// AES67 (`/admin/aes67` shows it: the SAP list is long for `/admin/stats`).
    #[serde(skip)]
    pub aes67: Aes67Status,
    /// The card's playback faults and drift (`/metrics` shows them).
    #[serde(skip)]
    pub card: CardStatus,
}

impl BridgeView {
    fn from_status(status: Status) -> BridgeView {
        BridgeView {
            state: status.state.into(),
            generation: status.generation,
            message: status.message,
            branches: status.branches,
            participants: status.participants,
            aes67: status.aes67,
            card: status.card,
        }
    }

    fn without_bridge(state: BridgeViewState, message: String) -> BridgeView {
        BridgeView { state, message, ..BridgeView::default() }
    }
}

/// The plan for the config in force: the card, Janus, one participant per group with server
/// audio users, and the users.
pub fn build_plan(config: &Config, janus: &Janus) -> Result<Plan, JanusError> {
    let device = &config.audio.device;
    let groups = janus
        .card_participants(config)?
        .into_iter()
        .map(|p| PlanGroup {
            // On Janus the admin's mute is Janus's (`Janus::mute_user`).
            muted: config.media.engine == MediaEngine::Bridged && janus.card_muted(&p.group),
            room: p.group,
            identity: p.identity,
            token: p.token,
            display: p.display,
            bitrate_kbps: p.bitrate_kbps,
        })
        .collect();
    let users = config
        .server_audio_users
        .iter()
        .map(|user| PlanUser {
            name: user.name.clone(),
            room: user.group.clone(),
            input_channel: user.input_channel.get(),
            output_channel: user.output_channel.map(Channel::get),
            ifb: user.ifb.as_ref().map(plan_ifb),
        })
        .collect();
    Ok(Plan {
        input_device: device.input_device_id.clone().unwrap_or_default(),
        output_device: device.output_device_id.clone().unwrap_or_default(),
        device_sample_rate: device.sample_rate.get(),
        // The pool's first node: the one beside bridged, which holds every group's room.
        janus_url: config.janus.pool().swap_remove(0).url,
        // On partyline's own rooms, bridged hosts them: the card meets them there.
        transport: match config.media.engine {
            MediaEngine::Bridged => Transport::Rooms,
            MediaEngine::Janus => config.bridge.transport,
        },
        ice_addresses: config.bridge.ice_addresses.iter().map(ToString::to_string).collect(),
        jitter_buffer_ms: config.bridge.jitter_buffer_ms.get(),
        groups,
        users,
        aes67: plan_aes67(&config.audio.aes67),
    })
}

/// AES67 as bridged takes it: `null`s as empty strings.
fn plan_aes67(aes67: &Aes67Config) -> PlanAes67 {
    let send = &aes67.send;
    PlanAes67 {
        interface: aes67.interface.clone().unwrap_or_default(),
        ptp_domain: aes67.ptp_domain,
        // Checked with the config: a list that does not read never reaches here.
        ptp_grandmasters: aes67.grandmaster_ids().unwrap_or_default(),
        receive_sdp: aes67.receive_sdp.clone().unwrap_or_default(),
        receive_latency_ms: aes67.receive_latency_ms,
        send_name: send.name.clone(),
        send_address: send.address.map(|a| a.to_string()).unwrap_or_default(),
        send_range: send.range.clone(),
        send_port: send.port,
        send_channels: send.channels,
        send_ttl: send.ttl,
    }
}

/// An IFB as bridged takes it: the program's source and the dip spelled out.
fn plan_ifb(ifb: &Ifb) -> PlanIfb {
    let (program_channel, program_room) = match &ifb.program {
        IfbProgram::Input(channel) => (Some(channel.get()), String::new()),
        IfbProgram::Group(group) => (None, group.clone()),
    };
    let dim_db = match ifb.dim_db {
        IfbDim::Db(db) => Some(db),
        IfbDim::Cut => None,
    };
    PlanIfb { program_channel, program_room, interrupt_room: ifb.interrupt.clone(), dim_db }
}

#[derive(Debug)]
pub struct BridgeManager {
    config: Arc<ConfigManager>,
    janus: Arc<Janus>,
    bus: BusChoice,
    view: Mutex<BridgeView>,
    /// Whether bridged owns its name on the bus now.
    present: AtomicBool,
    /// The plan bridged last accepted; `None` forces the next push.
    applied: tokio::sync::Mutex<Option<Plan>>,
    wake: Notify,
    /// Where changes of bridged's state are published.
    events: EventBus,
    /// The plans applied, for `/metrics`.
    pub applies: Applies,
}

impl BridgeManager {
    pub fn new(config: Arc<ConfigManager>, janus: Arc<Janus>, bus: BusChoice, events: EventBus) -> Arc<BridgeManager> {
        let view = BridgeView::without_bridge(BridgeViewState::Unknown, String::new());
        Arc::new(BridgeManager {
            config,
            janus,
            bus,
            view: Mutex::new(view),
            present: AtomicBool::new(false),
            applied: tokio::sync::Mutex::new(None),
            wake: Notify::new(),
            events,
            applies: Applies::default(),
        })
    }

    pub fn view(&self) -> BridgeView {
        lock(&self.view).clone()
    }

    /// Pushes the plan again now if it changed (an admin's mute of the card on the rooms).
    pub fn replan(&self) {
        self.wake.notify_one();
    }

    /// Whether bridged is on the bus now.
    pub fn is_present(&self) -> bool {
        self.present.load(Ordering::Relaxed)
    }

    /// bridged's status, as read from it.
    pub(crate) fn take_status(&self, status: Status) {
        self.set_view(BridgeView::from_status(status));
    }

    fn set_view(&self, view: BridgeView) {
        let on_rooms = self.config.current().media.engine == MediaEngine::Bridged;
        let in_rooms: Vec<&str> =
            view.participants.iter().filter(|p| p.state == BranchState::Joined).map(|p| p.room.as_str()).collect();
        self.janus.cards_follow_engine(on_rooms.then_some(in_rooms.as_slice()));
        let mut current = lock(&self.view);
        if (current.state, &current.message) != (view.state, &view.message) {
            self.events.publish(&LiveEvent::BridgeState { state: view.state, message: view.message.clone() });
        }
        let (ptp, was) = (&view.aes67.ptp, &current.aes67.ptp);
        if (ptp.state, &ptp.grandmaster) != (was.state, &was.grandmaster) {
            self.events.publish(&LiveEvent::PtpState { state: ptp.state, grandmaster: ptp.grandmaster.clone() });
        }
        *current = view;
    }

    /// Connects to the bus and follows bridged forever, reconnecting when the bus goes.
    pub async fn run(self: Arc<Self>) {
        let mut retry = BUS_RETRY;
        loop {
            let error = match self.bus.builder() {
                Ok(builder) => match builder.build().await {
                    Ok(connection) => {
                        retry.reset();
                        self.follow(&connection).await.err()
                    }
                    Err(e) => Some(e),
                },
                Err(e) => Some(e),
            };
            self.present.store(false, Ordering::Relaxed);
            let message = error.map_or_else(|| "the bus connection ended".to_owned(), |e| e.to_string());
            if self.view().state != BridgeViewState::Unreachable {
                tracing::warn!(bus = %self.bus, error = message, "no D-Bus connection for the bridge; retrying");
            }
            self.set_view(BridgeView::without_bridge(BridgeViewState::Unreachable, format!("{}: {message}", self.bus)));
            tokio::time::sleep(retry.next_pause()).await;
        }
    }

    async fn follow(&self, connection: &zbus::Connection) -> zbus::Result<()> {
        let proxy = BridgeProxy::new(connection).await?;
        let dbus = zbus::fdo::DBusProxy::new(connection).await?;
        let mut owners = dbus.receive_name_owner_changed_with_args(&[(0, BUS_NAME)]).await?;
        let mut changes = proxy.receive_status_changed().await?;
        let mut log_lines = proxy.receive_log_entry().await?;
        let mut talking = proxy.receive_talking().await?;
        let mut events = self.config.subscribe();
        tracing::info!(bus = %self.bus, "following partyline-bridged on D-Bus");
        let bus_name = zbus::names::BusName::try_from(BUS_NAME).map_err(zbus::Error::from)?;
        // The owner's unique name: a NameOwnerChanged already queued for the owner found here
        // (bridged starting while control subscribes) must not send the plan a second time.
        let mut owner = dbus.get_name_owner(bus_name).await.ok().map(|name| name.to_string());
        let present = owner.is_some();
        // A bridged without a plan holds no participant either: it may have been restarted
        // while control was away, after a predecessor died in the rooms.
        if present && proxy.status().await.is_ok_and(|s| s.generation == 0) {
            self.clear_leftovers().await;
        }
        self.appeared(&proxy, present).await;
        // An interval, not a sleep in the select: a sleep would restart at every other event,
        // and a steady stream of them (config writes, log lines) would starve the refresh.
        let mut refresh = tokio::time::interval(REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                Some(change) = owners.next() => {
                    let new_owner = change.args().ok().and_then(|a| a.new_owner().as_ref().map(ToString::to_string));
                    if new_owner == owner {
                        continue;
                    }
                    owner = new_owner;
                    if owner.is_some() {
                        self.clear_leftovers().await;
                    }
                    self.appeared(&proxy, owner.is_some()).await;
                }
                Some(_) = changes.next() => self.refresh(&proxy).await,
                Some(line) = log_lines.next() => forward_log_line(&line),
                Some(signal) = talking.next() => {
                    if let Ok(args) = signal.args() {
                        self.janus.card_talking(args.room(), *args.talking());
                    }
                }
                event = events.recv() => {
                    if matches!(event, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        return Ok(());
                    }
                    // The plan is built from the config as it is now: one push covers every
                    // write so far.
                    while !matches!(events.try_recv(), Err(TryRecvError::Empty | TryRecvError::Closed)) {}
                    self.push(&proxy, false).await;
                }
                () = self.wake.notified() => self.push(&proxy, false).await,
                _ = refresh.tick() => {
                    // Also retries a push that failed (Janus secrets arriving, a refused plan).
                    self.push(&proxy, false).await;
                    self.refresh(&proxy).await;
                }
            }
        }
    }

    /// Before a plan goes to a bridged that holds no participant (a new process): what a dead
    /// predecessor left in the rooms would block its joins until Janus times it out.
    async fn clear_leftovers(&self) {
        if let Err(e) = self.janus.kick_card_participants().await {
            tracing::warn!(error = %e, "could not clear the rooms of a previous partyline-bridged");
        }
    }

    /// bridged appeared (send it the plan: it may have restarted with nothing) or vanished.
    async fn appeared(&self, proxy: &BridgeProxy<'_>, present: bool) {
        self.present.store(present, Ordering::Relaxed);
        if present {
            tracing::info!("partyline-bridged is on the bus: sending the plan");
            self.push(proxy, true).await;
        } else {
            tracing::warn!("partyline-bridged is not on the bus");
            *self.applied.lock().await = None;
            self.set_view(BridgeView::without_bridge(
                BridgeViewState::Absent,
                "partyline-bridged is not running".into(),
            ));
        }
    }

    /// Sends the plan if it changed since bridged last accepted one (or always, `force`).
    async fn push(&self, proxy: &BridgeProxy<'_>, force: bool) {
        if !self.is_present() {
            return;
        }
        let config = self.config.current();
        let plan = match build_plan(&config, &self.janus) {
            Ok(plan) => plan,
            Err(e) => {
                self.set_view(BridgeView::without_bridge(BridgeViewState::Unconfigured, e.to_string()));
                return;
            }
        };
        let mut applied = self.applied.lock().await;
        if !force && applied.as_ref() == Some(&plan) {
            return;
        }
        // A new server audio user's token goes to Janus before bridged hears of the user:
        // otherwise its first request races the reconcile pass and is refused. Janus down:
        // the plan goes anyway, bridged retries its joins.
        if let Err(e) = self.janus.admit_server_users(&config).await {
            tracing::debug!(error = %e, "server audio users' tokens not registered before the plan");
        }
        let started = std::time::Instant::now();
        let outcome = proxy.apply(&plan).await;
        self.applies.count(outcome.is_ok(), started.elapsed());
        match outcome {
            Ok(generation) => {
                tracing::info!(generation, users = plan.users.len(), "bridge plan applied");
                *applied = Some(plan);
            }
            Err(e) => {
                tracing::error!(error = %e, "partyline-bridged refused the plan");
                *applied = None;
            }
        }
        drop(applied);
        self.refresh(proxy).await;
    }

    async fn refresh(&self, proxy: &BridgeProxy<'_>) {
        if !self.is_present() {
            return;
        }
        match proxy.status().await {
            Ok(status) => self.take_status(status),
            Err(e) => tracing::warn!(error = %e, "cannot read partyline-bridged's status"),
        }
    }
}

/// Puts one of bridged's log lines into this process's log (and so the log ring).
fn forward_log_line(signal: &partyline_shared::bridge::LogEntry) {
    let Ok(args) = signal.args() else { return };
    let (source, message) = (args.source(), args.message());
    match *args.level() {
        "error" => tracing::error!(target: "partyline_bridged", source, "{message}"),
        "warn" => tracing::warn!(target: "partyline_bridged", source, "{message}"),
        "info" => tracing::info!(target: "partyline_bridged", source, "{message}"),
        _ => tracing::debug!(target: "partyline_bridged", source, "{message}"),
    }
}

#[cfg(test)]
mod tests {
    use partyline_shared::bridge::BridgeState;

    use super::*;

    #[test]
    fn views_carry_bridged_status() {
        let status = Status {
            state: BridgeState::Running,
            generation: 3,
            message: String::new(),
            branches: vec![partyline_shared::bridge::BranchStatus { name: "FOH".into(), ..Default::default() }],
            participants: vec![partyline_shared::bridge::ParticipantStatus {
                room: "stage".into(),
                display: "FOH".into(),
                ..Default::default()
            }],
            aes67: Aes67Status { send_sdp: "v=0".into(), ..Aes67Status::default() },
            card: CardStatus::default(),
        };
        let view = BridgeView::from_status(status);
        assert_eq!(view.aes67.send_sdp, "v=0");
        assert_eq!((view.state, view.generation, view.branches.len()), (BridgeViewState::Running, 3, 1));
        assert_eq!((view.participants[0].room.as_str(), view.participants[0].display.as_str()), ("stage", "FOH"));
        assert_eq!(serde_json::to_value(&view).expect("json")["state"], "running", "the API's names");
        assert_eq!(BridgeViewState::Unconfigured.to_string(), "unconfigured");
    }
}
