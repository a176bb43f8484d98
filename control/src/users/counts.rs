//! What the registry counts: crew members and unused tokens per client address (the open
//! routes' limits) and connections (the stats).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;

use super::{UserKind, UserState, Users};
use crate::limits::address_key;

impl Users {
    /// Crew members' tokens not used yet, per client address they were asked for from (an
    /// IPv6 /64 as one address).
    pub fn pending_crew_by_address(&self) -> HashMap<IpAddr, usize> {
        let mut counts = HashMap::new();
        for user in self.lock().values().filter(|u| u.kind == UserKind::Crew && u.state == UserState::Pending) {
            let address = user.address.map_or(IpAddr::from([0, 0, 0, 0]), address_key);
            *counts.entry(address).or_default() += 1;
        }
        counts
    }

    /// Crew members whose token was asked for from `address` (an IPv6 /64 as one address).
    pub fn crew_at(&self, address: IpAddr) -> usize {
        let key = address_key(address);
        self.lock().values().filter(|u| u.kind == UserKind::Crew && u.address.map(address_key) == Some(key)).count()
    }

    pub fn active_connections(&self) -> u64 {
        self.lock().values().filter(|u| u.state == UserState::Connected).count() as u64
    }

    pub fn total_connections(&self) -> u64 {
        self.total_connections.load(Ordering::Relaxed)
    }
}
