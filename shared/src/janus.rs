//! Janus API messages partyline sends and reads: the core API (sessions, handles, the long
//! poll's events), the admin API (stored tokens), AudioBridge plugin requests, and the event
//! handler's posts; [`JanusError`], why a request failed; and, with the feature `janus-client`,
//! the HTTP client both daemons use ([`client`]).
//!
//! Shapes were measured against Janus 1.1.2 (see `packaging/janus/README.md`), configured with
//! string room and participant ids. Fields partyline does not read are not modelled; unknown
//! fields are ignored.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "janus-client")]
pub mod client;

mod error;
mod events;
mod response;
mod room;
pub use error::{JanusError, codes};
pub use events::{HandlerEvent, JanusEvent};
pub use response::{
    AudioBridgeReply, ErrorDetail, Participant, PluginData, PluginEvent, Response, RoomListing, ServerInfo,
    SessionEvent,
};
pub use room::{LOCAL_GROUP, RoomSpec, TALK_LEVEL_DBOV, TALK_WINDOW_PACKETS, TRUNK_GROUP, prebuffer_packets};

/// The AudioBridge plugin's package name.
pub const AUDIOBRIDGE: &str = "janus.plugin.audiobridge";

/// A request to the Janus core or admin API: the envelope fields every request has.
#[derive(Debug, Clone, Serialize)]
pub struct Envelope<'a> {
    pub transaction: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_secret: Option<&'a str>,
    #[serde(flatten)]
    pub request: Request<'a>,
}

/// What a request asks for; `janus` is its tag on the wire.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "janus", rename_all = "snake_case")]
pub enum Request<'a> {
    /// Core: a new session (`POST /janus`).
    Create,
    /// Core: a handle on a plugin (`POST /janus/SESSION`).
    Attach { plugin: &'a str },
    /// Core: a plugin request (`POST /janus/SESSION/HANDLE`), with an SDP for `join`.
    Message {
        body: AudioBridgeRequest,
        #[serde(skip_serializing_if = "Option::is_none")]
        jsep: Option<Jsep>,
    },
    /// Core: keeps a session alive (sessions expire after 60 s without a request).
    Keepalive,
    /// Core: ends a session.
    Destroy,
    /// Admin: allows `token` to use `plugins` (stored-token auth). Idempotent.
    AddToken {
        #[serde(rename = "token")]
        new_token: &'a str,
        plugins: Vec<&'a str>,
    },
    /// Admin: revokes `token`: every later request with it gets 403.
    RemoveToken {
        #[serde(rename = "token")]
        old_token: &'a str,
    },
    /// Admin: the stored tokens.
    ListTokens,
}

/// AudioBridge requests partyline makes (the `body` of a `message`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "request", rename_all = "lowercase")]
pub enum AudioBridgeRequest {
    /// A room that admits only joins whose body carries a `token` in `allowed` (measured on
    /// 1.1.2: any other token, or none, gets 489; an empty list admits nobody).
    Create {
        #[serde(flatten)]
        spec: RoomSpec,
        allowed: Vec<String>,
    },
    /// Adds tokens to, or removes them from, a room's `allowed` list (the room secret).
    Allowed {
        room: String,
        secret: String,
        action: AllowedAction,
        allowed: Vec<String>,
    },
    Destroy {
        room: String,
        secret: String,
        permanent: bool,
    },
    /// Whether `room` exists (the answer's `exists`).
    Exists {
        room: String,
    },
    /// Joins `room` as participant `id` (asynchronous: Janus acks, and the result, with its
    /// SDP answer or its plain-RTP address, comes as an event on the session's long poll).
    /// `token` must be in the room's `allowed` list; `prebuffer` is the participant's own
    /// prebuffering, in 20 ms packets. With `rtp`, a plain-RTP participant (no offer): Janus
    /// sends the room's mix there once it has received a first packet from that address.
    Join {
        room: String,
        id: String,
        display: String,
        token: String,
        /// [`LOCAL_GROUP`] for every participant but a trunk's ([`TRUNK_GROUP`]).
        group: String,
        bitrate: u32,
        muted: bool,
        prebuffer: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        rtp: Option<RtpPeer>,
    },
    /// Joins `room` as a trunk: a plain-RTP participant in [`TRUNK_GROUP`] that only sends
    /// (`rtp: {}`: Janus answers with its own address and sends it nothing), carrying the mix
    /// of the same room's replica on another node.
    #[serde(rename = "join")]
    JoinTrunk {
        room: String,
        id: String,
        display: String,
        token: String,
        group: String,
        muted: bool,
        /// Packets Janus holds before mixing the trunk (its own, not the room's).
        prebuffer: u32,
        rtp: serde_json::Map<String, Value>,
    },
    /// Forwards `group`'s mix of `room` as Opus RTP to `host:port` (room secret and, with
    /// `lock_rtp_forward`, the admin key); `always_on` keeps it going through silence.
    #[serde(rename = "rtp_forward")]
    RtpForward {
        room: String,
        secret: String,
        admin_key: String,
        group: String,
        host: String,
        port: u16,
        codec: String,
        always_on: bool,
    },
    #[serde(rename = "stop_rtp_forward")]
    StopRtpForward {
        room: String,
        secret: String,
        admin_key: String,
        stream_id: u64,
    },
    /// Changes a joined participant's display name (asynchronous, as `join`; the room's other
    /// participants get an event with the new name).
    Configure {
        display: String,
    },
    List,
    ListParticipants {
        room: String,
    },
    Kick {
        room: String,
        secret: String,
        id: String,
    },
    /// Mutes participant `id` of `room` (the room secret). Measured on 1.1.2: the participant
    /// can unmute itself afterwards (`configure` with `muted: false`), so whoever must keep it
    /// muted watches the `configured` events.
    Mute {
        room: String,
        secret: String,
        id: String,
    },
    /// Unmutes participant `id` of `room` (the room secret).
    Unmute {
        room: String,
        secret: String,
        id: String,
    },
    /// Mutes the whole room: the mix carries no participant; a participant's `configure`
    /// does not change the room's flag.
    #[serde(rename = "mute_room")]
    MuteRoom {
        room: String,
        secret: String,
    },
    #[serde(rename = "unmute_room")]
    UnmuteRoom {
        room: String,
        secret: String,
    },
}

/// A plain-RTP participant's address, as a `join` gives it (where Janus sends the mix) and as
/// its answer gives Janus's (where the participant sends). Measured on 1.1.2: Janus's socket
/// is connected to the participant's address, so the participant sends from the address it
/// gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtpPeer {
    pub ip: String,
    pub port: u16,
    pub payload_type: u8,
    /// The RFC 6464 audio-level extension's id in the participant's packets (Janus's talk
    /// detection reads it); absent in Janus's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audiolevel_ext: Option<u8>,
}

/// What an [`AudioBridgeRequest::Allowed`] does to the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AllowedAction {
    Add,
    Remove,
}

/// A session description travelling with a `join` (the offer) and its result (the answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jsep {
    #[serde(rename = "type")]
    pub kind: JsepType,
    pub sdp: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsepType {
    Offer,
    Answer,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_have_the_wire_shape() {
        let add = Envelope {
            transaction: "t1".into(),
            token: None,
            admin_secret: Some("s"),
            request: Request::AddToken { new_token: "tok", plugins: vec![AUDIOBRIDGE] },
        };
        assert_eq!(
            serde_json::to_value(&add).expect("json"),
            json!({"janus": "add_token", "transaction": "t1", "admin_secret": "s", "token": "tok", "plugins": [AUDIOBRIDGE]})
        );
        let kick = Envelope {
            transaction: "t2".into(),
            token: Some("mine"),
            admin_secret: None,
            request: Request::Message {
                body: AudioBridgeRequest::Kick { room: "r".into(), secret: "x".into(), id: "u".into() },
                jsep: None,
            },
        };
        assert_eq!(
            serde_json::to_value(&kick).expect("json"),
            json!({"janus": "message", "transaction": "t2", "token": "mine",
                   "body": {"request": "kick", "room": "r", "secret": "x", "id": "u"}})
        );
        let join = Envelope {
            transaction: "t3".into(),
            token: Some("mine"),
            admin_secret: None,
            request: Request::Message {
                body: AudioBridgeRequest::Join {
                    room: "r".into(),
                    id: "server-foh".into(),
                    display: "FOH".into(),
                    token: "mine".into(),
                    group: LOCAL_GROUP.into(),
                    bitrate: 64_000,
                    muted: false,
                    prebuffer: 2,
                    rtp: None,
                },
                jsep: Some(Jsep { kind: JsepType::Offer, sdp: "v=0\r\n".into() }),
            },
        };
        assert_eq!(
            serde_json::to_value(&join).expect("json"),
            json!({"janus": "message", "transaction": "t3", "token": "mine",
                   "body": {"request": "join", "room": "r", "id": "server-foh", "display": "FOH", "token": "mine",
                            "group": "local", "bitrate": 64_000, "muted": false, "prebuffer": 2},
                   "jsep": {"type": "offer", "sdp": "v=0\r\n"}})
        );
        let plain = AudioBridgeRequest::Join {
            room: "r".into(),
            id: "card:r".into(),
            display: "A".into(),
            token: "mine".into(),
            group: LOCAL_GROUP.into(),
            bitrate: 64_000,
            muted: false,
            prebuffer: 2,
            rtp: Some(RtpPeer { ip: "127.0.0.1".into(), port: 40_000, payload_type: 111, audiolevel_ext: Some(1) }),
        };
        assert_eq!(
            serde_json::to_value(plain).expect("json")["rtp"],
            json!({"ip": "127.0.0.1", "port": 40_000, "payload_type": 111, "audiolevel_ext": 1})
        );
        let exists = serde_json::to_value(AudioBridgeRequest::Exists { room: "r".into() }).expect("json");
        assert_eq!(exists, json!({"request": "exists", "room": "r"}));
        let renamed = serde_json::to_value(AudioBridgeRequest::Configure { display: "A, B".into() }).expect("json");
        assert_eq!(renamed, json!({"request": "configure", "display": "A, B"}));
        let list = serde_json::to_value(AudioBridgeRequest::ListParticipants { room: "r".into() }).expect("json");
        assert_eq!(list, json!({"request": "listparticipants", "room": "r"}));
        let allow = AudioBridgeRequest::Allowed {
            room: "r".into(),
            secret: "x".into(),
            action: AllowedAction::Remove,
            allowed: vec!["tok".into()],
        };
        let allow = serde_json::to_value(allow).expect("json");
        assert_eq!(
            allow,
            json!({"request": "allowed", "room": "r", "secret": "x", "action": "remove", "allowed": ["tok"]})
        );
        let spec = RoomSpec {
            room: "r".into(),
            description: "R".into(),
            admin_key: "k".into(),
            secret: "x".into(),
            sampling_rate: 48_000,
            default_prebuffering: 2,
            default_bitrate: 64_000,
            default_expectedloss: 10,
            audiolevel_event: false,
            audio_active_packets: 10,
            audio_level_average: 40,
            permanent: false,
            allow_rtp_participants: true,
            groups: vec![LOCAL_GROUP.into(), TRUNK_GROUP.into()],
        };
        let create = serde_json::to_value(AudioBridgeRequest::Create { spec, allowed: vec![] }).expect("json");
        assert_eq!(
            (&create["request"], &create["room"], &create["allowed"], &create["groups"]),
            (&json!("create"), &json!("r"), &json!([]), &json!(["local", "trunk"]))
        );
    }
}
