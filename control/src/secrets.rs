//! Secrets: each comes from its environment variable, else its file in the state directory,
//! else the config file; the admin token is generated into its file (0600) when none exists.
//! Secrets are never logged (their `Debug` is redacted); where they came from is.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use partyline_shared::config::{Config, Secret};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::files;

/// Where one secret may be found.
#[derive(Debug, Clone, Copy)]
pub struct SecretSpec {
    pub what: &'static str,
    pub env_var: &'static str,
    pub file_name: &'static str,
    /// The config file's key, for messages.
    pub config_key: &'static str,
}

pub const ADMIN_TOKEN: SecretSpec = SecretSpec {
    what: "admin token",
    env_var: "PARTYLINE_ADMIN_TOKEN",
    file_name: "admin-token",
    config_key: "server.adminToken",
};
pub const JANUS_ADMIN_SECRET: SecretSpec = SecretSpec {
    what: "Janus admin secret",
    env_var: "PARTYLINE_JANUS_ADMIN_SECRET",
    file_name: "janus-admin-secret",
    config_key: "janus.adminSecret",
};
pub const JANUS_ROOM_ADMIN_KEY: SecretSpec = SecretSpec {
    what: "AudioBridge admin key",
    env_var: "PARTYLINE_JANUS_ROOM_ADMIN_KEY",
    file_name: "janus-room-admin-key",
    config_key: "janus.roomAdminKey",
};
pub const JANUS_EVENT_SECRET: SecretSpec = SecretSpec {
    what: "Janus event handler password",
    env_var: "PARTYLINE_JANUS_EVENT_SECRET",
    file_name: "janus-event-secret",
    config_key: "janus.eventSecret",
};

/// Where a secret came from, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Environment,
    File(PathBuf),
    ConfigFile,
    Generated(PathBuf),
}

/// A secret value compared in constant time. Its `Debug` is redacted; it is (de)serialized as
/// the plain string (for files that must hold it, such as `crew.json`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValue(String);

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(********)")
    }
}

impl SecretValue {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn matches(&self, candidate: &str) -> bool {
        self.0.as_bytes().ct_eq(candidate.as_bytes()).into()
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The admin bearer token.
pub type AdminToken = SecretValue;

/// Finds a secret: environment, state file, config. `Ok(None)` when it is nowhere.
pub fn find(
    spec: SecretSpec,
    state_dir: &Path,
    from_config: Option<&Secret>,
) -> io::Result<Option<(SecretValue, SecretSource)>> {
    if let Some(value) = std::env::var(spec.env_var).ok().filter(|v| !v.trim().is_empty()) {
        return Ok(Some((SecretValue(value.trim().to_owned()), SecretSource::Environment)));
    }
    let path = state_dir.join(spec.file_name);
    match fs::read_to_string(&path) {
        Ok(value) if !value.trim().is_empty() => {
            return Ok(Some((SecretValue(value.trim().to_owned()), SecretSource::File(path))));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(from_config
        .filter(|s| !s.0.trim().is_empty())
        .map(|s| (SecretValue(s.0.trim().to_owned()), SecretSource::ConfigFile)))
}

/// Finds a secret, or generates one into its state file (mode 0600).
pub fn find_or_generate(
    spec: SecretSpec,
    state_dir: &Path,
    from_config: Option<&Secret>,
) -> io::Result<(SecretValue, SecretSource)> {
    if let Some(found) = find(spec, state_dir, from_config)? {
        return Ok(found);
    }
    let value = random_hex(32)?;
    let path = state_dir.join(spec.file_name);
    fs::create_dir_all(state_dir)?;
    files::create_new(&path, format!("{value}\n").as_bytes(), 0o600)?;
    Ok((SecretValue(value), SecretSource::Generated(path)))
}

/// Logs where a secret came from (never its value).
pub fn log_source(spec: SecretSpec, source: &SecretSource) {
    match source {
        SecretSource::Environment => tracing::info!("{} from {}", spec.what, spec.env_var),
        SecretSource::File(path) => tracing::info!(path = %path.display(), "{} from file", spec.what),
        SecretSource::ConfigFile => tracing::info!("{} from the config file ({})", spec.what, spec.config_key),
        SecretSource::Generated(path) => tracing::warn!(path = %path.display(), "generated a new {}", spec.what),
    }
}

/// The secrets control needs to drive Janus; a missing one disables what needs it.
#[derive(Debug, Clone, Default)]
pub struct JanusSecrets {
    pub admin_secret: Option<SecretValue>,
    pub room_admin_key: Option<SecretValue>,
    pub event_secret: Option<SecretValue>,
}

impl JanusSecrets {
    pub fn resolve(state_dir: &Path, config: &Config) -> io::Result<JanusSecrets> {
        let janus = &config.janus;
        let one = |spec: SecretSpec, from_config: Option<&Secret>| -> io::Result<Option<SecretValue>> {
            let found = find(spec, state_dir, from_config)?;
            match &found {
                Some((_, source)) => log_source(spec, source),
                None => tracing::warn!(
                    "no {}: set {}, write {}, or set {}",
                    spec.what,
                    spec.env_var,
                    state_dir.join(spec.file_name).display(),
                    spec.config_key
                ),
            }
            Ok(found.map(|(value, _)| value))
        };
        Ok(JanusSecrets {
            admin_secret: one(JANUS_ADMIN_SECRET, janus.admin_secret.as_ref())?,
            room_admin_key: one(JANUS_ROOM_ADMIN_KEY, janus.room_admin_key.as_ref())?,
            event_secret: one(JANUS_EVENT_SECRET, janus.event_secret.as_ref())?,
        })
    }
}

/// A secret derived from `key` for one purpose (`label`): HMAC-SHA256, 128 bits, hex. Derived
/// secrets need no storage and are the same after a restart.
pub fn derive(key: &str, label: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
    let tag = ring::hmac::sign(&key, label.as_bytes());
    tag.as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// `bytes` random bytes, hex: tokens and secrets.
pub fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(io::Error::other)?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn generated_once_with_mode_0600_then_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (first, source) = find_or_generate(ADMIN_TOKEN, dir.path(), None).expect("generated");
        assert!(matches!(source, SecretSource::Generated(_)));
        assert_eq!(first.expose().len(), 64);
        let mode = fs::metadata(dir.path().join(ADMIN_TOKEN.file_name)).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let from_config = Secret("ignored".into());
        let (again, source) = find_or_generate(ADMIN_TOKEN, dir.path(), Some(&from_config)).expect("read");
        assert!(matches!(source, SecretSource::File(_)));
        assert!(again.matches(first.expose()));
        assert!(!again.matches("wrong"));
    }

    #[test]
    fn config_value_is_the_last_resort() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(find(JANUS_EVENT_SECRET, dir.path(), None).expect("find").is_none());
        let from_config = Secret("from-file".into());
        let (value, source) = find(JANUS_EVENT_SECRET, dir.path(), Some(&from_config)).expect("find").expect("some");
        assert_eq!((value.expose(), source), ("from-file", SecretSource::ConfigFile));
    }
}
