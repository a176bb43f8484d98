//! One line of the journal as the report reads it: its time, and the live event it holds (the
//! shape `crate::events::LiveEvent` serialises to) or one of the journal's own lines. Types the
//! report does not use are read as [`Entry::Other`], so that a newer control's journal still
//! reads.

use serde::Deserialize;
use time::OffsetDateTime;

use super::rfc3339;

/// A journal line read.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub at: OffsetDateTime,
    pub entry: Entry,
}

#[derive(Debug, Deserialize)]
struct RawLine {
    at: String,
    #[serde(flatten)]
    entry: Entry,
}

/// What a journal line says.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Entry {
    /// control (re)started: what it knew of talks and links is gone.
    ControlStarted,
    /// The journal missed `count` events (its writer fell behind the bus, or could not write).
    EventsLost {
        count: u64,
    },
    UserJoined {
        identity: String,
        username: String,
        group_id: String,
    },
    UserLeft {
        identity: String,
        username: String,
        group_id: String,
        why: String,
    },
    Talking {
        identity: String,
        username: String,
        group_id: String,
    },
    StoppedTalking {
        identity: String,
        username: String,
        group_id: String,
    },
    LinkChanged {
        identity: String,
        username: String,
        group_id: String,
        quality: Quality,
        loss_percent: f32,
        jitter_ms: f32,
        rtt_ms: Option<f32>,
    },
    SessionMoved {
        identity: String,
        username: String,
        node: String,
    },
    NodeState {
        node: String,
        state: String,
        message: String,
    },
    JanusState {
        state: String,
        message: String,
    },
    BridgeState {
        state: String,
        message: String,
    },
    PtpState {
        state: String,
        grandmaster: String,
    },
    DirectOpened {
        group_id: String,
        caller: String,
        callee: String,
    },
    DirectClosed {
        group_id: String,
        why: String,
    },
    Log {
        level: String,
        message: String,
        source: String,
    },
    #[serde(other)]
    Other,
}

/// A line's link as judged (`crate::links::LinkQuality`), in order from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quality {
    Good,
    Degraded,
    Poor,
}

impl Quality {
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Good => "good",
            Quality::Degraded => "degraded",
            Quality::Poor => "poor",
        }
    }
}

/// Why a journal line cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BadLine {
    #[error("not a journal line: {0}")]
    Json(#[from] serde_json::Error),
    #[error("its time {0}")]
    Time(#[from] rfc3339::BadTime),
}

/// Reads one journal line.
pub fn read(text: &str) -> Result<Line, BadLine> {
    let raw: RawLine = serde_json::from_str(text)?;
    Ok(Line { at: rfc3339::parse(&raw.at)?, entry: raw.entry })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_the_events_they_hold_and_unknown_types_as_other() {
        let line = read(r#"{"at":"2026-05-01T18:00:00.5Z","type":"userLeft","identity":"ann-1","username":"Ann","groupId":"stage","why":"left the room"}"#)
            .expect("a line");
        assert_eq!(rfc3339::format(line.at), "2026-05-01T18:00:00.500Z");
        let left = Entry::UserLeft {
            identity: "ann-1".into(),
            username: "Ann".into(),
            group_id: "stage".into(),
            why: "left the room".into(),
        };
        assert_eq!(line.entry, left);
        let other = read(r#"{"at":"2026-05-01T18:00:00Z","type":"somethingNew","x":1}"#).expect("a line");
        assert_eq!(other.entry, Entry::Other);
        let started = read(r#"{"at":"2026-05-01T18:00:00Z","type":"controlStarted","version":"1.0"}"#);
        assert_eq!(started.expect("a line").entry, Entry::ControlStarted);
        assert!(read(r#"{"at":"2026-05-01T18:00:00Z","type":"userJo"#).is_err(), "a line cut by a crash");
        assert!(read(r#"{"at":"noon","type":"controlStarted"}"#).is_err());
    }
}
