//! The admin's bans: a name and/or a client address refused new tokens for a time, so that a
//! disconnect holds against someone who simply asks for a new token. In memory: a restart of
//! control lifts them (a ban is for the show, not for good).
//!
//! A name is compared as its slug ("Éve " and "eve" are one name); an address as it is, an IPv6
//! one on its /64 (a crew behind one NAT shares it: banning it bans them all, which the admin
//! UI says). A ban also ends every session of that name or address at once (`crate::api`).

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use partyline_shared::slugify;

use crate::limits::address_key;
use partyline_shared::sync::lock;
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A ban as the admin sees it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BanView {
    pub id: u64,
    /// The banned name (as the crew member gave it), if the name is banned.
    pub username: Option<String>,
    /// The banned client address, if the address is banned.
    pub address: Option<String>,
    /// RFC 3339: when it ends.
    pub until: String,
}

#[derive(Debug)]
struct Ban {
    id: u64,
    username: Option<String>,
    slug: Option<String>,
    address: Option<IpAddr>,
    ends: Instant,
    until: OffsetDateTime,
}

impl Ban {
    fn view(&self) -> BanView {
        BanView {
            id: self.id,
            username: self.username.clone(),
            address: self.address.map(|a| a.to_string()),
            until: self.until.format(&Rfc3339).unwrap_or_default(),
        }
    }
}

/// The bans in force.
#[derive(Debug, Default)]
pub struct Bans {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    last_id: u64,
    bans: Vec<Ban>,
}

impl Bans {
    /// Bans `username` (if given) and `address` (if given) for `length`; the ban as shown.
    pub fn add(&self, username: Option<&str>, address: Option<IpAddr>, length: Duration) -> BanView {
        let mut inner = lock(&self.inner);
        inner.last_id += 1;
        let ban = Ban {
            id: inner.last_id,
            username: username.map(str::to_owned),
            slug: username.map(slugify),
            address,
            ends: Instant::now() + length,
            until: OffsetDateTime::now_utc() + length,
        };
        let view = ban.view();
        inner.bans.push(ban);
        view
    }

    /// The ban in force on `username` or `address` (an IPv6 address's /64), if any.
    pub fn find(&self, username: &str, address: Option<IpAddr>) -> Option<BanView> {
        let slug = slugify(username);
        let key = address.map(address_key);
        self.in_force(|ban| {
            ban.slug.as_deref() == Some(slug.as_str()) || (key.is_some() && ban.address.map(address_key) == key)
        })
        .pop()
    }

    /// The bans in force, oldest first.
    pub fn list(&self) -> Vec<BanView> {
        self.in_force(|_| true)
    }

    /// Lifts ban `id`; whether there was one.
    pub fn lift(&self, id: u64) -> bool {
        let mut inner = lock(&self.inner);
        let before = inner.bans.len();
        inner.bans.retain(|ban| ban.id != id);
        inner.bans.len() < before
    }

    fn in_force(&self, which: impl Fn(&Ban) -> bool) -> Vec<BanView> {
        let mut inner = lock(&self.inner);
        let now = Instant::now();
        inner.bans.retain(|ban| ban.ends > now);
        inner.bans.iter().filter(|ban| which(ban)).map(Ban::view).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ban_holds_its_name_by_slug_or_its_address_until_lifted_or_over() {
        let bans = Bans::default();
        let (eve, other) = (IpAddr::from([10, 0, 0, 9]), IpAddr::from([10, 0, 0, 1]));
        let by_name = bans.add(Some("Éve"), None, Duration::from_secs(60));
        assert!(bans.find(" eve", Some(other)).is_some(), "the same slug");
        assert!(bans.find("Eva", Some(other)).is_none());
        let by_address = bans.add(None, Some(eve), Duration::from_secs(60));
        assert_eq!(bans.find("Anyone", Some(eve)).map(|b| b.id), Some(by_address.id));
        assert!(bans.lift(by_name.id) && !bans.lift(by_name.id));
        assert!(bans.find("eve", Some(other)).is_none(), "lifted");
        bans.add(Some("Max"), None, Duration::ZERO);
        assert!(bans.find("max", None).is_none(), "over");
        assert_eq!(bans.list().len(), 1);
        let v6 = bans.add(None, Some(IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, 9])), Duration::from_secs(60));
        let same_64 = IpAddr::from([0x2001, 0xdb8, 0, 1, 0xabcd, 0, 0, 1]);
        assert_eq!(bans.find("Anyone", Some(same_64)).map(|b| b.id), Some(v6.id), "an IPv6 ban holds its /64");
        assert!(bans.find("Anyone", Some(IpAddr::from([0x2001, 0xdb8, 0, 2, 0, 0, 0, 9]))).is_none());
    }
}
