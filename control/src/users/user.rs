//! A user as the registry keeps it: its lines and their state, its view for the API, and its
//! record in `crew.json`.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use partyline_shared::config::StreamKind;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::UNUSED_TOKEN_LIFETIME;
use super::direct::Peer;
use super::store::{CrewRecord, LineRecord};
use crate::links::LinkState;
use crate::secrets::SecretValue;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UserState {
    /// Holds a token, not (yet) in its room.
    Pending,
    /// In its group's room.
    Connected,
}

/// Who a user is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UserKind {
    /// A crew member in a browser, with a one-session token.
    Crew,
    /// A server audio user: a sound-card channel bridged by partyline-bridged, with a
    /// standing token; it stays registered while it is in the config.
    Server,
}

/// One line of a user: a group's room (or a direct line's), heard and/or talked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The room: a group's id, or a direct line's (`direct-…`).
    pub group_id: String,
    pub listen: bool,
    pub talk: bool,
    /// When Janus said the user joined this line's room; `None` while not in it.
    pub joined_at: Option<OffsetDateTime>,
    /// The admin muted the user on this line (AudioBridge `mute`): it cannot talk there until
    /// the admin releases it.
    pub muted_by_admin: bool,
    /// A direct line's other end; `None` on a group's line.
    pub direct: Option<Peer>,
    /// Janus's voice detection says the user talks on this line (`users::talk`).
    pub janus_talking: bool,
    /// The user talks on this line as the talk events last said (Janus's voice detection
    /// through the user's own mute, `users::talk`): what the admin's view shows at once.
    pub talking: bool,
}

impl Line {
    /// A line not joined yet.
    pub fn new(group_id: impl Into<String>, listen: bool, talk: bool) -> Line {
        Line {
            group_id: group_id.into(),
            listen,
            talk,
            joined_at: None,
            muted_by_admin: false,
            direct: None,
            janus_talking: false,
            talking: false,
        }
    }

    /// A listen-and-talk line on `group_id` (a server audio user's, or a one-group join).
    pub fn both(group_id: impl Into<String>) -> Line {
        Line::new(group_id, true, true)
    }
}

/// A line as `GET /admin/users` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineState {
    pub group_id: String,
    pub listen: bool,
    pub talk: bool,
    /// In the group's room now.
    pub joined: bool,
    /// Someone called this line in the last 5 s.
    pub call: bool,
    /// The admin muted the user on this line.
    pub muted_by_admin: bool,
    /// Talking on this line now, as the last `talking`/`stoppedTalking` event said.
    pub talking: bool,
    /// A direct line's other end (its name); null on a group's line.
    pub direct_with: Option<String>,
    /// The link as the panel last measured it; null before its first report.
    pub link: Option<LinkState>,
}

/// A registered user. Its `Debug` leaves the token out (a [`SecretValue`]: secrets never reach
/// logs).
#[derive(Debug, Clone)]
pub struct User {
    /// Its participant id in its rooms (unique): the slug of the name plus random hex.
    pub identity: String,
    pub username: String,
    /// Its lines, one room each (at least one); a server audio user has one.
    pub lines: Vec<Line>,
    pub token: SecretValue,
    /// A crew member's panel key: the secret of its panel's remote control
    /// (`/api/panel/{key}`), revoked with the session. Never logged, never in a URL that is.
    pub panel_key: Option<SecretValue>,
    pub kind: UserKind,
    pub state: UserState,
    /// The client address a crew member asked for its token from (what an address ban names).
    pub address: Option<IpAddr>,
    /// The Janus node its session is placed on (every line there); `None`: the pool's first,
    /// where server audio users always are.
    pub node: Option<String>,
    /// Its panel has an announce key (its position's `announce`).
    pub announce: bool,
    /// The position it joined as, if any (what other positions' person keys reach).
    pub position: Option<String>,
    /// A WHIP publisher or WHEP player that control drives on its client's behalf.
    pub stream: Option<StreamKind>,
    /// Its media is in partyline's own rooms (`media.engine: bridged`), which say when it
    /// joins and leaves: Janus's lists of participants do not judge it. A crew member's is
    /// decided when its token is issued, and such a token is never Janus's.
    pub on_rooms: bool,
    /// The direct line its reply key talks on: the last opened to it or spoken to it on, and
    /// when.
    pub reply_to: Option<(String, Instant)>,
    /// When the token was issued: monotonic, for its lifetime…
    pub(super) issued: Instant,
    /// …and wall clock, for the file (an `Instant` does not survive the process).
    pub(super) issued_at: OffsetDateTime,
    pub connected_at: Option<OffsetDateTime>,
    pub last_activity: OffsetDateTime,
}

/// A user as `GET /admin/users` shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserView {
    pub identity: String,
    pub username: String,
    /// The first line's group.
    pub group_id: String,
    /// Every line, joined or not.
    pub lines: Vec<LineState>,
    pub kind: UserKind,
    pub state: UserState,
    /// A crew member's client address, as it asked for its token (behind a NAT, the NAT's).
    pub address: Option<String>,
    /// The Janus node its lines are on.
    pub node: Option<String>,
    /// RFC 3339; null while pending.
    pub connected_at: Option<String>,
    /// RFC 3339: the last transition.
    pub last_activity: String,
    /// A WHIP source or a WHEP player (its client another system's), not a panel.
    pub stream: Option<StreamKind>,
}

impl User {
    pub fn view(&self) -> UserView {
        let format = |t: OffsetDateTime| t.format(&Rfc3339).unwrap_or_default();
        UserView {
            identity: self.identity.clone(),
            username: self.username.clone(),
            group_id: self.first_group().to_owned(),
            lines: self
                .lines
                .iter()
                .map(|l| LineState {
                    group_id: l.group_id.clone(),
                    listen: l.listen,
                    talk: l.talk,
                    joined: l.joined_at.is_some(),
                    call: false,
                    muted_by_admin: l.muted_by_admin,
                    talking: l.talking,
                    direct_with: l.direct.as_ref().map(|p| p.username.clone()),
                    link: None,
                })
                .collect(),
            kind: self.kind,
            state: self.state,
            address: self.address.map(|a| a.to_string()),
            node: self.node.clone(),
            connected_at: self.connected_at.map(format),
            last_activity: format(self.last_activity),
            stream: self.stream,
        }
    }

    /// A user just issued its token: pending, no panel key, no address.
    pub(super) fn pending(identity: String, username: String, lines: Vec<Line>, token: String, kind: UserKind) -> User {
        let now = OffsetDateTime::now_utc();
        User {
            identity,
            username,
            lines,
            token: SecretValue::new(token),
            panel_key: None,
            kind,
            state: UserState::Pending,
            address: None,
            node: None,
            announce: false,
            position: None,
            stream: None,
            on_rooms: false,
            reply_to: None,
            issued: Instant::now(),
            issued_at: now,
            connected_at: None,
            last_activity: now,
        }
    }

    /// The first line's group (every user has a line).
    pub fn first_group(&self) -> &str {
        self.lines.first().map_or("", |l| l.group_id.as_str())
    }

    /// Whether Janus holds its token (on its node, in its rooms' admission lists): not a crew
    /// member's issued on partyline's rooms, the registry's alone. (The card's participants are
    /// registered in Janus on either engine.)
    pub fn token_in_janus(&self) -> bool {
        !(self.on_rooms && self.kind == UserKind::Crew)
    }

    /// Whether one of its lines is `group_id`'s room.
    pub fn has_line(&self, group_id: &str) -> bool {
        self.lines.iter().any(|l| l.group_id == group_id)
    }

    /// Its line on `group_id`, if it has one.
    pub fn line(&self, group_id: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.group_id == group_id)
    }

    /// As `crew.json` keeps it. Direct lines are left out: they live as long as both panels'
    /// sessions in this process (after a restart of control, their rooms go).
    pub(super) fn record(&self) -> CrewRecord {
        let kept: Vec<&Line> = self.lines.iter().filter(|l| l.direct.is_none()).collect();
        let simple = matches!(&kept[..], [line] if line.listen && line.talk && !line.muted_by_admin);
        let lines = if simple {
            Vec::new()
        } else {
            let record = |l: &Line| LineRecord {
                group_id: l.group_id.clone(),
                listen: l.listen,
                talk: l.talk,
                joined: l.joined_at.is_some(),
                muted_by_admin: l.muted_by_admin,
            };
            kept.into_iter().map(record).collect()
        };
        CrewRecord {
            identity: self.identity.clone(),
            username: self.username.clone(),
            group_id: self.first_group().to_owned(),
            lines,
            token: self.token.clone(),
            panel_key: self.panel_key.clone(),
            address: self.address,
            node: self.node.clone(),
            announce: self.announce,
            position: self.position.clone(),
            stream: self.stream,
            state: self.state,
            issued_at_unix_ns: unix_ns(self.issued_at),
            connected_at_unix_ns: self.connected_at.map(unix_ns),
            last_activity_unix_ns: unix_ns(self.last_activity),
        }
    }

    /// A stored crew member; `None` if a time is out of range.
    pub(super) fn from_record(record: CrewRecord, now: OffsetDateTime) -> Option<User> {
        let time = |ns: i64| OffsetDateTime::from_unix_timestamp_nanos(ns.into()).ok();
        let issued_at = time(record.issued_at_unix_ns)?;
        let connected_at = match record.connected_at_unix_ns {
            Some(ns) => Some(time(ns)?),
            None => None,
        };
        // The token's age by the wall clock (none if the clock went back), as an `Instant` in
        // the past; capped, since anything past the lifetime is expired anyway (and `Instant`
        // then stays far from its limits: the fallback to now is never taken in practice).
        let age = Duration::try_from(now - issued_at).unwrap_or(Duration::ZERO).min(2 * UNUSED_TOKEN_LIFETIME);
        let joined_at = |joined: bool| if joined { connected_at.or(Some(now)) } else { None };
        let lines = if record.lines.is_empty() {
            let joined = record.state == UserState::Connected;
            vec![Line { joined_at: joined_at(joined), ..Line::both(record.group_id) }]
        } else {
            let line = |l: LineRecord| Line {
                joined_at: joined_at(l.joined),
                muted_by_admin: l.muted_by_admin,
                ..Line::new(l.group_id, l.listen, l.talk)
            };
            record.lines.into_iter().map(line).collect()
        };
        Some(User {
            identity: record.identity,
            username: record.username,
            lines,
            token: record.token,
            panel_key: record.panel_key,
            kind: UserKind::Crew,
            state: record.state,
            address: record.address,
            node: record.node,
            announce: record.announce,
            position: record.position,
            stream: record.stream,
            // A restarted control holds no rooms session: the panel posts its offer again.
            on_rooms: false,
            reply_to: None,
            issued: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            issued_at,
            connected_at,
            last_activity: time(record.last_activity_unix_ns)?,
        })
    }
}

fn unix_ns(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos()).unwrap_or(i64::MAX)
}
