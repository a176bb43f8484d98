//! A group participant's signalling with Janus: the session's long poll, the join (with a
//! WebRTC offer, or a plain-RTP address) and its answer, and the events that end a
//! participation.

use anyhow::{Context as _, anyhow};
use partyline_shared::bridge::PlanGroup;
use partyline_shared::janus::client::Session;
use partyline_shared::janus::{AudioBridgeRequest, JanusError, Jsep, JsepType, LOCAL_GROUP, RtpPeer, SessionEvent};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use super::{STEP_TIMEOUT, Stages};

/// The session's long poll, run by a task of its own (a pending poll must never be dropped:
/// the events Janus handed to it would be lost), stopped when this is dropped.
#[derive(Debug)]
pub struct Events {
    batches: mpsc::UnboundedReceiver<Result<Vec<SessionEvent>, JanusError>>,
    _poll: AbortOnDropHandle<()>,
}

impl Events {
    pub fn start(session: &Session) -> Events {
        let (tx, batches) = mpsc::unbounded_channel();
        let poller = session.poller();
        let poll = tokio::spawn(async move {
            loop {
                let batch = poller.next().await;
                let failed = batch.is_err();
                if tx.send(batch).is_err() || failed {
                    break;
                }
            }
        });
        Events { batches, _poll: AbortOnDropHandle::new(poll) }
    }

    /// The next batch of events; the poll's failure ends the participation.
    pub async fn next(&mut self) -> anyhow::Result<Vec<SessionEvent>> {
        Ok(self.batches.recv().await.ok_or_else(|| anyhow!("the long poll ended"))??)
    }
}

/// How the participant's media is to meet Janus's, as the join says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer {
    /// A WebRTC offer (SDP).
    Sdp(String),
    /// A plain-RTP participant receiving at this address.
    Rtp(RtpPeer),
}

/// Janus's half, as the result of the join gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The SDP answer to a WebRTC offer.
    Sdp(String),
    /// Where Janus receives a plain-RTP participant's packets.
    Rtp(RtpPeer),
}

/// Joins the group's room with `offer` (its own prebuffering of `prebuffer` packets, the token
/// the room admits) and returns Janus's answer, which comes on the long poll with the result of
/// the join.
pub async fn join(
    session: &Session,
    events: &mut Events,
    group: &PlanGroup,
    prebuffer: u32,
    offer: Offer,
    stages: &Stages,
) -> anyhow::Result<Answer> {
    // Its own prebuffering: the room's is sized for the crew's network, the card sits next to
    // Janus. The room admits only the tokens control issued for it: the join carries ours.
    let (rtp, jsep) = match offer {
        Offer::Sdp(sdp) => (None, Some(Jsep { kind: JsepType::Offer, sdp })),
        Offer::Rtp(peer) => (Some(peer), None),
    };
    let join = AudioBridgeRequest::Join {
        room: group.room.clone(),
        id: group.identity.clone(),
        display: group.display.clone(),
        token: group.token.clone(),
        group: LOCAL_GROUP.to_owned(),
        bitrate: group.bitrate_kbps * 1000,
        muted: false,
        prebuffer,
        rtp,
    };
    let transaction = session.send(join, jsep).await?;
    stages.mark("join acknowledged by Janus");
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    loop {
        let batch = tokio::select! {
            () = tokio::time::sleep_until(deadline) => {
                return Err(anyhow!("Janus did not answer the join within {STEP_TIMEOUT:?}"));
            }
            batch = events.next() => batch?,
        };
        // Every event of the batch is looked at: one ending the participation after the
        // answer ends this attempt too.
        let mut answer = None;
        for event in &batch {
            match join_news(event, &transaction, &group.identity) {
                JoinNews::Answer(given) => answer = Some(given),
                JoinNews::Refused(error) => return Err(error).context("join refused"),
                JoinNews::Ended(ended) => return Err(ended.into()),
                JoinNews::Nothing => {}
            }
        }
        if let Some(answer) = answer {
            return Ok(answer);
        }
    }
}

/// What one event says about the join of `transaction`.
#[derive(Debug, PartialEq)]
enum JoinNews {
    /// Janus's answer to the offer.
    Answer(Answer),
    /// The AudioBridge refused the join.
    Refused(JanusError),
    /// Something ended the participation.
    Ended(Ended),
    Nothing,
}

fn join_news(event: &SessionEvent, transaction: &str, identity: &str) -> JoinNews {
    if let SessionEvent::Event(news) = event
        && news.transaction.as_deref() == Some(transaction)
    {
        if let Some(Err(error)) = news.plugindata.as_ref().map(|p| p.data.clone().checked()) {
            return JoinNews::Refused(error);
        }
        if let Some(Jsep { kind: JsepType::Answer, sdp }) = &news.jsep {
            return JoinNews::Answer(Answer::Sdp(sdp.clone()));
        }
        let janus = news.plugindata.as_ref().and_then(|p| p.data.rtp.clone());
        return janus.map_or(JoinNews::Nothing, |peer| JoinNews::Answer(Answer::Rtp(peer)));
    }
    match ending(event, identity) {
        Some(ended) => JoinNews::Ended(ended),
        None => JoinNews::Nothing,
    }
}

/// Why Janus ended a participation: the participant joins again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Ended {
    #[error("Janus hung up: {0}")]
    HungUp(String),
    #[error("Janus detached the handle")]
    Detached,
    #[error("kicked from room {0:?}")]
    Kicked(String),
    #[error("left room {0:?}")]
    Left(String),
    #[error("room {0:?} was destroyed")]
    Destroyed(String),
}

/// Whether `event` ends the participation of `identity`. A kicked client's webrtcbin still
/// reports `connected`: only Janus's events tell a participant it is out.
pub fn ending(event: &SessionEvent, identity: &str) -> Option<Ended> {
    match event {
        SessionEvent::Hangup { reason } => {
            Some(Ended::HungUp(reason.clone().unwrap_or_else(|| "no reason given".to_owned())))
        }
        SessionEvent::Detached => Some(Ended::Detached),
        SessionEvent::Event(news) => {
            let data = &news.plugindata.as_ref()?.data;
            let room = || data.room.clone().unwrap_or_default();
            if data.kicked.as_deref() == Some(identity) {
                Some(Ended::Kicked(room()))
            } else if data.leaving.as_deref() == Some(identity) {
                Some(Ended::Left(room()))
            } else if data.audiobridge == "destroyed" {
                Some(Ended::Destroyed(room()))
            } else {
                None
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use partyline_shared::janus::codes;
    use serde_json::json;

    fn event(value: serde_json::Value) -> SessionEvent {
        serde_json::from_value(value).expect("an event")
    }

    fn audiobridge(transaction: Option<&str>, data: serde_json::Value) -> SessionEvent {
        let mut value = json!({"janus": "event", "sender": 1, "transaction": transaction,
                               "plugindata": {"plugin": "janus.plugin.audiobridge"}});
        value["plugindata"]["data"] = data;
        event(value)
    }

    #[test]
    fn what_ends_a_participation() {
        let me = "server-foh";
        let cases = [
            (event(json!({"janus": "hangup", "reason": "DTLS alert"})), Some(Ended::HungUp("DTLS alert".into()))),
            (event(json!({"janus": "hangup"})), Some(Ended::HungUp("no reason given".into()))),
            (event(json!({"janus": "detached"})), Some(Ended::Detached)),
            (
                audiobridge(None, json!({"audiobridge": "event", "room": "r", "kicked": me})),
                Some(Ended::Kicked("r".into())),
            ),
            (
                audiobridge(None, json!({"audiobridge": "event", "room": "r", "leaving": me})),
                Some(Ended::Left("r".into())),
            ),
            (audiobridge(None, json!({"audiobridge": "destroyed", "room": "r"})), Some(Ended::Destroyed("r".into()))),
            // Others leaving or kicked, talk events, media news: nothing ends.
            (audiobridge(None, json!({"audiobridge": "event", "room": "r", "kicked": "alice-1"})), None),
            (audiobridge(None, json!({"audiobridge": "event", "room": "r", "leaving": "alice-1"})), None),
            (audiobridge(None, json!({"audiobridge": "talking", "room": "r", "id": "alice-1"})), None),
            (event(json!({"janus": "webrtcup"})), None),
            (event(json!({"janus": "media", "type": "audio", "receiving": true})), None),
            (event(json!({"janus": "slowlink", "uplink": true, "lost": 4})), None),
        ];
        for (event, ended) in cases {
            assert_eq!(ending(&event, me), ended, "{event:?}");
        }
        assert_eq!(Ended::Kicked("r".into()).to_string(), "kicked from room \"r\"");
    }

    #[test]
    fn the_result_of_a_join_is_recognised_by_its_transaction() {
        let me = "server-foh";
        let answer = audiobridge(Some("pl-9"), json!({"audiobridge": "joined", "room": "r", "id": me}));
        let answer = match answer {
            SessionEvent::Event(mut news) => {
                news.jsep = Some(Jsep { kind: JsepType::Answer, sdp: "v=0\r\n".into() });
                SessionEvent::Event(news)
            }
            other => other,
        };
        assert_eq!(join_news(&answer, "pl-9", me), JoinNews::Answer(Answer::Sdp("v=0\r\n".into())));
        assert_eq!(join_news(&answer, "pl-8", me), JoinNews::Nothing, "another transaction's");
        let refused = audiobridge(
            Some("pl-9"),
            json!({"audiobridge": "event", "error_code": 489, "error": "Unauthorized (not in the allowed list)"}),
        );
        match join_news(&refused, "pl-9", me) {
            JoinNews::Refused(error) => assert_eq!(error.plugin_code(), Some(codes::NOT_ALLOWED)),
            other => panic!("a refusal, not {other:?}"),
        }
        let plain = audiobridge(
            Some("pl-9"),
            json!({"audiobridge": "joined", "room": "r", "id": me, "rtp": {"ip": "127.0.0.1", "port": 10_000, "payload_type": 111}}),
        );
        let janus = RtpPeer { ip: "127.0.0.1".into(), port: 10_000, payload_type: 111, audiolevel_ext: None };
        assert_eq!(join_news(&plain, "pl-9", me), JoinNews::Answer(Answer::Rtp(janus)));
        let kicked = audiobridge(None, json!({"audiobridge": "event", "room": "r", "kicked": me}));
        assert_eq!(join_news(&kicked, "pl-9", me), JoinNews::Ended(Ended::Kicked("r".into())));
        let others = audiobridge(None, json!({"audiobridge": "event", "room": "r", "participants": []}));
        assert_eq!(join_news(&others, "pl-9", me), JoinNews::Nothing);
    }
}
