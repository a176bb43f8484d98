//! The application: the API (`api`), the pages (`web`) and the `/janus` proxy on the one
//! listener, wrapped in the admin check, the body limits, the CORS headers of the WHIP and WHEP
//! routes and the observer of every request (metrics, the refused-request log); and the loopback
//! events listener.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::api;
use crate::state::AppState;

/// The whole application: the API under `/api`, the pages, `/janus`; JSON 404/405 for
/// everything else.
pub fn app(state: AppState) -> Router {
    Router::new()
        .merge(api::routes())
        .merge(crate::web::routes())
        .merge(crate::janus_proxy::routes())
        .fallback(api::route_not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(DefaultBodyLimit::max(api::BODY_LIMIT))
        // A client announcing a body it never sends must not hold a connection forever.
        .layer(RequestBodyTimeoutLayer::new(api::BODY_TIMEOUT))
        .layer(middleware::from_fn_with_state(state.clone(), api::require_admin))
        .layer(middleware::from_fn(api::stream_cors))
        // Outermost, so that a request refused by any layer above is counted and logged.
        .layer(middleware::from_fn_with_state(state.clone(), api::observe))
        .with_state(state)
}

/// The loopback-only events listener: Janus's event handler posts, nothing else.
pub fn events_app(state: AppState) -> Router {
    api::event_routes()
        .fallback(api::route_not_found)
        .layer(DefaultBodyLimit::max(api::EVENTS_BODY_LIMIT))
        .layer(middleware::from_fn_with_state(state.clone(), api::janus_events::authenticate_node))
        .layer(middleware::from_fn_with_state(state.clone(), api::observe))
        .with_state(state)
}
