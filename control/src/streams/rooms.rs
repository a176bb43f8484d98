//! A stream on partyline's own rooms (`media.engine: bridged`): its offer joins the rooms as a
//! session of one line, through the [`RoomsLink`] as a panel's does, with the line's rights
//! (the rooms answer a WHIP publisher receive only and a WHEP player send only, whatever the
//! offer says). A publisher talks from its join on. The stream ends when its session leaves the
//! rooms: its connection never came up or was lost (the rooms' own timers), or its participant
//! was removed; and a publisher, as on Janus, when the rooms have received nothing from it for
//! [`IDLE_TIMEOUT`](super::IDLE_TIMEOUT).

use std::sync::Arc;

use partyline_shared::config::StreamKind;
use partyline_shared::rooms_bus::RoomsError;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use super::{Silence, Stream, StreamError, Streams};
use crate::janus::Janus;
use crate::rooms_link::{RoomsLink, RoomsLinkError};
use crate::users::User;

/// What the rooms say of their sessions from the join on: the identities that leave, and whose
/// audio comes in or stops.
pub(super) struct Follow {
    gone: Receiver<String>,
    receiving: Receiver<(String, bool)>,
}

/// Joins `user` to `group` in the rooms with `offer`: what the rooms say of their sessions from
/// then on, and the answer.
pub(super) async fn join(
    rooms: &RoomsLink,
    user: &User,
    group: &str,
    offer: &str,
    whip: bool,
) -> Result<(Follow, String), StreamError> {
    // Before the join: a session that ends at once is not missed.
    let follow = Follow { gone: rooms.subscribe_gone(), receiving: rooms.subscribe_receiving() };
    let answer = rooms.join(user, offer, &[Some(group.to_owned())]).await.map_err(refused)?;
    if whip {
        rooms.set_talking(user, group, true).await.map_err(refused)?;
    }
    Ok((follow, answer))
}

fn refused(error: RoomsLinkError) -> StreamError {
    match error {
        RoomsLinkError::Rooms(RoomsError::BadOffer(message)) => StreamError::Refused(message),
        other => StreamError::Unavailable(format!("partyline's rooms: {other}")),
    }
}

impl Streams {
    /// Waits for the stream's session to leave the rooms, or a publisher's to fall idle; then
    /// ends the stream.
    pub(super) async fn follow_rooms(
        self: Arc<Self>,
        janus: Arc<Janus>,
        rooms: Arc<RoomsLink>,
        stream: Stream,
        Follow { mut gone, mut receiving }: Follow,
    ) {
        let ended = "its connection ended in the rooms";
        let mut silence = Silence::default();
        let why = loop {
            tokio::select! {
                left = gone.recv() => match left {
                    Ok(identity) if identity == stream.identity => break ended.to_owned(),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) if !rooms.has_session(&stream.identity) => break ended.to_owned(),
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break "the link to the rooms is gone".to_owned(),
                },
                said = receiving.recv(), if stream.kind == StreamKind::Whip => match said {
                    Ok((identity, flowing)) if identity == stream.identity => silence.receiving(flowing),
                    // Words missed in a burst: the next change is said again.
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break "the link to the rooms is gone".to_owned(),
                },
                why = silence.idle() => break why,
            }
        };
        self.end(&janus, &stream.id, &why).await;
    }
}
