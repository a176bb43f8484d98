//! A stream on partyline's own rooms (`media.engine: bridged`): its offer joins the rooms as a
//! session of one line, through the [`RoomsLink`] as a panel's does, with the line's rights
//! (the rooms answer a WHIP publisher receive only and a WHEP player send only, whatever the
//! offer says). A publisher talks from its join on. The stream ends when its session leaves the
//! rooms: its connection never came up or was lost (the rooms' own timers), or its participant
//! was removed.

use std::sync::Arc;

use partyline_shared::rooms_bus::RoomsError;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use super::{Stream, StreamError, Streams};
use crate::janus::Janus;
use crate::rooms_link::{RoomsLink, RoomsLinkError};
use crate::users::User;

/// Joins `user` to `group` in the rooms with `offer`: the identities whose sessions leave the
/// rooms from now on (the stream's own among them, one day), and the answer.
pub(super) async fn join(
    rooms: &RoomsLink,
    user: &User,
    group: &str,
    offer: &str,
    whip: bool,
) -> Result<(Receiver<String>, String), StreamError> {
    // Before the join: a session that ends at once is not missed.
    let gone = rooms.subscribe_gone();
    let answer = rooms.join(user, offer, &[Some(group.to_owned())]).await.map_err(refused)?;
    if whip {
        rooms.set_talking(user, group, true).await.map_err(refused)?;
    }
    Ok((gone, answer))
}

fn refused(error: RoomsLinkError) -> StreamError {
    match error {
        RoomsLinkError::Rooms(RoomsError::BadOffer(message)) => StreamError::Refused(message),
        other => StreamError::Unavailable(format!("partyline's rooms: {other}")),
    }
}

impl Streams {
    /// Waits for the stream's session to leave the rooms; then ends the stream.
    pub(super) async fn follow_rooms(
        self: Arc<Self>,
        janus: Arc<Janus>,
        rooms: Arc<RoomsLink>,
        stream: Stream,
        mut gone: Receiver<String>,
    ) {
        let why = loop {
            match gone.recv().await {
                Ok(identity) if identity == stream.identity => break "its connection ended in the rooms",
                Ok(_) => {}
                Err(RecvError::Lagged(_)) if !rooms.has_session(&stream.identity) => {
                    break "its connection ended in the rooms";
                }
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break "the link to the rooms is gone",
            }
        };
        self.end(&janus, &stream.id, why).await;
    }
}
