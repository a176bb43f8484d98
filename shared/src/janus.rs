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

/// AudioBridge's prebuffering of a network peer (a crew member, a WebRTC participant), in its
/// 20 ms packets, for `ms` of buffering: at least two (bridged's plain-RTP participants place
/// their send against Janus's tick and need one: `bridged/src/tick.rs`).
/// Janus mixes a participant once it holds prebuffering + 1 packets, takes one per 20 ms tick,
/// and drops the oldest whenever the queue reaches twice the prebuffering. At one packet, two
/// packets arriving within one tick already lose a frame (the sender runs on the sound card's
/// clock, Janus on the host's): a 20 ms hole every few seconds in the rooms whose mixing phase
/// falls near the sender's (`bench/audio`, 6 rooms: 7 frame slips in 114 ticks at one packet,
/// 0 and 1 in two runs at two).
pub fn prebuffer_packets(ms: u32) -> u32 {
    (ms / 20).max(2)
}

/// Voice activity as every room decides it (`audio_active_packets`): over this many 20 ms
/// packets (200 ms)...
pub const TALK_WINDOW_PACKETS: u32 = 10;
/// ...the average RFC 6464 level (dBov: 0 loudest, 127 silence) must be under this for a
/// participant to be talking (`audio_level_average`; −40 dBov).
pub const TALK_LEVEL_DBOV: u32 = 40;

/// The participant group (AudioBridge `groups`, 1.1.2+) of everyone joining a room on its own
/// node: crew, the card. A room's mix forwarded to another node is this group's only, so what
/// came from there is never sent back.
pub const LOCAL_GROUP: &str = "local";
/// The participant group of the trunks: the mixes of the same group's rooms on other nodes.
pub const TRUNK_GROUP: &str = "trunk";

/// A room as partyline creates it: one per group, id = group id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoomSpec {
    pub room: String,
    pub description: String,
    /// The AudioBridge `admin_key`: required to create rooms.
    pub admin_key: String,
    /// The room secret: required to kick, destroy and edit.
    pub secret: String,
    pub sampling_rate: u32,
    /// Packets (20 ms each) buffered per participant before mixing: the room's latency.
    pub default_prebuffering: u32,
    /// Bits per second of the mix sent to each participant (0: Opus decides).
    pub default_bitrate: u32,
    /// The loss (%) each participant's mix is encoded for (`audio.expectedLossPercent`): with
    /// the participant's own offer of `useinbandfec=1` (browsers', the crew's), Opus in-band
    /// FEC in what it hears.
    pub default_expectedloss: u32,
    /// Lets clients (and the admin UI) see who talks: AudioBridge sends `talking` and
    /// `stopped-talking` events to the room's participants (from their RFC 6464 audio levels).
    pub audiolevel_event: bool,
    /// Packets (20 ms each) a talking decision looks at.
    pub audio_active_packets: u32,
    /// Average level (0 loudest ..127 silence, dBov) over those packets above which a
    /// participant talks.
    pub audio_level_average: u32,
    /// Rooms live in Janus's memory only; partyline recreates them from the config.
    pub permanent: bool,
    /// Admits bridged's plain-RTP participants (`bridge.transport: rtp`) and the trunks from
    /// other nodes. Crew clients cannot use it: control's `/janus` proxy refuses any request
    /// that asks for plain RTP.
    pub allow_rtp_participants: bool,
    /// The participant groups, [`LOCAL_GROUP`] and [`TRUNK_GROUP`]; with groups, every join
    /// must name one (Janus refuses a join without).
    pub groups: Vec<String>,
}

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

/// Why a request to Janus failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JanusError {
    #[error("Janus is unreachable at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Janus refused the request ({code}): {reason}")]
    Refused { code: i64, reason: String },
    #[error("AudioBridge refused the request ({code}): {reason}")]
    Plugin { code: i64, reason: String },
    #[error("unexpected answer from Janus: {0}")]
    Protocol(String),
    /// A secret the request needs is missing (control's Janus admin secret or room admin key).
    #[error("{0}")]
    NotConfigured(&'static str),
    /// No live node of the pool has room for a new session (their capacities, summed).
    #[error("every Janus node is at its capacity ({0} participants)")]
    Full(u32),
}

impl JanusError {
    /// Errors after which the session must be created again (Janus restarted or went away).
    pub fn loses_session(&self) -> bool {
        match self {
            JanusError::Unreachable { .. } | JanusError::Protocol(_) => true,
            JanusError::Refused { code, .. } => *code == codes::NO_SUCH_SESSION || *code == codes::UNAUTHORIZED,
            JanusError::Plugin { .. } | JanusError::NotConfigured(_) | JanusError::Full(_) => false,
        }
    }

    /// The AudioBridge's error code, for a plugin error.
    pub fn plugin_code(&self) -> Option<i64> {
        match self {
            JanusError::Plugin { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<ErrorDetail> for JanusError {
    fn from(error: ErrorDetail) -> Self {
        JanusError::Refused { code: error.code, reason: error.reason }
    }
}

/// Janus's error codes partyline acts on.
pub mod codes {
    /// The session does not exist (Janus restarted, or it timed out).
    pub const NO_SUCH_SESSION: i64 = 458;
    /// Wrong or missing secret/token.
    pub const UNAUTHORIZED: i64 = 403;
    /// AudioBridge: no such room.
    pub const NO_SUCH_ROOM: i64 = 485;
    /// AudioBridge: the room already exists.
    pub const ROOM_EXISTS: i64 = 486;
    /// AudioBridge: no such participant (487 is "not joined").
    pub const NO_SUCH_USER: i64 = 492;
    /// AudioBridge: the join's token is not in the room's `allowed` list.
    pub const NOT_ALLOWED: i64 = 489;
    /// Admin API: no such stored token.
    pub const TOKEN_NOT_FOUND: i64 = 490;
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

/// One event of the event handler's posts (each post is a JSON array of them).
#[derive(Debug, Clone, Deserialize)]
pub struct HandlerEvent {
    #[serde(rename = "type")]
    pub kind: u32,
    #[serde(default)]
    pub session_id: Option<u64>,
    #[serde(default)]
    pub handle_id: Option<u64>,
    #[serde(default)]
    pub event: Value,
}

/// What an event handler event means to partyline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JanusEvent {
    /// A handle was attached with a stored token.
    Attached { handle_id: u64, token: String },
    /// A participant joined a room (`handle_id` is absent only in unusual cases).
    Joined { room: String, id: String, handle_id: Option<u64> },
    /// A participant left a room: left, hung up, kicked, or its session ended.
    Left { room: String, id: String },
    /// A participant changed its own settings (`configure`), `muted` among them.
    Configured { room: String, id: String, muted: bool },
    /// A participant started (`talking`) or stopped talking, as the room's voice activity
    /// detection decides from its RFC 6464 audio levels (rooms with `audiolevel_event`).
    Talking { room: String, id: String, talking: bool },
    /// Janus (re)started: its rooms and tokens are gone.
    Started,
    /// Janus is shutting down.
    Shutdown,
    /// Anything else.
    Other,
}

impl HandlerEvent {
    /// Event types (Janus's `JANUS_EVENT_TYPE_*`).
    const HANDLE: u32 = 2;
    const PLUGIN: u32 = 64;
    const CORE: u32 = 256;

    pub fn meaning(&self) -> JanusEvent {
        let text = |v: &Value| v.as_str().map(str::to_owned);
        match self.kind {
            Self::HANDLE if self.event["name"] == "attached" => match (self.handle_id, text(&self.event["token"])) {
                (Some(handle_id), Some(token)) => JanusEvent::Attached { handle_id, token },
                _ => JanusEvent::Other,
            },
            Self::PLUGIN if self.event["plugin"] == AUDIOBRIDGE => {
                let data = &self.event["data"];
                let (Some(room), Some(id)) = (text(&data["room"]), text(&data["id"])) else {
                    return JanusEvent::Other;
                };
                // Joins and leaves name themselves in `event`, voice activity in `audiobridge`.
                match data["event"].as_str().or_else(|| data["audiobridge"].as_str()) {
                    Some("joined") => JanusEvent::Joined { room, id, handle_id: self.handle_id },
                    Some("left" | "kicked") => JanusEvent::Left { room, id },
                    Some("configured") => match data["muted"].as_bool() {
                        Some(muted) => JanusEvent::Configured { room, id, muted },
                        None => JanusEvent::Other,
                    },
                    Some("talking") => JanusEvent::Talking { room, id, talking: true },
                    Some("stopped-talking") => JanusEvent::Talking { room, id, talking: false },
                    _ => JanusEvent::Other,
                }
            }
            Self::CORE => match self.event["status"].as_str() {
                Some("started") => JanusEvent::Started,
                Some("shutdown") => JanusEvent::Shutdown,
                _ => JanusEvent::Other,
            },
            _ => JanusEvent::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prebuffering_is_whole_packets_and_never_below_two() {
        for (ms, packets) in [(20, 2), (39, 2), (40, 2), (59, 2), (60, 3), (1000, 50)] {
            assert_eq!(prebuffer_packets(ms), packets, "{ms} ms");
        }
    }

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

    #[test]
    fn handler_events_as_measured() {
        let posts = json!([
            {"emitter":"j","type":2,"session_id":1,"handle_id":5,"event":{"name":"attached","plugin":AUDIOBRIDGE,"token":"tok-alice"}},
            {"emitter":"j","type":64,"session_id":1,"handle_id":5,"event":{"plugin":AUDIOBRIDGE,"data":{"event":"joined","room":"stage-left","id":"alice-1","display":"Alice","setup":false,"muted":false}}},
            {"emitter":"j","type":64,"event":{"plugin":AUDIOBRIDGE,"data":{"event":"left","room":"stage-left","id":"alice-1","display":"Alice"}}},
            {"emitter":"j","type":64,"event":{"plugin":AUDIOBRIDGE,"data":{"event":"kicked","room":"stage-left","id":"carol"}}},
            {"emitter":"j","type":64,"event":{"plugin":AUDIOBRIDGE,"data":{"event":"configured","room":"stage-left","id":"bob-2","display":"Bob","muted":false,"quality":4}}},
            {"emitter":"j","type":64,"session_id":2,"handle_id":6,"event":{"plugin":AUDIOBRIDGE,"data":{"audiobridge":"talking","id":"server-a","room":"x"}}},
            {"emitter":"j","type":64,"session_id":2,"handle_id":6,"event":{"plugin":AUDIOBRIDGE,"data":{"audiobridge":"stopped-talking","id":"server-a","room":"x"}}},
            {"emitter":"j","type":256,"subtype":1,"event":{"status":"started","info":{}}},
            {"emitter":"j","type":1,"session_id":1,"event":{"name":"timeout"}}
        ]);
        let events: Vec<HandlerEvent> = serde_json::from_value(posts).expect("parses");
        let meanings: Vec<JanusEvent> = events.iter().map(HandlerEvent::meaning).collect();
        assert_eq!(
            meanings,
            [
                JanusEvent::Attached { handle_id: 5, token: "tok-alice".into() },
                JanusEvent::Joined { room: "stage-left".into(), id: "alice-1".into(), handle_id: Some(5) },
                JanusEvent::Left { room: "stage-left".into(), id: "alice-1".into() },
                JanusEvent::Left { room: "stage-left".into(), id: "carol".into() },
                JanusEvent::Configured { room: "stage-left".into(), id: "bob-2".into(), muted: false },
                JanusEvent::Talking { room: "x".into(), id: "server-a".into(), talking: true },
                JanusEvent::Talking { room: "x".into(), id: "server-a".into(), talking: false },
                JanusEvent::Started,
                JanusEvent::Other,
            ]
        );
    }
}
