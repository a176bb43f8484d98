//! Start-up and shutdown: logging, config, secrets, the listener, the background tasks.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use hyper_util::rt::TokioTimer;
use partyline_shared::config::{LogLevel, Secret, TlsMode};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;

use crate::app;
use crate::config::{self, ConfigManager};
use crate::linger::{IDLE_TIMEOUT, LingeringAcceptor, MAX_CONNECTIONS};
use crate::logring::LogRing;
use crate::per_address::PerAddress;
use crate::secrets::{self, AdminToken};
use crate::state::{AppState, Listener, Setup};
use crate::{Cli, events_listener, tls};

type FilterHandle = reload::Handle<EnvFilter, tracing_subscriber::Registry>;

/// Runs the control plane until SIGTERM or SIGINT.
pub fn run(cli: Cli) -> ExitCode {
    if cli.print_relay_config {
        return print_relay_config(&cli);
    }
    let logs = LogRing::default();
    let filter = init_logging(&logs);
    // Before any HTTP client (the Janus link) is built.
    partyline_shared::crypto::install_provider();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(cli, logs, filter)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("partyline-control stopped: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--print-relay-config`: coturn's settings for the config's relay on stdout.
fn print_relay_config(cli: &Cli) -> ExitCode {
    let relay_config = || -> anyhow::Result<String> {
        let config = config::read(&cli.config)?;
        let network = &config.network;
        let media: Vec<_> = network.public_address.into_iter().chain(cli.relay_peer.iter().copied()).collect();
        if media.is_empty() {
            anyhow::bail!("the relay relays to the media server only: set network.publicAddress or give --relay-peer");
        }
        let tls = tls::files(&config.server.tls.mode(), &cli.state_dir())?;
        let tls = tls.as_ref().map(|(cert, key)| (cert.as_path(), key.as_path()));
        crate::turn::coturn_config(network, &media, tls).map_err(anyhow::Error::msg)
    };
    match relay_config() {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("partyline-control: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(cli: Cli, logs: LogRing, filter: FilterHandle) -> anyhow::Result<()> {
    let started = Instant::now();
    tracing::info!(version = env!("CARGO_PKG_VERSION"), config = %cli.config.display(), "partyline-control starting");
    let config = ConfigManager::load(&cli.config)?;
    let initial = config.current();
    set_level(&filter, initial.logging.level);
    let state_dir = cli.state_dir();
    let admin_token = admin_token(&state_dir, initial.server.admin_token.as_ref())?;

    let tls = tls::server_config(&initial.server.tls.mode(), &state_dir)?;
    let listener = TcpListener::bind(initial.server.listen)
        .await
        .with_context(|| format!("cannot listen on {}", initial.server.listen))?;
    let addr = listener.local_addr()?;
    let origin = origin(addr, tls.is_some());
    let certificate_sha256 = tls::CertificatePin::new(tls.as_ref().map(|tls| tls.certificate_sha256.clone()));

    let janus_secrets = secrets::JanusSecrets::resolve(&state_dir, &initial)
        .with_context(|| format!("cannot read the Janus secrets in {}", state_dir.display()))?;
    let events_listener = TcpListener::bind(initial.server.events_listen)
        .await
        .with_context(|| format!("cannot listen on {} (server.eventsListen)", initial.server.events_listen))?;
    let events_addr = events_listener.local_addr()?;
    warn_if_few_open_files();
    let per_address = PerAddress::default();
    let connections = LingeringAcceptor::new(MAX_CONNECTIONS).with_per_address(per_address.clone());
    // The crew as the previous process left it (crew.json); Janus's reconciliation then
    // confirms who is still connected and expires unused tokens.
    let state = AppState::new(Setup {
        config: Arc::clone(&config),
        state_dir: &state_dir,
        admin_token,
        janus_secrets,
        bus: cli.bus(),
        logs,
        listener: Listener {
            certificate_sha256: certificate_sha256.clone(),
            connections: connections.clone(),
            started,
        },
    })?;

    // Before the tasks that publish start.
    state.journal.start(state.events.watch());
    let users = Arc::clone(&state.users);
    per_address.count_sessions_with(move |address| users.crew_at(address));
    tokio::spawn(config::watch_for_reloads(Arc::clone(&config)));
    tokio::spawn(follow_log_level(Arc::clone(&config), filter));
    tokio::spawn(Arc::clone(&state.janus).run());
    tokio::spawn(Arc::clone(&state.janus).close_directs_of_the_removed());
    tokio::spawn(Arc::clone(&state.streams).end_of_the_removed(Arc::clone(&state.janus), Arc::clone(&state.users)));
    tokio::spawn(config::publish_changes(Arc::clone(&config), state.events.clone()));
    tokio::spawn(Arc::clone(&state.bridge).run());
    tokio::spawn(Arc::clone(&state.rooms).run());
    let events_app = app::events_app(state.clone());
    tokio::spawn(async move {
        if let Err(e) = events_listener::serve(events_listener, events_app, config).await {
            tracing::error!(error = %e, "the events listener stopped");
        }
    });
    let app = app::app(state);
    // Signal handling is in place before anyone is told the server is ready.
    let handle = axum_server::Handle::new();
    tokio::spawn(shutdown_on_signal(handle.clone()).await?);
    tracing::info!(%origin, events = %events_addr, "listening");
    // The one line scripts and tests wait for; stable wording.
    println!("partyline-control listening on {origin} (API {origin}/api, events http://{events_addr})");

    let listener = listener.into_std()?;
    // Connections close lingering (`linger`): a client still sending a body the server did not
    // read (a 413, …) gets the response instead of a TCP reset. At most MAX_CONNECTIONS at once.
    let mut server = axum_server::from_tcp(listener)?.handle(handle).first_request_timeout(IDLE_TIMEOUT);
    // Headers are read within the timeout, and a kept-alive connection waiting for its next
    // request counts as reading headers: an idle connection closes after it.
    server.http_builder().http1().timer(TokioTimer::new()).header_read_timeout(IDLE_TIMEOUT);
    match tls {
        Some(tls) => {
            let tls = axum_server::tls_rustls::RustlsConfig::from_config(tls.config);
            if let TlsMode::Files { cert, key } = initial.server.tls.mode() {
                tokio::spawn(tls::follow_files(cert, key, tls.clone(), certificate_sha256));
            }
            let acceptor =
                axum_server::tls_rustls::RustlsAcceptor::new(tls).handshake_timeout(IDLE_TIMEOUT).acceptor(connections);
            server.acceptor(acceptor).serve(app.into_make_service_with_connect_info::<SocketAddr>()).await?;
        }
        None => {
            server.acceptor(connections).serve(app.into_make_service_with_connect_info::<SocketAddr>()).await?;
        }
    }
    tracing::info!("partyline-control stopped");
    Ok(())
}

/// Warns when the process may open fewer files than a full listener needs (`LimitNOFILE` of the
/// package's unit): past that, the listener cannot accept while clients hold their connections.
fn warn_if_few_open_files() {
    let limits = procfs::process::Process::myself().and_then(|me| me.limits()).ok();
    let soft = match limits.map(|l| l.max_open_files.soft_limit) {
        Some(procfs::process::LimitValue::Value(soft)) => usize::try_from(soft).ok(),
        _ => None,
    };
    let needed = 4 * MAX_CONNECTIONS;
    if let Some(soft) = soft.filter(|&soft| soft < needed) {
        tracing::warn!(
            open_files = soft,
            needed,
            "the open-file limit is below what a full listener needs: under a crowd or a flood of idle \
             connections the listener may stop accepting (raise it: LimitNOFILE, ulimit -n)"
        );
    }
}

fn admin_token(state_dir: &std::path::Path, from_config: Option<&Secret>) -> anyhow::Result<AdminToken> {
    let (token, source) = secrets::find_or_generate(secrets::ADMIN_TOKEN, state_dir, from_config)
        .with_context(|| format!("cannot read or create the admin token in {}", state_dir.display()))?;
    secrets::log_source(secrets::ADMIN_TOKEN, &source);
    Ok(token)
}

fn origin(addr: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    let host = if addr.ip().is_unspecified() { "localhost".to_owned() } else { addr.ip().to_string() };
    let host = if addr.is_ipv6() && host != "localhost" { format!("[{host}]") } else { host };
    format!("{scheme}://{host}:{}", addr.port())
}

/// stderr and the log ring, both behind one level filter: `RUST_LOG` when set, else the
/// config's `logging.level` for partyline's own crates.
fn init_logging(logs: &LogRing) -> FilterHandle {
    let (filter, handle) = reload::Layer::new(level_filter(LogLevel::Info));
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal()))
        .with(logs.layer())
        .init();
    handle
}

fn level_filter(level: LogLevel) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let level = level.as_str();
        EnvFilter::new(format!("warn,partyline_control={level},partyline_shared={level},partyline_bridged={level}"))
    })
}

fn set_level(filter: &FilterHandle, level: LogLevel) {
    if let Err(e) = filter.reload(level_filter(level)) {
        tracing::warn!(error = %e, "cannot change the log level");
    }
}

async fn follow_log_level(config: Arc<ConfigManager>, filter: FilterHandle) {
    let mut events = config.subscribe();
    let mut level = config.current().logging.level;
    loop {
        match events.recv().await {
            Ok(event) if event.config.logging.level != level => {
                level = event.config.logging.level;
                set_level(&filter, level);
                tracing::info!(level = level.as_str(), "log level changed");
            }
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Installs the SIGTERM/SIGINT handlers now and returns the task that waits for them.
async fn shutdown_on_signal(
    handle: axum_server::Handle<SocketAddr>,
) -> anyhow::Result<impl std::future::Future<Output = ()>> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "shutting down");
        handle.graceful_shutdown(Some(std::time::Duration::from_secs(5)));
    })
}
