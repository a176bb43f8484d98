//! The event handler's posts ([`HandlerEvent`]) and what each means to partyline ([`JanusEvent`]).

use serde::Deserialize;
use serde_json::Value;

use super::AUDIOBRIDGE;

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
