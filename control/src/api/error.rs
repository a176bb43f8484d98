//! One error type for every route, one JSON shape: `{"error": "…", "code": "…"}`.

use crate::janus::JanusError;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::config::{EditError, UpdateError};

/// The body of every error response.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for people.
    #[schema(example = "no group has id \"stage-left\"")]
    pub error: String,
    /// What went wrong, for programs.
    #[schema(example = "not_found")]
    pub code: &'static str,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    /// A body a program tells apart by its code (an SDP offer's `bad_sdp`, `no_audio`, …).
    #[error("{message}")]
    BadInput { code: &'static str, message: String },
    #[error("missing or invalid admin token: send `Authorization: Bearer <admin token>`")]
    Unauthorized,
    #[error("{0}")]
    NotFound(String),
    #[error("{0} asks for a PIN: send it as `pin`")]
    PinRequired(String),
    #[error("wrong PIN for {0}")]
    WrongPin(String),
    #[error("the token does not hold this line")]
    Forbidden,
    /// A WHIP or WHEP request without a stream token of its kind.
    #[error(
        "missing or unknown {0} token: send `Authorization: Bearer <token>` with a token the admin created for this group"
    )]
    StreamUnauthorized(&'static str),
    #[error("too many wrong PINs from this address: wait a minute")]
    TooManyRequests,
    /// A limit of the open routes (`too_many_tokens`, `too_many_pending`).
    #[error("{message}")]
    Limited { code: &'static str, message: String },
    /// Refused whoever asks (`foreign_origin`, `banned`).
    #[error("{message}")]
    Denied { code: &'static str, message: String },
    #[error("Route not found: {method} {path}")]
    RouteNotFound { method: String, path: String },
    #[error("Method not allowed: {method} {path}")]
    MethodNotAllowed { method: String, path: String },
    #[error("{0}")]
    Conflict(String),
    /// A conflict a program tells apart by its code (`muted_by_admin`, `line_muted`,
    /// `cannot_talk`, `panel_offline`).
    #[error("{message}")]
    Refused { code: &'static str, message: String },
    #[error("{0}")]
    GatewayTimeout(String),
    #[error("request body too large: the limit is {} bytes", super::BODY_LIMIT)]
    PayloadTooLarge,
    #[error("expected a JSON body with `Content-Type: application/json`")]
    UnsupportedMediaType,
    #[error("expected a body with `Content-Type: {0}`")]
    ExpectedMediaType(&'static str),
    #[error("{0}")]
    InsufficientStorage(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::BadInput { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized
            | ApiError::StreamUnauthorized(_)
            | ApiError::PinRequired(_)
            | ApiError::WrongPin(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden | ApiError::Denied { .. } => StatusCode::FORBIDDEN,
            ApiError::TooManyRequests | ApiError::Limited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) | ApiError::RouteNotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) | ApiError::Refused { .. } => StatusCode::CONFLICT,
            ApiError::GatewayTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType | ApiError::ExpectedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::InsufficientStorage(_) => StatusCode::INSUFFICIENT_STORAGE,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::BadInput { code, .. } => code,
            ApiError::Unauthorized | ApiError::StreamUnauthorized(_) => "unauthorized",
            ApiError::PinRequired(_) => "pin_required",
            ApiError::WrongPin(_) => "wrong_pin",
            ApiError::Forbidden => "forbidden",
            ApiError::TooManyRequests => "too_many_tries",
            ApiError::Limited { code, .. } | ApiError::Denied { code, .. } => code,
            ApiError::NotFound(_) => "not_found",
            ApiError::RouteNotFound { .. } => "route_not_found",
            ApiError::MethodNotAllowed { .. } => "method_not_allowed",
            ApiError::Conflict(_) => "conflict",
            ApiError::Refused { code, .. } => code,
            ApiError::GatewayTimeout(_) => "panel_not_responding",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::UnsupportedMediaType | ApiError::ExpectedMediaType(_) => "unsupported_media_type",
            ApiError::InsufficientStorage(_) => "insufficient_storage",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal(_) => "internal",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = ErrorBody { error: self.to_string(), code: self.code() };
        let mut response = (status, Json(body.clone())).into_response();
        // For the request log (`super::observe`), which does not parse bodies.
        response.extensions_mut().insert(body);
        response
    }
}

impl From<EditError> for ApiError {
    fn from(e: EditError) -> Self {
        match e {
            EditError::Invalid { .. } => ApiError::BadRequest(e.to_string()),
            EditError::NotFound { .. } => ApiError::NotFound(e.to_string()),
            EditError::Conflict(message) => ApiError::Conflict(message),
        }
    }
}

impl From<UpdateError> for ApiError {
    fn from(e: UpdateError) -> Self {
        match e {
            UpdateError::Edit(e) => e.into(),
            UpdateError::Invalid(_) => ApiError::BadRequest(e.to_string()),
            UpdateError::Write(ref io) if io.kind() == std::io::ErrorKind::StorageFull => {
                ApiError::InsufficientStorage(format!("{e}; the previous config stays in force"))
            }
            UpdateError::Encode(_) | UpdateError::Write(_) | UpdateError::Aborted(_) => {
                ApiError::Internal(format!("{e}; the previous config stays in force"))
            }
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::UnsupportedMediaType,
            _ => ApiError::BadRequest(json_problem(&rejection)),
        }
    }
}

/// axum's text, less its generic preamble: what is wrong and where.
fn json_problem(rejection: &JsonRejection) -> String {
    let text = rejection.body_text();
    let detail = text
        .strip_prefix("Failed to deserialize the JSON body into the target type: ")
        .or_else(|| text.strip_prefix("Failed to parse the request body as JSON: "))
        .unwrap_or(&text);
    format!("invalid JSON body: {detail}")
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        let text = rejection.body_text();
        if rejection.status().is_server_error() {
            return ApiError::Internal(text);
        }
        ApiError::BadRequest(format!("invalid path: {}", text.strip_prefix("Invalid URL: ").unwrap_or(&text)))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        let text = rejection.body_text();
        let detail = text.strip_prefix("Failed to deserialize query string: ").unwrap_or(&text);
        ApiError::BadRequest(format!("invalid query string: {detail}"))
    }
}

/// Janus could not do what a request needs: 503, saying why.
/// A crew member's event streams are all taken ([`crate::limits::MAX_STREAMS_PER_SESSION`]).
pub(super) fn too_many_streams() -> ApiError {
    let most = crate::limits::MAX_STREAMS_PER_SESSION;
    ApiError::Limited {
        code: "too_many_streams",
        message: format!("this session holds its {most} event streams already"),
    }
}

pub(super) fn unavailable(error: &JanusError) -> ApiError {
    ApiError::Unavailable(format!("the media server is unavailable: {error}"))
}
