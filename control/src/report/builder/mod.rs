//! The report's arithmetic: the journal's lines applied in order to what is open now (who is on
//! which line, who talks, whose link is bad, who left, what is down, which direct lines are
//! open); whatever ends inside the window, or lasts across it, goes into the report and the
//! timeline as it ends. Lines after the window's end are left out; lines before its start only
//! open and close things.

mod crew;
mod services;

use std::collections::BTreeMap;

use time::OffsetDateTime;

use crew::{Absence, GroupTally, MemberTally, OpenLinkDrop, OpenTalk, group_report, member_report};
use services::{OpenDirect, OpenOutage, bridge_health, janus_health, ptp_health};

use super::entry::{self, Entry, Line};
use super::rfc3339::format;
use super::{Built, Occurrence, ShowReport, Window};

/// Where the talk of every direct line counts: one line per call would be noise.
const DIRECT_LINES: &str = "direct";

/// A participant on a room: (identity, room).
type OnRoom = (String, String);

/// How something that lasts ended.
#[derive(Debug, Clone, Copy)]
enum Ended {
    At(OffsetDateTime),
    /// Still going at the window's end.
    StillOpen,
}

#[derive(Debug)]
pub(super) struct Builder {
    window: Window,
    /// The window has opened: what was open then is counted in it.
    entered: bool,
    /// Per group, who is on its line now: identity → name.
    present: BTreeMap<String, BTreeMap<String, String>>,
    talks: BTreeMap<OnRoom, OpenTalk>,
    link_drops: BTreeMap<OnRoom, OpenLinkDrop>,
    /// By (name, group).
    absences: BTreeMap<(String, String), Absence>,
    /// By service.
    outages: BTreeMap<String, OpenOutage>,
    /// By room.
    directs: BTreeMap<String, OpenDirect>,
    members: BTreeMap<String, MemberTally>,
    groups: BTreeMap<String, GroupTally>,
    report: ShowReport,
    timeline: Vec<Occurrence>,
}

impl Builder {
    pub(super) fn new(window: Window) -> Builder {
        Builder {
            window,
            entered: false,
            present: BTreeMap::new(),
            talks: BTreeMap::new(),
            link_drops: BTreeMap::new(),
            absences: BTreeMap::new(),
            outages: BTreeMap::new(),
            directs: BTreeMap::new(),
            members: BTreeMap::new(),
            groups: BTreeMap::new(),
            report: ShowReport {
                from: format(window.from),
                to: format(window.to),
                members: Vec::new(),
                groups: Vec::new(),
                outages: Vec::new(),
                sessions_moved: Vec::new(),
                direct_lines: Vec::new(),
                warnings: Vec::new(),
                control_starts: Vec::new(),
                lost_events: 0,
                unreadable_lines: 0,
            },
            timeline: Vec::new(),
        }
    }

    /// Applies every line of `journal`, then closes the window.
    pub(super) fn read(mut self, journal: &str) -> Built {
        for text in journal.lines().filter(|line| !line.trim().is_empty()) {
            match entry::read(text) {
                Ok(line) => self.apply(line),
                Err(error) => {
                    tracing::debug!(%error, "a journal line left out of the report");
                    self.report.unreadable_lines += 1;
                }
            }
        }
        self.finish()
    }

    fn apply(&mut self, Line { at, entry }: Line) {
        if at > self.window.to {
            return;
        }
        if at >= self.window.from {
            self.enter_window();
        }
        match entry {
            Entry::ControlStarted => self.control_started(at),
            Entry::EventsLost { count } => self.events_lost(at, count),
            Entry::UserJoined { identity, username, group_id } => self.joined(at, (identity, group_id), &username),
            Entry::UserLeft { identity, username, group_id, why } => {
                self.left(at, (identity, group_id), &username, why);
            }
            Entry::Talking { identity, username, group_id } => {
                self.talks.entry((identity, group_id)).or_insert(OpenTalk { start: at, username });
            }
            Entry::StoppedTalking { identity, group_id, .. } => self.end_talk(&(identity, group_id), at),
            Entry::LinkChanged { identity, username, group_id, quality, loss_percent, jitter_ms, rtt_ms } => {
                let rtt = rtt_ms.map(|rtt| format!(", round trip {rtt:.0} ms")).unwrap_or_default();
                let figures = format!("loss {loss_percent:.1} %, jitter {jitter_ms:.0} ms{rtt}");
                self.link_changed(at, (identity, group_id), username, quality, &figures);
            }
            Entry::SessionMoved { identity, username, node } => self.session_moved(at, identity, username, node),
            Entry::NodeState { node, state, message } => {
                self.service_state(at, format!("node {node}"), janus_health(&state), state, message);
            }
            Entry::JanusState { state, message } => {
                self.service_state(at, "janus".into(), janus_health(&state), state, message);
            }
            Entry::BridgeState { state, message } => {
                self.service_state(at, "bridged".into(), bridge_health(&state), state, message);
            }
            Entry::PtpState { state, grandmaster } => {
                let message = if grandmaster.is_empty() { grandmaster } else { format!("grandmaster {grandmaster}") };
                self.service_state(at, "ptp".into(), ptp_health(&state), state, message);
            }
            Entry::DirectOpened { group_id, caller, callee } => {
                self.directs.insert(group_id, OpenDirect { start: at, caller, callee });
            }
            Entry::DirectClosed { group_id, why } => {
                if let Some(open) = self.directs.remove(&group_id) {
                    self.end_direct(open, Ended::At(at), Some(why));
                }
            }
            Entry::Log { level, message, source } => self.logged(at, level, message, source),
            Entry::Other => {}
        }
    }

    fn inside(&self, at: OffsetDateTime) -> bool {
        at >= self.window.from
    }

    /// Counts who is on each line as the window opens (once).
    fn enter_window(&mut self) {
        if std::mem::replace(&mut self.entered, true) {
            return;
        }
        for (group, on) in self.present.iter().filter(|(_, on)| !on.is_empty()) {
            let tally = self.groups.entry(group.clone()).or_default();
            tally.members.extend(on.values().cloned());
            (tally.peak, tally.peak_at) = (on.len(), Some(self.window.from));
            for (identity, username) in on {
                self.members.entry(username.clone()).or_default().saw(identity);
            }
        }
    }

    fn member(&mut self, username: &str, identity: &str) -> &mut MemberTally {
        let tally = self.members.entry(username.to_owned()).or_default();
        tally.saw(identity);
        tally
    }

    fn note(&mut self, time: OffsetDateTime, kind: &'static str, member: &str, group: &str, detail: String) {
        let (member, group) = (member.to_owned(), group.to_owned());
        self.timeline.push(Occurrence { time, kind, member, group, detail, duration: None });
    }

    fn control_started(&mut self, at: OffsetDateTime) {
        // What control knew of talks and links died with the process; its next judgement of a
        // link starts from good again.
        for on_room in self.talks.keys().cloned().collect::<Vec<_>>() {
            self.end_talk(&on_room, at);
        }
        for on_room in self.link_drops.keys().cloned().collect::<Vec<_>>() {
            self.end_link_drop(&on_room, Ended::At(at));
        }
        if self.inside(at) {
            self.report.control_starts.push(format(at));
            self.note(at, "control_started", "", "", String::new());
        }
    }

    fn events_lost(&mut self, at: OffsetDateTime, count: u64) {
        if self.inside(at) {
            self.report.lost_events += count;
            self.note(at, "events_lost", "", "", format!("{count} events the journal missed"));
        }
    }

    fn end_time(&self, ended: Ended) -> OffsetDateTime {
        match ended {
            Ended::At(at) => at,
            Ended::StillOpen => self.window.to,
        }
    }

    /// Closes the window: what is still open ends at its end.
    fn finish(mut self) -> Built {
        self.enter_window();
        for on_room in self.talks.keys().cloned().collect::<Vec<_>>() {
            self.end_talk(&on_room, self.window.to);
        }
        for on_room in self.link_drops.keys().cloned().collect::<Vec<_>>() {
            self.end_link_drop(&on_room, Ended::StillOpen);
        }
        for service in self.outages.keys().cloned().collect::<Vec<_>>() {
            self.end_outage(&service, Ended::StillOpen);
        }
        for open in std::mem::take(&mut self.directs).into_values() {
            self.end_direct(open, Ended::StillOpen, None);
        }
        let mut report = self.report;
        report.members = self.members.into_iter().map(|(username, tally)| member_report(username, tally)).collect();
        report.groups = self.groups.into_iter().map(|(group, tally)| group_report(group, tally)).collect();
        // The times are UTC to the millisecond, all alike: as text they sort as times.
        report.outages.sort_by(|a, b| a.start.cmp(&b.start));
        report.direct_lines.sort_by(|a, b| a.start.cmp(&b.start));
        let mut timeline = self.timeline;
        timeline.sort_by_key(|occurrence| occurrence.time);
        Built { report, timeline }
    }
}

/// An end as the report shows it: none while still open.
fn shown(ended: Ended) -> Option<String> {
    match ended {
        Ended::At(at) => Some(format(at)),
        Ended::StillOpen => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use time::macros::datetime;

    use super::*;
    use crate::report::seconds;

    /// The window of every case: 18:00 to 19:00 on the show's day.
    const WINDOW: Window = Window { from: datetime!(2026-05-01 18:00 UTC), to: datetime!(2026-05-01 19:00 UTC) };

    /// A journal from lines `HH:MM:SS[.mmm] {type} key=value …` (values without spaces; `_`
    /// stands for a space), as the writer would have written them on the show's day.
    fn journal(lines: &str) -> String {
        let mut text = String::new();
        for line in lines.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(raw) = line.strip_prefix("raw ") {
                text.push_str(raw);
                text.push('\n');
                continue;
            }
            let mut words = line.split_whitespace();
            let (at, kind) = (words.next().expect("a time"), words.next().expect("a type"));
            let mut object = json!({ "at": format!("2026-05-01T{at}Z"), "type": kind });
            for pair in words {
                let (key, value) = pair.split_once('=').expect("key=value");
                let value = value.replace('_', " ");
                object[key] = match (value.parse::<u64>(), value.parse::<f64>()) {
                    (Ok(whole), _) => Value::from(whole),
                    (_, Ok(number)) => Value::from(number),
                    _ => Value::String(value),
                };
            }
            text.push_str(&object.to_string());
            text.push('\n');
        }
        text
    }

    fn report_of(lines: &str) -> (Value, Vec<Occurrence>) {
        let Built { report, timeline } = Builder::new(WINDOW).read(&journal(lines));
        (serde_json::to_value(report).expect("JSON"), timeline)
    }

    /// Data-driven: journal lines in; what the report says at JSON pointers out.
    #[test]
    fn the_report_s_arithmetic() {
        let ann = "identity=ann-1 username=Ann groupId=stage";
        // (what the case holds, the journal, what the report says at JSON pointers)
        type Case = (&'static str, String, Vec<(&'static str, Value)>);
        let cases: Vec<Case> = vec![
            (
                "a link judged poor, degraded, good again is one drop of its worst; a leave and a rejoin of the name is another",
                format!(
                    "18:00:00 userJoined {ann}
                     18:00:10 linkChanged {ann} quality=poor lossPercent=12 jitterMs=8
                     18:00:15 linkChanged {ann} quality=degraded lossPercent=4 jitterMs=8
                     18:00:40 linkChanged {ann} quality=good lossPercent=0 jitterMs=2
                     18:01:00 userLeft {ann} why=left_the_room
                     18:01:12.500 userJoined identity=ann-2 username=Ann groupId=stage"
                ),
                vec![
                    ("/members/0/username", json!("Ann")),
                    ("/members/0/identities", json!(["ann-1", "ann-2"])),
                    ("/members/0/joins/1/time", json!("2026-05-01T18:01:12.500Z")),
                    ("/members/0/leaves/0/why", json!("left the room")),
                    ("/members/0/drops/0/kind", json!("link")),
                    ("/members/0/drops/0/start", json!("2026-05-01T18:00:10.000Z")),
                    ("/members/0/drops/0/durationS", json!(30.0)),
                    ("/members/0/drops/0/detail", json!("poor (loss 12.0 %, jitter 8 ms)")),
                    ("/members/0/drops/1/kind", json!("rejoin")),
                    ("/members/0/drops/1/durationS", json!(12.5)),
                    ("/members/0/drops/1/detail", json!("left the room")),
                    ("/members/0/drops/2", Value::Null),
                ],
            ),
            (
                "talk counts inside the window only: across its start, cut by a leave, by a restart, open at its end",
                format!(
                    "17:59:50 userJoined {ann}
                     17:59:50 talking {ann}
                     18:00:05 stoppedTalking {ann}
                     18:10:00 talking {ann}
                     18:10:03 userLeft {ann} why=left_the_room
                     18:20:00 userJoined identity=bo-1 username=Bo groupId=stage
                     18:20:00 talking identity=bo-1 username=Bo groupId=stage
                     18:20:04 controlStarted
                     18:59:58 talking identity=bo-1 username=Bo groupId=stage
                     19:00:30 stoppedTalking identity=bo-1 username=Bo groupId=stage"
                ),
                vec![
                    ("/members/0/talkSeconds/stage", json!(8.0)),
                    ("/members/0/talkSecondsTotal", json!(8.0)),
                    ("/members/1/talkSeconds/stage", json!(6.0)),
                    ("/groups/0/talkSeconds", json!(14.0)),
                    ("/controlStarts", json!(["2026-05-01T18:20:04.000Z"])),
                ],
            ),
            (
                "who was on a line as the window opens counts: members seen and the most at once",
                format!(
                    "17:30:00 userJoined {ann}
                     17:40:00 userJoined identity=cy-1 username=Cy groupId=stage
                     17:50:00 userLeft identity=cy-1 username=Cy groupId=stage why=removed
                     18:30:00 userJoined identity=bo-1 username=Bo groupId=stage
                     18:31:00 userJoined identity=di-1 username=Di groupId=backstage
                     18:40:00 userLeft identity=bo-1 username=Bo groupId=stage why=left_the_room
                     18:45:00 userJoined identity=bo-2 username=Bo groupId=stage"
                ),
                vec![
                    ("/groups/0/group", json!("backstage")),
                    ("/groups/1/members", json!(["Ann", "Bo"])),
                    ("/groups/1/peakMembers", json!(2)),
                    ("/groups/1/peakAt", json!("2026-05-01T18:30:00.000Z")),
                    ("/members/0/username", json!("Ann")),
                    ("/members/0/joins", json!([])),
                    ("/members/1/drops/0/durationS", json!(300.0)),
                    ("/members/3", Value::Null),
                ],
            ),
            (
                "an outage is shown whole from its real start; one still on runs to the window's end",
                "17:50:00 nodeState node=b state=down message=unreachable
                 18:05:00 nodeState node=b state=up message=
                 18:10:00 sessionMoved identity=ann-1 username=Ann node=b
                 18:30:00 janusState state=down message=refused
                 18:31:00 janusState state=down message=timeout
                 18:40:00 bridgeState state=unknown message=
                 18:50:00 ptpState state=lost grandmaster=00:11
                 18:55:00 ptpState state=acquiring grandmaster=
                 18:58:00 ptpState state=locked grandmaster=00:22"
                    .to_owned(),
                vec![
                    ("/outages/0/service", json!("node b")),
                    ("/outages/0/start", json!("2026-05-01T17:50:00.000Z")),
                    ("/outages/0/durationS", json!(900.0)),
                    ("/outages/0/message", json!("unreachable")),
                    ("/outages/1/service", json!("janus")),
                    ("/outages/1/message", json!("refused")),
                    ("/outages/1/end", Value::Null),
                    ("/outages/1/durationS", json!(1800.0)),
                    ("/outages/2/service", json!("ptp")),
                    ("/outages/2/durationS", json!(480.0)),
                    ("/outages/2/message", json!("grandmaster 00:11")),
                    ("/outages/3", Value::Null),
                    ("/sessionsMoved/0/node", json!("b")),
                    ("/members/0/identities", json!(["ann-1"])),
                ],
            ),
            (
                "lost events, warnings and direct lines count inside the window; later and unreadable lines are left out",
                "17:59:00 eventsLost count=5
                 18:10:00 eventsLost count=7
                 18:11:00 log level=warn message=a_crew_member's_link_degraded source=partyline_control::api
                 18:12:00 directOpened groupId=direct-0a1b caller=Ann callee=Bo
                 18:12:30 talking identity=ann-1 username=Ann groupId=direct-0a1b
                 18:12:40 stoppedTalking identity=ann-1 username=Ann groupId=direct-0a1b
                 18:13:00 directClosed groupId=direct-0a1b why=one_end_left
                 18:14:00 directOpened groupId=direct-9f caller=Bo callee=Cy
                 19:00:01 eventsLost count=100
                 raw {\"at\":\"2026-05-01T18:20:00Z\",\"type\":\"userJo"
                    .to_owned(),
                vec![
                    ("/lostEvents", json!(7)),
                    ("/unreadableLines", json!(1)),
                    ("/warnings/0/message", json!("a crew member's link degraded")),
                    ("/warnings/0/level", json!("warn")),
                    ("/directLines/0/durationS", json!(60.0)),
                    ("/directLines/0/why", json!("one end left")),
                    ("/directLines/1/end", Value::Null),
                    ("/directLines/1/durationS", json!(2760.0)),
                    ("/members/0/talkSeconds/direct", json!(10.0)),
                    ("/groups", json!([])),
                ],
            ),
        ];
        for (name, lines, expected) in cases {
            let (report, _) = report_of(&lines);
            for (pointer, want) in expected {
                let got = report.pointer(pointer).cloned().unwrap_or(Value::Null);
                assert_eq!(got, want, "{name}: {pointer}\n{report:#}");
            }
        }
    }

    #[test]
    fn the_timeline_holds_every_occurrence_in_time_order() {
        let (_, timeline) = report_of(
            "17:59:50 talking identity=ann-1 username=Ann groupId=stage
             18:00:01 userJoined identity=bo-1 username=Bo groupId=stage
             18:00:02 janusState state=down message=refused
             18:00:03 eventsLost count=2
             18:00:04 userLeft identity=ann-1 username=Ann groupId=stage why=left_the_room
             18:00:05 janusState state=up message=",
        );
        let rows: Vec<(String, &str, &str, Option<f64>)> =
            timeline.iter().map(|o| (format(o.time), o.kind, o.member.as_str(), o.duration.map(seconds))).collect();
        assert_eq!(
            rows,
            [
                ("2026-05-01T18:00:00.000Z".to_owned(), "talk", "Ann", Some(4.0)),
                ("2026-05-01T18:00:01.000Z".to_owned(), "join", "Bo", None),
                ("2026-05-01T18:00:02.000Z".to_owned(), "outage", "", Some(3.0)),
                ("2026-05-01T18:00:03.000Z".to_owned(), "events_lost", "", None),
                ("2026-05-01T18:00:04.000Z".to_owned(), "leave", "Ann", None),
            ]
        );
        assert_eq!(timeline[2].detail, "janus down: refused");
    }
}
