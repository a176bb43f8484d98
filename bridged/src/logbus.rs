//! A `tracing` layer that forwards bridged's own log lines (info and above) to the bus as
//! `LogEntry` signals, for control's log ring. Bounded and rate-limited: a burst of lines never
//! blocks the pipeline or floods the bus.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use partyline_shared::sync::lock;
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// At most this many lines per window reach the bus; the rest are counted and reported.
const MAX_PER_WINDOW: u32 = 20;
const WINDOW: Duration = Duration::from_secs(1);
/// Lines waiting for the bus.
pub const QUEUE: usize = 256;

#[derive(Debug, Clone)]
pub struct LogLine {
    pub level: &'static str,
    pub source: String,
    pub message: String,
}

#[derive(Debug)]
struct Window {
    start: Instant,
    sent: u32,
    dropped: u32,
}

#[derive(Debug)]
pub struct BusLayer {
    tx: mpsc::Sender<LogLine>,
    window: Mutex<Window>,
}

impl BusLayer {
    pub fn new(tx: mpsc::Sender<LogLine>) -> BusLayer {
        BusLayer { tx, window: Mutex::new(Window { start: Instant::now(), sent: 0, dropped: 0 }) }
    }
}

#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{}{value:?}", if self.0.is_empty() { "" } else { " " });
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            let _ = write!(self.0, "{}{value}", if self.0.is_empty() { "" } else { " " });
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for BusLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        // Info and above, bridged's own lines only (zbus's would loop back through the bus).
        if *meta.level() > Level::INFO || !meta.target().starts_with("partyline_bridged") {
            return;
        }
        let mut dropped_before = 0;
        {
            let mut window = lock(&self.window);
            if window.start.elapsed() >= WINDOW {
                dropped_before = window.dropped;
                *window = Window { start: Instant::now(), sent: 0, dropped: 0 };
            }
            if window.sent >= MAX_PER_WINDOW {
                window.dropped += 1;
                return;
            }
            window.sent += 1;
        }
        if dropped_before > 0 {
            let _ = self.tx.try_send(LogLine {
                level: "warn",
                source: "partyline_bridged::logbus".into(),
                message: format!("{dropped_before} log line(s) not forwarded (rate limit)"),
            });
        }
        let mut message = Message::default();
        event.record(&mut message);
        let level = match *meta.level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            _ => "info",
        };
        let _ = self.tx.try_send(LogLine { level, source: meta.target().to_owned(), message: message.0 });
    }
}
