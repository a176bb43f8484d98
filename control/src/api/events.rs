//! The admin's live event stream (`GET /api/admin/events`): see `crate::events`.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;

use super::{AppState, ErrorBody, sse};
use crate::events::LiveEvent;

/// Live events (Server-Sent Events): each `event:` is a [`LiveEvent`]'s `type`, its `data:` the
/// event as JSON, its `id:` a sequence number. Reconnecting with `Last-Event-ID` resumes without
/// a loss while the events are still kept (the last 1,024); otherwise the stream starts with a
/// `reset` event: read the state again. A client more than 256 events behind is cut: its stream
/// ends with an `overflow` event; one that stops reading loses the connection once writes to it
/// have waited 30 s.
#[utoipa::path(get, path = "/api/admin/events", tag = "system", security(("admin_token" = [])),
    params(("Last-Event-ID" = Option<u64>, Header, description = "The id of the last event received")),
    responses((status = 200, description = "The stream of live events", body = LiveEvent, content_type = "text/event-stream"),
        (status = 401, body = ErrorBody)))]
pub async fn stream(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // A malformed id counts as an unknown one: the client is told to re-read the state.
    let last_id =
        headers.get("last-event-id").map(|v| v.to_str().ok().and_then(|v| v.trim().parse().ok()).unwrap_or(u64::MAX));
    let subscription = state.events.subscribe(last_id);
    sse::stream(state.events.stream(subscription))
}
