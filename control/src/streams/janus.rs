//! A stream on Janus (`media.engine: janus`): its participant joins the group's AudioBridge
//! room with the client's offer on a Janus session of its own, whose long poll is read until
//! the session ends: its PeerConnection gone (Janus's `hangup`) or never up within
//! [`CONNECT_TIMEOUT`], a WHIP client Janus has received nothing from for [`IDLE_TIMEOUT`].
//! Media flows client ⇄ Janus over ICE, as for panels; control only relays the offer and the
//! answer (tidied for browsers: [`tidy_answer`]).

use std::sync::Arc;
use std::time::Duration;

use partyline_shared::Config;
use partyline_shared::config::StreamKind;
use partyline_shared::janus::client::Session;
use partyline_shared::janus::{
    AudioBridgeRequest, JanusError, Jsep, JsepType, LOCAL_GROUP, SessionEvent, prebuffer_packets,
};
use tokio::sync::mpsc;

use super::sdp::tidy_answer;
use super::{Silence, Stream, StreamError, Streams};
use crate::janus::Janus;
use crate::users::User;

/// How long Janus may take to answer an offer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Janus's errors about a session description (unknown type, invalid SDP, …): the client's
/// offer is at fault, not Janus.
const JSEP_ERRORS: std::ops::RangeInclusive<i64> = 464..=469;
/// A session whose PeerConnection is not up this long after the answer is dead: ended.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A request at least this often keeps the Janus session alive (it ends after 60 s without).
const KEEPALIVE: Duration = Duration::from_secs(25);

/// What joining Janus gives a stream: its session, the answer, the session's events from then on.
pub(super) type Joined = (Session, String, mpsc::Receiver<Event>);

/// Joins `user` (the stream's participant, shown as `name`) to `group`'s room with `offer`. A
/// session opened for an offer Janus refused is destroyed.
pub(super) async fn join(
    janus: &Janus,
    config: &Config,
    user: &User,
    (group, name): (&str, &str),
    offer: &str,
    whip: bool,
) -> Result<Joined, StreamError> {
    let session = janus.session_as(user).await?;
    let events = watch(&session);
    let bitrate = config.group(group).map_or(64_000, |(_, g)| config.group_bitrate(g).get() * 1000);
    let join = AudioBridgeRequest::Join {
        room: group.to_owned(),
        id: user.identity.clone(),
        display: name.to_owned(),
        token: user.token.expose().to_owned(),
        group: LOCAL_GROUP.to_owned(),
        bitrate,
        muted: !whip,
        // A publisher talks from its join on: one packet over the rooms' prebuffering, as a
        // panel's talk key (`janus_proxy::policy::Priming`).
        prebuffer: prebuffer_packets(config.audio.jitter_buffer_ms.get()) + u32::from(whip),
        rtp: None,
    };
    let jsep = Jsep { kind: JsepType::Offer, sdp: offer.to_owned() };
    let answered = match session.send(join, Some(jsep)).await {
        Ok(transaction) => answer_to(events, &transaction).await,
        // Janus's own check of the SDP (465: "Error processing SDP", and its JSEP kin).
        Err(JanusError::Refused { code, reason }) if JSEP_ERRORS.contains(&code) => Err(StreamError::Refused(reason)),
        Err(other) => Err(StreamError::Janus(other)),
    };
    match answered {
        Ok((answer, events)) => Ok((session, tidy_answer(offer, &answer), events)),
        Err(e) => {
            let _ = session.destroy().await;
            Err(e)
        }
    }
}

impl Streams {
    /// Reads the session's events until its PeerConnection or its Janus session is gone, and
    /// keeps it alive meanwhile; then ends it.
    pub(super) async fn follow_janus(
        self: Arc<Self>,
        janus: Arc<Janus>,
        stream: Stream,
        session: Session,
        mut events: mpsc::Receiver<Event>,
    ) {
        let mut keepalive = tokio::time::interval(KEEPALIVE);
        let connect = tokio::time::sleep(CONNECT_TIMEOUT);
        tokio::pin!(connect);
        let mut up = false;
        let mut silence = Silence::default();
        let why = loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(Event::Ended(why)) | Some(Event::Failed(why)) => break why,
                    Some(Event::Up) => up = true,
                    Some(Event::Receiving(receiving)) if stream.kind == StreamKind::Whip => silence.receiving(receiving),
                    Some(Event::Receiving(_) | Event::Plugin(_)) => {}
                    None => break "its Janus session is gone".to_owned(),
                },
                () = &mut connect, if !up => {
                    break format!("its connection did not come up within {} s", CONNECT_TIMEOUT.as_secs());
                }
                why = silence.idle() => break why,
                _ = keepalive.tick() => {
                    if let Err(e) = session.keepalive().await {
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
pub(super) enum Event {
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
