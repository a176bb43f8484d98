//! The one way the API answers with an event stream (Server-Sent Events): events as they come,
//! and a keep-alive comment whenever the stream is quiet, so that a client gone without a word is
//! noticed by the write that fails (`crate::linger` bounds a stalled one).

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Serialize;

/// What one client's stream waits on.
pub(super) trait EventSource: Send + 'static {
    /// The next event; `None` ends the stream.
    fn next_event(&mut self) -> impl Future<Output = Option<Event>> + Send;
}

/// The answer streaming `events`.
pub(super) fn stream(
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// The answer streaming the events of `source` until it ends.
pub(super) fn from_source(source: impl EventSource) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    stream(futures_util::stream::unfold(source, |mut source| async move {
        let event = source.next_event().await?;
        Some((Ok(event), source))
    }))
}

/// An event named `name` with `data` as JSON.
pub(super) fn json_event(name: &str, data: &impl Serialize) -> Event {
    Event::default().event(name).json_data(data).unwrap_or_default()
}
