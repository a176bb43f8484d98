//! The sessions control holds in partyline's rooms: by identity and by the rooms' session id.

use std::collections::HashMap;

/// A user's session in the rooms.
#[derive(Debug, Clone)]
pub(super) struct RoomsSession {
    pub(super) id: u64,
    /// The rooms of its m-lines, in the offer's order (a line's index is its place here; a
    /// stopped m-line's is empty).
    pub(super) rooms: Vec<String>,
    /// Its media is up (`SessionConnected`): a line added now is joined at once.
    pub(super) connected: bool,
}

/// The sessions control holds in the rooms, both ways.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    pub(super) by_identity: HashMap<String, RoomsSession>,
    pub(super) identity_of: HashMap<u64, String>,
}

impl Sessions {
    pub(super) fn insert(&mut self, identity: &str, session: RoomsSession) -> Option<RoomsSession> {
        self.identity_of.insert(session.id, identity.to_owned());
        let replaced = self.by_identity.insert(identity.to_owned(), session);
        if let Some(old) = &replaced {
            self.identity_of.remove(&old.id);
        }
        replaced
    }

    pub(super) fn remove_identity(&mut self, identity: &str) -> Option<RoomsSession> {
        let session = self.by_identity.remove(identity)?;
        self.identity_of.remove(&session.id);
        Some(session)
    }

    pub(super) fn remove_session(&mut self, id: u64) -> Option<(String, RoomsSession)> {
        let identity = self.identity_of.remove(&id)?;
        let session = self.by_identity.remove(&identity)?;
        Some((identity, session))
    }
}
