//! The YAML codec, behind two functions so that the crate doing the work can be swapped
//! here and nowhere else. (`serde_yaml` is archived and `serde_yml` unsound; `serde_norway`
//! is the maintained continuation of the former.)

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A YAML error; its message names the key and, where the parser knows it, the line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(String);

impl YamlError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Parses YAML text into `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_norway::from_str(text).map_err(|e| YamlError(e.to_string()))
}

/// Renders `value` as YAML text.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, YamlError> {
    serde_norway::to_string(value).map_err(|e| YamlError(e.to_string()))
}
