//! `media:` which media server carries the crew's audio.
//!
//! ```yaml
//! media:
//!   engine: janus      # janus: Janus AudioBridge, one room per group (the default)
//!                      # bridged: partyline's own rooms, hosted by partyline-bridged
//! ```
//!
//! With `bridged`, a panel sends its offer to control (`POST /api/session/media`), which hands it
//! to bridged's rooms over D-Bus (`org.partyline.Rooms1`); bridged must run with
//! `--rooms-address`. Janus still runs beside it (the card's rooms, the streams, the pool) until
//! the rooms carry all of it.

use serde::{Deserialize, Serialize};

/// `media:` the engine the panels' audio goes through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct MediaConfig {
    pub engine: MediaEngine,
}

impl MediaConfig {
    pub fn is_default(&self) -> bool {
        *self == MediaConfig::default()
    }
}

/// Which media server mixes the groups for the panels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum MediaEngine {
    /// Janus AudioBridge: the panel joins each line's room through `/janus`.
    #[default]
    Janus,
    /// partyline's own rooms in bridged: one peer connection per panel, its offer posted to
    /// `/api/session/media`.
    Bridged,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_reads_as_written_and_defaults_to_janus() {
        let read = |yaml: &str| serde_norway::from_str::<MediaConfig>(yaml).map(|m| m.engine);
        assert_eq!(read("{}").ok(), Some(MediaEngine::Janus));
        assert_eq!(read("engine: bridged").ok(), Some(MediaEngine::Bridged));
        assert!(read("engine: gstreamer").is_err(), "an unknown engine is refused");
        assert!(read("engin: bridged").is_err(), "an unknown key is refused");
    }
}
