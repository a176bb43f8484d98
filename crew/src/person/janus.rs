//! A panel's lines on Janus's rooms: one Janus session over control's `/janus`, per line an
//! AudioBridge handle joined with the token and a WebRTC offer of its own (all lines at once, as
//! connection.js does), talk keys as `configure {muted}`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;

use super::{Engine, JoinError, Joined, PanelLine, Profile, Tasks, relay_of};
use crate::control_api::{ControlApi, Credentials, Line};
use crate::janus_ws::{HandleEvent, JanusError, JanusSession};
use crate::media::line::direction;
use crate::media::{Offer, Onsets, Relay, Voice};

/// Joins every line of `credentials` through `/janus`; the handles' watcher joins `tasks`.
pub(super) async fn join(
    api: &ControlApi,
    credentials: &Credentials,
    profile: &Profile,
    voices: &[Arc<Voice>],
    onsets: &Onsets,
    tasks: &mut Tasks,
) -> Result<Joined, JoinError> {
    let relay = relay_of(profile, credentials)?;
    let socket = api.connect_janus().await.map_err(JoinError::Connect)?;
    let (janus, handle_events) = JanusSession::create(socket, &credentials.token)
        .await
        .map_err(|error| JoinError::Janus { room: String::new(), error })?;
    let ended: Arc<Mutex<HashSet<u64>>> = Arc::default();
    let identity = credentials.participant_identity.clone();
    tasks.0.push(tokio::spawn(watch_handles(handle_events, ended.clone(), identity)));
    let joins = credentials.lines.iter().enumerate().map(|(index, line)| {
        let room = profile.rooms_override.as_ref().and_then(|rooms| rooms.get(index)).unwrap_or(&line.room_name);
        let voice = voices.get(index % voices.len().max(1)).cloned();
        let (janus, relay) = (&janus, relay.clone());
        async move {
            let relay = match relay {
                Some((server, tls)) => Some(
                    Relay::allocate(&server, tls)
                        .await
                        .map_err(|error| JoinError::Relay { room: room.clone(), error })?,
                ),
                None => None,
            };
            let joined = join_line(janus, credentials, profile, line, room, relay).await?;
            let (handle, offer, answer, took) = joined;
            let setup = PanelLine::setup(line, room, voice, profile, onsets);
            let media_error = |error| JoinError::Media { room: room.clone(), error };
            let media = offer.start(&answer, profile.link, vec![setup]).map_err(media_error)?.pop();
            let media = media.expect("one line's media for one line's offer");
            Ok::<_, JoinError>((
                PanelLine { line: line.clone(), index, handle: Some(handle), media, talking: false },
                took,
            ))
        }
    });
    let results = join_all(joins).await;
    let join_time = results.iter().flatten().map(|(_, took)| *took).max().unwrap_or_default();
    let mut lines = Vec::new();
    for result in results {
        lines.push(result?.0);
    }
    Ok(Joined { engine: Engine::Janus { session: janus, ended }, lines, join_time })
}

/// Joins one line: a handle, the join with the offer, the end of candidates; returns the handle,
/// the offer, Janus's answer and how long the join took.
async fn join_line(
    janus: &JanusSession,
    credentials: &Credentials,
    profile: &Profile,
    line: &Line,
    room: &str,
    relay: Option<Relay>,
) -> Result<(u64, Offer, String, Duration), JoinError> {
    let janus_error = |error| JoinError::Janus { room: room.to_owned(), error };
    let media_error = |error| JoinError::Media { room: room.to_owned(), error };
    let identity = &credentials.participant_identity;
    let handle = janus.attach(identity).await.map_err(janus_error)?;
    let directions = [direction(line.talk, line.listen)];
    let offer = Offer::new(profile.media_address, &directions, relay).await.map_err(media_error)?;
    let join = json!({"request": "join", "room": room, "id": identity, "display": profile.name, "muted": true,
                      "token": credentials.token});
    let jsep = json!({"type": "offer", "sdp": offer.sdp});
    let asked = Instant::now();
    let (answer, jsep) = janus.message(handle, join, Some(jsep)).await.map_err(janus_error)?;
    let took = asked.elapsed();
    let unexpected = || JanusError::Refused { code: 0, reason: format!("the join answered {answer}") };
    let sdp = jsep.as_ref().and_then(|j| j["sdp"].as_str()).filter(|_| answer["audiobridge"] == "joined");
    let sdp = sdp.ok_or_else(unexpected).map_err(janus_error)?.to_owned();
    janus.trickle_completed(handle).await.map_err(janus_error)?;
    Ok((handle, offer, sdp, took))
}

/// A talk key on a line's handle: AudioBridge's `configure {muted}`.
pub(super) async fn key(janus: &JanusSession, handle: u64, on: bool) -> Result<(), JanusError> {
    janus.message(handle, json!({"request": "configure", "muted": !on}), None).await.map(drop)
}

/// Marks the handles Janus kicks or hangs up.
async fn watch_handles(
    mut events: tokio::sync::mpsc::UnboundedReceiver<HandleEvent>,
    ended: Arc<Mutex<HashSet<u64>>>,
    identity: String,
) {
    while let Some(event) = events.recv().await {
        let message = &event.message;
        let data = &message["plugindata"]["data"];
        // AudioBridge tells everyone who was kicked: this line ended if it was us.
        let kicked = data["kicked"] == identity.as_str() || !data["kicked_all"].is_null();
        if message["janus"] == "hangup" || message["janus"] == "detached" || kicked {
            ended.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(event.handle);
        }
    }
}
