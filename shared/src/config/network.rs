//! `network:` how crew off the venue's LAN reach partyline (a director at home, a camera crew
//! across town, a phone on mobile data), and `server.adminAllowFrom`, who may administer it.
//!
//! ```yaml
//! network:
//!   publicAddress: 203.0.113.10          # what the media server advertises to the internet
//!   stun: ["stun:turn.example.org:3478"]
//!   turn:
//!     urls: ["turns:turn.example.org:443?transport=tcp", "turn:turn.example.org:3478"]
//!     secret: "…"                          # coturn's static-auth-secret
//!     credentialSeconds: 43200
//! ```
//!
//! The relay's credentials follow the TURN REST API scheme (coturn's `use-auth-secret`): control
//! hands each session a username `EXPIRY:IDENTITY` and its HMAC-SHA1 under the shared secret;
//! the relay checks both and refuses the credential once `EXPIRY` (Unix seconds) has passed.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::Secret;

/// The shortest PIN a group or position may have once crew can join from off-site: anyone on
/// the internet can then try PINs (at the per-address and per-PIN budgets).
pub const OFF_SITE_MIN_PIN_DIGITS: usize = 6;

/// `network:` the way in from off-site. All of it is optional: without it, partyline serves
/// the venue's LAN alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkConfig {
    /// The public address the media server is reached at through the venue's NAT (Janus's
    /// `nat_1_1_mapping`, which its own config file carries: see docs/network.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_address: Option<IpAddr>,
    /// STUN servers the panels use to learn their public address (`stun:HOST:PORT`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stun: Vec<IceUrl>,
    /// A TURN relay for crew whose network lets no UDP through to the media server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnConfig>,
}

impl NetworkConfig {
    pub fn is_default(&self) -> bool {
        *self == NetworkConfig::default()
    }

    /// Whether crew may join from outside the venue: a relay or a public media address is set.
    pub fn off_site(&self) -> bool {
        self.turn.is_some() || self.public_address.is_some()
    }

    /// The rules serde cannot say: a relay has a `turn:`/`turns:` URL and a secret; STUN is
    /// STUN. The error names the key and why.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if let Some(i) = self.stun.iter().position(IceUrl::is_turn) {
            return Err((format!("stun[{i}]"), "a `turn:` URL: relays go in `network.turn.urls`".into()));
        }
        let Some(turn) = &self.turn else { return Ok(()) };
        if turn.urls.is_empty() {
            return Err(("turn.urls".into(), "give the relay's `turn:` or `turns:` URLs".into()));
        }
        if let Some(i) = turn.urls.iter().position(|url| !url.is_turn()) {
            return Err((format!("turn.urls[{i}]"), "a `stun:` URL: STUN servers go in `network.stun`".into()));
        }
        if turn.secret.0.len() < 16 {
            return Err(("turn.secret".into(), "at least 16 characters (coturn's static-auth-secret)".into()));
        }
        Ok(())
    }
}

/// `network.turn`: the relay and the secret it shares with control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnConfig {
    /// `turn:` and `turns:` URLs (RFC 7065); a `turns:` on port 443 gets through firewalls that
    /// let only HTTPS out.
    pub urls: Vec<IceUrl>,
    /// coturn's `static-auth-secret`.
    pub secret: Secret,
    /// How long a credential handed out with a token stays valid: the relay refuses it after
    /// (an allocation is refreshed with it every few minutes, so it must outlast a show).
    #[serde(default = "default_credential_seconds")]
    pub credential_seconds: CredentialSeconds,
}

fn default_credential_seconds() -> CredentialSeconds {
    CredentialSeconds(12 * 3600)
}

checked_number!(
    /// `network.turn.credentialSeconds`: a relay credential's life.
    CredentialSeconds(u32), |v| (60..=7 * 24 * 3600).contains(&v), "60 s to 7 days"
);

/// An ICE server's URL (RFC 7064/7065): `stun:`, `turn:` or `turns:`, a host, a port if any,
/// and for TURN a `?transport=udp|tcp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IceUrl(String);

impl IceUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A `turn:`/`turns:` URL (a relay) rather than `stun:`.
    pub fn is_turn(&self) -> bool {
        self.0.starts_with("turn")
    }

    /// Where a relay's URL leads (RFC 7065): None for a `stun:` URL.
    pub fn relay_endpoint(&self) -> Option<RelayEndpoint> {
        let (scheme, rest) = self.0.split_once(':')?;
        let tls = match scheme {
            "turn" => false,
            "turns" => true,
            _ => return None,
        };
        let (host_port, query) = rest.split_once('?').map_or((rest, None), |(h, q)| (h, Some(q)));
        let default_port = if tls { 5349 } else { 3478 };
        let (host, port) = match host_port.rsplit_once(':') {
            // An IPv6 address without a port ends in `]`; with one, `]:PORT`.
            Some((host, port)) if !port.ends_with(']') => (host, port.parse().ok()?),
            _ => (host_port, default_port),
        };
        let tcp = match query {
            Some("transport=tcp") => true,
            Some("transport=udp") => false,
            _ => tls,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        Some(RelayEndpoint { host, port, tls, tcp })
    }
}

/// A relay's address and how it is spoken to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayEndpoint {
    /// A name or an address (an IPv6 one without its brackets).
    pub host: String,
    pub port: u16,
    /// `turns:`: TLS (over TCP, or DTLS over UDP).
    pub tls: bool,
    /// Over TCP (`?transport=tcp`, or `turns:` without a transport).
    pub tcp: bool,
}

impl TryFrom<String> for IceUrl {
    type Error = String;
    fn try_from(url: String) -> Result<Self, String> {
        let expected = "expected `stun:HOST[:PORT]`, `turn:HOST[:PORT][?transport=udp|tcp]` or `turns:…`";
        let Some((scheme, rest)) = url.split_once(':') else { return Err(format!("{url:?}: {expected}")) };
        let (host_port, query) = rest.split_once('?').map_or((rest, None), |(h, q)| (h, Some(q)));
        let transport_ok = match (scheme, query) {
            (_, None) => true,
            ("turn" | "turns", Some(q)) => q == "transport=udp" || q == "transport=tcp",
            _ => false,
        };
        let host_ok = !host_port.is_empty()
            && !host_port.starts_with("//")
            && host_port.chars().all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c));
        if matches!(scheme, "stun" | "turn" | "turns") && transport_ok && host_ok {
            Ok(IceUrl(url))
        } else {
            Err(format!("{url:?}: {expected}"))
        }
    }
}

impl From<IceUrl> for String {
    fn from(url: IceUrl) -> String {
        url.0
    }
}

/// An address range (`10.0.0.0/8`, `2001:db8::/32`) or one address, in `server.adminAllowFrom`.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AddressRange(IpNet);

impl AddressRange {
    /// Whether `address` is in the range (an IPv4 address mapped into IPv6, as a dual-stack
    /// listener sees it, as the IPv4 address it is).
    pub fn contains(&self, address: IpAddr) -> bool {
        self.0.contains(&address.to_canonical())
    }
}

impl fmt::Debug for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl TryFrom<String> for AddressRange {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        let range = IpNet::from_str(&text)
            .or_else(|_| IpAddr::from_str(&text).map(IpNet::from))
            .map_err(|_| format!("{text:?}: expected an address or a range (`192.168.0.0/16`, `fd00::/8`)"))?;
        // One way of writing it, whatever way it was typed (`10.1.2.3/8` is `10.0.0.0/8`).
        Ok(AddressRange(range.trunc()))
    }
}

impl From<AddressRange> for String {
    fn from(range: AddressRange) -> String {
        range.0.to_string()
    }
}

/// `server.adminAllowFrom`'s default: loopback and the private ranges (RFC 1918, IPv6 unique
/// and link local): the venue's LAN, never the internet.
pub fn private_ranges() -> Vec<AddressRange> {
    let v4 = |a, b, prefix| IpNet::new(IpAddr::V4(Ipv4Addr::new(a, b, 0, 0)), prefix);
    let v6 = |first, prefix| IpNet::new(IpAddr::V6(Ipv6Addr::new(first, 0, 0, 0, 0, 0, 0, 0)), prefix);
    [v4(127, 0, 8), v4(10, 0, 8), v4(172, 16, 12), v4(192, 168, 16), v4(169, 254, 16), v6(0xfc00, 7), v6(0xfe80, 10)]
        .into_iter()
        .chain([IpNet::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 128)])
        .map(|range| AddressRange(range.expect("a valid prefix length")))
        .collect()
}

/// Whether `ranges` is [`private_ranges`] (the default, left out of the saved file).
pub(super) fn is_private_ranges(ranges: &[AddressRange]) -> bool {
    ranges == private_ranges().as_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> AddressRange {
        AddressRange::try_from(text.to_owned()).expect("valid")
    }

    #[test]
    fn ranges_hold_their_addresses_and_a_mapped_ipv4_is_its_ipv4() {
        let lan = range("192.168.1.77/16");
        assert_eq!(String::from(lan), "192.168.0.0/16", "written one way");
        assert!(lan.contains("192.168.200.1".parse().expect("an address")));
        assert!(lan.contains("::ffff:192.168.3.4".parse().expect("an address")), "a dual-stack listener's view");
        assert!(!lan.contains("192.169.0.1".parse().expect("an address")));
        assert!(range("2001:db8::1").contains("2001:db8::1".parse().expect("an address")), "one address is a /128");
        assert!(!range("2001:db8::1").contains("2001:db8::2".parse().expect("an address")));
        for bad in ["", "lan", "10.0.0.0/33", "10.0.0"] {
            assert!(AddressRange::try_from(bad.to_owned()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_default_admin_ranges_are_the_private_ones_only() {
        let private = private_ranges();
        let allowed = |a: &str| private.iter().any(|r| r.contains(a.parse().expect("an address")));
        for inside in
            ["127.0.0.1", "10.1.2.3", "172.31.0.9", "192.168.0.1", "::1", "fd12::1", "fe80::1", "::ffff:10.0.0.5"]
        {
            assert!(allowed(inside), "{inside}");
        }
        for outside in ["8.8.8.8", "172.32.0.1", "100.64.0.1", "2001:db8::1", "::ffff:8.8.8.8"] {
            assert!(!allowed(outside), "{outside}");
        }
    }

    #[test]
    fn a_relay_loads_checked_and_its_secret_is_never_shown() {
        use crate::config::{Config, REDACTED};
        let text = "server:\n  adminAllowFrom: [10.1.0.0/16, 2001:db8::7]\nnetwork:\n  publicAddress: 203.0.113.10\n  \
                    stun: ['stun:stun.example.org:3478']\n  turn:\n    urls: ['turns:turn.example.org:443?transport=tcp']\n    \
                    secret: 0123456789abcdef-shared\n";
        let config = Config::from_yaml(text).expect("loads");
        config.validate().expect("valid");
        assert!(config.network.off_site());
        assert_eq!(
            config.network.turn.as_ref().expect("valid").credential_seconds.get(),
            12 * 3600,
            "the default life"
        );
        assert_eq!(config.server.admin_allow_from.len(), 2);
        let shown = config.redacted().to_yaml().expect("valid");
        assert!(!shown.contains("0123456789abcdef") && shown.contains(REDACTED), "{shown}");
        let back = Config::from_yaml(&config.to_yaml().expect("valid")).expect("valid");
        assert_eq!(back, config, "round trip");
        assert!(
            !Config::default().to_yaml().expect("valid").contains("adminAllowFrom"),
            "the default is not written out"
        );

        for (yaml, key) in [
            ("network:\n  stun: ['turn:x']\n", "network.stun[0]"),
            ("network:\n  turn:\n    urls: []\n    secret: 0123456789abcdef\n", "network.turn.urls"),
            ("network:\n  turn:\n    urls: ['stun:x']\n    secret: 0123456789abcdef\n", "network.turn.urls[0]"),
            ("network:\n  turn:\n    urls: ['turn:x']\n    secret: short\n", "network.turn.secret"),
        ] {
            let error = Config::from_yaml(yaml).expect("valid").validate().expect_err(yaml);
            assert_eq!(error.path, key, "{yaml}");
        }
        for yaml in [
            "server:\n  adminAllowFrom: [lan]\n",
            "network:\n  turn:\n    urls: ['turn:x']\n    secret: 0123456789abcdef\n    credentialSeconds: 5\n",
        ] {
            assert!(Config::from_yaml(yaml).is_err(), "{yaml}");
        }
    }

    #[test]
    fn ice_urls_are_stun_or_turn_urls() {
        for good in [
            "stun:stun.example.org",
            "turn:10.0.0.1:3478?transport=udp",
            "turns:turn.example.org:443?transport=tcp",
            "turn:[2001:db8::1]:3478",
        ] {
            assert!(IceUrl::try_from(good.to_owned()).is_ok(), "{good}");
        }
        for bad in ["http://x", "turn:", "stun:x?transport=tcp", "turn://x", "turn:x?transport=sctp", "turn:a b"] {
            assert!(IceUrl::try_from(bad.to_owned()).is_err(), "{bad}");
        }
        assert!(IceUrl::try_from("turns:x".to_owned()).expect("valid").is_turn());
        assert!(!IceUrl::try_from("stun:x".to_owned()).expect("valid").is_turn());
    }

    #[test]
    fn a_relay_url_says_where_and_how() {
        let endpoint = |url: &str| IceUrl::try_from(url.to_owned()).expect("valid").relay_endpoint();
        let relay = |host: &str, port, tls, tcp| Some(RelayEndpoint { host: host.into(), port, tls, tcp });
        assert_eq!(endpoint("turns:turn.example.org:443?transport=tcp"), relay("turn.example.org", 443, true, true));
        assert_eq!(endpoint("turns:turn.example.org"), relay("turn.example.org", 5349, true, true));
        assert_eq!(endpoint("turn:10.0.0.1"), relay("10.0.0.1", 3478, false, false));
        assert_eq!(endpoint("turn:10.0.0.1:3479?transport=tcp"), relay("10.0.0.1", 3479, false, true));
        assert_eq!(endpoint("turn:[2001:db8::1]:3478"), relay("2001:db8::1", 3478, false, false));
        assert_eq!(endpoint("turn:[2001:db8::1]"), relay("2001:db8::1", 3478, false, false));
        assert_eq!(endpoint("stun:stun.example.org"), None);
    }
}
