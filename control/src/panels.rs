//! Remote control of the crew's panels: what a control surface asks of a panel through its
//! panel key (`/api/panel/{key}`) goes to that panel's own session stream as a command, the
//! panel applies it as if pressed on screen and reports its state back; control keeps each
//! panel's last report, so that a surface can read the panel (`GET /api/panel/{key}`) and
//! follow it (`GET /api/panel/{key}/events`).
//!
//! The browser is the one that applies a command (it owns the microphone and the room's
//! mute), so a command answers once the panel has reported it applied ([`Panels::command`]).
//! A talk held on by a surface (`on`) is released after `crew.maxRemoteTalkSeconds` without a
//! word from that surface (`crate::api::panel`); a latched talk (`toggle`) stays.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use partyline_shared::sync::lock;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, oneshot};
use utoipa::ToSchema;

/// How long a command waits for its panel to report it applied.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// Pushes a slow panel stream may fall behind by before it skips some.
const BACKLOG: usize = 256;

/// A panel's talk key on one line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TalkState {
    #[default]
    Off,
    /// Held on the panel (pointer or key).
    Momentary,
    /// Latched (a tap on the panel, or `toggle` from a surface).
    Latched,
    /// Held on by a control surface (`on`): released when the surface goes silent.
    Remote,
}

/// One line of a panel as the panel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LineReport {
    pub group_id: String,
    /// Heard (listen on, and the line has listen).
    pub listen: bool,
    /// 0 to 100.
    pub volume: u8,
    pub talk: TalkState,
    /// Someone else talks on the line.
    #[serde(default)]
    pub active: bool,
    /// Who talks on it.
    #[serde(default)]
    pub talkers: Vec<String>,
    /// A program line the panel dims now (someone talks to it).
    #[serde(default)]
    pub dimmed: bool,
}

/// Something control sends a panel on its session stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    /// Echoed in the panel's report (`ack`); absent on commands nobody waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub group_id: String,
    /// `on`, `off` or `toggle`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub talk: Option<Switch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<Switch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<u8>,
    /// Why control (not a surface) sends it: `surface-silent` (the release of a remote talk),
    /// `admin` (a talk forced off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

impl Command {
    pub fn new(group_id: &str) -> Command {
        Command { id: None, group_id: group_id.to_owned(), talk: None, listen: None, volume: None, reason: None }
    }
}

/// A key's state asked for by a surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    On,
    Off,
    Toggle,
}

/// The admin's hold on one of a panel's lines, as the panel is told it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminState {
    pub group_id: String,
    /// The admin muted this user on this line.
    pub muted_by_admin: bool,
    /// The admin muted the whole line.
    pub line_muted: bool,
}

/// What goes to one panel's session stream.
#[derive(Debug, Clone)]
pub enum Push {
    Command(Command),
    Admin(AdminState),
}

#[derive(Debug)]
pub struct Panels {
    /// To the panels' session streams, each keeping its own identity's.
    pushes: broadcast::Sender<(String, Push)>,
    /// Identities whose panel (report, admin state, call) changed, for the surfaces' streams.
    changes: broadcast::Sender<String>,
    reports: Mutex<HashMap<String, Vec<LineReport>>>,
    /// Commands waiting for their panel's report, by id.
    waiting: Mutex<HashMap<u64, oneshot::Sender<()>>>,
    next_id: AtomicU64,
    /// Open session streams, per identity: a panel with none cannot be commanded.
    streams: Mutex<HashMap<String, usize>>,
    /// When each panel's surface last sent anything with its key.
    surface_seen: Mutex<HashMap<String, Instant>>,
    /// Lines whose remote talk is being watched for a silent surface: (identity, group).
    held: Mutex<HashSet<(String, String)>>,
}

impl Default for Panels {
    fn default() -> Self {
        Panels {
            pushes: broadcast::channel(BACKLOG).0,
            changes: broadcast::channel(BACKLOG).0,
            reports: Mutex::default(),
            waiting: Mutex::default(),
            next_id: AtomicU64::new(1),
            streams: Mutex::default(),
            surface_seen: Mutex::default(),
            held: Mutex::default(),
        }
    }
}

/// Why a command did not get applied.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("the panel is not connected to control (no session stream): nothing was changed")]
    Offline,
    #[error("the panel did not report the command applied within {} ms", COMMAND_TIMEOUT.as_millis())]
    NoAnswer,
}

impl Panels {
    pub fn subscribe_pushes(&self) -> broadcast::Receiver<(String, Push)> {
        self.pushes.subscribe()
    }

    pub fn subscribe_changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }

    /// A session stream of `identity` opened.
    pub fn open_stream(&self, identity: &str) {
        *lock(&self.streams).entry(identity.to_owned()).or_default() += 1;
        self.changed(identity);
    }

    /// A session stream of `identity` closed.
    pub fn close_stream(&self, identity: &str) {
        let mut streams = lock(&self.streams);
        if let Some(count) = streams.get_mut(identity) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                streams.remove(identity);
            }
        }
        drop(streams);
        self.changed(identity);
    }

    /// Whether `identity`'s panel has a session stream open (it can be commanded).
    pub fn online(&self, identity: &str) -> bool {
        lock(&self.streams).contains_key(identity)
    }

    pub fn changed(&self, identity: &str) {
        // Nobody following is fine.
        let _ = self.changes.send(identity.to_owned());
    }

    /// Sends `push` to `identity`'s panel, waiting for nobody.
    pub fn push(&self, identity: &str, push: Push) {
        let _ = self.pushes.send((identity.to_owned(), push));
    }

    /// Sends `command` to `identity`'s panel and waits until the panel reports it applied.
    pub async fn command(&self, identity: &str, command: Command) -> Result<(), CommandError> {
        self.command_within(identity, command, COMMAND_TIMEOUT).await
    }

    async fn command_within(&self, identity: &str, mut command: Command, within: Duration) -> Result<(), CommandError> {
        if !self.online(identity) {
            return Err(CommandError::Offline);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (done, applied) = oneshot::channel();
        lock(&self.waiting).insert(id, done);
        command.id = Some(id);
        self.push(identity, Push::Command(command));
        let result = tokio::time::timeout(within, applied).await;
        lock(&self.waiting).remove(&id);
        match result {
            Ok(Ok(())) => Ok(()),
            _ => Err(CommandError::NoAnswer),
        }
    }

    /// A panel's report of its lines; `ack` the command it applied, if any.
    pub fn report(&self, identity: &str, lines: Vec<LineReport>, ack: Option<u64>) {
        let changed = {
            let mut reports = lock(&self.reports);
            let changed = reports.get(identity) != Some(&lines);
            reports.insert(identity.to_owned(), lines);
            changed
        };
        if let Some(done) = ack.and_then(|id| lock(&self.waiting).remove(&id)) {
            let _ = done.send(());
        }
        if changed {
            self.changed(identity);
        }
    }

    /// `identity`'s panel as it last reported it (empty before its first report).
    pub fn reported(&self, identity: &str) -> Vec<LineReport> {
        lock(&self.reports).get(identity).cloned().unwrap_or_default()
    }

    /// Its surface sent something with the panel key.
    pub fn surface_heard(&self, identity: &str) {
        lock(&self.surface_seen).insert(identity.to_owned(), Instant::now());
    }

    /// When its surface was last heard.
    pub fn surface_last_heard(&self, identity: &str) -> Option<Instant> {
        lock(&self.surface_seen).get(identity).copied()
    }

    /// Starts watching a remote talk on `group`; false if it is watched already.
    pub fn hold(&self, identity: &str, group: &str) -> bool {
        lock(&self.held).insert((identity.to_owned(), group.to_owned()))
    }

    pub fn unhold(&self, identity: &str, group: &str) {
        lock(&self.held).remove(&(identity.to_owned(), group.to_owned()));
    }

    /// Drops what is kept of the sessions for which `gone` is true (ended sessions).
    pub fn prune(&self, gone: impl Fn(&str) -> bool) {
        lock(&self.reports).retain(|identity, _| !gone(identity));
        lock(&self.surface_seen).retain(|identity, _| !gone(identity));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn line(talk: TalkState) -> LineReport {
        LineReport {
            group_id: "stage".into(),
            listen: true,
            volume: 80,
            talk,
            active: false,
            talkers: vec![],
            dimmed: false,
        }
    }

    #[tokio::test]
    async fn a_command_answers_once_its_panel_reports_it_applied() {
        let panels = Arc::new(Panels::default());
        assert!(matches!(panels.command("alice-1", Command::new("stage")).await, Err(CommandError::Offline)));
        panels.open_stream("alice-1");
        let mut pushes = panels.subscribe_pushes();
        let panel = {
            let panels = Arc::clone(&panels);
            tokio::spawn(async move {
                let (identity, push) = pushes.recv().await.expect("a push");
                let Push::Command(command) = push else { panic!("a command") };
                panels.report(&identity, vec![line(TalkState::Remote)], command.id);
            })
        };
        let command = Command { talk: Some(Switch::On), ..Command::new("stage") };
        panels.command("alice-1", command).await.expect("applied");
        panel.await.expect("panel");
        assert_eq!(panels.reported("alice-1"), [line(TalkState::Remote)]);
    }

    #[tokio::test]
    async fn a_panel_that_never_reports_times_the_command_out() {
        let panels = Panels::default();
        panels.open_stream("alice-1");
        let answer = panels.command_within("alice-1", Command::new("stage"), Duration::from_millis(50)).await;
        assert!(matches!(answer, Err(CommandError::NoAnswer)));
        assert!(lock(&panels.waiting).is_empty(), "the waiter is gone");
    }

    #[test]
    fn a_panel_is_online_while_a_stream_is_open() {
        let panels = Panels::default();
        panels.open_stream("alice-1");
        panels.open_stream("alice-1");
        panels.close_stream("alice-1");
        assert!(panels.online("alice-1"));
        panels.close_stream("alice-1");
        assert!(!panels.online("alice-1"));
    }
}
