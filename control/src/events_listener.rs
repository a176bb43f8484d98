//! The events listener (`server.eventsListen`), where the Janus nodes post their events. With
//! nodes on other hosts it faces a LAN, so it has the public listener's discipline and more:
//! connections only from loopback and the nodes' addresses (the hosts of their URLs), at most
//! [`MAX_EVENT_CONNECTIONS`] at once, the same timeouts, and each post's credentials checked
//! before its body is read (`crate::api::janus_events`).

use std::collections::HashSet;
use std::future::{Ready, ready};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use axum::Router;
use hyper_util::rt::TokioTimer;
use partyline_shared::config::JanusConfig;
use partyline_shared::sync::lock;
use tokio::net::{TcpListener, TcpStream};

use crate::config::ConfigManager;
use crate::linger::{IDLE_TIMEOUT, Lingering, LingeringAcceptor};

/// The most connections the events listener holds at once: a node's event handler posts on
/// one connection at a time, and a pool has a few nodes.
pub const MAX_EVENT_CONNECTIONS: usize = 64;

/// Serves `app` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, app: Router, config: Arc<ConfigManager>) -> io::Result<()> {
    let acceptor = NodesOnly::new(LingeringAcceptor::new(MAX_EVENT_CONNECTIONS));
    acceptor.admit(&config.current().janus).await;
    tokio::spawn(acceptor.clone().follow(config));
    let mut server = axum_server::from_tcp(listener.into_std()?)?.first_request_timeout(IDLE_TIMEOUT);
    server.http_builder().http1().timer(TokioTimer::new()).header_read_timeout(IDLE_TIMEOUT);
    server.acceptor(acceptor).serve(app.into_make_service()).await
}

/// An acceptor that closes at once a connection from an address that is neither loopback nor a
/// node's, and hands the others to a [`LingeringAcceptor`].
#[derive(Debug, Clone)]
struct NodesOnly {
    inner: LingeringAcceptor,
    nodes: Arc<RwLock<HashSet<IpAddr>>>,
    /// When a stranger was last logged: a flood is one warning a minute.
    last_warned: Arc<Mutex<Option<Instant>>>,
}

impl NodesOnly {
    fn new(inner: LingeringAcceptor) -> NodesOnly {
        NodesOnly { inner, nodes: Arc::default(), last_warned: Arc::default() }
    }

    fn admits(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        peer.is_loopback() || self.nodes.read().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&peer)
    }

    /// Takes the addresses of `janus`'s nodes as the ones admitted (a host name resolved now).
    async fn admit(&self, janus: &JanusConfig) {
        let mut addresses = HashSet::new();
        for node in janus.pool() {
            for url in [&node.url, &node.admin_url, &node.ws_url] {
                addresses.extend(resolve(url).await);
            }
        }
        *self.nodes.write().unwrap_or_else(std::sync::PoisonError::into_inner) = addresses;
    }

    /// Follows the pool through config changes.
    async fn follow(self, config: Arc<ConfigManager>) {
        let mut changes = config.subscribe();
        loop {
            match changes.recv().await {
                Ok(change) => self.admit(&change.config.janus).await,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => self.admit(&config.current().janus).await,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    fn warn_stranger(&self, peer: SocketAddr) {
        let mut last = lock(&self.last_warned);
        if last.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(60)) {
            *last = Some(Instant::now());
            tracing::warn!(%peer, "a connection to the events listener from an address no Janus node has: closed (logged once a minute)");
        }
    }
}

/// The addresses of `url`'s host: itself when it is an address; a name's, resolved; none when
/// it cannot be (logged: that node's events are refused until it resolves).
async fn resolve(url: &str) -> Vec<IpAddr> {
    let Some((host, port)) = host_and_port(url) else { return Vec::new() };
    if let Ok(address) = host.parse::<IpAddr>() {
        return vec![address.to_canonical()];
    }
    match tokio::net::lookup_host((host.as_str(), port)).await {
        Ok(found) => found.map(|a| a.ip().to_canonical()).collect(),
        Err(e) => {
            tracing::warn!(url, error = %e, "cannot resolve a Janus node's host: its events are refused until it resolves");
            Vec::new()
        }
    }
}

/// `http://host:port/path` → (`host`, `port`), brackets off an IPv6 address.
fn host_and_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let default_port = if matches!(scheme, "https" | "wss") { 443 } else { 80 };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, rest) = v6.split_once(']')?;
        let port = rest.strip_prefix(':').map_or(Some(default_port), |p| p.parse().ok())?;
        return Some((host.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((authority.to_owned(), default_port)),
    }
}

impl<S> axum_server::accept::Accept<TcpStream, S> for NodesOnly {
    type Stream = Lingering;
    type Service = S;
    type Future = Ready<io::Result<(Lingering, S)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        match stream.peer_addr() {
            Ok(peer) if self.admits(peer.ip()) => self.inner.accept(stream, service),
            Ok(peer) => {
                self.warn_stranger(peer);
                ready(Err(io::Error::other("not a Janus node's address")))
            }
            Err(e) => ready(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_url_s_host_and_port_are_found() {
        let cases = [
            ("http://10.1.0.2:8088/janus", Some(("10.1.0.2", 8088))),
            ("ws://10.1.0.2:8188", Some(("10.1.0.2", 8188))),
            ("wss://janus.example", Some(("janus.example", 443))),
            ("http://[fd00::2]:7088/admin", Some(("fd00::2", 7088))),
            ("http://user@[fd00::2]/admin", Some(("fd00::2", 80))),
            ("10.1.0.2:8088", None),
            ("http://10.1.0.2:port/janus", None),
        ];
        for (url, want) in cases {
            let got = host_and_port(url);
            assert_eq!(got.as_ref().map(|(h, p)| (h.as_str(), *p)), want, "{url}");
        }
    }

    #[tokio::test]
    async fn only_loopback_and_the_nodes_addresses_are_admitted() {
        let acceptor = NodesOnly::new(LingeringAcceptor::new(4));
        let yaml = "janus:\n  nodes:\n    - {name: a, url: 'http://10.1.0.2:8088/janus', adminUrl: 'http://10.1.0.2:7088/admin', wsUrl: 'ws://[fd00::2]:8188'}\n";
        let config = partyline_shared::config::Config::from_yaml(yaml).expect("a pool");
        acceptor.admit(&config.janus).await;
        for (peer, admitted) in [
            ("127.0.0.1", true),
            ("127.0.0.9", true),
            ("::1", true),
            ("10.1.0.2", true),
            ("::ffff:10.1.0.2", true),
            ("fd00::2", true),
            ("10.1.0.3", false),
            ("192.168.1.20", false),
        ] {
            assert_eq!(acceptor.admits(peer.parse().expect("an address")), admitted, "{peer}");
        }
    }
}
