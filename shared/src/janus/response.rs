//! What Janus answers: the core and admin API's answers, the long poll's session events, and
//! the AudioBridge's replies (rooms, participants, plugin errors).

use serde::Deserialize;
use serde_json::Value;

use super::{JanusError, Jsep, RtpPeer};

/// Any answer of the core or admin API.
#[derive(Debug, Clone, Deserialize)]
pub struct Response {
    /// `success`, `error`, `ack`, `event`, `server_info`, …
    pub janus: String,
    #[serde(default)]
    pub data: Option<Value>,
    #[serde(default)]
    pub error: Option<ErrorDetail>,
    #[serde(default)]
    pub plugindata: Option<PluginData>,
}

/// The `error` of an answer or event whose `janus` is `error`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ErrorDetail {
    pub code: i64,
    pub reason: String,
}

/// `GET /janus/info`, as far as partyline reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ServerInfo {
    #[serde(default)]
    pub version_string: Option<String>,
}

/// One event of a session's long poll (`GET /janus/SESSION`); `janus` is its tag on the wire.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "janus", rename_all = "lowercase")]
pub enum SessionEvent {
    /// A plugin event.
    Event(Box<PluginEvent>),
    /// The PeerConnection is up (ICE and DTLS).
    Webrtcup,
    /// Janus started (`receiving: true`) or stopped receiving media (after a second without).
    Media {
        #[serde(default)]
        receiving: Option<bool>,
    },
    /// The PeerConnection is gone.
    Hangup {
        #[serde(default)]
        reason: Option<String>,
    },
    /// The handle is gone.
    Detached,
    /// Janus had nothing to say for 30 s.
    Keepalive,
    /// The session failed (no such session, …).
    Error { error: ErrorDetail },
    /// Anything else (`slowlink`, `trickle`, …).
    #[serde(other)]
    Other,
}

/// A plugin event of the long poll: the result of an asynchronous request (with its
/// `transaction`), or news of the room (a participant kicked or leaving, the room destroyed).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PluginEvent {
    #[serde(default)]
    pub transaction: Option<String>,
    #[serde(default)]
    pub plugindata: Option<PluginData<AudioBridgeReply>>,
    #[serde(default)]
    pub jsep: Option<Jsep>,
}

/// A plugin's part of an answer or event.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PluginData<T = Value> {
    pub plugin: String,
    pub data: T,
}

/// The `data` of an AudioBridge answer or event. Plugin errors arrive as `"janus": "success"`
/// (or `"event"`) with `error_code` set here.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AudioBridgeReply {
    /// What it is: `success`, `created`, `joined`, `event`, `destroyed`, `participants`, …
    pub audiobridge: String,
    #[serde(default)]
    pub error_code: Option<i64>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub room: Option<String>,
    /// `exists`: whether the room exists.
    #[serde(default)]
    pub exists: bool,
    /// Events: the participant kicked out of the room.
    #[serde(default)]
    pub kicked: Option<String>,
    /// Events: the participant leaving the room.
    #[serde(default)]
    pub leaving: Option<String>,
    #[serde(default)]
    pub list: Vec<RoomListing>,
    #[serde(default)]
    pub participants: Vec<Participant>,
    /// `joined` of a plain-RTP participant: where Janus receives its packets.
    #[serde(default)]
    pub rtp: Option<RtpPeer>,
    /// `rtp_forward`: the new forwarder's id.
    #[serde(default)]
    pub stream_id: Option<u64>,
}

impl AudioBridgeReply {
    /// The reply, or its plugin error.
    pub fn checked(self) -> Result<AudioBridgeReply, JanusError> {
        match self.error_code {
            Some(code) => Err(JanusError::Plugin { code, reason: self.error.unwrap_or_default() }),
            None => Ok(self),
        }
    }
}

/// An entry of the AudioBridge `list`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RoomListing {
    pub room: String,
    #[serde(default)]
    pub sampling_rate: u32,
    #[serde(default)]
    pub num_participants: u32,
}

/// An entry of `listparticipants`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Participant {
    pub id: String,
    #[serde(default)]
    pub display: Option<String>,
    /// Whether its PeerConnection is up.
    #[serde(default)]
    pub setup: bool,
    #[serde(default)]
    pub muted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::janus::codes;

    #[test]
    fn audiobridge_replies_and_their_errors() {
        let parse = |data: Value| serde_json::from_value::<AudioBridgeReply>(data).expect("a reply");
        let exists = parse(json!({"audiobridge": "success", "room": "r", "exists": true}));
        assert!(exists.checked().expect("no error").exists);
        let refused = parse(
            json!({"audiobridge": "event", "error_code": 489, "error": "Unauthorized (not in the allowed list)"}),
        );
        let error = refused.checked().expect_err("a plugin error");
        assert_eq!(error.plugin_code(), Some(codes::NOT_ALLOWED));
        assert!(!error.loses_session(), "the session is fine");
        // A plain-RTP join's answer, as 1.1.2 gives it.
        let joined = parse(json!({"audiobridge": "joined", "room": "x", "id": "card:x", "participants": [],
                                  "rtp": {"ip": "127.0.0.1", "port": 10_000, "payload_type": 111}}));
        let janus = RtpPeer { ip: "127.0.0.1".into(), port: 10_000, payload_type: 111, audiolevel_ext: None };
        assert_eq!(joined.rtp, Some(janus));
        let kicked = parse(json!({"audiobridge": "event", "room": "r", "kicked": "server-foh"}));
        assert_eq!((kicked.room.as_deref(), kicked.kicked.as_deref()), (Some("r"), Some("server-foh")));
    }
}
