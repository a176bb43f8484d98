//! WHIP and WHEP sessions: other systems in and out of a line. Each session is a participant of
//! its group's room that control drives on the client's behalf: registered as a user with a
//! token of its own (a WHIP publisher may talk on the line, a WHEP player only listens, as a
//! listen-only line), joined with the client's offer on a Janus session of its own, whose long
//! poll this module reads until the session ends: the client's `DELETE`, its PeerConnection
//! gone (Janus's `hangup`) or never up within [`CONNECT_TIMEOUT`], a WHIP client Janus has
//! received nothing from for [`IDLE_TIMEOUT`], the admin's disconnect (a kick, which hangs it
//! up), or its token's revocation. Media flows
//! client ⇄ Janus over ICE, as for panels; control only relays the offer and the answer.
//!
//! `sdp` checks an offer before anything is registered for it, and tidies Janus's answer for
//! browsers.

pub mod sdp;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use partyline_shared::Config;
use partyline_shared::config::{StreamKind, StreamToken};
use partyline_shared::janus::client::Session;
use partyline_shared::janus::{
    AudioBridgeRequest, JanusError, Jsep, JsepType, LOCAL_GROUP, SessionEvent, prebuffer_packets,
};
use partyline_shared::sdp::BadSdp;
use partyline_shared::sync::lock;
use tokio::sync::mpsc;

use crate::janus::{IssueError, Janus};
use crate::secrets::random_hex;
use crate::users::{Line, Users};
use sdp::{check_offer, tidy_answer};

/// Sessions of one kind a group takes at once.
pub const MAX_PER_GROUP: usize = 4;
/// How long Janus may take to answer an offer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Janus's errors about a session description (unknown type, invalid SDP, …): the client's
/// offer is at fault, not Janus.
const JSEP_ERRORS: std::ops::RangeInclusive<i64> = 464..=469;
/// A session whose PeerConnection is not up this long after the answer is dead: ended.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A WHIP session Janus has received nothing from for this long is idle: ended (a publisher
/// sends all the time, silence included).
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// A request at least this often keeps the Janus session alive (it ends after 60 s without).
const KEEPALIVE: Duration = Duration::from_secs(25);

/// One WHIP or WHEP session.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Random hex: the session's resource (`/api/whip/{group}/{id}`).
    pub id: String,
    pub kind: StreamKind,
    pub group: String,
    /// Its participant identity (a user of the registry).
    pub identity: String,
    /// The stream token it came with.
    pub token_id: String,
    session: Session,
}

/// Why a session was not started.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    BadOffer(#[from] BadSdp),
    #[error("group {group:?} has {MAX_PER_GROUP} {kind} sessions, the most it takes: end one first")]
    Full { group: String, kind: &'static str },
    #[error("the media server refused the offer: {0}")]
    Refused(String),
    #[error(transparent)]
    Janus(#[from] JanusError),
}

/// What a client asks for.
#[derive(Debug)]
pub struct StartRequest {
    pub kind: StreamKind,
    pub group: String,
    pub token: StreamToken,
    pub offer: String,
    pub address: IpAddr,
}

/// The sessions running, by id.
#[derive(Debug, Default)]
pub struct Streams {
    sessions: Mutex<HashMap<String, Stream>>,
    /// Sessions being started, per kind and group: counted against [`MAX_PER_GROUP`] from the
    /// check on, so that offers arriving together cannot all pass it while Janus answers.
    /// Always locked after `sessions`.
    starting: Mutex<HashMap<(StreamKind, String), usize>>,
}

/// A session's place under the cap while it starts; given back when dropped.
struct Slot<'a> {
    streams: &'a Streams,
    key: (StreamKind, String),
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut starting = lock(&self.streams.starting);
        if let Some(count) = starting.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                starting.remove(&self.key);
            }
        }
    }
}

impl Streams {
    /// The session `id` of `kind` in `group`, if it runs.
    pub fn get(&self, kind: StreamKind, group: &str, id: &str) -> Option<Stream> {
        lock(&self.sessions).get(id).filter(|s| s.kind == kind && s.group == group).cloned()
    }

    /// Starts a session: its offer checked, its participant registered and joined with it.
    /// The stream and Janus's answer. Nothing stays registered when it fails.
    pub async fn start(
        self: &Arc<Self>,
        janus: &Arc<Janus>,
        users: &Users,
        config: &Config,
        request: StartRequest,
    ) -> Result<(Stream, String), StreamError> {
        let StartRequest { kind, group, token, offer, address } = request;
        check_offer(&offer, kind)?;
        let _slot = self.reserve(kind, &group)?;
        let whip = kind == StreamKind::Whip;
        let name = format!("{} ({})", token.name, kind.as_str().to_uppercase());
        let user = janus
            .issue_token(&name, vec![Line::new(&group, !whip, whip)], None, address, None, None)
            .await
            .map_err(|e| match e {
                IssueError::Janus(e) => StreamError::Janus(e),
                // A stream takes no position.
                IssueError::Taken(taken) => StreamError::Refused(taken.to_string()),
            })?;
        users.set_stream(&user.identity, kind);
        let id = random_hex(8).map_err(|e| JanusError::Protocol(e.to_string()))?;
        let joined = async {
            let session = janus.session_as(&user).await?;
            let events = watch(&session);
            let bitrate = config.group(&group).map_or(64_000, |(_, g)| config.group_bitrate(g).get() * 1000);
            let join = AudioBridgeRequest::Join {
                room: group.clone(),
                id: user.identity.clone(),
                display: name.clone(),
                token: user.token.expose().to_owned(),
                group: LOCAL_GROUP.to_owned(),
                bitrate,
                muted: !whip,
                // A publisher talks from its join on: one packet over the rooms' prebuffering,
                // as a panel's talk key (`janus_proxy::policy::Priming`).
                prebuffer: prebuffer_packets(config.audio.jitter_buffer_ms.get()) + u32::from(whip),
                rtp: None,
            };
            let jsep = Jsep { kind: JsepType::Offer, sdp: offer.clone() };
            let transaction = session.send(join, Some(jsep)).await.map_err(|e| match e {
                // Janus's own check of the SDP (465: "Error processing SDP", and its JSEP kin).
                JanusError::Refused { code, reason } if JSEP_ERRORS.contains(&code) => StreamError::Refused(reason),
                other => StreamError::Janus(other),
            })?;
            let answer = answer_to(events, &transaction).await.map(|(sdp, events)| (tidy_answer(&offer, &sdp), events));
            Ok::<_, StreamError>((session, answer))
        };
        let (session, (answer, events)) = match joined.await {
            Ok((session, Ok(answered))) => (session, answered),
            Ok((session, Err(e))) => {
                let _ = session.destroy().await;
                self.forget_user(janus, &user.identity, "its offer was refused").await;
                return Err(e);
            }
            Err(e) => {
                self.forget_user(janus, &user.identity, "its session could not be opened").await;
                return Err(e);
            }
        };
        let stream =
            Stream { id: id.clone(), kind, group, identity: user.identity.clone(), token_id: token.id, session };
        lock(&self.sessions).insert(id.clone(), stream.clone());
        tracing::info!(
            stream = id,
            kind = kind.as_str(),
            group = stream.group,
            identity = stream.identity,
            "stream session started"
        );
        tokio::spawn(Arc::clone(self).follow(Arc::clone(janus), stream.clone(), events));
        Ok((stream, answer))
    }

    /// A place under the cap for a session of `kind` in `group`, taken before anything awaits.
    fn reserve(&self, kind: StreamKind, group: &str) -> Result<Slot<'_>, StreamError> {
        let sessions = lock(&self.sessions);
        let mut starting = lock(&self.starting);
        let key = (kind, group.to_owned());
        let running = sessions.values().filter(|s| s.kind == kind && s.group == group).count();
        if running + starting.get(&key).copied().unwrap_or(0) >= MAX_PER_GROUP {
            return Err(StreamError::Full { group: group.to_owned(), kind: kind.as_str() });
        }
        *starting.entry(key.clone()).or_default() += 1;
        Ok(Slot { streams: self, key })
    }

    /// Ends session `id` (`why` is logged): its Janus session destroyed, its participant
    /// disconnected. False when it was not running.
    pub async fn end(&self, janus: &Janus, id: &str, why: &str) -> bool {
        let Some(stream) = lock(&self.sessions).remove(id) else { return false };
        let _ = stream.session.destroy().await;
        tracing::info!(stream = id, kind = stream.kind.as_str(), group = stream.group, why, "stream session ended");
        self.forget_user(janus, &stream.identity, why).await;
        true
    }

    /// How many sessions of stream token `token_id` run.
    pub fn of_token(&self, token_id: &str) -> usize {
        lock(&self.sessions).values().filter(|s| s.token_id == token_id).count()
    }

    /// Ends every session of stream token `token_id` (revoked).
    pub async fn end_of_token(&self, janus: &Janus, token_id: &str) {
        let ids: Vec<String> =
            lock(&self.sessions).values().filter(|s| s.token_id == token_id).map(|s| s.id.clone()).collect();
        for id in ids {
            self.end(janus, &id, "its stream token was revoked").await;
        }
    }

    /// Ends the session of every user removed from the registry (the admin's disconnect, its
    /// group deleted), as it goes.
    pub async fn end_of_the_removed(self: Arc<Self>, janus: Arc<Janus>, users: Arc<Users>) {
        let mut removals = users.subscribe_removals();
        loop {
            match removals.recv().await {
                Ok(removal) => {
                    let id =
                        lock(&self.sessions).values().find(|s| s.identity == removal.identity).map(|s| s.id.clone());
                    if let Some(id) = id {
                        self.end(&janus, &id, "its participant was removed").await;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    async fn forget_user(&self, janus: &Janus, identity: &str, why: &str) {
        // Gone already (the admin disconnected it, or Janus's leave came first) is fine.
        let _ = janus.disconnect(identity, why, "stream").await;
    }

    /// Reads the session's events until its PeerConnection or its Janus session is gone, and
    /// keeps it alive meanwhile; then ends it.
    async fn follow(self: Arc<Self>, janus: Arc<Janus>, stream: Stream, mut events: mpsc::Receiver<Event>) {
        let mut keepalive = tokio::time::interval(KEEPALIVE);
        let connect = tokio::time::sleep(CONNECT_TIMEOUT);
        tokio::pin!(connect);
        let mut up = false;
        // While Janus receives nothing from a WHIP client: since when.
        let idle = tokio::time::sleep(IDLE_TIMEOUT);
        tokio::pin!(idle);
        let mut idle_since = None;
        let why = loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(Event::Ended(why)) | Some(Event::Failed(why)) => break why,
                    Some(Event::Up) => up = true,
                    Some(Event::Receiving(receiving)) if stream.kind == StreamKind::Whip => {
                        // The timer counts only while idle (its branch is off otherwise).
                        idle_since = (!receiving).then(tokio::time::Instant::now);
                        if let Some(since) = idle_since {
                            idle.as_mut().reset(since + IDLE_TIMEOUT);
                        }
                    }
                    Some(Event::Receiving(_) | Event::Plugin(_)) => {}
                    None => break "its Janus session is gone".to_owned(),
                },
                () = &mut connect, if !up => {
                    break format!("its connection did not come up within {} s", CONNECT_TIMEOUT.as_secs());
                }
                () = &mut idle, if idle_since.is_some() => {
                    break format!("no media from it for {} s", IDLE_TIMEOUT.as_secs());
                }
                _ = keepalive.tick() => {
                    if let Err(e) = stream.session.keepalive().await {
                        break format!("its Janus session is gone: {e}");
                    }
                }
            }
        };
        self.end(&janus, &stream.id, &why).await;
    }
}

/// An event of a stream's Janus session, as this module needs it.
#[derive(Debug)]
enum Event {
    /// A plugin event: `(transaction, its answer SDP or its error)`.
    Plugin((Option<String>, Result<Option<String>, String>)),
    /// The PeerConnection is up (ICE and DTLS).
    Up,
    /// Janus started or stopped receiving media from the client.
    Receiving(bool),
    /// The PeerConnection or the handle is gone.
    Ended(String),
    /// The long poll failed: the session is gone.
    Failed(String),
}

/// The session's long poll, in a task of its own, as a channel of [`Event`]s.
fn watch(session: &Session) -> mpsc::Receiver<Event> {
    let poller = session.poller();
    let (sender, receiver) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let events = match poller.next().await {
                Ok(events) => events,
                Err(e) => {
                    let _ = sender.send(Event::Failed(format!("its Janus session is gone: {e}"))).await;
                    return;
                }
            };
            for event in events {
                let event = match event {
                    SessionEvent::Event(plugin) => {
                        let error = plugin.plugindata.as_ref().and_then(|d| d.data.error.clone());
                        let result = match error {
                            Some(error) => Err(error),
                            None => Ok(plugin.jsep.map(|j| j.sdp)),
                        };
                        Event::Plugin((plugin.transaction, result))
                    }
                    SessionEvent::Hangup { reason } => {
                        Event::Ended(format!("its connection ended ({})", reason.unwrap_or_else(|| "hangup".into())))
                    }
                    SessionEvent::Detached => Event::Ended("its handle was detached".into()),
                    SessionEvent::Webrtcup => Event::Up,
                    SessionEvent::Media { receiving: Some(receiving) } => Event::Receiving(receiving),
                    _ => continue,
                };
                let last = matches!(event, Event::Ended(_) | Event::Failed(_));
                if sender.send(event).await.is_err() || last {
                    return;
                }
            }
        }
    });
    receiver
}

/// Janus's answer to the join of `transaction`, and the events that follow it.
async fn answer_to(
    mut events: mpsc::Receiver<Event>,
    transaction: &str,
) -> Result<(String, mpsc::Receiver<Event>), StreamError> {
    let answer = tokio::time::timeout(ANSWER_TIMEOUT, async {
        while let Some(event) = events.recv().await {
            match event {
                Event::Plugin((Some(t), result)) if t == transaction => match result {
                    Ok(Some(sdp)) => return Ok(sdp),
                    Ok(None) => continue,
                    Err(error) => return Err(StreamError::Refused(error)),
                },
                Event::Plugin(_) | Event::Up | Event::Receiving(_) => {}
                Event::Ended(why) | Event::Failed(why) => return Err(StreamError::Refused(why)),
            }
        }
        Err(StreamError::Refused("its Janus session is gone".into()))
    })
    .await
    .unwrap_or_else(|_| Err(StreamError::Refused(format!("no answer within {} s", ANSWER_TIMEOUT.as_secs()))))?;
    Ok((answer, events))
}
