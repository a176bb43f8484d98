//! [`JanusError`], why a request to Janus failed, and the error codes partyline acts on.

use super::ErrorDetail;

/// Why a request to Janus failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JanusError {
    #[error("Janus is unreachable at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Janus refused the request ({code}): {reason}")]
    Refused { code: i64, reason: String },
    #[error("AudioBridge refused the request ({code}): {reason}")]
    Plugin { code: i64, reason: String },
    #[error("unexpected answer from Janus: {0}")]
    Protocol(String),
    /// A secret the request needs is missing (control's Janus admin secret or room admin key).
    #[error("{0}")]
    NotConfigured(&'static str),
    /// No live node of the pool has room for a new session (their capacities, summed).
    #[error("every Janus node is at its capacity ({0} participants)")]
    Full(u32),
}

impl JanusError {
    /// Errors after which the session must be created again (Janus restarted or went away).
    pub fn loses_session(&self) -> bool {
        match self {
            JanusError::Unreachable { .. } | JanusError::Protocol(_) => true,
            JanusError::Refused { code, .. } => *code == codes::NO_SUCH_SESSION || *code == codes::UNAUTHORIZED,
            JanusError::Plugin { .. } | JanusError::NotConfigured(_) | JanusError::Full(_) => false,
        }
    }

    /// The AudioBridge's error code, for a plugin error.
    pub fn plugin_code(&self) -> Option<i64> {
        match self {
            JanusError::Plugin { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<ErrorDetail> for JanusError {
    fn from(error: ErrorDetail) -> Self {
        JanusError::Refused { code: error.code, reason: error.reason }
    }
}

/// Janus's error codes partyline acts on.
pub mod codes {
    /// The session does not exist (Janus restarted, or it timed out).
    pub const NO_SUCH_SESSION: i64 = 458;
    /// Wrong or missing secret/token.
    pub const UNAUTHORIZED: i64 = 403;
    /// AudioBridge: no such room.
    pub const NO_SUCH_ROOM: i64 = 485;
    /// AudioBridge: the room already exists.
    pub const ROOM_EXISTS: i64 = 486;
    /// AudioBridge: no such participant (487 is "not joined").
    pub const NO_SUCH_USER: i64 = 492;
    /// AudioBridge: the join's token is not in the room's `allowed` list.
    pub const NOT_ALLOWED: i64 = 489;
    /// Admin API: no such stored token.
    pub const TOKEN_NOT_FOUND: i64 = 490;
}
