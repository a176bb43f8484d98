//! What a panel may say to Janus: an allow list, one connection's worth of state.
//!
//! Every frame from the browser must be exactly one JSON object that parses as one of
//! [`Request`]'s variants, with no field the panel does not send (serde's `deny_unknown_fields`,
//! duplicate keys refused). What goes on to Janus is that typed request serialized again, never
//! the browser's bytes, so nothing the types do not name can reach Janus (a second JSON value in
//! the frame, an extra field, a `record` or `rtp` hidden in a body).
//!
//! Beyond the shapes, the connection is bound to one crew member's token (the first request's,
//! which must be a registered crew member's): every request carries that token; only sessions
//! and handles this connection created are used; a handle joins once, one of the member's own
//! lines, under the member's own identity, with its token and its registered name; a line the
//! member may not talk on joins muted and stays muted; a talk-only line's offer receives nothing
//! (`a=sendonly`). Anything else is a [`Refusal`], and the connection ends.
//!
//! Every talk onset starts primed, whatever the page does ([`Priming`]): AudioBridge empties a
//! participant's queue when it is muted and prebuffers again only when its prebuffering is
//! raised, so each unmute raises it by one packet over the rooms' and each mute lowers it back.

use std::collections::HashMap;

use partyline_shared::janus::LOCAL_GROUP;
use partyline_shared::sdp::{self, Attributes, Direction};
use serde::Deserialize;

use super::requests::{Body, Jsep, Request};

use crate::secrets::SecretValue;
use crate::users::User;

/// AudioBridge, the one plugin a panel attaches to.
pub const PLUGIN: &str = "janus.plugin.audiobridge";
/// Requests awaiting Janus's answer that may hold a new session or handle id. A panel has a
/// couple at a time; the bound keeps a client from growing this map.
const MAX_PENDING: usize = 64;
/// A panel opens one Janus session per connection (janus.js: one `Janus` object per connection).
const MAX_SESSIONS: usize = 1;

/// Why a request is not relayed: said to the browser in the close frame and logged. Never
/// holds a secret (the close reason and the log line show it as is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// Why a token is refused that no registered crew member holds.
const ENDED: &str = "a token that is no crew member's (unknown, revoked or ended)";

fn refuse<T>(why: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(why.into()))
}

/// The crew member a connection speaks for.
#[derive(Debug, Clone)]
pub struct Bound {
    pub identity: String,
    pub username: String,
    token: SecretValue,
}

/// What a request waits for from Janus: the id of what it creates.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Session,
    Handle { session: u64 },
}

/// How a participant's queue is primed at every talk onset, not only at its join.
///
/// AudioBridge (1.1.2) mixes a participant once its queue holds `prebuffer` + 1 packets, then
/// takes one per 20 ms tick as the queue stands, and trims the queue back to `prebuffer` when a
/// packet makes it `2 × prebuffer` long. A mute empties the queue, and only a join or a
/// *raised* `prebuffer` (handled before `muted` in one `configure`) makes it prebuffer again: an
/// unmute alone starts the next talk spurt on a queue of 0–1 packets, where any packet landing
/// after the mixer's tick is a 20 ms hole every listener hears. So a mute goes on with the
/// rooms' prebuffering and an unmute with one packet more: raised, it primes the queue again.
///
/// Why one more and not the rooms' own (a mute one lower): a queue primed to the rooms' 2
/// packets runs 2–3 deep, and a packet a few ms early makes it 4, twice the prebuffering, where
/// AudioBridge trims it back to 2 at once and the spurt goes on with a few ms of margin; at 3 it
/// trims only at 6. Measured with a talker 0–10 ms late on its link
/// (`serial::crew::every_talk_onset_starts_primed_and_a_jittery_talker_is_heard_without_a_hole`):
/// primed to 2, holes in 2 runs of 3; to 3, none. The cost is one frame (20 ms) on every spurt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priming {
    /// The rooms' prebuffering, in 20 ms packets (at least two:
    /// [`prebuffer_packets`](partyline_shared::janus::prebuffer_packets)).
    pub rooms: u32,
}

impl Priming {
    /// What a mute (and a muted join) carries: the rooms' prebuffering.
    fn muted(self) -> u32 {
        self.rooms
    }

    /// What an unmute after a mute (and an unmuted join) carries: one more, which raises it.
    fn talking(self) -> u32 {
        self.rooms + 1
    }

    /// What an unmute after an unmute carries, with no mute of the page's in between (control's
    /// own AudioBridge `mute` may have been, which leaves the prebuffering as it was): one more
    /// again, so that it still raises it; never more than that, so a page unmuting over and over
    /// is not buffered deeper and deeper.
    fn talking_again(self) -> u32 {
        self.rooms + 2
    }
}

/// A handle this connection attached.
#[derive(Debug, Default)]
struct Handle {
    /// The room it joined (`None` before its join).
    room: Option<String>,
    /// The prebuffering its next unmute goes on with ([`Priming`]).
    next_unmute: Option<u32>,
}

/// One connection's allow list and what it learnt: whose it is, its sessions and handles.
#[derive(Debug, Default)]
pub struct Policy {
    /// What every join is given as its `quality` (None: Janus's default).
    mix_complexity: Option<u8>,
    /// What joins and talk keys carry as `prebuffer` (None: Janus's default, and no priming).
    priming: Option<Priming>,
    bound: Option<Bound>,
    pending: HashMap<String, Pending>,
    /// Session id → its handles by id.
    sessions: HashMap<u64, HashMap<u64, Handle>>,
}

impl Policy {
    /// A connection's policy whose joins ask Janus for mixes of this Opus complexity and whose
    /// talk onsets are primed to the rooms' prebuffering.
    pub fn new(mix_complexity: u8, priming: Priming) -> Policy {
        Policy { mix_complexity: Some(mix_complexity), priming: Some(priming), ..Policy::default() }
    }

    /// Whose connection this is, once its first request named a crew member's token.
    pub fn bound(&self) -> Option<&Bound> {
        self.bound.as_ref()
    }

    /// Checks one frame from the browser; the text to send Janus instead of it, or why not.
    /// `user_of` finds the registered crew member holding a token, as the registry is now.
    pub fn check(&mut self, frame: &[u8], user_of: impl Fn(&str) -> Option<User>) -> Result<String, Refusal> {
        let mut request: Request = serde_json::from_slice(frame)
            .map_err(|e| Refusal(format!("not a request a panel sends ({})", short(&e.to_string()))))?;
        let token = token_of(&request).to_owned();
        self.bind(&token, &user_of)?;
        // The registry is read only where the member's lines matter: keep-alives and trickles,
        // most of a panel's frames, cost no lookup (a removed member's connection is closed by
        // its removal, not found out here).
        let member = || user_of(&token).ok_or_else(|| Refusal(ENDED.into()));
        match &mut request {
            Request::Create { transaction, .. } => {
                if self.sessions.len() + self.pending_sessions() >= MAX_SESSIONS {
                    return refuse("a second Janus session on one connection");
                }
                self.expect(transaction, Pending::Session)?;
            }
            Request::Attach { transaction, session_id, plugin, opaque_id, .. } => {
                let user = member()?;
                let handles = self.session(*session_id)?;
                if *plugin != PLUGIN {
                    return refuse(format!("plugin {plugin:?}: panels use {PLUGIN} only"));
                }
                if opaque_id.as_ref().is_some_and(|o| *o != user.identity) {
                    return refuse("an opaque id other than the session's identity");
                }
                if handles.len() >= user.lines.len() {
                    return refuse("more handles than the session has lines");
                }
                self.expect(transaction, Pending::Handle { session: *session_id })?;
            }
            Request::Message { token, session_id, handle_id, body, jsep, .. } => {
                let room = self.handle(*session_id, *handle_id)?.room.clone();
                self.message(member, token, (*session_id, *handle_id), room, body, jsep.as_ref())?;
            }
            Request::Trickle { session_id, handle_id, .. } | Request::Hangup { session_id, handle_id, .. } => {
                self.handle(*session_id, *handle_id)?;
            }
            Request::Detach { session_id, handle_id, .. } => {
                self.handle(*session_id, *handle_id)?;
                self.sessions.get_mut(session_id).map(|handles| handles.remove(handle_id));
            }
            Request::Keepalive { session_id, .. } => {
                self.session(*session_id)?;
            }
            Request::Destroy { session_id, .. } => {
                self.session(*session_id)?;
                self.sessions.remove(session_id);
            }
        }
        serde_json::to_string(&request).map_err(|e| Refusal(format!("cannot relay the request: {e}")))
    }

    /// Learns the ids Janus hands out (a `success` answering a create or an attach).
    pub fn observe(&mut self, frame: &str) {
        if self.pending.is_empty() {
            return;
        }
        #[derive(Deserialize)]
        struct Answer {
            janus: String,
            transaction: Option<String>,
            data: Option<Created>,
        }
        #[derive(Deserialize)]
        struct Created {
            id: u64,
        }
        let Ok(answer) = serde_json::from_str::<Answer>(frame) else { return };
        let Some(pending) = answer.transaction.and_then(|t| self.pending.remove(&t)) else { return };
        let Some(Created { id }) = answer.data.filter(|_| answer.janus == "success") else { return };
        match pending {
            Pending::Session => {
                self.sessions.insert(id, HashMap::new());
            }
            Pending::Handle { session } => {
                if let Some(handles) = self.sessions.get_mut(&session) {
                    handles.insert(id, Handle::default());
                }
            }
        }
    }

    /// Checks that `token` is the connection's; the first request's binds the connection to
    /// the crew member holding it, who must be registered.
    fn bind(&mut self, token: &str, user_of: impl Fn(&str) -> Option<User>) -> Result<(), Refusal> {
        match &self.bound {
            Some(bound) if bound.token.matches(token) => Ok(()),
            Some(_) => refuse("a token other than the connection's"),
            None => {
                let user = user_of(token).ok_or_else(|| Refusal(ENDED.into()))?;
                let token = SecretValue::new(token.to_owned());
                self.bound = Some(Bound { identity: user.identity, username: user.username, token });
                Ok(())
            }
        }
    }

    fn message(
        &mut self,
        member: impl Fn() -> Result<User, Refusal>,
        token: &str,
        (session, handle): (u64, u64),
        room: Option<String>,
        body: &mut Body,
        jsep: Option<&Jsep>,
    ) -> Result<(), Refusal> {
        match body {
            Body::Join { room: wanted, id, display, muted, token: joins_with, prebuffer, quality, group } => {
                if room.is_some() {
                    return refuse("a second join on one handle");
                }
                let user = member()?;
                let Some(line) = user.line(wanted) else {
                    return refuse(format!("a join of {wanted:?}, which is not one of the session's lines"));
                };
                if *id != user.identity {
                    return refuse(format!("a join under the identity {id:?}, not the session's"));
                }
                if joins_with != token {
                    return refuse("a join with a token other than the connection's");
                }
                if !line.talk && !*muted {
                    return refuse(format!("an unmuted join of {wanted:?}, a listen-only line"));
                }
                match jsep {
                    Some(offer) if !line.listen && receives(&offer.sdp) => {
                        return refuse(format!("an offer to receive {wanted:?}, a talk-only line"));
                    }
                    _ => {}
                }
                // Others see the name the token was issued to, whatever the page says.
                display.clone_from(&user.username);
                (*quality, *group) = (self.mix_complexity, LOCAL_GROUP);
                *prebuffer = self.priming.map(|p| if *muted { p.muted() } else { p.talking() });
                let next_unmute = self.priming.map(|p| if *muted { p.talking() } else { p.talking_again() });
                if let Some(handles) = self.sessions.get_mut(&session) {
                    handles.insert(handle, Handle { room: Some(wanted.clone()), next_unmute });
                }
            }
            Body::Configure { muted: false, prebuffer } => {
                let Some(room) = room else { return refuse("a configure before the handle's join") };
                if !member()?.line(&room).is_some_and(|line| line.talk) {
                    return refuse(format!("an unmute on {room:?}, a line the session may not talk on"));
                }
                if jsep.is_some() {
                    return refuse("a new offer in a configure");
                }
                *prebuffer = self.handle(session, handle)?.next_unmute;
                self.set_next_unmute(session, handle, self.priming.map(Priming::talking_again));
            }
            Body::Configure { muted: true, prebuffer } => {
                if jsep.is_some() {
                    return refuse("an offer outside a join");
                }
                *prebuffer = self.priming.map(Priming::muted);
                self.set_next_unmute(session, handle, self.priming.map(Priming::talking));
            }
            Body::Leave {} => {
                if jsep.is_some() {
                    return refuse("an offer outside a join");
                }
            }
        }
        Ok(())
    }

    fn expect(&mut self, transaction: &str, pending: Pending) -> Result<(), Refusal> {
        if self.pending.len() >= MAX_PENDING {
            return refuse("too many requests awaiting Janus's answer");
        }
        self.pending.insert(transaction.to_owned(), pending);
        Ok(())
    }

    fn pending_sessions(&self) -> usize {
        self.pending.values().filter(|p| matches!(p, Pending::Session)).count()
    }

    fn set_next_unmute(&mut self, session: u64, handle: u64, prebuffer: Option<u32>) {
        if let Some(handle) = self.sessions.get_mut(&session).and_then(|handles| handles.get_mut(&handle)) {
            handle.next_unmute = prebuffer;
        }
    }

    fn session(&self, id: u64) -> Result<&HashMap<u64, Handle>, Refusal> {
        self.sessions.get(&id).ok_or_else(|| Refusal("a session this connection did not create".into()))
    }

    fn handle(&self, session: u64, handle: u64) -> Result<&Handle, Refusal> {
        self.session(session)?.get(&handle).ok_or_else(|| Refusal("a handle this connection did not attach".into()))
    }
}

fn token_of(request: &Request) -> &str {
    match request {
        Request::Create { token, .. }
        | Request::Attach { token, .. }
        | Request::Message { token, .. }
        | Request::Trickle { token, .. }
        | Request::Keepalive { token, .. }
        | Request::Hangup { token, .. }
        | Request::Detach { token, .. }
        | Request::Destroy { token, .. } => token,
    }
}

/// Whether an SDP offer asks to receive audio: any media section that is not `sendonly` or
/// `inactive` (a section without a direction attribute is `sendrecv`, RFC 8866 §6.7). An offer
/// that does not read as SDP cannot show that it receives nothing: it counts as receiving.
fn receives(sdp: &str) -> bool {
    sdp::parse(sdp).map_or(true, |session| {
        session.medias.iter().any(|m| !matches!(m.direction(), Some(Direction::SendOnly | Direction::Inactive)))
    })
}

/// The first line of a parse error, bounded: it goes into a close frame (at most 123 bytes).
fn short(message: &str) -> String {
    message.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::SecretValue;
    use crate::users::{Line, Users};
    use serde_json::{Value, json};

    const TOKEN: &str = "t0ken";

    /// Alice's panel: `talk-listen` both ways, `listen-only`, `talk-only`.
    fn alice() -> (Users, User) {
        let users = Users::default();
        let lines = vec![
            Line::new("talk-listen", true, true),
            Line::new("listen-only", true, false),
            Line::new("talk-only", false, true),
        ];
        let user =
            users.register("alice-1".into(), "Alice".into(), lines, TOKEN.into(), SecretValue::new("k".into()), None);
        (users, user)
    }

    /// A policy bound to Alice with session 1 and handles 11, 12, 13.
    fn connected(users: &Users) -> Policy {
        let mut policy = Policy::default();
        let lookup = |t: &str| users.by_token(t);
        policy.check(create("c").to_string().as_bytes(), lookup).expect("create");
        policy.observe(&json!({"janus": "success", "transaction": "c", "data": {"id": 1}}).to_string());
        for handle in [11, 12, 13] {
            let attach = json!({"janus": "attach", "transaction": format!("a{handle}"), "token": TOKEN,
                                "session_id": 1, "plugin": PLUGIN, "opaque_id": "alice-1"});
            policy.check(attach.to_string().as_bytes(), lookup).expect("attach");
            let answer = json!({"janus": "success", "transaction": format!("a{handle}"), "data": {"id": handle}});
            policy.observe(&answer.to_string());
        }
        policy
    }

    fn create(transaction: &str) -> Value {
        json!({"janus": "create", "transaction": transaction, "token": TOKEN})
    }

    fn message(handle: u64, body: Value) -> Value {
        let mut message =
            json!({"janus": "message", "transaction": "m", "token": TOKEN, "session_id": 1, "handle_id": handle});
        message["body"] = body;
        message
    }

    fn join(room: &str, muted: bool) -> Value {
        json!({"request": "join", "room": room, "id": "alice-1", "display": "Alice", "muted": muted, "token": TOKEN})
    }

    const SENDRECV: &str = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=sendrecv\r\n";
    const SENDONLY: &str = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=sendonly\r\n";
    const RECVONLY: &str = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=recvonly\r\n";

    fn with_offer(mut request: Value, sdp: &str) -> Value {
        request["jsep"] = json!({"type": "offer", "sdp": sdp});
        request
    }

    /// Everything a panel sends passes, and goes on as the same JSON (a join in the room's
    /// `local` group).
    #[test]
    fn what_a_panel_sends_is_relayed_as_it_is() {
        let (users, _) = alice();
        let mut policy = connected(&users);
        let lookup = |t: &str| users.by_token(t);
        let panel = [
            with_offer(message(11, join("talk-listen", true)), SENDRECV),
            with_offer(message(12, join("listen-only", true)), RECVONLY),
            with_offer(message(13, join("talk-only", false)), SENDONLY),
            message(11, json!({"request": "configure", "muted": false})),
            message(13, json!({"request": "configure", "muted": true})),
            json!({"janus": "trickle", "transaction": "i", "token": TOKEN, "session_id": 1, "handle_id": 11,
                   "candidate": {"candidate": "candidate:1 1 udp 1 10.0.0.2 5000 typ host", "sdpMid": "0", "sdpMLineIndex": 0}}),
            json!({"janus": "trickle", "transaction": "j", "token": TOKEN, "session_id": 1, "handle_id": 11,
                   "candidate": {"completed": true}}),
            json!({"janus": "keepalive", "transaction": "k", "token": TOKEN, "session_id": 1}),
            json!({"janus": "hangup", "transaction": "h", "token": TOKEN, "session_id": 1, "handle_id": 12}),
            json!({"janus": "detach", "transaction": "d", "token": TOKEN, "session_id": 1, "handle_id": 12}),
            json!({"janus": "destroy", "transaction": "x", "token": TOKEN, "session_id": 1}),
        ];
        for request in panel {
            let relayed =
                policy.check(request.to_string().as_bytes(), lookup).unwrap_or_else(|e| panic!("{request}: {e}"));
            let mut expected = request.clone();
            if expected["body"]["request"] == "join" {
                expected["body"]["group"] = json!("local");
            }
            assert_eq!(serde_json::from_str::<Value>(&relayed).expect("JSON"), expected);
        }
    }

    /// A join goes on with control's Opus complexity for its mix and in the room's `local`
    /// group; a page can choose neither (a trunk's group would put it in what other nodes hear
    /// of this room, and out of what this room forwards).
    #[test]
    fn a_join_carries_control_s_mix_complexity_and_group_never_the_page_s() {
        let (users, _) = alice();
        let mut policy = connected(&users);
        policy.mix_complexity = Some(2);
        let lookup = |t: &str| users.by_token(t);
        let request = with_offer(message(11, join("talk-listen", true)), SENDRECV);
        let relayed: Value =
            serde_json::from_str(&policy.check(request.to_string().as_bytes(), lookup).expect("join")).expect("JSON");
        assert_eq!((&relayed["body"]["quality"], &relayed["body"]["group"]), (&json!(2), &json!("local")), "{relayed}");
        for (field, value) in [("quality", json!(10)), ("group", json!("trunk")), ("group", json!("local"))] {
            let mut own = join("listen-only", true);
            own[field] = value;
            let refused = policy.check(message(12, own).to_string().as_bytes(), lookup).expect_err("a page's own");
            assert!(refused.0.contains("not a request"), "{field}: {refused:?}");
        }
    }

    /// Every talk onset starts on a primed queue: a muted join and each mute carry the rooms'
    /// prebuffering and each unmute one packet more, so that AudioBridge prebuffers again at
    /// every unmute; a page can set neither.
    #[test]
    fn every_unmute_raises_the_prebuffering_a_mute_lowered_and_a_page_sets_none() {
        let (users, _) = alice();
        let mut policy = connected(&users);
        policy.priming = Some(Priming { rooms: 2 });
        let lookup = |t: &str| users.by_token(t);
        let mut relayed = |request: Value| -> Value {
            let text =
                policy.check(request.to_string().as_bytes(), lookup).unwrap_or_else(|e| panic!("{request}: {e}"));
            serde_json::from_str(&text).expect("JSON")
        };
        let joined = relayed(with_offer(message(11, join("talk-listen", true)), SENDRECV));
        assert_eq!(joined["body"]["prebuffer"], json!(2), "{joined}");
        // Unmutes in a row (control's own `mute` may have emptied the queue in between) still
        // raise it, one packet and no further.
        let presses: Vec<Value> = [false, true, false, true, false, false, false, true, false]
            .into_iter()
            .map(|muted| {
                relayed(message(11, json!({"request": "configure", "muted": muted})))["body"]["prebuffer"].clone()
            })
            .collect();
        let expected = [3, 2, 3, 2, 3, 4, 4, 2, 3];
        assert_eq!(presses, expected.map(|p| json!(p)));
        // An unmuted join (a key latched over a reconnect) talks primed by the join itself.
        let joined = relayed(with_offer(message(13, join("talk-only", false)), SENDONLY));
        let unmuted = relayed(message(13, json!({"request": "configure", "muted": false})));
        assert_eq!((&joined["body"]["prebuffer"], &unmuted["body"]["prebuffer"]), (&json!(3), &json!(4)));
        for own in [json!({"request": "configure", "muted": false, "prebuffer": 0}), {
            let mut join = join("listen-only", true);
            join["prebuffer"] = json!(0);
            join
        }] {
            let refused = policy.check(message(12, own).to_string().as_bytes(), lookup).expect_err("a page's own");
            assert!(refused.0.contains("not a request"), "{refused:?}");
        }
    }

    /// Data-driven: each request, sent on a connected panel, is refused with a reason naming it.
    #[test]
    fn what_a_panel_never_sends_is_refused_with_the_reason() {
        let (users, _) = alice();
        let cases: Vec<(&str, String, &str)> = vec![
            (
                "a second JSON value in the frame",
                format!(
                    "{}{}",
                    message(11, join("talk-listen", true)),
                    json!({"janus": "message", "body": {"request": "join", "rtp": {}}})
                ),
                "not a request",
            ),
            (
                "plain RTP",
                message(
                    11,
                    json!({"request": "join", "room": "talk-listen", "id": "alice-1", "display": "Alice",
                "muted": true, "token": TOKEN, "rtp": {"ip": "192.0.2.1", "port": 9}}),
                )
                .to_string(),
                "not a request",
            ),
            (
                "recording",
                message(
                    11,
                    json!({"request": "configure", "muted": true, "record": true,
                "filename": "/tmp/x"}),
                )
                .to_string(),
                "not a request",
            ),
            ("listing rooms", message(11, json!({"request": "list"})).to_string(), "not a request"),
            (
                "a forwarder (a cascade's leg)",
                message(11, json!({"request": "rtp_forward", "room": "talk-listen", "host": "192.0.2.1", "port": 9}))
                    .to_string(),
                "not a request",
            ),
            (
                "a trunk's join",
                message(
                    11,
                    json!({"request": "join", "room": "talk-listen", "id": "trunk:b", "display": "Alice",
                "muted": false, "token": TOKEN, "group": "trunk", "rtp": {}}),
                )
                .to_string(),
                "not a request",
            ),
            (
                "listing a room",
                message(11, json!({"request": "listparticipants", "room": "x"})).to_string(),
                "not a request",
            ),
            (
                "an admin request",
                message(11, json!({"request": "kick", "room": "x", "id": "b"})).to_string(),
                "not a request",
            ),
            (
                "a duplicate key",
                r#"{"janus":"keepalive","transaction":"k","token":"t0ken","session_id":1,"session_id":2}"#.into(),
                "not a request",
            ),
            ("info", json!({"janus": "info", "transaction": "i"}).to_string(), "not a request"),
            (
                "claim",
                json!({"janus": "claim", "transaction": "i", "token": TOKEN, "session_id": 1}).to_string(),
                "not a request",
            ),
            (
                "another token",
                json!({"janus": "keepalive", "transaction": "k", "token": "other", "session_id": 1}).to_string(),
                "a token other than",
            ),
            (
                "another session",
                json!({"janus": "keepalive", "transaction": "k", "token": TOKEN, "session_id": 2}).to_string(),
                "did not create",
            ),
            ("another handle", message(99, join("talk-listen", true)).to_string(), "did not attach"),
            ("a second session", create("c2").to_string(), "second Janus session"),
            (
                "another plugin",
                json!({"janus": "attach", "transaction": "a", "token": TOKEN, "session_id": 1,
                "plugin": "janus.plugin.videoroom"})
                .to_string(),
                "plugin",
            ),
            (
                "another identity",
                message(
                    11,
                    json!({"request": "join", "room": "talk-listen", "id": "card:talk-listen",
                "display": "Alice", "muted": true, "token": TOKEN}),
                )
                .to_string(),
                "identity",
            ),
            ("another room", message(11, join("foh", true)).to_string(), "not one of the session's lines"),
            ("an unmuted listen-only join", message(12, join("listen-only", false)).to_string(), "listen-only"),
            (
                "a listen-only unmute",
                message(12, json!({"request": "configure", "muted": false})).to_string(),
                "before the handle's join",
            ),
            (
                "a talk-only line receiving",
                with_offer(message(13, join("talk-only", true)), SENDRECV).to_string(),
                "talk-only",
            ),
            (
                "an answer",
                message(11, json!({"request": "configure", "muted": true}))
                    .as_object()
                    .map(|o| {
                        let mut o = o.clone();
                        o.insert("jsep".into(), json!({"type": "answer", "sdp": "v=0"}));
                        o
                    })
                    .map(|o| Value::Object(o).to_string())
                    .unwrap_or_default(),
                "not a request",
            ),
            ("a JSON array", "[]".into(), "not a request"),
            ("not JSON", "hello".into(), "not a request"),
        ];
        for (what, frame, reason) in cases {
            let mut policy = connected(&users);
            let refusal = policy.check(frame.as_bytes(), |t| users.by_token(t)).expect_err(what);
            assert!(refusal.0.contains(reason), "{what}: {refusal}");
            assert!(refusal.0.len() <= 123, "{what}: a close reason fits a close frame: {refusal}");
        }
    }

    #[test]
    fn a_listen_only_line_joined_muted_cannot_unmute_and_a_second_join_is_refused() {
        let (users, _) = alice();
        let mut policy = connected(&users);
        let lookup = |t: &str| users.by_token(t);
        policy.check(message(12, join("listen-only", true)).to_string().as_bytes(), lookup).expect("muted join");
        let unmute = message(12, json!({"request": "configure", "muted": false})).to_string();
        assert!(policy.check(unmute.as_bytes(), lookup).expect_err("unmute").0.contains("may not talk"));
        let again = message(12, join("talk-listen", true)).to_string();
        assert!(policy.check(again.as_bytes(), lookup).expect_err("rejoin").0.contains("second join"));
    }

    #[test]
    fn the_first_token_must_be_a_crew_member_s_and_an_ended_one_is_refused_later() {
        let (users, alice) = alice();
        let mut policy = Policy::default();
        let unknown = json!({"janus": "create", "transaction": "c", "token": "guess"}).to_string();
        assert!(policy.check(unknown.as_bytes(), |t| users.by_token(t)).is_err());
        let mut policy = connected(&users);
        assert_eq!(policy.bound().map(|b| b.identity.as_str()), Some("alice-1"));
        users.remove(&alice.identity, crate::users::Ending::Disconnected);
        let join = message(11, join("talk-listen", true)).to_string();
        assert!(policy.check(join.as_bytes(), |t| users.by_token(t)).expect_err("ended").0.contains("no crew member"));
    }

    #[test]
    fn only_sendonly_or_inactive_sections_do_not_receive() {
        assert!(receives(SENDRECV) && receives(RECVONLY));
        assert!(receives("v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"), "no direction is sendrecv");
        assert!(!receives(SENDONLY));
        assert!(!receives("v=0\r\nm=audio 9 RTP/AVP 0\r\na=inactive\r\n"));
        assert!(receives(&format!("{SENDONLY}m=audio 9 RTP/AVP 0\r\n")), "a second section that receives");
        assert!(receives("hello"), "an offer that is not SDP may receive");
    }
}
