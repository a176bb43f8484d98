//! The card's participant on partyline's own rooms, hosted by this bridged: the group's feed
//! becomes the room's local line ([`LocalLine`](partyline_rooms::engine::LocalLine)) for as
//! long as the plan has the group. Nothing to join over a network, nothing to retry: the rooms
//! are in this process, and a room is made when the line arrives.

use std::sync::Arc;

use partyline_shared::bridge::{BranchState, PlanGroup};
use tokio_util::sync::CancellationToken;

use super::Context;
use crate::feed::Feed;

/// Attaches `feed` to its room until cancelled, then takes it away.
pub(super) async fn stay(context: Context, group: PlanGroup, feed: Arc<Feed>, cancel: CancellationToken) {
    let board = &context.board;
    board.add_participant(&group.room, &group.display);
    let Some(rooms) = context.rooms.as_ref() else {
        let error = "partyline's rooms are not running here: start bridged with --rooms-address";
        tracing::error!("room {}: {error}", group.room);
        board.participant_state(&group.room, BranchState::Retrying, "", Some(error));
        cancel.cancelled().await;
        board.remove_participant(&group.room);
        return;
    };
    feed.connect_rooms();
    match rooms.attach_local(&group.room, feed.clone()).await {
        Ok(()) => {
            tracing::info!("room {}: the card is in partyline's room, without a codec", group.room);
            board.participant_state(&group.room, BranchState::Joined, "local", None);
        }
        Err(error) => {
            tracing::error!("room {}: the card cannot join partyline's room: {error}", group.room);
            board.participant_state(&group.room, BranchState::Retrying, "", Some(&error.to_string()));
        }
    }
    cancel.cancelled().await;
    // The rooms gone (bridged stopping) have nothing to take away.
    let _ = rooms.detach_local(&group.room).await;
    feed.disconnect();
    board.remove_participant(&group.room);
}
