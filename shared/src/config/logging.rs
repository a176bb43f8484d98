//! `logging:` the log level, and the original system's logging keys.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

/// `logging:`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct LoggingConfig {
    pub level: LogLevel,
    #[serde(skip_serializing)]
    pub(super) log_latency: Option<IgnoredAny>,
    #[serde(skip_serializing)]
    pub(super) log_audio_stats: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    #[default]
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}
