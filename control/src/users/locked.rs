//! The registry, locked: the one way to the users, so that every change of the crew reaches
//! `crew.json` in order, and is on disk before the change is visible to its caller.

use std::collections::HashMap;

use partyline_shared::sync::lock;

use super::store::{CrewRecord, CrewStore, Ticket};
use super::{User, UserKind, Users};

/// The registry, locked. [`Registry::crew_changed`] hands the crew to the store (if any) while
/// the lock is held, so that snapshots queue in the order of the changes; once the lock is
/// released (the guard dropped), the change waits until its snapshot is on disk.
pub(super) struct Registry<'a> {
    /// `None` only while being dropped.
    users: Option<std::sync::MutexGuard<'a, HashMap<String, User>>>,
    store: Option<&'a CrewStore>,
    written: std::cell::Cell<Option<Ticket>>,
}

impl Registry<'_> {
    pub(super) fn crew_changed(&self) {
        if let Some(store) = self.store {
            let crew: Vec<CrewRecord> = self.values().filter(|u| u.kind == UserKind::Crew).map(User::record).collect();
            self.written.set(Some(store.enqueue(crew)));
        }
    }
}

impl Drop for Registry<'_> {
    fn drop(&mut self) {
        // Others may change the registry while this change is written (or written with theirs).
        drop(self.users.take());
        if let (Some(store), Some(ticket)) = (self.store, self.written.take()) {
            store.wait(ticket);
        }
    }
}

impl std::ops::Deref for Registry<'_> {
    type Target = HashMap<String, User>;
    fn deref(&self) -> &Self::Target {
        self.users.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Registry<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.users.as_mut().expect("held until dropped")
    }
}

impl Users {
    pub(super) fn lock(&self) -> Registry<'_> {
        Registry {
            users: Some(lock(&self.by_identity)),
            store: self.store.as_ref(),
            written: std::cell::Cell::new(None),
        }
    }
}
