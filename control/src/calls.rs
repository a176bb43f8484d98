//! The call signal: a crew member presses Call on a line, and every panel on that line (and the
//! admin's user view) flashes it for [`CALL_SHOWN`]. Calls go out to the panels' event streams
//! through one broadcast channel; the latest call of each group is kept for the admin's view.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use partyline_shared::sync::lock;
use serde::Serialize;
use tokio::sync::broadcast;

/// How long a call shows.
pub const CALL_SHOWN: Duration = Duration::from_secs(5);
/// Calls a slow panel stream may fall behind by before it skips some (a call is a flash, not
/// a message that must arrive: a panel that lags that far has bigger problems).
const BACKLOG: usize = 64;

/// One call, as the panels' event stream sends it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    /// The line (group) called.
    pub group_id: String,
    /// The caller's name.
    pub from: String,
    /// The caller's participant identity.
    pub identity: String,
    /// RFC 3339, UTC.
    pub at: String,
}

#[derive(Debug)]
pub struct Calls {
    sender: broadcast::Sender<Call>,
    latest: Mutex<HashMap<String, Instant>>,
}

impl Default for Calls {
    fn default() -> Self {
        Self { sender: broadcast::channel(BACKLOG).0, latest: Mutex::new(HashMap::new()) }
    }
}

impl Calls {
    /// Sends `call` to every listening stream and remembers it for the admin's view.
    pub fn send(&self, call: Call) {
        lock(&self.latest).insert(call.group_id.clone(), Instant::now());
        // Nobody listening is fine: the admin's view still shows it.
        let _ = self.sender.send(call);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Call> {
        self.sender.subscribe()
    }

    /// Whether `group` was called within the last [`CALL_SHOWN`].
    pub fn is_calling(&self, group: &str) -> bool {
        let mut latest = lock(&self.latest);
        latest.retain(|_, at| at.elapsed() < CALL_SHOWN);
        latest.contains_key(group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_reaches_subscribers_and_shows_for_a_while() {
        let calls = Calls::default();
        let mut panel = calls.subscribe();
        assert!(!calls.is_calling("stage"));
        let call = Call { group_id: "stage".into(), from: "Alice".into(), identity: "alice-1".into(), at: "t".into() };
        calls.send(call);
        assert_eq!(panel.recv().await.map(|c| c.group_id).ok().as_deref(), Some("stage"));
        assert!(calls.is_calling("stage") && !calls.is_calling("foh"));
    }
}
