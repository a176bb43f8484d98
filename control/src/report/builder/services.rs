//! The services' part of the report (outages of Janus, its nodes, bridged, PTP), direct lines
//! and the log's warnings.

use time::OffsetDateTime;

use super::{Builder, DIRECT_LINES, Ended, shown};
use crate::report::rfc3339::format;
use crate::report::{DirectLineReport, LoggedWarning, Occurrence, Outage, seconds};

#[derive(Debug)]
pub(super) struct OpenOutage {
    start: OffsetDateTime,
    state: String,
    message: String,
}

#[derive(Debug)]
pub(super) struct OpenDirect {
    pub(super) start: OffsetDateTime,
    pub(super) caller: String,
    pub(super) callee: String,
}

/// Whether a service's state is one it works in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Health {
    Working,
    Failing,
    /// Not known yet (a start), or on the way (PTP acquiring): neither ends nor starts an outage.
    Unsure,
}

impl Builder {
    pub(super) fn service_state(
        &mut self,
        at: OffsetDateTime,
        service: String,
        health: Health,
        state: String,
        message: String,
    ) {
        match health {
            Health::Working => self.end_outage(&service, Ended::At(at)),
            // An outage is shown as it began: a later state of the same outage (down again with
            // another message) does not start another.
            Health::Failing => {
                self.outages.entry(service).or_insert(OpenOutage { start: at, state, message });
            }
            Health::Unsure => {}
        }
    }

    pub(super) fn end_outage(&mut self, service: &str, ended: Ended) {
        let Some(open) = self.outages.remove(service) else { return };
        let end = self.end_time(ended);
        if end < self.window.from {
            return;
        }
        let lasted = end - open.start;
        let detail = if open.message.is_empty() {
            format!("{service} {}", open.state)
        } else {
            format!("{service} {}: {}", open.state, open.message)
        };
        self.timeline.push(Occurrence {
            time: open.start,
            kind: "outage",
            member: String::new(),
            group: String::new(),
            detail,
            duration: Some(lasted),
        });
        let OpenOutage { start, state, message } = open;
        let (start, end, duration_s) = (format(start), shown(ended), seconds(lasted));
        self.report.outages.push(Outage { service: service.to_owned(), state, message, start, end, duration_s });
    }

    pub(super) fn end_direct(&mut self, open: OpenDirect, ended: Ended, why: Option<String>) {
        let end = self.end_time(ended);
        if end < self.window.from {
            return;
        }
        let lasted = end - open.start;
        let detail =
            format!("with {}{}", open.callee, why.as_ref().map(|why| format!("; closed: {why}")).unwrap_or_default());
        let (member, group) = (open.caller.clone(), DIRECT_LINES.to_owned());
        self.timeline.push(Occurrence {
            time: open.start,
            kind: "direct_line",
            member,
            group,
            detail,
            duration: Some(lasted),
        });
        let OpenDirect { start, caller, callee } = open;
        let (start, end, duration_s) = (format(start), shown(ended), seconds(lasted));
        self.report.direct_lines.push(DirectLineReport { caller, callee, start, end, duration_s, why });
    }

    pub(super) fn logged(&mut self, at: OffsetDateTime, level: String, message: String, source: String) {
        if !self.inside(at) {
            return;
        }
        let kind = if level == "error" { "error" } else { "warn" };
        self.note(at, kind, "", "", format!("{message} ({source})"));
        self.report.warnings.push(LoggedWarning { time: format(at), level, message, source });
    }
}

/// The link to Janus, or one node.
pub(super) fn janus_health(state: &str) -> Health {
    match state {
        "up" => Health::Working,
        "down" | "unconfigured" => Health::Failing,
        _ => Health::Unsure,
    }
}

pub(super) fn bridge_health(state: &str) -> Health {
    match state {
        "idle" | "running" => Health::Working,
        "unreachable" | "absent" | "unconfigured" | "degraded" | "error" => Health::Failing,
        _ => Health::Unsure,
    }
}

/// PTP lost or held runs the clock free (audio goes on): an outage of the clock, not of audio.
pub(super) fn ptp_health(state: &str) -> Health {
    match state {
        "locked" | "off" => Health::Working,
        "lost" | "held" => Health::Failing,
        _ => Health::Unsure,
    }
}
