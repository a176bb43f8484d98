//! The D-Bus object `/org/partyline/Bridge1`, interface `org.partyline.Bridge1` (the contract in
//! `partyline_shared::bridge`), and the task that turns state changes and log lines into signals.

use std::sync::Arc;

use partyline_shared::bridge::{BridgeError, BridgeState, OBJECT_PATH, Plan, Status};
use tokio::sync::mpsc;
use zbus::object_server::SignalEmitter;

use crate::logbus::LogLine;
use crate::player::Player;

/// The served object.
#[derive(Debug)]
pub struct BridgeService {
    player: Arc<Player>,
}

impl BridgeService {
    pub fn new(player: Arc<Player>) -> BridgeService {
        BridgeService { player }
    }
}

#[zbus::interface(name = "org.partyline.Bridge1")]
impl BridgeService {
    /// Applies `plan` (only its difference from the plan in force) and returns its generation.
    async fn apply(&self, plan: Plan) -> Result<u64, BridgeError> {
        self.player.apply(plan).await
    }

    /// The whole status, with every branch.
    async fn status(&self) -> Result<Status, BridgeError> {
        Ok(self.player.board().status())
    }

    /// `idle`, `running`, `degraded` or `error`.
    #[zbus(property)]
    async fn state(&self) -> BridgeState {
        self.player.board().state()
    }

    /// Generation of the plan in force.
    #[zbus(property)]
    async fn generation(&self) -> u64 {
        self.player.board().generation()
    }

    /// The state or a branch changed.
    #[zbus(signal)]
    async fn status_changed(emitter: &SignalEmitter<'_>, state: BridgeState, generation: u64) -> zbus::Result<()>;

    /// One of bridged's log lines (level, source, message).
    #[zbus(signal)]
    async fn log_entry(emitter: &SignalEmitter<'_>, level: &str, source: &str, message: &str) -> zbus::Result<()>;

    /// The card started or stopped talking in `room` (the voice activity of the group's send).
    #[zbus(signal)]
    async fn talking(emitter: &SignalEmitter<'_>, room: &str, talking: bool) -> zbus::Result<()>;
}

/// Emits `StatusChanged` (and `PropertiesChanged` for `State` and `Generation`) whenever the
/// summary changes, `Talking` for every change of the card's voice activity, and `LogEntry` for
/// every forwarded log line. Runs until the connection ends.
pub async fn notify(connection: zbus::Connection, player: Arc<Player>, mut logs: mpsc::Receiver<LogLine>) {
    let iface = match connection.object_server().interface::<_, BridgeService>(OBJECT_PATH).await {
        Ok(iface) => iface,
        Err(error) => {
            tracing::error!("D-Bus notifier: {error}");
            return;
        }
    };
    let board = player.board().clone();
    let mut last = board.summary();
    loop {
        tokio::select! {
            () = board.changed.notified() => {
                let now = board.summary();
                if now == last {
                    continue;
                }
                let emitter = iface.signal_emitter();
                let service = iface.get().await;
                if now.state != last.state {
                    let _ = service.state_changed(emitter).await;
                }
                if now.generation != last.generation {
                    let _ = service.generation_changed(emitter).await;
                }
                let _ = BridgeService::status_changed(emitter, now.state, now.generation).await;
                last = now;
            }
            () = board.talk_news.notified() => {
                for (room, talking) in board.take_talk() {
                    let _ = BridgeService::talking(iface.signal_emitter(), &room, talking).await;
                }
            }
            line = logs.recv() => {
                let Some(line) = line else { continue };
                let _ = BridgeService::log_entry(iface.signal_emitter(), line.level, &line.source, &line.message).await;
            }
        }
    }
}
