//! Janus's event posts, on the events listener (`server.eventsListen`): each node's event
//! handler posts under its own name and password, checked before the body is read; the events
//! then speak only for the participants that node carries (`crate::janus`'s intake).

use axum::Extension;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine as _;
use partyline_shared::janus::HandlerEvent;

use super::{ApiError, ApiJson, AppState, ErrorBody};

/// The node whose credentials a post carried ([`authenticate_node`]).
#[derive(Debug, Clone)]
pub struct EventPoster(pub String);

/// Admits a post only with a node's basic-auth credentials (`name:eventSecret`), before its
/// body (up to a megabyte) is read: a stranger on the LAN costs a header, not an upload.
pub(crate) async fn authenticate_node(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let credentials = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v.trim()).ok())
        .and_then(|v| String::from_utf8(v).ok());
    let poster = credentials
        .as_deref()
        .and_then(|c| c.split_once(':'))
        .and_then(|(user, password)| state.janus.event_poster(user, password));
    let Some(poster) = poster else {
        return Err(ApiError::Unauthorized);
    };
    request.extensions_mut().insert(EventPoster(poster));
    Ok(next.run(request).await)
}

/// Janus's event handler posts (a JSON array of events) with HTTP basic auth: the node's name
/// and its `eventSecret` (the first node: also `janus` and `janus.eventSecret`). Events about
/// participants another node carries are ignored with a warning.
#[utoipa::path(post, path = "/api/internal/janus-events", tag = "internal",
    request_body(content = Vec<Object>, description = "Events of Janus's sample event handler"),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn janus_events(
    State(state): State<AppState>,
    Extension(EventPoster(node)): Extension<EventPoster>,
    ApiJson(events): ApiJson<Vec<HandlerEvent>>,
) -> Result<StatusCode, ApiError> {
    for event in events {
        state.janus.on_event_from(&node, event.meaning()).await;
    }
    Ok(StatusCode::NO_CONTENT)
}
