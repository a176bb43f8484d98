//! WHIP (RFC 9725) and WHEP, other systems in and out of a line: `POST /api/whip/{group}` with
//! an SDP offer publishes into the group's room (OBS Studio's "WHIP" output), `POST
//! /api/whep/{group}` listens to its mix (a WebRTC player). Each needs a stream token of its
//! kind for that group (`Authorization: Bearer`, created by the admin: `stream_tokens.rs`).
//! The answer is `201 Created` with the media server's SDP answer and the session's resource in
//! `Location`; `DELETE` on it ends the session. Trickle ICE (`PATCH`) is not offered: 405, as
//! the RFC asks, so clients put their candidates in the offer (the media server's are in its answer).
//! Open on the LAN, from any origin (a player's page is another site's): the CORS headers the
//! RFC asks for are on every answer, and `OPTIONS` says what is accepted.

use std::net::{IpAddr, SocketAddr};

use axum::body::Bytes;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use partyline_shared::config::{STREAM_TOKEN_SCHEME, StreamKind, StreamToken};
use partyline_shared::sdp::BadSdp;

use super::error::unavailable;
use super::{ApiError, ApiPath, AppState, ErrorBody};
use crate::config::stream_token_by_hash;
use crate::streams::{StartRequest, StreamError};

const SDP: &str = "application/sdp";

/// The stored form of a stream token's secret: its SHA-256.
pub(super) fn hash_secret(secret: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("{STREAM_TOKEN_SCHEME}{hex}")
}

/// The stream token of `kind` the request's bearer is, for `group`.
fn token_of(state: &AppState, headers: &HeaderMap, kind: StreamKind, group: &str) -> Result<StreamToken, ApiError> {
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or(ApiError::StreamUnauthorized(kind.as_str()))?;
    let config = state.config.current();
    config.group(group).ok_or_else(|| ApiError::NotFound(format!("no group has id {group:?}")))?;
    let (of, token) =
        stream_token_by_hash(&config, kind, &hash_secret(secret)).ok_or(ApiError::StreamUnauthorized(kind.as_str()))?;
    if of != group {
        let message = format!("this {} token is for another group", kind.as_str());
        return Err(ApiError::Denied { code: "wrong_group", message });
    }
    Ok(token)
}

/// The offer of a request: `application/sdp`, UTF-8, within the API's body limit.
fn offer_of(headers: &HeaderMap, body: Result<Bytes, BytesRejection>) -> Result<String, ApiError> {
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        _ => ApiError::BadRequest(format!("cannot read the body: {}", rejection.body_text())),
    })?;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if content_type.split(';').next().map(str::trim) != Some(SDP) {
        return Err(ApiError::ExpectedMediaType(SDP));
    }
    String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::BadInput { code: "bad_sdp", message: "the offer is not UTF-8".into() })
}

async fn start(
    state: AppState,
    kind: StreamKind,
    group: String,
    headers: HeaderMap,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let token = token_of(&state, &headers, kind, &group)?;
    let offer = offer_of(&headers, body)?;
    let address = client.map_or(IpAddr::from([0, 0, 0, 0]), |Extension(ConnectInfo(a))| a.ip());
    let config = state.config.current();
    let request = StartRequest { kind, group: group.clone(), token, offer, address };
    let (stream, answer) =
        state.streams.start((&state.janus, &state.rooms), &state.users, &config, request).await.map_err(
            |e| match e {
                StreamError::BadOffer(BadSdp { code, message }) => ApiError::BadInput { code, message },
                StreamError::Refused(_) => ApiError::BadInput { code: "offer_refused", message: e.to_string() },
                StreamError::Full { .. } => ApiError::Limited { code: "too_many_sessions", message: e.to_string() },
                StreamError::Janus(e) => unavailable(&e),
                StreamError::Unavailable(message) => ApiError::Unavailable(message),
            },
        )?;
    let location = format!("/api/{}/{group}/{}", kind.as_str(), stream.id);
    let mut response = (StatusCode::CREATED, answer).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(SDP));
    if let Ok(location) = HeaderValue::from_str(&location) {
        headers.insert(header::LOCATION, location);
    }
    // The venue's STUN and TURN servers, a relay's with a credential for this session.
    let servers = crate::turn::ice_servers(&config.network, &stream.identity, std::time::SystemTime::now());
    for link in crate::turn::link_headers(&servers) {
        if let Ok(link) = HeaderValue::from_str(&link) {
            headers.append(header::LINK, link);
        }
    }
    Ok(response)
}

async fn end(
    state: AppState,
    kind: StreamKind,
    group: String,
    id: String,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let token = token_of(&state, &headers, kind, &group)?;
    let stream = state
        .streams
        .get(kind, &group, &id)
        .filter(|s| s.token_id == token.id)
        .ok_or_else(|| ApiError::NotFound(format!("no {} session {id:?} of this token runs", kind.as_str())))?;
    state.streams.end(&state.janus, &stream.id, "its client ended it").await;
    Ok(StatusCode::OK)
}

fn no_trickle(uri: &Uri) -> ApiError {
    ApiError::MethodNotAllowed { method: "PATCH".into(), path: uri.path().to_owned() }
}

/// Publish into a line (WHIP): the offer's audio is heard on the group's line, as a
/// participant named after the token (`NAME (WHIP)`). 201 with the SDP answer and `Location`.
#[utoipa::path(post, path = "/api/whip/{group}", tag = "streams", request_body(content = String, content_type = "application/sdp"),
    params(("group" = String, Path, description = "The group's id")),
    responses((status = 201, description = "The SDP answer; `Location`: the session", body = String, content_type = "application/sdp"),
        (status = 400, description = "A bad offer: `bad_sdp`, `no_audio`, `unsupported_codec`, `wrong_direction`, `offer_refused`", body = ErrorBody),
        (status = 401, description = "No WHIP token of this group", body = ErrorBody),
        (status = 403, description = "A WHIP token of another group (`wrong_group`)", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 429, description = "The group has as many WHIP sessions as it takes (`too_many_sessions`)", body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn whip(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    headers: HeaderMap,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    start(state, StreamKind::Whip, group, headers, client, body).await
}

/// Listen to a line (WHEP): a recvonly offer gets the group's mix, as a listen-only participant.
#[utoipa::path(post, path = "/api/whep/{group}", tag = "streams", request_body(content = String, content_type = "application/sdp"),
    params(("group" = String, Path, description = "The group's id")),
    responses((status = 201, description = "The SDP answer; `Location`: the session", body = String, content_type = "application/sdp"),
        (status = 400, description = "A bad offer: `bad_sdp`, `no_audio`, `unsupported_codec`, `wrong_direction`, `offer_refused`", body = ErrorBody),
        (status = 401, description = "No WHEP token of this group", body = ErrorBody),
        (status = 403, description = "A WHEP token of another group (`wrong_group`)", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 415, body = ErrorBody),
        (status = 429, description = "The group has as many WHEP sessions as it takes (`too_many_sessions`)", body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn whep(
    State(state): State<AppState>,
    ApiPath(group): ApiPath<String>,
    headers: HeaderMap,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    start(state, StreamKind::Whep, group, headers, client, body).await
}

/// End a WHIP session (with the token it was started with).
#[utoipa::path(delete, path = "/api/whip/{group}/{session}", tag = "streams",
    params(("group" = String, Path), ("session" = String, Path, description = "From the `Location` of the POST")),
    responses((status = 200), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn whip_end(
    State(state): State<AppState>,
    ApiPath((group, id)): ApiPath<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    end(state, StreamKind::Whip, group, id, headers).await
}

/// End a WHEP session (with the token it was started with).
#[utoipa::path(delete, path = "/api/whep/{group}/{session}", tag = "streams",
    params(("group" = String, Path), ("session" = String, Path, description = "From the `Location` of the POST")),
    responses((status = 200), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn whep_end(
    State(state): State<AppState>,
    ApiPath((group, id)): ApiPath<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    end(state, StreamKind::Whep, group, id, headers).await
}

/// Trickle ICE is not offered (RFC 9725: 405): the client puts its candidates in the offer.
#[utoipa::path(patch, path = "/api/whip/{group}/{session}", tag = "streams",
    params(("group" = String, Path), ("session" = String, Path)), responses((status = 405, body = ErrorBody)))]
pub async fn whip_trickle(uri: Uri) -> ApiError {
    no_trickle(&uri)
}

/// Trickle ICE is not offered (405): the client puts its candidates in the offer.
#[utoipa::path(patch, path = "/api/whep/{group}/{session}", tag = "streams",
    params(("group" = String, Path), ("session" = String, Path)), responses((status = 405, body = ErrorBody)))]
pub async fn whep_trickle(uri: Uri) -> ApiError {
    no_trickle(&uri)
}

/// What a WHIP or WHEP endpoint takes (`Accept-Post`), and the CORS preflight's answer.
#[utoipa::path(options, path = "/api/whip/{group}", tag = "streams", params(("group" = String, Path)), responses((status = 204)))]
pub async fn whip_options() -> Response {
    options()
}

/// What a WHEP endpoint takes (`Accept-Post`), and the CORS preflight's answer.
#[utoipa::path(options, path = "/api/whep/{group}", tag = "streams", params(("group" = String, Path)), responses((status = 204)))]
pub async fn whep_options() -> Response {
    options()
}

/// The CORS preflight of a WHIP session's resource (its `DELETE`).
#[utoipa::path(options, path = "/api/whip/{group}/{session}", tag = "streams", params(("group" = String, Path), ("session" = String, Path)), responses((status = 204)))]
pub async fn whip_resource_options() -> Response {
    options()
}

/// The CORS preflight of a WHEP session's resource (its `DELETE`).
#[utoipa::path(options, path = "/api/whep/{group}/{session}", tag = "streams", params(("group" = String, Path), ("session" = String, Path)), responses((status = 204)))]
pub async fn whep_resource_options() -> Response {
    options()
}

fn options() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert("accept-post", HeaderValue::from_static(SDP));
    response
}

/// The CORS headers of every WHIP and WHEP answer (and of the preflight): any origin may
/// publish or listen with a token, which is the credential (no cookies are involved).
pub(crate) async fn cors(request: Request, next: Next) -> Response {
    let streams = ["/api/whip/", "/api/whep/"].iter().any(|p| request.uri().path().starts_with(p));
    let mut response = next.run(request).await;
    if streams {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("OPTIONS, POST, DELETE, PATCH"));
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Authorization, Content-Type, If-Match"),
        );
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("Location, ETag, Link, Accept-Post"),
        );
    }
    response
}
