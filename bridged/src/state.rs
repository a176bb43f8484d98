//! What bridged reports: written by the branches, the pipeline's bus and `Apply`, read by
//! `Status()` and by the D-Bus notifier (which emits `StatusChanged` and `PropertiesChanged`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use partyline_shared::bridge::{BranchState, BranchStatus, BridgeState, Status};
use tokio::sync::{Notify, mpsc};

/// Level reported before the first measurement, and for silence.
pub const SILENCE_DB: f64 = -100.0;

/// Counters a branch's pad probes and the `level` element update from streaming threads.
#[derive(Debug)]
pub struct BranchStats {
    pub sent: AtomicU64,
    pub received: AtomicU64,
    level_bits: AtomicU64,
}

impl Default for BranchStats {
    fn default() -> Self {
        BranchStats {
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            level_bits: AtomicU64::new(SILENCE_DB.to_bits()),
        }
    }
}

impl BranchStats {
    pub fn set_level(&self, db: f64) {
        let db = if db.is_finite() { db.clamp(SILENCE_DB, 0.0) } else { SILENCE_DB };
        self.level_bits.store(db.to_bits(), Ordering::Relaxed);
    }

    pub fn level(&self) -> f64 {
        f64::from_bits(self.level_bits.load(Ordering::Relaxed))
    }
}

#[derive(Debug)]
struct Branch {
    room: String,
    state: BranchState,
    participant_id: String,
    last_error: String,
    stats: Arc<BranchStats>,
}

/// What the GStreamer bus needs to reach a branch: its counters and its fault channel.
#[derive(Debug, Clone)]
pub struct Tap {
    pub stats: Arc<BranchStats>,
    pub faults: mpsc::UnboundedSender<String>,
}

#[derive(Debug, Default)]
struct Inner {
    generation: u64,
    has_users: bool,
    pipeline_error: Option<String>,
    branches: BTreeMap<String, Branch>,
    /// Branch bins by element name (`branch:NAME`).
    taps: HashMap<String, Tap>,
}

/// The whole reported state, shared by every task.
#[derive(Debug, Default)]
pub struct Shared {
    inner: Mutex<Inner>,
    /// Signalled on every change that `StatusChanged` should report.
    pub changed: Notify,
}

/// What `StatusChanged` reports, compared to decide whether to emit.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub state: BridgeState,
    pub generation: u64,
    pub branches: Vec<(String, BranchState, String)>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn update(&self, f: impl FnOnce(&mut Inner)) {
        f(&mut self.lock());
        self.changed.notify_one();
    }

    pub fn set_plan(&self, generation: u64, has_users: bool) {
        self.update(|inner| {
            inner.generation = generation;
            inner.has_users = has_users;
        });
    }

    pub fn set_pipeline_error(&self, error: Option<String>) {
        self.update(|inner| inner.pipeline_error = error);
    }

    pub fn add_branch(&self, name: &str, room: &str) -> Arc<BranchStats> {
        let stats = Arc::new(BranchStats::default());
        let branch = Branch {
            room: room.to_owned(),
            state: BranchState::Connecting,
            participant_id: String::new(),
            last_error: String::new(),
            stats: stats.clone(),
        };
        self.update(|inner| {
            inner.branches.insert(name.to_owned(), branch);
        });
        stats
    }

    pub fn remove_branch(&self, name: &str) {
        self.update(|inner| {
            inner.branches.remove(name);
        });
    }

    /// Sets a branch's state; `error` replaces the last error when given.
    pub fn branch_state(&self, name: &str, state: BranchState, participant_id: &str, error: Option<&str>) {
        self.update(|inner| {
            if let Some(branch) = inner.branches.get_mut(name) {
                branch.state = state;
                participant_id.clone_into(&mut branch.participant_id);
                if let Some(error) = error {
                    error.clone_into(&mut branch.last_error);
                }
            }
        });
    }

    pub fn add_tap(&self, bin: &str, tap: Tap) {
        self.lock().taps.insert(bin.to_owned(), tap);
    }

    pub fn remove_tap(&self, bin: &str) {
        self.lock().taps.remove(bin);
    }

    pub fn tap(&self, bin: &str) -> Option<Tap> {
        self.lock().taps.get(bin).cloned()
    }

    fn state_of(inner: &Inner) -> (BridgeState, String) {
        if !inner.has_users {
            let why = if inner.generation == 0 { "no plan yet" } else { "the plan has no server audio users" };
            return (BridgeState::Idle, why.to_owned());
        }
        if let Some(error) = &inner.pipeline_error {
            return (BridgeState::Error, error.clone());
        }
        let retrying: Vec<&str> =
            inner.branches.iter().filter(|(_, b)| b.state == BranchState::Retrying).map(|(n, _)| n.as_str()).collect();
        if !retrying.is_empty() {
            return (BridgeState::Degraded, format!("retrying: {}", retrying.join(", ")));
        }
        let connecting = inner.branches.values().filter(|b| b.state == BranchState::Connecting).count();
        if connecting > 0 {
            return (BridgeState::Running, format!("{connecting} branch(es) connecting"));
        }
        (BridgeState::Running, format!("{} branch(es) joined", inner.branches.len()))
    }

    pub fn status(&self) -> Status {
        let inner = self.lock();
        let (state, message) = Shared::state_of(&inner);
        Status {
            state,
            generation: inner.generation,
            message,
            branches: inner
                .branches
                .iter()
                .map(|(name, b)| BranchStatus {
                    name: name.clone(),
                    room: b.room.clone(),
                    state: b.state,
                    participant_id: b.participant_id.clone(),
                    packets_sent: b.stats.sent.load(Ordering::Relaxed),
                    packets_received: b.stats.received.load(Ordering::Relaxed),
                    input_level_db: b.stats.level(),
                    last_error: b.last_error.clone(),
                })
                .collect(),
        }
    }

    pub fn summary(&self) -> Summary {
        let inner = self.lock();
        Summary {
            state: Shared::state_of(&inner).0,
            generation: inner.generation,
            branches: inner.branches.iter().map(|(n, b)| (n.clone(), b.state, b.last_error.clone())).collect(),
        }
    }

    pub fn state(&self) -> BridgeState {
        Shared::state_of(&self.lock()).0
    }

    pub fn generation(&self) -> u64 {
        self.lock().generation
    }
}
