//! Extractors whose rejections are [`ApiError`]s, so that every bad request gets the JSON
//! error body.

use axum::extract::FromRequest;
use axum::extract::FromRequestParts;

use super::ApiError;

/// `axum::Json` with the API's error body.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// `axum::extract::Path` with the API's error body (e.g. an id that is not UTF-8).
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query` with the API's error body.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// For optional fields of a partial update that may also be `null`: absent → `None`,
/// `null` → `Some(None)`, a value → `Some(Some(v))`. Use with `#[serde(default)]`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}
