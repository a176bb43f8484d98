//! Command line.

use std::path::PathBuf;

/// partyline's control plane: admin and user HTTP API, config owner.
///
/// Serves the join page, the admin UI, the API under /api and the Janus WebSocket proxy from
/// one HTTPS listener (`server.listen` in the config file). The config file is created with
/// defaults when missing; SIGHUP (or editing the file) reloads it after validation.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "partyline-control", version, about, long_about)]
pub struct Cli {
    /// The config file (created with defaults when missing).
    #[arg(long, env = "PARTYLINE_CONFIG", default_value = "partyline.yaml")]
    pub config: PathBuf,

    /// Where generated secrets (admin token) and the self-signed certificate live;
    /// defaults to the config file's directory.
    #[arg(long, env = "PARTYLINE_STATE_DIR")]
    pub state_dir: Option<PathBuf>,

    /// Reach partyline-bridged on the session bus (`DBUS_SESSION_BUS_ADDRESS`) instead of
    /// the system bus; `PARTYLINE_BUS=session` does the same.
    #[arg(long)]
    pub session: bool,

    /// Reach partyline-bridged on the bus at this address (e.g. `unix:path=/run/x`);
    /// `PARTYLINE_BUS=ADDRESS` does the same.
    #[arg(long, value_name = "ADDRESS")]
    pub bus_address: Option<String>,

    /// Print coturn settings for the config's relay (`network.turn`) and exit: its ports and
    /// address from the relay's URLs, the shared secret, control's certificate for `turns:`,
    /// and as its only peers the media server (`network.publicAddress` and each --relay-peer).
    #[arg(long)]
    pub print_relay_config: bool,

    /// With --print-relay-config: an address of the media server the relay may relay to
    /// (Janus's ICE address), repeatable.
    #[arg(long, value_name = "ADDRESS", requires = "print_relay_config")]
    pub relay_peer: Vec<std::net::IpAddr>,
}

impl Cli {
    /// The bus to find partyline-bridged on.
    pub fn bus(&self) -> partyline_shared::bridge::BusChoice {
        let env = std::env::var("PARTYLINE_BUS").ok().filter(|v| !v.is_empty());
        partyline_shared::bridge::BusChoice::pick(self.session, self.bus_address.clone(), env.as_deref())
    }

    /// The state directory: `--state-dir`, or the config file's directory.
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(|| match self.config.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        })
    }
}
