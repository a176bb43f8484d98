//! HTTP requests by route, method and status, and their latency by route.

use axum::http::Method;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: &'static str,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

/// Requests and their latency.
#[derive(Debug)]
pub struct HttpFigures {
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
}

impl Default for HttpFigures {
    fn default() -> Self {
        let latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        HttpFigures { requests: Family::default(), latency }
    }
}

/// 100 µs to 3.3 s: a cached read takes tens of µs, a durable write a few ms, a token with
/// Janus's round trips some tens.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

impl HttpFigures {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "http_requests",
            "HTTP requests answered, by route, method and status",
            self.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to the response's head, by route (an event stream's is its start)",
            self.latency.clone(),
        );
    }

    /// One request answered: its route's template, method, status and time to its head.
    pub fn observe(&self, route: &str, method: &Method, status: u16, seconds: f64) {
        let request = RequestLabels { route: route.to_owned(), method: method_label(method), status };
        self.requests.get_or_create(&request).inc();
        self.latency.get_or_create(&RouteLabels { route: route.to_owned() }).observe(seconds);
    }
}

/// The method as a label: one of HTTP's own, or `other` (any token is a method, and a
/// client's invention would make a series each).
fn method_label(method: &Method) -> &'static str {
    static KNOWN: [Method; 9] = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ];
    KNOWN.iter().find(|known| *known == method).map_or("other", |known| known.as_str())
}
