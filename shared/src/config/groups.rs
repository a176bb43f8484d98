//! `groups[]`: the party lines, their ids, and the PIN hash a group or position asks for.

use std::fmt;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::{Bitrate, StreamToken};
use crate::slug::slugify;

/// `groups[]`: a party line. Its id is derived from its name, never stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Group {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_bitrate: Option<Bitrate>,
    /// Asked of a crew member joining this group (stored hashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<PinHash>,
    /// A program line (the show's sound): the crew only listen to it, and their panels dim it
    /// while someone talks to them (`crew.programDimDb`); its sources are the card's inputs
    /// (server audio users).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub program: bool,
    /// Tokens that let other systems publish into this line (WHIP) or listen to it (WHEP).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_tokens: Vec<StreamToken>,
    /// Legacy keys of the original system.
    #[serde(default, skip_serializing)]
    pub(super) id: Option<IgnoredAny>,
    #[serde(default, skip_serializing)]
    pub(super) description: Option<IgnoredAny>,
    #[serde(default, skip_serializing)]
    pub(super) channels: Option<IgnoredAny>,
}

impl Group {
    pub fn new(name: impl Into<String>, audio_bitrate: Option<Bitrate>) -> Self {
        Self {
            name: name.into(),
            audio_bitrate,
            pin: None,
            program: false,
            stream_tokens: Vec::new(),
            id: None,
            description: None,
            channels: None,
        }
    }

    /// The group's id: the slug of its name (also its Janus room id).
    pub fn id(&self) -> String {
        slugify(&self.name)
    }
}

/// A PIN as the config keeps it: `pbkdf2-sha256$ITERATIONS$SALT$HASH` (base64), never the PIN.
/// Made and checked by control; shown by the API only as "has a PIN".
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PinHash(pub String);

impl PinHash {
    /// The scheme prefix every stored PIN hash has.
    pub const SCHEME: &'static str = "pbkdf2-sha256$";
}

impl fmt::Debug for PinHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PinHash(********)")
    }
}
