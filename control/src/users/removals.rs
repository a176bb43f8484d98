//! Removals from the registry, announced to whoever holds a crew member's connections (the
//! `/janus` proxy closes them), with why: the admin's disconnect keeps a panel out. A line
//! taken from a member who stays (the admin's removal, a direct line closed) is announced
//! apart, to whoever carries its media line by line (partyline's rooms).

use super::{User, UserKind, Users};

/// A crew member removed from the registry, as its `/janus` connection is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removal {
    pub identity: String,
    pub ending: Ending,
    /// The Janus node it was on.
    pub node: Option<String>,
}

/// A line taken from a crew member who keeps its other lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineRemoval {
    pub identity: String,
    pub group: String,
}

/// Why a crew member's session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It left, its token expired unused, its groups were deleted or its admission failed: a
    /// panel still there may join again by itself.
    Ended,
    /// Its Janus node was lost or removed: its panel joins again at once, on another node,
    /// with its panel key.
    Moved,
    /// The admin disconnected it (or took its last line): its panel must say so and stay out.
    /// Janus's kick event says the same, but on another connection than the admin's request,
    /// so the proxy's close may overtake it.
    Disconnected,
}

/// Where removals of crew members, and of their lines, are announced.
#[derive(Debug)]
pub(super) struct Removals {
    users: tokio::sync::broadcast::Sender<Removal>,
    lines: tokio::sync::broadcast::Sender<LineRemoval>,
}

impl Default for Removals {
    fn default() -> Self {
        // A burst larger than this makes a listener lag, and a lagging listener checks its
        // crew member in the registry instead.
        Removals { users: tokio::sync::broadcast::channel(1024).0, lines: tokio::sync::broadcast::channel(1024).0 }
    }
}

impl Users {
    /// Takes a crew member off a lost node: removed, its panel key kept for the panel's rejoin.
    /// Kept before the removal is announced: the panel, told `moved`, rejoins at once.
    pub fn move_off(&self, identity: &str) -> Option<User> {
        let user = self.get(identity)?;
        self.keep_for_resume(&user);
        let removed = self.remove(identity, Ending::Moved);
        if removed.is_none() {
            // Removed otherwise meanwhile (the admin's disconnect): nothing to resume.
            self.forget_resume(&user.token);
        }
        removed
    }

    /// The crew members removed from now on, whatever the reason (left, expired, disconnected,
    /// their groups gone).
    pub fn subscribe_removals(&self) -> tokio::sync::broadcast::Receiver<Removal> {
        self.removed.users.subscribe()
    }

    /// The lines taken from crew members who stay, from now on.
    pub fn subscribe_line_removals(&self) -> tokio::sync::broadcast::Receiver<LineRemoval> {
        self.removed.lines.subscribe()
    }

    pub(super) fn announce_line_removed(&self, user: &User, group: &str) {
        if user.kind == UserKind::Crew {
            let removal = LineRemoval { identity: user.identity.clone(), group: group.to_owned() };
            let _ = self.removed.lines.send(removal);
        }
    }

    pub(super) fn announce_removed(&self, user: &User, ending: Ending) {
        if user.kind == UserKind::Crew {
            // No listener (no proxy connection) is not an error.
            let removal = Removal { identity: user.identity.clone(), ending, node: user.node.clone() };
            let _ = self.removed.users.send(removal);
        }
    }
}
