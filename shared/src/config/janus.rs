//! `janus:` where the media server's APIs are: one Janus, or a pool of nodes (`janus.nodes`)
//! with their capacity, site and secrets, and the pool's checks.

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret};

/// `janus:` where the media server's APIs are (all loopback in a normal install).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct JanusConfig {
    pub url: String,
    pub admin_url: String,
    pub ws_url: String,
    /// Janus admin API secret; `PARTYLINE_JANUS_ADMIN_SECRET` and the state directory win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_secret: Option<Secret>,
    /// AudioBridge `admin_key` (room creation); `PARTYLINE_JANUS_ROOM_ADMIN_KEY` and the state
    /// directory win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room_admin_key: Option<Secret>,
    /// Password of the event handler's posts (basic auth, user `janus`);
    /// `PARTYLINE_JANUS_EVENT_SECRET` and the state directory win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_secret: Option<Secret>,
    /// A pool of Janus nodes; empty: one node, `local`, at `url`, `adminUrl` and `wsUrl`
    /// (which a pool does not use). The first node is the one beside partyline-bridged: the
    /// card's participants join there, and it holds every group's room.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<JanusNode>,
}

/// Participants (one per line of a panel) a node carries when its config gives no capacity:
/// one core of Janus 1.1.2 at the default room settings (BENCHMARKS.md, "Capacity").
pub const DEFAULT_NODE_CAPACITY: u32 = 64;

/// `janus.nodes[]`: one Janus of the pool. Its Janus admin secret and AudioBridge admin key are
/// the pool's unless it names its own (a node another team runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JanusNode {
    /// Its name in placements, stats and logs: lowercase letters, digits and `-`.
    pub name: String,
    pub url: String,
    pub admin_url: String,
    pub ws_url: String,
    /// Where the node is (a building, a truck): a position or a join may ask for a site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// Participants it carries; sessions are placed by load against it.
    #[serde(default = "default_node_capacity")]
    pub capacity: u32,
    /// Its Janus admin API secret, when not the pool's (`janus.adminSecret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_secret: Option<Secret>,
    /// Its AudioBridge `admin_key`, when not the pool's (`janus.roomAdminKey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_admin_key: Option<Secret>,
    /// The password its event handler posts with (basic auth, user: its name). Every node but
    /// the first has one of its own, so that a node's events are known to be its own; the
    /// first's defaults to the pool's (`janus.eventSecret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_secret: Option<Secret>,
}

fn default_node_capacity() -> u32 {
    DEFAULT_NODE_CAPACITY
}

impl JanusConfig {
    /// The pool: `nodes`, or the one node at `url`, `adminUrl` and `wsUrl`.
    pub fn pool(&self) -> Vec<JanusNode> {
        if !self.nodes.is_empty() {
            return self.nodes.clone();
        }
        vec![JanusNode {
            name: "local".into(),
            url: self.url.clone(),
            admin_url: self.admin_url.clone(),
            ws_url: self.ws_url.clone(),
            site: None,
            capacity: DEFAULT_NODE_CAPACITY,
            admin_secret: None,
            room_admin_key: None,
            event_secret: None,
        }]
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let pool = self.pool();
        for (index, node) in pool.iter().enumerate() {
            let at = |field: &str| {
                if self.nodes.is_empty() { format!("janus.{field}") } else { format!("janus.nodes[{index}].{field}") }
            };
            let valid_name = !node.name.is_empty()
                && node.name.len() <= 32
                && node.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !valid_name {
                return Err(ConfigError::new(at("name"), format!("{:?}: 1 to 32 of a-z, 0-9 and -", node.name)));
            }
            if pool[..index].iter().any(|n| n.name == node.name) {
                return Err(ConfigError::new(at("name"), format!("{:?} names two nodes", node.name)));
            }
            for (field, url, schemes) in [
                ("url", &node.url, ["http://", "https://"]),
                ("adminUrl", &node.admin_url, ["http://", "https://"]),
                ("wsUrl", &node.ws_url, ["ws://", "wss://"]),
            ] {
                if !schemes.iter().any(|s| url.starts_with(s)) {
                    let expected = schemes.join(" or ");
                    return Err(ConfigError::new(at(field), format!("{url:?} does not start with {expected}")));
                }
            }
            if node.capacity == 0 {
                return Err(ConfigError::new(at("capacity"), "at least 1 participant"));
            }
            if node.site.as_deref().is_some_and(|site| site.trim().is_empty()) {
                return Err(ConfigError::new(at("site"), "empty: give a name or leave it out"));
            }
            self.validate_event_secret(&pool, index).map_err(|message| ConfigError::new(at("eventSecret"), message))?;
        }
        Ok(())
    }

    /// A node's events are accepted as its own only if no other node (nor the pool's default,
    /// which the first node may use) knows its password.
    fn validate_event_secret(&self, pool: &[JanusNode], index: usize) -> Result<(), String> {
        let Some(secret) = &pool[index].event_secret else {
            return match index {
                0 => Ok(()),
                _ => Err("required: every node but the first posts its events with a password of its own".into()),
            };
        };
        if secret.0.len() < 16 {
            return Err("at least 16 characters".into());
        }
        if self.event_secret.as_ref() == Some(secret) {
            return Err("the same as janus.eventSecret: give each node its own".into());
        }
        match pool[..index].iter().position(|other| other.event_secret.as_ref() == Some(secret)) {
            Some(other) => Err(format!("the same as node {:?}'s: give each node its own", pool[other].name)),
            None => Ok(()),
        }
    }
}

impl Default for JanusConfig {
    fn default() -> Self {
        Self {
            url: "http://127.0.0.1:8088/janus".into(),
            admin_url: "http://127.0.0.1:7088/admin".into(),
            ws_url: "ws://127.0.0.1:8188".into(),
            admin_secret: None,
            room_admin_key: None,
            event_secret: None,
            nodes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// Without `nodes`, the pool is one node at the three URLs (today's files work unchanged);
    /// with them, each node is checked and named in the error by its index.
    #[test]
    fn janus_nodes_make_the_pool_and_each_bad_one_is_named() {
        let one = Config::from_yaml("janus:\n  url: http://10.0.0.1:8088/janus\n").expect("parses");
        let pool = one.janus.pool();
        assert_eq!(pool.len(), 1);
        assert_eq!((pool[0].name.as_str(), pool[0].url.as_str()), ("local", "http://10.0.0.1:8088/janus"));
        assert_eq!(pool[0].capacity, DEFAULT_NODE_CAPACITY);
        let node = |name: &str, extra: &str| {
            format!(
                "    - name: {name}\n      url: http://{name}:8088/janus\n      adminUrl: http://{name}:7088/admin\n      wsUrl: ws://{name}:8188\n{extra}"
            )
        };
        let own_events = "      eventSecret: b-posts-under-its-own\n";
        let two = format!(
            "janus:\n  nodes:\n{}{}",
            node("a", ""),
            node("b", &format!("      site: truck\n      capacity: 100\n{own_events}"))
        );
        let two_hosts = Config::from_yaml(&format!("{two}server:\n  eventsListen: 10.1.0.1:7089\n")).expect("parses");
        assert_eq!(two_hosts.validate(), Ok(()), "events from nodes on a private network");
        let pool = Config::from_yaml(&two).expect("parses").janus.pool();
        let names: Vec<(&str, Option<&str>, u32)> =
            pool.iter().map(|n| (n.name.as_str(), n.site.as_deref(), n.capacity)).collect();
        assert_eq!(names, [("a", None, DEFAULT_NODE_CAPACITY), ("b", Some("truck"), 100)]);
        for (yaml, path, says) in [
            (format!("janus:\n  nodes:\n{}{}", node("a", ""), node("a", "")), "janus.nodes[1].name", "names two nodes"),
            (format!("janus:\n  nodes:\n{}", node("A", "")), "janus.nodes[0].name", "a-z"),
            (
                format!("janus:\n  nodes:\n{}", node("a", "      capacity: 0\n")),
                "janus.nodes[0].capacity",
                "at least 1",
            ),
            (format!("janus:\n  nodes:\n{}", node("a", "      site: ' '\n")), "janus.nodes[0].site", "empty"),
            (two.replace("ws://b", "http://b"), "janus.nodes[1].wsUrl", "ws:// or wss://"),
            (two.replace(own_events, ""), "janus.nodes[1].eventSecret", "a password of its own"),
            (two.replace("b-posts-under-its-own", "short"), "janus.nodes[1].eventSecret", "at least 16"),
            (
                format!("{two}  eventSecret: b-posts-under-its-own\n"),
                "janus.nodes[1].eventSecret",
                "the same as janus.eventSecret",
            ),
            (
                two.replacen("wsUrl: ws://a:8188\n", &format!("wsUrl: ws://a:8188\n{own_events}"), 1),
                "janus.nodes[1].eventSecret",
                "the same as node \"a\"'s",
            ),
            ("janus:\n  adminUrl: 127.0.0.1:7088\n".to_owned(), "janus.adminUrl", "http:// or https://"),
            ("server:\n  eventsListen: 0.0.0.0:7089\n".to_owned(), "server.eventsListen", "loopback or private"),
            ("server:\n  eventsListen: 203.0.113.5:7089\n".to_owned(), "server.eventsListen", "loopback or private"),
            (
                format!("{two}groups:\n  - name: G\npositions:\n  - name: P\n    listen: [g]\n    site: moon\n"),
                "positions[0].site",
                "no Janus node has this site",
            ),
        ] {
            let err = Config::from_yaml(&yaml).expect("parses").validate().expect_err(path);
            assert_eq!(err.path, path, "{yaml}");
            assert!(err.message.contains(says), "{path}: {}", err.message);
        }
    }
}
