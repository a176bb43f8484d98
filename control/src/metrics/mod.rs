//! What `GET /metrics` counts as it happens, and its two text formats.
//!
//! Two kinds of figures. What only exists as it happens is counted as it happens, by the part
//! that sees it: HTTP requests and their latency (`http`), bridged's plan applies
//! (`bridged_link`), new addresses using the admin token (here). Everything else is read from
//! the state at each scrape (`api::metrics`), so that nothing has to be kept in step with it.
//! This module knows nothing of the state: the route puts the two together.
//!
//! Labels are bounded: groups and nodes come from the config, members are labelled while they
//! hold a token, routes by their template (`/api/panel/{key}`, never a key), addresses never.
//! No token, key or secret is ever a label.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Mutex;

use partyline_shared::sync::lock;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

mod http;

pub use http::HttpFigures;

/// The media type Prometheus asks for and gets.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Prometheus's own text format, for a client that does not ask for OpenMetrics.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Addresses remembered as having used the admin token; past this, each further one counts as
/// new (an attack spraying addresses must not grow control's memory).
const KNOWN_ADMIN_ADDRESSES: usize = 256;

/// The counters kept as things happen.
#[derive(Debug, Default)]
pub struct Metrics {
    pub http: HttpFigures,
    admin_addresses: Mutex<HashSet<IpAddr>>,
    new_admin_addresses: Counter,
}

impl Metrics {
    /// The admin token was accepted from `address`: a first use from there is counted and
    /// logged (an alert rule watches the count: a token used from a new machine may be a leak).
    pub fn admin_token_used_from(&self, address: IpAddr) {
        let mut known = lock(&self.admin_addresses);
        if known.contains(&address) {
            return;
        }
        if known.len() < KNOWN_ADMIN_ADDRESSES {
            known.insert(address);
        }
        drop(known);
        self.new_admin_addresses.inc();
        tracing::info!(%address, "the admin token was used from an address new to this run of control");
    }

    /// Registers the counters kept here.
    pub fn register(&self, registry: &mut Registry) {
        self.http.register(registry);
        registry.register(
            "admin_token_new_addresses",
            "Addresses the admin token was first used from, since control started",
            self.new_admin_addresses.clone(),
        );
    }
}

/// An OpenMetrics exposition in Prometheus's own text format (0.0.4), for a client that does
/// not ask for OpenMetrics (promtool, curl): a counter's HELP and TYPE lines name its samples
/// (`…_total`), and there are no UNIT and EOF lines. Everything else is the same in both.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: HashSet<&str> =
        openmetrics.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut text = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let described = ["# HELP ", "# TYPE "].into_iter().find_map(|kind| {
            let (name, rest) = line.strip_prefix(kind)?.split_once(' ')?;
            counters.contains(name).then(|| format!("{kind}{name}_total {rest}"))
        });
        text.push_str(described.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_names_a_counter_by_its_samples_and_drops_what_only_openmetrics_has() {
        let openmetrics = "# HELP x_seconds Time.\n# TYPE x_seconds counter\n# UNIT x_seconds seconds\n\
                           x_seconds_total{a=\"b\"} 1.5\n# HELP y A gauge.\n# TYPE y gauge\ny 2\n# EOF\n";
        let expected = "# HELP x_seconds_total Time.\n# TYPE x_seconds_total counter\n\
                        x_seconds_total{a=\"b\"} 1.5\n# HELP y A gauge.\n# TYPE y gauge\ny 2\n";
        assert_eq!(to_prometheus_text(openmetrics), expected);
    }

    #[test]
    fn an_address_counts_as_new_once_and_the_memory_of_them_is_bounded() {
        let metrics = Metrics::default();
        let address = |n: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n));
        metrics.admin_token_used_from(address(1));
        metrics.admin_token_used_from(address(1));
        assert_eq!(metrics.new_admin_addresses.get(), 1);
        for n in 0..1000 {
            metrics.admin_token_used_from(address(n));
        }
        assert_eq!(lock(&metrics.admin_addresses).len(), KNOWN_ADMIN_ADDRESSES);
        // Forgotten ones count again: the count errs towards an alert, never towards silence.
        assert!(metrics.new_admin_addresses.get() >= 1000);
    }
}
