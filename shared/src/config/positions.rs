//! `positions[]`: prepared panels, their lines (listened and talked groups) and the checks of them.

use serde::{Deserialize, Serialize};

use super::{Occupants, PinHash};
use crate::slug::slugify;

/// The most lines a position (a panel) holds.
pub const MAX_LINES: usize = 12;

/// `positions[]`: a prepared panel, a name and the groups it listens to and talks to. A group
/// in both is one line with a listen and a talk key; a talk-only or listen-only line is allowed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Position {
    pub name: String,
    /// Group ids heard on this position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<String>,
    /// Group ids this position talks to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub talk: Vec<String>,
    /// Asked of a crew member joining this position (stored hashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<PinHash>,
    /// The site (`janus.nodes[].site`) whose nodes its sessions are placed on while one is up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// The panel has an announce key: one press talks on every one of its talk lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub announce: bool,
    /// Person keys: the positions (ids) this panel opens a direct line to with one press.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub talk_to: Vec<String>,
    /// Whether a second crew member may join while someone holds it (`one` or `many`).
    #[serde(default, skip_serializing_if = "Occupants::is_default")]
    pub occupants: Occupants,
}

/// One line of a panel: a group, heard and/or talked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSpec {
    pub group: String,
    pub listen: bool,
    pub talk: bool,
}

impl Position {
    /// The id used in URLs (`/?position=ID`, `/admin/positions/:id`): the slug of the name.
    pub fn id(&self) -> String {
        slugify(&self.name)
    }

    pub fn lines(&self) -> Vec<LineSpec> {
        lines_of(&self.listen, &self.talk)
    }

    /// An announce key talks on the position's talk lines: it needs one. The error names the
    /// field and why, as [`check_lines`] does.
    pub fn check_announce(&self) -> Result<(), (String, String)> {
        if self.announce && self.talk.is_empty() {
            return Err(("announce".into(), "the position talks on no line: nothing to announce on".into()));
        }
        Ok(())
    }
}

/// The lines of `listen` and `talk` group lists: every listened group in its order, then the
/// talk-only ones in theirs.
pub fn lines_of(listen: &[String], talk: &[String]) -> Vec<LineSpec> {
    let mut lines: Vec<LineSpec> =
        listen.iter().map(|g| LineSpec { group: g.clone(), listen: true, talk: talk.contains(g) }).collect();
    lines.extend(talk.iter().filter(|g| !listen.contains(g)).map(|g| LineSpec {
        group: g.clone(),
        listen: false,
        talk: true,
    }));
    lines
}

/// Checks a panel's group lists: known groups, none twice in one list, 1 to [`MAX_LINES`] lines.
/// `known` says whether a group id exists.
pub fn check_lines(listen: &[String], talk: &[String], known: impl Fn(&str) -> bool) -> Result<(), (String, String)> {
    for (field, list) in [("listen", listen), ("talk", talk)] {
        for (i, group) in list.iter().enumerate() {
            if !known(group) {
                return Err((format!("{field}[{i}]"), format!("no group has id {group:?}")));
            }
            if list[..i].contains(group) {
                return Err((format!("{field}[{i}]"), format!("{group:?} is listed twice")));
            }
        }
    }
    match lines_of(listen, talk).len() {
        0 => Err(("listen".into(), "a panel needs at least one line (listen or talk)".into())),
        n if n > MAX_LINES => Err(("listen".into(), format!("{n} lines: at most {MAX_LINES}"))),
        _ => Ok(()),
    }
}
