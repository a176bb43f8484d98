//! The open routes' limits: how many tokens one client address gets per minute, how many
//! direct lines one panel opens per minute, how many event streams one crew member holds; and
//! what such limits count as one address ([`address_key`]).
//!
//! A sliding window per address (the times of the last minute's grants), so a burst at the
//! edge of a minute cannot get twice the rate. Addresses with nothing in the window are
//! forgotten, which bounds the memory by the addresses seen within a minute.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use partyline_shared::sync::lock;

const WINDOW: Duration = Duration::from_secs(60);

/// Grants per key (a client address, a crew member) within a sliding minute.
#[derive(Debug)]
pub struct PerMinute<K = IpAddr> {
    granted: Mutex<HashMap<K, Grants>>,
}

impl<K> Default for PerMinute<K> {
    fn default() -> Self {
        Self { granted: Mutex::default() }
    }
}

#[derive(Debug, Default)]
struct Grants {
    times: VecDeque<Instant>,
    /// Refused since the window was last under its limit: logged once, not once per request.
    refused: bool,
}

/// What [`PerMinute::take`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    Granted,
    /// Over the limit; `first`: the first refusal since the address was last under it.
    Refused {
        first: bool,
    },
}

impl PerMinute<IpAddr> {
    /// Takes one grant for client address `from` (its [`address_key`]) if it has had fewer
    /// than `limit` in the last minute.
    pub fn take(&self, from: IpAddr, limit: u32) -> Take {
        self.take_at(address_key(from), limit, Instant::now())
    }
}

impl<K: Hash + Eq> PerMinute<K> {
    /// Takes one grant for `key` if it has had fewer than `limit` in the last minute.
    pub fn take_for(&self, key: K, limit: u32) -> Take {
        self.take_at(key, limit, Instant::now())
    }

    fn take_at(&self, from: K, limit: u32, now: Instant) -> Take {
        let mut granted = lock(&self.granted);
        granted.retain(|_, grants| {
            while grants.times.front().is_some_and(|&at| now.saturating_duration_since(at) >= WINDOW) {
                grants.times.pop_front();
            }
            !grants.times.is_empty()
        });
        let grants = granted.entry(from).or_default();
        if grants.times.len() >= limit as usize {
            let first = !std::mem::replace(&mut grants.refused, true);
            return Take::Refused { first };
        }
        grants.refused = false;
        grants.times.push_back(now);
        Take::Granted
    }
}

/// What the limits on the open routes key an address on: an IPv4 address, or an IPv6 /64 (one
/// host is given a whole /64 and picks any address in it).
pub fn address_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// Event streams one crew member may hold open at once (its panel's session stream, its
/// control surfaces' streams): a token holds a few, not any number.
pub const MAX_STREAMS_PER_SESSION: usize = 8;

/// Places held per key (a client address's connections, a crew member's streams): one is
/// taken while its key holds few enough, and given back when dropped.
#[derive(Debug)]
pub struct Places<K> {
    held: Arc<Mutex<HashMap<K, usize>>>,
}

impl<K> Default for Places<K> {
    fn default() -> Self {
        Places { held: Arc::default() }
    }
}

impl<K> Clone for Places<K> {
    fn clone(&self) -> Self {
        Places { held: Arc::clone(&self.held) }
    }
}

impl<K: Hash + Eq + Clone> Places<K> {
    /// A place for `key` if `allowed` says yes to the number it holds now.
    pub fn take_if(&self, key: K, allowed: impl FnOnce(usize) -> bool) -> Option<Place<K>> {
        let mut held = lock(&self.held);
        let count = held.entry(key.clone()).or_default();
        if !allowed(*count) {
            if *count == 0 {
                held.remove(&key);
            }
            return None;
        }
        *count += 1;
        Some(Place { held: Arc::clone(&self.held), key })
    }

    /// The keys holding places now.
    pub fn keys(&self) -> usize {
        lock(&self.held).len()
    }
}

/// One place of a [`Places`], given back when dropped.
#[derive(Debug)]
pub struct Place<K: Hash + Eq> {
    held: Arc<Mutex<HashMap<K, usize>>>,
    key: K,
}

impl<K: Hash + Eq> Drop for Place<K> {
    fn drop(&mut self) {
        let mut held = lock(&self.held);
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// The event streams open per crew member.
pub type StreamPlaces = Places<String>;
/// One of a crew member's streams.
pub type StreamPlace = Place<String>;

impl StreamPlaces {
    /// A place for one more stream of `identity`, if it holds fewer than
    /// [`MAX_STREAMS_PER_SESSION`].
    pub fn take(&self, identity: &str) -> Option<StreamPlace> {
        self.take_if(identity.to_owned(), |held| held < MAX_STREAMS_PER_SESSION)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_host_counts_as_its_64_and_a_mapped_ipv4_as_itself() {
        let key = |text: &str| address_key(text.parse().expect("an address"));
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:bbbb::9"), "one /64");
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
    }

    #[test]
    fn a_minute_s_grants_per_address_in_a_sliding_window() {
        let limiter = PerMinute::<&str>::default();
        let (a, b) = ("ann-1", "ben-2");
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        for i in 0..3 {
            assert_eq!(limiter.take_at(a, 3, at(i * 20)), Take::Granted, "grant {i}");
        }
        assert_eq!(limiter.take_at(a, 3, at(59)), Take::Refused { first: true }, "a fourth within the minute");
        assert_eq!(limiter.take_at(a, 3, at(59)), Take::Refused { first: false }, "said once");
        assert_eq!(limiter.take_at(b, 3, at(59)), Take::Granted, "another address");
        assert_eq!(limiter.take_at(a, 3, at(60)), Take::Granted, "the first grant left the window");
        assert_eq!(limiter.take_at(a, 3, at(61)), Take::Refused { first: true }, "but not the second");
    }
}
