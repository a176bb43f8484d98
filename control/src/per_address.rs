//! Connections per client address on the public listener: one host cannot hold the listener's
//! whole cap. An address (an IPv6 /64 as one, [`address_key`]) holds at most
//! [`PER_ADDRESS`] connections, plus [`PER_SESSION`] for each crew member whose token it asked
//! for: a crew behind one NAT keeps room for its panels (a `/janus` WebSocket, a session
//! stream and a request or two each) while a host with no session cannot hold more than a few
//! hundred idle connections.

use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use crate::limits::{Place, Places, address_key};

/// Connections any address may hold.
pub const PER_ADDRESS: usize = 256;
/// More for each crew member at that address (its panel's connections).
pub const PER_SESSION: usize = 4;

type SessionsAt = Box<dyn Fn(IpAddr) -> usize + Send + Sync>;

/// One connection's place among its address's, given back when dropped.
pub type AddressSlot = Place<IpAddr>;

/// The open connections per address, shared by the listener's acceptor and its connections.
#[derive(Clone, Default)]
pub struct PerAddress {
    open: Places<IpAddr>,
    /// The crew members at an address; set once the registry exists (none counted before).
    sessions_at: Arc<OnceLock<SessionsAt>>,
}

impl fmt::Debug for PerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerAddress").field("addresses", &self.open.keys()).finish_non_exhaustive()
    }
}

impl PerAddress {
    /// Counts the crew members at an address with `sessions_at` from now on.
    pub fn count_sessions_with(&self, sessions_at: impl Fn(IpAddr) -> usize + Send + Sync + 'static) {
        let _ = self.sessions_at.set(Box::new(sessions_at));
    }

    /// A place for one more connection from `peer`, if its address has one.
    pub fn take(&self, peer: IpAddr) -> Option<AddressSlot> {
        let key = address_key(peer.to_canonical());
        // The registry is asked only past the base: a flood costs a map lookup per connection.
        self.open.take_if(key, |held| held < PER_ADDRESS || held < self.allowance(key))
    }

    fn allowance(&self, key: IpAddr) -> usize {
        let sessions = self.sessions_at.get().map_or(0, |count| count(key));
        PER_ADDRESS + PER_SESSION * sessions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_holds_its_base_plus_room_for_its_crew_and_a_64_is_one_address() {
        let per_address = PerAddress::default();
        let host = IpAddr::from([10, 0, 0, 7]);
        let held: Vec<AddressSlot> = (0..PER_ADDRESS).map_while(|_| per_address.take(host)).collect();
        assert_eq!(held.len(), PER_ADDRESS);
        assert!(per_address.take(host).is_none(), "over the base");
        assert!(per_address.take(IpAddr::from([10, 0, 0, 8])).is_some(), "another address is not concerned");

        per_address.count_sessions_with(move |at| if at == host { 10 } else { 0 });
        let more: Vec<AddressSlot> = (0..100).map_while(|_| per_address.take(host)).collect();
        assert_eq!(more.len(), 10 * PER_SESSION, "room for its ten crew members' panels");
        drop(more);
        assert!(per_address.take(host).is_some(), "a closed connection gives its place back");

        let v6 = |last: u16| IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, last]);
        let held: Vec<AddressSlot> = (0..PER_ADDRESS).map_while(|n| per_address.take(v6(n as u16))).collect();
        assert_eq!(held.len(), PER_ADDRESS);
        assert!(per_address.take(v6(9999)).is_none(), "the /64 is one address");
    }
}
