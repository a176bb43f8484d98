//! The crew's part of the report: who is on which line, who talks, whose link is bad, who left
//! and came back.

use std::collections::{BTreeMap, BTreeSet};

use partyline_shared::config::is_direct_room;
use time::{Duration, OffsetDateTime};

use super::{Builder, DIRECT_LINES, Ended, OnRoom, shown};
use crate::report::entry::Quality;
use crate::report::rfc3339::format;
use crate::report::{
    DropKind, Dropout, GroupReport, MemberJoin, MemberLeave, MemberReport, Occurrence, SessionMove, seconds,
};

#[derive(Debug)]
pub(super) struct OpenTalk {
    pub(super) start: OffsetDateTime,
    pub(super) username: String,
}

#[derive(Debug)]
pub(super) struct OpenLinkDrop {
    start: OffsetDateTime,
    username: String,
    worst: Quality,
    /// The worst judgement and its figures.
    detail: String,
}

/// A member gone from a line: a join of the same name on it ends a drop.
#[derive(Debug)]
pub(super) struct Absence {
    since: OffsetDateTime,
    why: String,
}

#[derive(Debug, Default)]
pub(super) struct MemberTally {
    /// In the order first seen.
    identities: Vec<String>,
    joins: Vec<MemberJoin>,
    leaves: Vec<MemberLeave>,
    drops: Vec<Dropout>,
    talk: BTreeMap<String, Duration>,
}

#[derive(Debug, Default)]
pub(super) struct GroupTally {
    talk: Duration,
    pub(super) members: BTreeSet<String>,
    pub(super) peak: usize,
    pub(super) peak_at: Option<OffsetDateTime>,
}

impl MemberTally {
    pub(super) fn saw(&mut self, identity: &str) {
        if !self.identities.iter().any(|seen| seen == identity) {
            self.identities.push(identity.to_owned());
        }
    }
}

impl Builder {
    pub(super) fn joined(&mut self, at: OffsetDateTime, (identity, group): OnRoom, username: &str) {
        if is_direct_room(&group) {
            // Its direct line is listed whole.
            return;
        }
        let on = self.present.entry(group.clone()).or_default();
        on.insert(identity.clone(), username.to_owned());
        let count = on.len();
        let absence = self.absences.remove(&(username.to_owned(), group.clone()));
        if !self.inside(at) {
            return;
        }
        if let Some(Absence { since, why }) = absence {
            let (start, end, lasted) = (format(since), Some(format(at)), at - since);
            let (group, duration_s) = (group.clone(), seconds(lasted));
            let dropout = Dropout { kind: DropKind::Rejoin, group, start, end, duration_s, detail: why };
            self.add_dropout(since, lasted, &identity, username, dropout);
        }
        let tally = self.groups.entry(group.clone()).or_default();
        tally.members.insert(username.to_owned());
        if count > tally.peak {
            (tally.peak, tally.peak_at) = (count, Some(at));
        }
        self.member(username, &identity).joins.push(MemberJoin { time: format(at), group: group.clone() });
        self.note(at, "join", username, &group, String::new());
    }

    pub(super) fn left(&mut self, at: OffsetDateTime, on_room: OnRoom, username: &str, why: String) {
        // A talk ends with its talker's leave when no stop came first.
        self.end_talk(&on_room, at);
        self.end_link_drop(&on_room, Ended::At(at));
        let (identity, group) = on_room;
        if is_direct_room(&group) {
            return;
        }
        if let Some(on) = self.present.get_mut(&group) {
            on.remove(&identity);
        }
        self.absences.insert((username.to_owned(), group.clone()), Absence { since: at, why: why.clone() });
        if !self.inside(at) {
            return;
        }
        self.groups.entry(group.clone()).or_default().members.insert(username.to_owned());
        let leave = MemberLeave { time: format(at), group: group.clone(), why: why.clone() };
        self.member(username, &identity).leaves.push(leave);
        self.note(at, "leave", username, &group, why);
    }

    /// Ends `on_room`'s talk, if one is open, at `end`: the part inside the window counts.
    pub(super) fn end_talk(&mut self, on_room: &OnRoom, end: OffsetDateTime) {
        let Some(talk) = self.talks.remove(on_room) else { return };
        if end < self.window.from {
            return;
        }
        let start = talk.start.max(self.window.from);
        let talked = (end.min(self.window.to) - start).max(Duration::ZERO);
        let (identity, room) = on_room;
        let line = if is_direct_room(room) { DIRECT_LINES } else { room };
        *self.member(&talk.username, identity).talk.entry(line.to_owned()).or_default() += talked;
        if line != DIRECT_LINES {
            let tally = self.groups.entry(line.to_owned()).or_default();
            tally.talk += talked;
            tally.members.insert(talk.username.clone());
        }
        let (member, group) = (talk.username, line.to_owned());
        self.timeline.push(Occurrence {
            time: start,
            kind: "talk",
            member,
            group,
            detail: String::new(),
            duration: Some(talked),
        });
    }

    pub(super) fn link_changed(
        &mut self,
        at: OffsetDateTime,
        on_room: OnRoom,
        username: String,
        quality: Quality,
        figures: &str,
    ) {
        if quality == Quality::Good {
            self.end_link_drop(&on_room, Ended::At(at));
            return;
        }
        let detail = format!("{} ({figures})", quality.as_str());
        match self.link_drops.get_mut(&on_room) {
            Some(open) if quality > open.worst => (open.worst, open.detail) = (quality, detail),
            Some(_) => {}
            None => {
                self.link_drops.insert(on_room, OpenLinkDrop { start: at, username, worst: quality, detail });
            }
        }
    }

    pub(super) fn end_link_drop(&mut self, on_room: &OnRoom, ended: Ended) {
        let Some(open) = self.link_drops.remove(on_room) else { return };
        let end = self.end_time(ended);
        if end < self.window.from {
            return;
        }
        let (identity, room) = on_room;
        let group = if is_direct_room(room) { DIRECT_LINES.to_owned() } else { room.clone() };
        let lasted = end - open.start;
        let (start, end, duration_s) = (format(open.start), shown(ended), seconds(lasted));
        let dropout = Dropout { kind: DropKind::Link, group, start, end, duration_s, detail: open.detail };
        self.add_dropout(open.start, lasted, identity, &open.username, dropout);
    }

    /// Adds `dropout` (from `start`, for `lasted`) to the member and the timeline.
    pub(super) fn add_dropout(
        &mut self,
        start: OffsetDateTime,
        lasted: Duration,
        identity: &str,
        username: &str,
        dropout: Dropout,
    ) {
        let kind = match dropout.kind {
            DropKind::Link => "link_drop",
            DropKind::Rejoin => "rejoin",
        };
        let (member, group, detail) = (username.to_owned(), dropout.group.clone(), dropout.detail.clone());
        self.timeline.push(Occurrence { time: start, kind, member, group, detail, duration: Some(lasted) });
        self.member(username, identity).drops.push(dropout);
    }

    pub(super) fn session_moved(&mut self, at: OffsetDateTime, identity: String, username: String, node: String) {
        if !self.inside(at) {
            return;
        }
        self.member(&username, &identity);
        self.note(at, "session_moved", &username, "", format!("off node {node}"));
        self.report.sessions_moved.push(SessionMove { time: format(at), username, identity, node });
    }
}

pub(super) fn member_report(username: String, tally: MemberTally) -> MemberReport {
    let MemberTally { identities, joins, leaves, mut drops, talk } = tally;
    drops.sort_by(|a, b| a.start.cmp(&b.start));
    let talk_seconds_total = seconds(talk.values().copied().sum());
    let talk_seconds = talk.into_iter().map(|(line, talked)| (line, seconds(talked))).collect();
    MemberReport { username, identities, joins, leaves, drops, talk_seconds, talk_seconds_total }
}

pub(super) fn group_report(group: String, tally: GroupTally) -> GroupReport {
    let GroupTally { talk, members, peak, peak_at } = tally;
    let members = members.into_iter().collect();
    GroupReport { group, talk_seconds: seconds(talk), members, peak_members: peak, peak_at: peak_at.map(format) }
}
