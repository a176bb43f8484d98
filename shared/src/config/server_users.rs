//! `server_audio_users[]`: the sound card's channels in the groups, and the checks of their IFBs.

use serde::{Deserialize, Serialize};

use super::{Channel, Ifb, IfbProgram};
use crate::slug::slugify;

/// `server_audio_users[]`: one input channel of the card sent into a group, and (unless
/// `output_channel` is null) that group's mix played on one output channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerAudioUser {
    pub name: String,
    /// A group id.
    pub group: String,
    pub input_channel: Channel,
    #[serde(default)]
    pub output_channel: Option<Channel>,
    /// The output is an IFB: it plays a program that the interrupt group's talk dips ([`Ifb`]),
    /// instead of the user's group minus itself. Needs an output channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifb: Option<Ifb>,
}

impl ServerAudioUser {
    /// The id used in URLs (`/admin/server-users/:id`): the slug of the name.
    pub fn id(&self) -> String {
        slugify(&self.name)
    }

    /// The groups this user's output hears beside its own: its IFB's interrupt and program.
    pub fn heard_groups(&self) -> impl Iterator<Item = &str> {
        let ifb = self.ifb.as_ref();
        let program = ifb.and_then(|ifb| match &ifb.program {
            IfbProgram::Group(group) => Some(group.as_str()),
            IfbProgram::Input(_) => None,
        });
        ifb.map(|ifb| ifb.interrupt.as_str()).into_iter().chain(program)
    }

    /// Whether the card takes part in `group` for this user: it sends into it, or hears it.
    pub fn uses_group(&self, group: &str) -> bool {
        self.group == group || self.heard_groups().any(|g| g == group)
    }

    /// Points every reference of this user to the group `from` (its group, its IFB's) at `to`.
    pub fn rename_group(&mut self, from: &str, to: &str) {
        let mut groups = vec![&mut self.group];
        if let Some(ifb) = &mut self.ifb {
            groups.push(&mut ifb.interrupt);
            if let IfbProgram::Group(group) = &mut ifb.program {
                groups.push(group);
            }
        }
        for group in groups.into_iter().filter(|g| **g == from) {
            to.clone_into(group);
        }
    }
}

/// Checks a server audio user's IFB: it needs the user's output, and its groups must exist.
/// The error names the key under `ifb` that is wrong (`None`: `ifb` itself).
pub fn check_ifb(
    ifb: &Ifb,
    has_output: bool,
    known: impl Fn(&str) -> bool,
) -> Result<(), (Option<&'static str>, String)> {
    if !has_output {
        return Err((None, "an IFB plays on the user's output: set output_channel".into()));
    }
    if !known(&ifb.interrupt) {
        return Err((Some("interrupt"), format!("no group has id {:?}", ifb.interrupt)));
    }
    match &ifb.program {
        IfbProgram::Group(group) if !known(group) => Err((Some("program"), format!("no group has id {group:?}"))),
        IfbProgram::Group(group) if *group == ifb.interrupt => {
            Err((Some("program"), format!("{group:?} is also the interrupt group: the program would dip itself")))
        }
        _ => Ok(()),
    }
}
