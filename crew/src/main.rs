//! `partyline-crew`: load-test a partyline box with simulated panels before the show.
//!
//!   partyline-crew --server https://box:8443 --certificate-sha256 AB:CD:… --position stage --users 20
//!
//! Each member joins as a browser's panel does and talks in turns; the report says what the
//! listeners heard (levels, gaps, mouth-to-ear) and what it cost. `--step` ramps to the knee.

use std::io::Write as _;
use std::net::{IpAddr, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use partyline_crew::cpu::Watched;
use partyline_crew::media::{Link, Loss, Path};
use partyline_crew::run::{self, Ramp, Steady};
use partyline_crew::{Crew, Lines, Options, TlsCheck};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "A headless crew for partyline: simulated panels that join, talk and listen like the browser's, and measure what they hear"
)]
struct Cli {
    /// The server's origin, as crew open it (https://HOST:PORT).
    #[arg(long, env = "PARTYLINE_SERVER")]
    server: String,
    /// The SHA-256 of the server's certificate (the admin page and every token answer show it).
    #[arg(long, conflicts_with = "insecure")]
    certificate_sha256: Option<String>,
    /// Take any certificate, the server's and the relay's (a lab's choice, never a show's).
    #[arg(long)]
    insecure: bool,
    /// Each line also offers a candidate on the TURN relay the token answer names (over TLS or
    /// TCP), as a browser does: for a crew whose network lets no UDP through.
    #[arg(long)]
    relay: bool,
    /// The SHA-256 of the relay's TLS certificate (`turns:`), with --relay.
    #[arg(long, requires = "relay")]
    relay_certificate_sha256: Option<String>,
    /// Simulated members.
    #[arg(long, default_value_t = 10)]
    users: usize,
    /// Every member joins this position's lines.
    #[arg(long, conflicts_with_all = ["listen", "talk"])]
    position: Option<String>,
    /// Groups every member listens to (comma-separated ids), with --talk.
    #[arg(long, value_delimiter = ',')]
    listen: Vec<String>,
    /// Groups every member talks on (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    talk: Vec<String>,
    /// The PIN, where the position or groups ask for one.
    #[arg(long, env = "PARTYLINE_PIN")]
    pin: Option<String>,
    /// Seconds of talking and listening once everyone joined.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Seconds over which the joins start.
    #[arg(long, default_value_t = 10)]
    ramp: u64,
    /// Seconds each talker holds a line before the next member takes it.
    #[arg(long, default_value_t = 5)]
    turn: u64,
    /// Ramp to the knee: add this many members per step until a listener hears a gap or
    /// mouth-to-ear grows 10 ms over the first step's.
    #[arg(long)]
    step: Option<usize>,
    /// The most members a ramp adds up to.
    #[arg(long, default_value_t = 200)]
    max_users: usize,
    /// Seconds judged per step of a ramp (after 10 s of settling).
    #[arg(long, default_value_t = 60)]
    step_seconds: u64,
    /// The address the media sockets bind to (default: the one that routes to the server).
    #[arg(long)]
    media_address: Option<IpAddr>,
    /// How late a packet may come before a listener counts it concealed (ms).
    #[arg(long, default_value_t = 40)]
    jitter_buffer_ms: u64,
    /// A simulated lossy link, both ways on every line: this share of packets lost (%).
    #[arg(long, default_value_t = 0.0, value_parser = percent)]
    link_loss: f64,
    /// ...in bursts of this many packets on average (Gilbert–Elliott; 1: each loss alone).
    #[arg(long, default_value_t = 1.0)]
    link_burst: f64,
    /// ...and each packet delayed by up to this (uniform, so packets may overtake), in ms.
    #[arg(long, default_value_t = 0)]
    link_jitter_ms: u64,
    /// Talkers encode Opus in-band FEC for this loss (%), as a browser that measured it does.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    fec_percent: u8,
    /// Also measure these processes' CPU and memory (NAME=PID, e.g. janus=1234), repeatable.
    #[arg(long = "watch")]
    watch: Vec<Watched>,
    /// The report as JSON on stdout (progress stays on stderr).
    #[arg(long)]
    json: bool,
    /// Names are PREFIX-1, PREFIX-2, …
    #[arg(long, default_value = "crew")]
    name_prefix: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let options = options(&cli)?;
    let mut crew = Crew::new(options).context("the crew")?;
    let progress = |line: &str| {
        let _ = writeln!(std::io::stderr(), "crew: {line}");
    };
    let output = match cli.step {
        None => {
            let plan = Steady { users: cli.users, ramp: secs(cli.ramp), duration: secs(cli.duration) };
            let report = run::steady(&mut crew, &plan, &cli.watch, progress).await;
            if cli.json { serde_json::to_string_pretty(&report)? } else { report.table() }
        }
        Some(step) => {
            let plan = Ramp {
                start: cli.users,
                step,
                max: cli.max_users,
                ramp: secs(cli.ramp),
                settle: secs(10),
                measure: secs(cli.step_seconds),
                latency_margin_ms: 10.0,
            };
            let steps = run::ramp(&mut crew, &plan, &cli.watch, progress).await;
            if cli.json {
                serde_json::to_string_pretty(&steps)?
            } else {
                steps
                    .iter()
                    .map(|s| format!("{}{}\n", s.report.table(), s.degraded.as_deref().unwrap_or("clean")))
                    .collect()
            }
        }
    };
    println!("{output}");
    crew.leave(usize::MAX).await;
    let failed = crew.joins.iter().filter_map(|join| join.as_ref().err()).collect::<Vec<_>>();
    if let Some(first) = failed.first() {
        bail!("{} of {} joins failed; the first: {first}", failed.len(), crew.joins.len());
    }
    Ok(())
}

fn percent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p),
        _ => Err(format!("{text:?} is not a share of packets from 0 to 100 (%)")),
    }
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

fn options(cli: &Cli) -> anyhow::Result<Options> {
    let tls = match (&cli.certificate_sha256, cli.insecure) {
        (Some(pin), _) => TlsCheck::pinned(pin).map_err(anyhow::Error::msg)?,
        (None, true) => TlsCheck::Insecure,
        (None, false) if cli.server.starts_with("https://") => {
            bail!("give the server certificate's --certificate-sha256 (the admin page shows it), or --insecure")
        }
        (None, false) => TlsCheck::Insecure,
    };
    let relay = match (cli.relay, &cli.relay_certificate_sha256) {
        (false, _) => None,
        (true, Some(pin)) => Some(TlsCheck::pinned(pin).map_err(anyhow::Error::msg)?),
        (true, None) if cli.insecure => Some(TlsCheck::Insecure),
        (true, None) => bail!("give the relay certificate's --relay-certificate-sha256, or --insecure"),
    };
    let lines = match &cli.position {
        Some(position) => Lines::Position { position: position.clone() },
        None if cli.listen.is_empty() && cli.talk.is_empty() => bail!("give --position, or --listen and --talk"),
        None => Lines::Groups { listen: cli.listen.clone(), talk: cli.talk.clone() },
    };
    let loss = match (cli.link_loss, cli.link_burst) {
        (0.0, _) => Loss::None,
        (percent, burst) if burst <= 1.0 => Loss::Random(percent / 100.0),
        (percent, burst) => Loss::bursty(percent, burst),
    };
    let link = Path { loss, jitter: Duration::from_millis(cli.link_jitter_ms) };
    let media_address = match cli.media_address {
        Some(address) => address,
        None => route_to(&cli.server)?,
    };
    Ok(Options {
        server: cli.server.clone(),
        tls,
        lines,
        pin: cli.pin.clone(),
        name_prefix: cli.name_prefix.clone(),
        media_address,
        jitter_buffer: Duration::from_millis(cli.jitter_buffer_ms),
        turn: secs(cli.turn),
        link: Link { up: link, down: link },
        fec_percent: cli.fec_percent,
        relay,
    })
}

/// The local address the kernel would send to the server from (no packet is sent).
fn route_to(server: &str) -> anyhow::Result<IpAddr> {
    let authority = server.split("://").nth(1).unwrap_or(server).split('/').next().unwrap_or_default();
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        authority.to_owned()
    } else {
        format!("{authority}:443")
    };
    let target = with_port.to_socket_addrs()?.next().with_context(|| format!("{authority} has no address"))?;
    let socket = UdpSocket::bind(if target.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" })?;
    socket.connect(target)?;
    Ok(socket.local_addr()?.ip())
}
