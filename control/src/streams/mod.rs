//! WHIP and WHEP sessions: other systems in and out of a line. Each session is a participant of
//! its group's room that control drives on the client's behalf: registered as a user with a
//! token of its own (a WHIP publisher may talk on the line, a WHEP player only listens, as a
//! listen-only line), joined with the client's offer where the panels' media goes: Janus
//! (`janus`) or partyline's own rooms (`rooms`), each of which says when the session ends and
//! when a WHIP publisher stops sending ([`Silence`]: idle for [`IDLE_TIMEOUT`], it is ended).
//! Besides, the client's `DELETE`, the admin's disconnect (a kick) and its token's revocation
//! end it.
//!
//! `sdp` checks an offer before anything is registered for it, and tidies Janus's answer for
//! browsers.

mod janus;
mod rooms;
pub mod sdp;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use partyline_shared::Config;
use partyline_shared::config::{MediaEngine, StreamKind, StreamToken};
use partyline_shared::janus::JanusError;
use partyline_shared::janus::client::Session;
use partyline_shared::sdp::BadSdp;
use partyline_shared::sync::lock;

use crate::janus::{IssueError, Janus};
use crate::rooms_link::RoomsLink;
use crate::secrets::random_hex;
use crate::users::{Line, Users};
use sdp::check_offer;

/// Sessions of one kind a group takes at once.
pub const MAX_PER_GROUP: usize = 4;
/// A WHIP session the media server has received nothing from for this long is idle: ended (a
/// publisher sends all the time, silence included).
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
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
    media: Media,
}

/// Where a session's media goes.
#[derive(Debug, Clone)]
enum Media {
    /// Its own Janus session, destroyed at its end.
    Janus(Session),
    /// partyline's rooms, which its participant's removal leaves.
    Rooms,
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
    #[error("{0}")]
    Unavailable(String),
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

    /// Starts a session: its offer checked, its participant registered and joined with it
    /// where `config` says the panels' media goes. The stream and the answer. Nothing stays
    /// registered when it fails.
    pub async fn start(
        self: &Arc<Self>,
        (janus, rooms): (&Arc<Janus>, &Arc<RoomsLink>),
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
        let joined = match random_hex(8) {
            Ok(id) => match config.media.engine {
                MediaEngine::Janus => janus::join(janus, config, &user, (&group, &name), &offer, whip)
                    .await
                    .map(|(session, answer, events)| (id, answer, Follow::Janus(session, events))),
                MediaEngine::Bridged => rooms::join(rooms, &user, &group, &offer, whip)
                    .await
                    .map(|(follow, answer)| (id, answer, Follow::Rooms(follow))),
            },
            Err(e) => Err(StreamError::Janus(JanusError::Protocol(e.to_string()))),
        };
        let (id, answer, follow) = match joined {
            Ok(joined) => joined,
            Err(e) => {
                self.forget_user(janus, &user.identity, "its offer was refused").await;
                return Err(e);
            }
        };
        let media = match &follow {
            Follow::Janus(session, _) => Media::Janus(session.clone()),
            Follow::Rooms(_) => Media::Rooms,
        };
        let stream = Stream { id: id.clone(), kind, group, identity: user.identity.clone(), token_id: token.id, media };
        lock(&self.sessions).insert(id.clone(), stream.clone());
        tracing::info!(
            stream = id,
            kind = kind.as_str(),
            group = stream.group,
            identity = stream.identity,
            engine = ?config.media.engine,
            "stream session started"
        );
        let (this, janus) = (Arc::clone(self), Arc::clone(janus));
        match follow {
            Follow::Janus(session, events) => tokio::spawn(this.follow_janus(janus, stream.clone(), session, events)),
            Follow::Rooms(follow) => tokio::spawn(this.follow_rooms(janus, Arc::clone(rooms), stream.clone(), follow)),
        };
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
        if let Media::Janus(session) = &stream.media {
            let _ = session.destroy().await;
        }
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
}

/// Since when the media server has received nothing from a WHIP session, as it says.
#[derive(Debug, Default)]
struct Silence(Option<tokio::time::Instant>);

impl Silence {
    /// The media server receives the session's media (true), or has stopped receiving it.
    fn receiving(&mut self, receiving: bool) {
        self.0 = if receiving { None } else { self.0.or_else(|| Some(tokio::time::Instant::now())) };
    }

    /// Ready once the session has sent nothing for [`IDLE_TIMEOUT`]; never while it sends.
    async fn idle(&self) -> String {
        match self.0 {
            Some(since) => tokio::time::sleep_until(since + IDLE_TIMEOUT).await,
            None => std::future::pending().await,
        }
        format!("no media from it for {} s", IDLE_TIMEOUT.as_secs())
    }
}

/// What tells a starting session's end, by where its media goes.
enum Follow {
    Janus(Session, tokio::sync::mpsc::Receiver<janus::Event>),
    Rooms(rooms::Follow),
}
