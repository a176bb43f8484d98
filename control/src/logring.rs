//! The log ring: a `tracing` layer that keeps the newest [`CAPACITY`] events for
//! `GET /api/admin/logs`, beside the stderr output.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use partyline_shared::sync::lock;
use serde::Serialize;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use crate::events::{EventBus, LiveEvent};

pub const CAPACITY: usize = 1_000;

/// One log event as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct LogEntry {
    /// Increases by one per event, from 1; use it as `after=` to fetch only newer entries.
    pub seq: u64,
    /// RFC 3339, UTC.
    pub timestamp: String,
    #[schema(value_type = String, example = "warn")]
    #[serde(serialize_with = "serialize_level")]
    pub level: Level,
    pub message: String,
    /// The module that logged it.
    pub source: String,
    /// The event's structured fields (`meta`, as the original system's clients read them).
    #[schema(value_type = Object)]
    pub meta: Map<String, Value>,
}

fn serialize_level<S: serde::Serializer>(level: &Level, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&level.as_str().to_ascii_lowercase())
}

#[derive(Debug, Default)]
struct Ring {
    entries: VecDeque<LogEntry>,
    last_seq: u64,
    /// Where warnings and errors also go, once there is a bus.
    events: Option<EventBus>,
}

/// Shared handle to the ring; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct LogRing(Arc<Mutex<Ring>>);

/// What a query returns: the page, newest first, and how many entries matched in all.
#[derive(Debug)]
pub struct LogPage {
    pub entries: Vec<LogEntry>,
    pub total: usize,
}

impl LogRing {
    /// The `tracing` layer that fills this ring.
    pub fn layer(&self) -> RingLayer {
        RingLayer(self.clone())
    }

    /// From now on, warnings and errors are also published on `bus`.
    pub fn publish_warnings_to(&self, bus: EventBus) {
        lock(&self.0).events = Some(bus);
    }

    /// Entries at `min_level` or more severe (`warn` → warn and error), with a sequence
    /// number above `after`, newest first, at most `limit` of them.
    pub fn query(&self, min_level: Level, after: u64, limit: usize) -> LogPage {
        let ring = lock(&self.0);
        let matching = ring.entries.iter().rev().filter(|e| e.seq > after && e.level <= min_level);
        let total = matching.clone().count();
        LogPage { entries: matching.take(limit).cloned().collect(), total }
    }

    fn push(&self, mut entry: LogEntry) {
        let mut ring = lock(&self.0);
        ring.last_seq += 1;
        entry.seq = ring.last_seq;
        if ring.entries.len() == CAPACITY {
            ring.entries.pop_front();
        }
        let publish = (entry.level <= Level::WARN).then(|| ring.events.clone()).flatten().map(|bus| {
            let event = LiveEvent::Log {
                level: entry.level.as_str().to_ascii_lowercase(),
                message: entry.message.clone(),
                source: entry.source.clone(),
            };
            (bus, event)
        });
        ring.entries.push_back(entry);
        drop(ring);
        if let Some((bus, event)) = publish {
            bus.publish(&event);
        }
    }
}

#[derive(Debug)]
pub struct RingLayer(LogRing);

impl<S: Subscriber> Layer<S> for RingLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut visitor = FieldVisitor::default();
        event.record(&mut visitor);
        let timestamp = OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default();
        self.0.push(LogEntry {
            seq: 0,
            timestamp,
            level: *meta.level(),
            message: visitor.message,
            source: meta.target().to_owned(),
            meta: visitor.fields,
        });
    }
}

#[derive(Default)]
struct FieldVisitor {
    message: String,
    fields: Map<String, Value>,
}

impl FieldVisitor {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            match value {
                Value::String(s) => self.message = s,
                other => self.message = other.to_string(),
            }
        } else {
            self.fields.insert(field.name().to_owned(), value);
        }
    }
}

impl Visit for FieldVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.put(field, Value::String(text));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn keeps_the_newest_and_filters_by_level() {
        let ring = LogRing::default();
        let subscriber = tracing_subscriber::registry().with(ring.layer());
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..CAPACITY + 5 {
                tracing::info!(i, "info {i}");
            }
            tracing::warn!(who = "x", "a warning");
            tracing::error!("an error");
        });
        let all = ring.query(Level::TRACE, 0, usize::MAX);
        assert_eq!(all.total, CAPACITY);
        assert_eq!(all.entries[0].message, "an error");
        assert_eq!(all.entries[0].seq, CAPACITY as u64 + 7);
        let warn = ring.query(Level::WARN, 0, 10);
        assert_eq!(warn.total, 2);
        assert_eq!(warn.entries[1].meta["who"], "x");
        let after = ring.query(Level::TRACE, CAPACITY as u64 + 6, 10);
        assert_eq!(after.entries.len(), 1);
    }
}
