//! bridged's plan applies as `/metrics` counts them: how many, how many refused, and how long
//! each took (the D-Bus call, which returns once bridged has rebuilt what changed).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    /// `applied` or `refused`.
    outcome: &'static str,
}

#[derive(Debug)]
pub struct Applies {
    count: Family<Outcome, Counter>,
    time: Histogram,
}

impl Default for Applies {
    fn default() -> Self {
        // 1 ms to 16 s: a plan that changes a name takes milliseconds, one that opens a card
        // and joins rooms some hundreds.
        Applies { count: Family::default(), time: Histogram::new(exponential_buckets(0.001, 2.0, 15)) }
    }
}

impl Applies {
    pub(crate) fn count(&self, applied: bool, took: Duration) {
        self.count.get_or_create(&Outcome { outcome: if applied { "applied" } else { "refused" } }).inc();
        self.time.observe(took.as_secs_f64());
    }

    pub fn register(&self, registry: &mut Registry) {
        registry.register("bridged_plan_applies", "Plans sent to partyline-bridged, by outcome", self.count.clone());
        registry.register_with_unit(
            "bridged_plan_apply",
            "Time partyline-bridged took to apply a plan",
            prometheus_client::registry::Unit::Seconds,
            self.time.clone(),
        );
    }
}
