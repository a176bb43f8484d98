//! The application: the API (`api`), the pages (`web`) and the `/janus` proxy on the one
//! listener, wrapped in the admin check, the body limits and the refused-request log; and the
//! loopback events listener. The state every handler reaches is [`AppState`].

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::api::{self, ApiError};
use crate::bans::Bans;
use crate::bridge::BridgeManager;
use crate::calls::Calls;
use crate::config::ConfigManager;
use crate::events::EventBus;
use crate::janus::Janus;
use crate::limits::PerMinute;
use crate::linger::LingeringAcceptor;
use crate::logring::LogRing;
use crate::panels::Panels;
use crate::pin::PinLimiter;
use crate::secrets::{AdminToken, JanusSecrets, SecretValue};
use crate::users::Users;
use partyline_shared::bridge::BusChoice;

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    pub config: Arc<ConfigManager>,
    pub logs: LogRing,
    pub admin_token: Arc<AdminToken>,
    pub janus: Arc<Janus>,
    pub bridge: Arc<BridgeManager>,
    /// Who holds a token and who is connected (the Janus link keeps it in step with Janus).
    pub users: Arc<Users>,
    /// The call signal's fan-out to the panels.
    pub calls: Arc<Calls>,
    /// The panels' remote control: commands to them, their reported state.
    pub panels: Arc<Panels>,
    /// PIN tries per client address, and the verifications running.
    pub pins: Arc<PinLimiter>,
    /// Tokens per client address a minute.
    pub token_rate: Arc<PerMinute>,
    /// Names and addresses the admin refuses tokens to for now.
    pub bans: Arc<Bans>,
    /// Live events for the admin's event stream.
    pub events: EventBus,
    /// Whether the public listener speaks TLS (for the URLs handed to browsers).
    pub tls: bool,
    /// The SHA-256 of the listener's certificate (`AB:CD:…`), for control surfaces to pin.
    pub certificate_sha256: Option<String>,
    /// The public listener's connections (open now, and the cap).
    pub connections: LingeringAcceptor,
    pub started: Instant,
}

impl AppState {
    /// The state of a control with its config file at `config_file`, its state directory at
    /// `state_dir`, and no outside parts: Janus unconfigured (no secrets, so no link is made)
    /// and bridged absent (a bus address that does not exist). For running the router in one
    /// process, as the fuzz target of request bodies does; call inside a tokio runtime, once
    /// the process's TLS provider is installed (`partyline_shared::crypto::install_provider`).
    pub fn offline(config_file: &Path, state_dir: &Path, admin_token: &str) -> anyhow::Result<AppState> {
        let config = ConfigManager::load(config_file)?;
        let events = EventBus::default();
        let users = Arc::new(Users::restore(state_dir, events.clone()));
        let janus = Janus::new(Arc::clone(&config), JanusSecrets::default(), Arc::clone(&users), events.clone())?;
        let bus = BusChoice::Address(format!("unix:path={}", state_dir.join("no-bus").display()));
        let bridge = BridgeManager::new(Arc::clone(&config), Arc::clone(&janus), bus, events.clone());
        Ok(AppState {
            config,
            events,
            logs: LogRing::default(),
            admin_token: Arc::new(SecretValue::new(admin_token.to_owned())),
            janus,
            bridge,
            users,
            calls: Arc::default(),
            panels: Arc::default(),
            pins: Arc::default(),
            token_rate: Arc::default(),
            bans: Arc::default(),
            tls: false,
            certificate_sha256: None,
            connections: LingeringAcceptor::new(crate::linger::MAX_CONNECTIONS),
            started: Instant::now(),
        })
    }

    /// For changes bridged must act on: refused while it is not on the bus to act on them.
    pub fn require_bridge(&self) -> Result<(), ApiError> {
        if self.bridge.is_present() {
            return Ok(());
        }
        let view = self.bridge.view();
        Err(ApiError::Unavailable(format!(
            "partyline-bridged is not available ({}: {}); nothing was changed",
            view.state, view.message
        )))
    }
}

/// The whole application: the API under `/api`, the pages, `/janus`; JSON 404/405 for
/// everything else.
pub fn app(state: AppState) -> Router {
    Router::new()
        .merge(api::routes())
        .merge(crate::web::routes())
        .merge(crate::janus_proxy::routes())
        .fallback(api::route_not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(DefaultBodyLimit::max(api::BODY_LIMIT))
        // A client announcing a body it never sends must not hold a connection forever.
        .layer(RequestBodyTimeoutLayer::new(api::BODY_TIMEOUT))
        .layer(middleware::from_fn_with_state(state.clone(), api::require_admin))
        .layer(middleware::from_fn(api::log_errors))
        .with_state(state)
}

/// The loopback-only events listener: Janus's event handler posts, nothing else.
pub fn events_app(state: AppState) -> Router {
    api::event_routes()
        .fallback(api::route_not_found)
        .layer(DefaultBodyLimit::max(api::EVENTS_BODY_LIMIT))
        .layer(middleware::from_fn(api::log_errors))
        .with_state(state)
}
