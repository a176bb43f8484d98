//! `server:` the listener, the event handler's listener, TLS and the admin token and addresses,
//! with the original system's `host`, `port` and `livekit` keys.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::{AddressRange, Secret, network, private_ranges};

/// `server:` the one listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "ServerFile", rename_all = "camelCase")]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Plain-HTTP listener for Janus's event handler posts: loopback, or a private address
    /// (RFC 1918, IPv6 unique or link local) where the Janus nodes of a pool on other hosts
    /// reach it.
    pub events_listen: SocketAddr,
    pub tls: Tls,
    /// Admin token; `PARTYLINE_ADMIN_TOKEN` and the state directory's `admin-token` file win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<Secret>,
    /// Where the admin UI and API (`/admin`, `/api/admin/…`, `/metrics`) answer from: other
    /// addresses get 403 even with the admin token. Default: loopback and the private ranges.
    #[serde(skip_serializing_if = "network::is_private_ranges")]
    pub admin_allow_from: Vec<AddressRange>,
    /// The original system's keys found in the file, until
    /// [`Config::take_legacy`](super::Config::take_legacy) takes them.
    #[serde(skip)]
    pub(super) legacy: Option<LegacyServer>,
}

/// The original system's `server.host` + `server.port` (mapped to `listen` unless the file
/// gives `listen` too) and `server.livekit` (dropped).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LegacyServer {
    pub(super) host: Option<String>,
    pub(super) port: Option<u16>,
    pub(super) livekit: bool,
    /// The file gives `listen` as well: it wins.
    pub(super) listen_given: bool,
}

/// `server:` as the file has it: whether `listen` is given matters when legacy keys are too.
#[derive(Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
struct ServerFile {
    listen: Option<SocketAddr>,
    events_listen: SocketAddr,
    tls: Tls,
    admin_token: Option<Secret>,
    admin_allow_from: Vec<AddressRange>,
    host: Option<String>,
    port: Option<u16>,
    livekit: Option<IgnoredAny>,
}

impl Default for ServerFile {
    fn default() -> Self {
        let ServerConfig { events_listen, tls, admin_token, admin_allow_from, .. } = ServerConfig::default();
        ServerFile {
            listen: None,
            events_listen,
            tls,
            admin_token,
            admin_allow_from,
            host: None,
            port: None,
            livekit: None,
        }
    }
}

impl From<ServerFile> for ServerConfig {
    fn from(file: ServerFile) -> Self {
        let ServerFile { listen, events_listen, tls, admin_token, admin_allow_from, host, port, livekit } = file;
        let legacy = (host.is_some() || port.is_some() || livekit.is_some()).then(|| LegacyServer {
            host,
            port,
            livekit: livekit.is_some(),
            listen_given: listen.is_some(),
        });
        let listen = listen.unwrap_or(ServerConfig::default().listen);
        ServerConfig { listen, events_listen, tls, admin_token, admin_allow_from, legacy }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            events_listen: SocketAddr::from(([127, 0, 0, 1], 7089)),
            tls: Tls::default(),
            admin_token: None,
            admin_allow_from: private_ranges(),
            legacy: None,
        }
    }
}

/// `server.tls`: `false` for plain HTTP, or certificate and key files; both `null` (the
/// default) means a self-signed certificate generated into the state directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged, expecting = "`false`, `true`, or `{ cert: PATH, key: PATH }`")]
pub enum Tls {
    Enabled(bool),
    Files(TlsFiles),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsFiles {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl Default for Tls {
    fn default() -> Self {
        Tls::Files(TlsFiles::default())
    }
}

/// What the listener does with TLS, once the file's shorthand is resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum TlsMode {
    Off,
    SelfSigned,
    Files { cert: PathBuf, key: PathBuf },
}

impl Tls {
    pub fn mode(&self) -> TlsMode {
        match self {
            Tls::Enabled(false) => TlsMode::Off,
            Tls::Enabled(true) | Tls::Files(TlsFiles { cert: None, key: None }) => TlsMode::SelfSigned,
            Tls::Files(TlsFiles { cert, key }) => {
                TlsMode::Files { cert: cert.clone().unwrap_or_default(), key: key.clone().unwrap_or_default() }
            }
        }
    }
}

/// Loopback, or an address no one outside the venue's own networks can send to.
pub(super) fn is_private(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        std::net::IpAddr::V6(v6) => v6.is_loopback() || v6.is_unique_local() || v6.is_unicast_link_local(),
    }
}

pub(super) fn parse_host(host: &str) -> Option<std::net::IpAddr> {
    match host {
        "localhost" => Some([127, 0, 0, 1].into()),
        _ => host.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn tls_shorthands() {
        let off: Config = Config::from_yaml("server:\n  tls: false\n").expect("parses");
        assert_eq!(off.server.tls.mode(), TlsMode::Off);
        assert_eq!(Config::default().server.tls.mode(), TlsMode::SelfSigned);
        let files = Config::from_yaml("server:\n  tls: {cert: /a.pem, key: /b.pem}\n").expect("parses");
        assert!(matches!(files.server.tls.mode(), TlsMode::Files { .. }));
    }
}
