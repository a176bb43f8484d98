//! [`AppState`]: what every handler reaches, built in one place ([`AppState::new`]) for the
//! running process and for an offline one alike. Below the API and the `/janus` proxy, which
//! both take it; it knows neither.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use partyline_shared::Config;
use partyline_shared::bridge::BusChoice;

use crate::bans::Bans;
use crate::bridged_link::BridgeManager;
use crate::calls::Calls;
use crate::config::ConfigManager;
use crate::events::EventBus;
use crate::janus::Janus;
use crate::journal::Journal;
use crate::limits::{PerMinute, StreamPlaces};
use crate::linger::LingeringAcceptor;
use crate::links::Links;
use crate::logring::LogRing;
use crate::metrics::Metrics;
use crate::panels::Panels;
use crate::pin::PinLimiter;
use crate::rendered::{Rendered, Same};
use crate::rooms_link::RoomsLink;
use crate::secrets::{AdminToken, JanusSecrets, SecretValue};
use crate::streams::Streams;
use crate::tls::CertificatePin;
use crate::users::Users;

/// What every handler can reach: one `Arc`, so that the clone axum makes for each handler and
/// each middleware of every request is one reference count, not one per part (the parts' own
/// clones and drops were a fifth of a read's CPU).
#[derive(Debug, Clone)]
pub struct AppState(Arc<Parts>);

impl std::ops::Deref for AppState {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// The parts of [`AppState`].
#[derive(Debug)]
pub struct Parts {
    pub config: Arc<ConfigManager>,
    pub logs: LogRing,
    pub admin_token: Arc<AdminToken>,
    pub janus: Arc<Janus>,
    pub bridge: Arc<BridgeManager>,
    /// partyline's own rooms in bridged (`media.engine: bridged`).
    pub rooms: Arc<RoomsLink>,
    /// Who holds a token and who is connected (the Janus link keeps it in step with Janus).
    pub users: Arc<Users>,
    /// The call signal's fan-out to the panels.
    pub calls: Arc<Calls>,
    /// The panels' remote control: commands to them, their reported state.
    pub panels: Arc<Panels>,
    /// The crew's links as their panels measure them.
    pub links: Arc<Links>,
    /// WHIP and WHEP sessions.
    pub streams: Arc<Streams>,
    /// PIN tries per client address, and the verifications running.
    pub pins: Arc<PinLimiter>,
    /// Tokens per client address a minute.
    pub token_rate: Arc<PerMinute>,
    /// Admin requests refused for their address (`server.adminAllowFrom`), logged once a minute
    /// per address: a flood from the internet is not a flood of log lines.
    pub admin_refusals: Arc<PerMinute>,
    /// Direct lines opened per crew member (one token, one session) a minute.
    pub call_rate: Arc<PerMinute<String>>,
    /// Offers and talk keys per session on partyline's rooms.
    pub media_rate: Arc<PerMinute<String>>,
    /// Names and addresses the admin refuses tokens to for now.
    pub bans: Arc<Bans>,
    /// The event streams each crew member holds open.
    pub stream_places: StreamPlaces,
    /// Live events for the admin's event stream.
    pub events: EventBus,
    /// The show's journal, the show report's source (written once `Journal::start`ed).
    pub journal: Journal,
    /// The SHA-256 of the listener's certificate (`AB:CD:…`), for control surfaces to pin.
    pub certificate_sha256: CertificatePin,
    /// The public listener's connections (open now, and the cap).
    pub connections: LingeringAcceptor,
    pub started: Instant,
    /// `GET /api/admin/groups`'s answer, for the config and the muted lines it shows.
    pub group_list: Rendered<(Same<Config>, Vec<String>)>,
    /// What `/metrics` counts as it happens.
    pub metrics: Metrics,
}

impl AppState {
    /// The state of a control with `setup`'s parts: the crew as the previous process left it
    /// (`crew.json` in the state directory), the Janus link and the bridged manager made but
    /// not started (the caller spawns their `run`), the log's warnings published as events.
    pub fn new(setup: Setup<'_>) -> anyhow::Result<AppState> {
        let Setup { config, state_dir, admin_token, janus_secrets, bus, logs, listener } = setup;
        let events = EventBus::default();
        logs.publish_warnings_to(events.clone());
        let users = Arc::new(Users::restore(state_dir, events.clone()));
        let janus = Janus::new(Arc::clone(&config), janus_secrets, Arc::clone(&users), events.clone())?;
        let rooms = RoomsLink::new(bus.clone(), Arc::clone(&users));
        let bridge = BridgeManager::new(Arc::clone(&config), Arc::clone(&janus), bus, events.clone());
        Ok(AppState(Arc::new(Parts {
            config,
            logs,
            admin_token: Arc::new(admin_token),
            janus,
            bridge,
            rooms,
            users,
            calls: Arc::default(),
            panels: Arc::default(),
            links: Arc::default(),
            streams: Arc::default(),
            pins: Arc::default(),
            token_rate: Arc::default(),
            admin_refusals: Arc::default(),
            call_rate: Arc::default(),
            media_rate: Arc::default(),
            bans: Arc::default(),
            stream_places: StreamPlaces::default(),
            events,
            journal: Journal::in_dir(state_dir),
            certificate_sha256: listener.certificate_sha256,
            connections: listener.connections,
            started: listener.started,
            group_list: Rendered::default(),
            metrics: Metrics::default(),
        })))
    }

    /// Whether the public listener speaks TLS (for the URLs handed to browsers): it has a
    /// certificate.
    pub fn tls(&self) -> bool {
        self.certificate_sha256.is_set()
    }

    /// The state of a control with its config file at `config_file`, its state directory at
    /// `state_dir`, and no outside parts: Janus unconfigured (no secrets, so no link is made)
    /// and bridged absent (a bus address that does not exist). For running the router in one
    /// process, as the fuzz target of request bodies does; call inside a tokio runtime, once
    /// the process's TLS provider is installed (`partyline_shared::crypto::install_provider`).
    pub fn offline(config_file: &Path, state_dir: &Path, admin_token: &str) -> anyhow::Result<AppState> {
        AppState::new(Setup {
            config: ConfigManager::load(config_file)?,
            state_dir,
            admin_token: SecretValue::new(admin_token.to_owned()),
            janus_secrets: JanusSecrets::default(),
            bus: BusChoice::Address(format!("unix:path={}", state_dir.join("no-bus").display())),
            logs: LogRing::default(),
            listener: Listener {
                certificate_sha256: CertificatePin::default(),
                connections: LingeringAcceptor::new(crate::linger::MAX_CONNECTIONS),
                started: Instant::now(),
            },
        })
    }
}

/// The parts of an [`AppState`] that come from outside: files, secrets, the bus, the listener.
#[derive(Debug)]
pub struct Setup<'a> {
    pub config: Arc<ConfigManager>,
    /// Where `crew.json` is.
    pub state_dir: &'a Path,
    pub admin_token: AdminToken,
    pub janus_secrets: JanusSecrets,
    /// Where bridged is.
    pub bus: BusChoice,
    pub logs: LogRing,
    pub listener: Listener,
}

/// The public listener as the handlers see it.
#[derive(Debug)]
pub struct Listener {
    /// The SHA-256 of its certificate (`AB:CD:…`) when it speaks TLS.
    pub certificate_sha256: CertificatePin,
    /// Its connections (open now, and the cap).
    pub connections: LingeringAcceptor,
    /// When the process started.
    pub started: Instant,
}
