//! The report's timeline as CSV (RFC 4180): one row per occurrence,
//! `time,kind,member,group,detail,duration_s`, lines ending in CRLF, a field quoted when it
//! holds a comma, a quote or a line break (its quotes doubled). A field that a spreadsheet would
//! take for a formula (`=`, `+`, `-`, `@` first: a crew member may name themselves so) gets a
//! leading `'`, so that opening the file runs nothing.

use std::fmt::Write as _;

use super::rfc3339::format;
use super::{Occurrence, seconds};

const HEADER: &str = "time,kind,member,group,detail,duration_s";

/// `timeline` as CSV, its header first.
pub fn to_csv(timeline: &[Occurrence]) -> String {
    let mut csv = String::with_capacity(64 * (timeline.len() + 1));
    csv.push_str(HEADER);
    csv.push_str("\r\n");
    for occurrence in timeline {
        let duration = occurrence.duration.map(|d| seconds(d).to_string()).unwrap_or_default();
        let fields =
            [format(occurrence.time), occurrence.kind.to_owned(), occurrence.member.clone(), occurrence.group.clone()];
        for field in fields.iter().chain([&occurrence.detail]) {
            csv.push_str(&quoted(field));
            csv.push(',');
        }
        // Infallible: writing to a String.
        let _ = write!(csv, "{duration}\r\n");
    }
    csv
}

/// One field, quoted when RFC 4180 needs it, defused when a spreadsheet would evaluate it.
fn quoted(field: &str) -> String {
    let field =
        if field.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{field}") } else { field.to_owned() };
    if field.contains([',', '"', '\r', '\n']) { format!("\"{}\"", field.replace('"', "\"\"")) } else { field }
}

#[cfg(test)]
mod tests {
    use time::Duration;
    use time::macros::datetime;

    use super::*;

    #[test]
    fn fields_are_quoted_as_rfc_4180_says_and_formulas_defused() {
        let row = |member: &str, detail: &str, duration: Option<Duration>| Occurrence {
            time: datetime!(2026-05-01 18:00:00.5 UTC),
            kind: "leave",
            member: member.into(),
            group: "stage".into(),
            detail: detail.into(),
            duration,
        };
        let timeline = [
            row("Ann", "left the room", None),
            row("Bo, \"the\" boss", "line\nbreak", Some(Duration::milliseconds(2_345))),
            row("=HYPERLINK(\"x\")", "-1", Some(Duration::seconds(60))),
        ];
        let want = "time,kind,member,group,detail,duration_s\r\n\
            2026-05-01T18:00:00.500Z,leave,Ann,stage,left the room,\r\n\
            2026-05-01T18:00:00.500Z,leave,\"Bo, \"\"the\"\" boss\",stage,\"line\nbreak\",2.3\r\n\
            2026-05-01T18:00:00.500Z,leave,\"'=HYPERLINK(\"\"x\"\")\",stage,'-1,60\r\n";
        assert_eq!(to_csv(&timeline), want);
    }
}
