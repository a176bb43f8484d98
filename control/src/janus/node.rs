//! One Janus node: control's HTTP client for it, control's session on it, and the rooms control
//! created there. The link ([`super::Janus`]) places every room on a node
//! ([`super::Janus::node_of`]) and registers every token on every node
//! ([`super::Janus::nodes`]); today there is one node, at the config's `janus.url`.

use std::collections::HashMap;
use std::sync::Mutex;

use partyline_shared::Config;
use partyline_shared::janus::client::{Client, Session};
use partyline_shared::janus::{JanusError, RoomSpec};
use partyline_shared::sync::lock;

use super::REQUEST_TIMEOUT;
use crate::secrets::{SecretValue, random_hex};

#[derive(Debug)]
pub(super) struct Node {
    http: Client,
    /// control's own stored token, for its session.
    own_token: String,
    /// The session and its AudioBridge handle; `None` until (re)connected.
    session: tokio::sync::Mutex<Option<Session>>,
    /// Rooms as control created them here, to notice a changed spec.
    pub(super) created: Mutex<HashMap<String, RoomSpec>>,
    /// Janus's version, once connected.
    version: Mutex<Option<String>>,
}

impl Node {
    pub(super) fn new() -> std::io::Result<Node> {
        Ok(Node {
            http: Client::new(REQUEST_TIMEOUT).map_err(std::io::Error::other)?,
            own_token: random_hex(32)?,
            session: tokio::sync::Mutex::new(None),
            created: Mutex::new(HashMap::new()),
            version: Mutex::new(None),
        })
    }

    /// The connected session, (re)connecting when there is none (or when the config moved the
    /// node to another URL): control's own token is added, a session opened, and `tokens`
    /// (every registered user's) added again.
    pub(super) async fn session(
        &self,
        config: &Config,
        admin_secret: &str,
        tokens: impl FnOnce() -> Vec<SecretValue>,
    ) -> Result<Session, JanusError> {
        let mut session = self.session.lock().await;
        let (api, admin) = (&config.janus.url, &config.janus.admin_url);
        if let Some(at) = session.as_ref().filter(|at| at.url() == api.trim_end_matches('/')) {
            return Ok(at.clone());
        }
        self.http.add_token(admin, admin_secret, &self.own_token).await?;
        let at = self.http.open(api, &self.own_token).await?;
        for token in tokens() {
            self.http.add_token(admin, admin_secret, token.expose()).await?;
        }
        let version = self.http.info(api).await.ok().and_then(|info| info.version_string);
        tracing::info!(url = api, version = version.as_deref().unwrap_or("?"), "connected to Janus");
        *lock(&self.version) = version;
        // Whatever control created before is gone if Janus restarted; `rooms::plan` recreates it.
        lock(&self.created).clear();
        *session = Some(at.clone());
        Ok(at)
    }

    /// The session if one is up, without connecting.
    pub(super) async fn session_if_up(&self) -> Option<Session> {
        self.session.lock().await.clone()
    }

    /// Forgets a session Janus no longer knows: the next request connects again.
    pub(super) async fn lose_session(&self) {
        *self.session.lock().await = None;
    }

    pub(super) fn version(&self) -> Option<String> {
        lock(&self.version).clone()
    }

    /// Lets `token` open sessions here.
    pub(super) async fn add_token(&self, config: &Config, admin_secret: &str, token: &str) -> Result<(), JanusError> {
        self.http.add_token(&config.janus.admin_url, admin_secret, token).await
    }

    /// Revokes `token` here (one Janus does not know is not an error).
    pub(super) async fn remove_token(
        &self,
        config: &Config,
        admin_secret: &str,
        token: &str,
    ) -> Result<(), JanusError> {
        self.http.remove_token(&config.janus.admin_url, admin_secret, token).await
    }
}
