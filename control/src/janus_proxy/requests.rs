//! The requests a panel sends to Janus, as types: janus.js's messages with only the fields a
//! panel sets, every other field refused (`deny_unknown_fields`). What may be sent when, and by
//! whom, is `policy`'s.

use serde::{Deserialize, Serialize};

/// A request a panel sends to Janus (janus.js's messages, only the fields it sets).
#[derive(Debug, Deserialize, Serialize)]
#[serde(tag = "janus", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    Create {
        transaction: String,
        token: String,
    },
    Attach {
        transaction: String,
        token: String,
        session_id: u64,
        plugin: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opaque_id: Option<String>,
    },
    Message {
        transaction: String,
        token: String,
        session_id: u64,
        handle_id: u64,
        body: Body,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        jsep: Option<Jsep>,
    },
    Trickle {
        transaction: String,
        token: String,
        session_id: u64,
        handle_id: u64,
        candidate: Candidate,
    },
    Keepalive {
        transaction: String,
        token: String,
        session_id: u64,
    },
    Hangup {
        transaction: String,
        token: String,
        session_id: u64,
        handle_id: u64,
    },
    Detach {
        transaction: String,
        token: String,
        session_id: u64,
        handle_id: u64,
    },
    Destroy {
        transaction: String,
        token: String,
        session_id: u64,
    },
}

/// The AudioBridge requests a panel sends.
#[derive(Debug, Deserialize, Serialize)]
#[serde(tag = "request", rename_all = "lowercase", deny_unknown_fields)]
pub enum Body {
    /// Joins a line's room (the panel's `join`: every field is given).
    Join {
        room: String,
        id: String,
        display: String,
        muted: bool,
        token: String,
        /// The participant's prebuffering: control's ([`Priming`]), never the page's.
        #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
        prebuffer: Option<u32>,
        /// The Opus complexity of the mix Janus encodes for this participant: control's
        /// (`audio.opusComplexity`), never the page's (a page that sends one is refused).
        #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
        quality: Option<u8>,
        /// Always the room's `local` group (a page's own is refused: a trunk's is for nodes).
        #[serde(default, skip_deserializing)]
        group: &'static str,
    },
    /// Talk key on or off.
    Configure {
        muted: bool,
        /// Primes the queue for the next onset ([`Priming`]): control's, never the page's.
        #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
        prebuffer: Option<u32>,
    },
    Leave {},
}

/// The SDP offer of a join.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Jsep {
    #[serde(rename = "type")]
    kind: JsepKind,
    pub sdp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trickle: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum JsepKind {
    Offer,
}

/// One trickled ICE candidate, or the end of them.
#[derive(Debug, Deserialize, Serialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum Candidate {
    Completed {
        completed: bool,
    },
    Ice {
        candidate: String,
        #[serde(rename = "sdpMid", default, skip_serializing_if = "Option::is_none")]
        sdp_mid: Option<String>,
        #[serde(rename = "sdpMLineIndex", default, skip_serializing_if = "Option::is_none")]
        sdp_m_line_index: Option<u32>,
    },
}
