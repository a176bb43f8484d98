//! The show report (`GET /api/admin/report`): what a producer asks after a show ("who dropped
//! out, when, and why"), worked out from the journal's lines (`crate::journal`) for a window of
//! time. Per crew member: joins, leaves with why, drops (a link judged worse than good and
//! back, or a leave and a rejoin of the same name on the same line) and talk time per line; per
//! group: talk time, who was on it, the most at once; Janus, its nodes, bridged and PTP: each
//! outage; sessions moved, direct lines, warnings, and the events the journal lost.
//!
//! Talk time counts only what falls inside the window (a talk across its edge is clipped). A
//! drop, an outage or a direct line is shown whole, from its real start, and one still open at
//! the window's end runs to it (`end` null). What came before the window is read too: it says
//! who was on a line, talking, dropped or down when the window opens.

mod builder;
mod csv;
mod entry;
pub mod rfc3339;

use std::collections::BTreeMap;

use serde::Serialize;
use time::{Duration, OffsetDateTime};
use utoipa::ToSchema;

pub use csv::to_csv;

/// The span of time a report covers, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
}

/// A report and its timeline (one row per occurrence, in time order: the CSV).
#[derive(Debug)]
pub struct Built {
    pub report: ShowReport,
    pub timeline: Vec<Occurrence>,
}

/// Works out the report of `window` from the journal's text (its lines in the order written).
pub fn build(journal: &str, window: Window) -> Built {
    builder::Builder::new(window).read(journal)
}

/// One occurrence of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    pub time: OffsetDateTime,
    /// `control_started`, `join`, `leave`, `talk`, `link_drop`, `rejoin`, `outage`,
    /// `session_moved`, `direct_line`, `warn`, `error`, `events_lost`.
    pub kind: &'static str,
    /// The crew member's name, if it is about one.
    pub member: String,
    /// The group (or `direct`), if it is about one.
    pub group: String,
    pub detail: String,
    /// How long it lasted, for what lasts.
    pub duration: Option<Duration>,
}

/// What happened during a show, from control's journal.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShowReport {
    /// The window's start, RFC 3339, UTC.
    #[schema(example = "2026-05-01T18:00:00Z")]
    pub from: String,
    /// The window's end, RFC 3339, UTC.
    #[schema(example = "2026-05-01T23:00:00Z")]
    pub to: String,
    /// Every crew member (by name) on a line in the window, by name.
    pub members: Vec<MemberReport>,
    /// Every group someone was on in the window, by id.
    pub groups: Vec<GroupReport>,
    /// Each time Janus (the link to it, or one node of the pool), bridged or the PTP clock was
    /// not working, by start.
    pub outages: Vec<Outage>,
    /// Crew sessions moved off a lost Janus node.
    pub sessions_moved: Vec<SessionMove>,
    pub direct_lines: Vec<DirectLineReport>,
    /// Warnings and errors of control's log.
    pub warnings: Vec<LoggedWarning>,
    /// When control (re)started (RFC 3339): talks going on then ended unheard.
    pub control_starts: Vec<String>,
    /// Events the journal missed in the window (its writer fell behind, or the disk refused):
    /// the report lacks them.
    pub lost_events: u64,
    /// Journal lines that could not be read (a line a crash cut short): left out.
    pub unreadable_lines: u64,
}

/// One crew member (one name: a member who joins again gets a new identity).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberReport {
    pub username: String,
    /// The participant identities the name had, first seen first.
    pub identities: Vec<String>,
    pub joins: Vec<MemberJoin>,
    pub leaves: Vec<MemberLeave>,
    /// Link drops and leaves followed by a rejoin, by start.
    pub drops: Vec<Dropout>,
    /// Seconds talked in the window, per line (a group id, or `direct` for direct lines).
    pub talk_seconds: BTreeMap<String, f64>,
    pub talk_seconds_total: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MemberJoin {
    /// RFC 3339, UTC.
    pub time: String,
    pub group: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MemberLeave {
    /// RFC 3339, UTC.
    pub time: String,
    pub group: String,
    /// Why, as control saw it (`left the room`, `removed`, `no longer in the room`, …).
    pub why: String,
}

/// A stretch in which a crew member was not heard well, or not there.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dropout {
    pub kind: DropKind,
    pub group: String,
    /// RFC 3339, UTC.
    pub start: String,
    /// RFC 3339, UTC; null while it lasted past the window's end.
    pub end: Option<String>,
    /// From start to end (or to the window's end).
    pub duration_s: f64,
    /// A link's worst judgement and its figures then; a rejoin's leave's why.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DropKind {
    /// The line's link was judged degraded or poor, until judged good again (or the member
    /// left the line, or control restarted).
    Link,
    /// The member left the line and joined it again.
    Rejoin,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupReport {
    pub group: String,
    /// Seconds talked on it in the window, everyone together.
    pub talk_seconds: f64,
    /// Who was on it in the window, by name.
    pub members: Vec<String>,
    /// The most members on it at once.
    pub peak_members: usize,
    /// When that peak was first reached (the window's start, if it was there already).
    pub peak_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Outage {
    /// `janus` (control's link to it), `node NAME` (one node of a pool), `bridged` or `ptp`.
    pub service: String,
    /// The state it went into (`down`, `absent`, `lost`, …).
    pub state: String,
    pub message: String,
    /// RFC 3339, UTC.
    pub start: String,
    /// RFC 3339, UTC; null while it lasted past the window's end.
    pub end: Option<String>,
    pub duration_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SessionMove {
    /// RFC 3339, UTC.
    pub time: String,
    pub username: String,
    pub identity: String,
    /// The node it left.
    pub node: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectLineReport {
    pub caller: String,
    pub callee: String,
    /// RFC 3339, UTC.
    pub start: String,
    /// RFC 3339, UTC; null while it lasted past the window's end.
    pub end: Option<String>,
    pub duration_s: f64,
    /// Why it closed.
    pub why: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct LoggedWarning {
    /// RFC 3339, UTC.
    pub time: String,
    /// `warn` or `error`.
    pub level: String,
    pub message: String,
    /// The module that logged it.
    pub source: String,
}

/// Seconds, to a tenth: what a producer reads, and what a sum of many is exact to.
fn seconds(duration: Duration) -> f64 {
    (duration.as_seconds_f64() * 10.0).round() / 10.0
}
