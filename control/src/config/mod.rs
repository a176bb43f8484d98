//! The config manager: the only writer of the config file.
//!
//! Every change goes validate → write (temp file, fsync, rename, fsync dir) → swap in memory →
//! emit event. One writer at a time: an update runs start to finish on a blocking thread while
//! holding the writer lock, so a client that hangs up mid-request cannot leave the file and
//! the memory disagreeing, and two concurrent edits never lose one another.

mod edit;
mod stream_tokens;
mod watch;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use partyline_shared::Config;
use partyline_shared::config::ConfigError;
use partyline_shared::sync::lock;
use partyline_shared::yaml::YamlError;
use tokio::sync::broadcast;

use crate::events::{EventBus, LiveEvent};
use crate::files::{self, Durability};

pub use edit::*;
pub use stream_tokens::{add_stream_token, revoke_stream_token, stream_token_by_hash};
pub use watch::watch_for_reloads;

/// The config file's mode: readable by the service's group (the file may hold secrets).
const FILE_MODE: u32 = 0o640;

/// What changed, for the components that follow the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigEventKind {
    /// Any change (always sent).
    ConfigUpdated,
    /// `audio.device` changed (sent after `ConfigUpdated`).
    AudioDeviceUpdated,
}

#[derive(Debug, Clone)]
pub struct ConfigEvent {
    pub kind: ConfigEventKind,
    pub config: Arc<Config>,
    /// What changed, as the log says it (`create group Stage`, `reload from disk`).
    pub what: Arc<str>,
}

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: {source}")]
    Parse { path: PathBuf, source: YamlError },
    #[error("{path}: {source}")]
    Invalid { path: PathBuf, source: ConfigError },
    #[error("cannot create {path}: {source}")]
    Create { path: PathBuf, source: UpdateError },
}

/// Why an update was refused or failed; the previous config is in force either way.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error(transparent)]
    Edit(#[from] EditError),
    #[error("the change would make the config invalid: {0}")]
    Invalid(#[from] ConfigError),
    #[error("cannot encode the config: {0}")]
    Encode(#[from] YamlError),
    #[error("cannot write the config file: {0}")]
    Write(#[from] io::Error),
    #[error("the config writer stopped: {0}")]
    Aborted(String),
}

#[derive(Debug)]
pub struct ConfigManager {
    path: PathBuf,
    current: RwLock<Arc<Config>>,
    /// Held for the whole of an update or reload (they run on blocking threads); holds the
    /// file's text as control last wrote or read it.
    writer: Mutex<String>,
    events: broadcast::Sender<ConfigEvent>,
}

/// The config at `path`, parsed and validated, for a command that only reads it (nothing is
/// created or cleaned up, unlike [`ConfigManager::load`]).
pub fn read(path: &Path) -> Result<Config, LoadError> {
    let text = fs::read_to_string(path).map_err(|source| LoadError::Read { path: path.to_owned(), source })?;
    parse(path, &text)
}

impl ConfigManager {
    /// Loads the file at `path`, creating it with defaults when it does not exist.
    pub fn load(path: &Path) -> Result<Arc<Self>, LoadError> {
        // Write through a symlink to its target, rather than replacing the link.
        let path = &fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
        files::remove_stale_temp_files(files::parent_dir(path));
        let (config, text) = match fs::read_to_string(path) {
            Ok(text) => (parse(path, &text)?, text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => create_default(path)?,
            Err(source) => return Err(LoadError::Read { path: path.to_owned(), source }),
        };
        let (events, _) = broadcast::channel(64);
        let manager =
            Self { path: path.to_owned(), current: RwLock::new(Arc::new(config)), writer: Mutex::new(text), events };
        Ok(Arc::new(manager))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The config in force.
    pub fn current(&self) -> Arc<Config> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Events of every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<ConfigEvent> {
        self.events.subscribe()
    }

    /// Applies `edit` to a copy of the config in force, validates the result, writes it
    /// durably, then makes it the config in force. `what` names the change in the log.
    /// An edit that changes nothing writes nothing.
    pub async fn update<T, F>(self: &Arc<Self>, what: String, edit: F) -> Result<T, UpdateError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Config) -> Result<T, EditError> + Send + 'static,
    {
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || this.update_blocking(&what, edit))
            .await
            .map_err(|e| UpdateError::Aborted(e.to_string()))?
    }

    fn update_blocking<T>(
        &self,
        what: &str,
        edit: impl FnOnce(&mut Config) -> Result<T, EditError>,
    ) -> Result<T, UpdateError> {
        let mut on_disk = lock(&self.writer);
        let old = self.current();
        let mut new = Config::clone(&old);
        let output = edit(&mut new)?;
        new.validate()?;
        if new != *old {
            let text = new.to_yaml()?;
            files::replace(&self.path, text.as_bytes(), FILE_MODE, Durability::Disk).inspect_err(|e| {
                tracing::error!(path = %self.path.display(), error = %e, change = what, "config write failed; the previous config stays in force");
            })?;
            *on_disk = text;
            tracing::info!(change = what, "config updated");
            self.swap(&old, new, what);
        }
        Ok(output)
    }

    /// Re-reads the file (after SIGHUP or an edit by hand). An invalid file is refused and
    /// the config in force stays.
    pub fn reload(&self) -> Result<bool, LoadError> {
        let mut on_disk = lock(&self.writer);
        let text =
            fs::read_to_string(&self.path).map_err(|source| LoadError::Read { path: self.path.clone(), source })?;
        // Our own writes wake the watcher too: what we wrote needs no parsing.
        if *on_disk == text {
            return Ok(false);
        }
        let new = parse(&self.path, &text)?;
        *on_disk = text;
        let old = self.current();
        if new == *old {
            return Ok(false);
        }
        tracing::info!(path = %self.path.display(), "config reloaded from disk");
        self.swap(&old, new, "reload from disk");
        Ok(true)
    }

    fn swap(&self, old: &Config, new: Config, what: &str) {
        let device_changed = old.audio.device != new.audio.device;
        let new = Arc::new(new);
        let what: Arc<str> = what.into();
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&new);
        // No subscriber is not an error: events are for whoever listens now.
        let updated =
            ConfigEvent { kind: ConfigEventKind::ConfigUpdated, config: Arc::clone(&new), what: what.clone() };
        let _ = self.events.send(updated);
        if device_changed {
            let _ = self.events.send(ConfigEvent { kind: ConfigEventKind::AudioDeviceUpdated, config: new, what });
        }
    }
}

/// Writes a config with every default at `path`.
fn create_default(path: &Path) -> Result<(Config, String), LoadError> {
    let config = Config::default();
    let create = || -> Result<String, UpdateError> {
        let text = config.to_yaml()?;
        files::replace(path, text.as_bytes(), FILE_MODE, Durability::Disk)?;
        Ok(text)
    };
    let text = create().map_err(|source| LoadError::Create { path: path.to_owned(), source })?;
    tracing::info!(path = %path.display(), "created the config file with defaults");
    Ok((config, text))
}

/// Parses and validates a file's text; legacy keys are accepted with one warning.
fn parse(path: &Path, text: &str) -> Result<Config, LoadError> {
    let mut config = Config::from_yaml(text).map_err(|source| LoadError::Parse { path: path.to_owned(), source })?;
    let legacy = config.take_legacy();
    if !legacy.is_empty() {
        tracing::warn!(
            path = %path.display(),
            keys = legacy.join(", "),
            "legacy keys accepted; they are dropped (or mapped) on the next save"
        );
    }
    config.validate().map_err(|source| LoadError::Invalid { path: path.to_owned(), source })?;
    Ok(config)
}

/// Publishes every change of the config in force, until the config manager goes.
pub async fn publish_changes(config: Arc<ConfigManager>, bus: EventBus) {
    let mut changes = config.subscribe();
    loop {
        match changes.recv().await {
            Ok(change) if change.kind == ConfigEventKind::ConfigUpdated => {
                bus.publish(&LiveEvent::ConfigChanged { what: change.what.to_string() });
            }
            Ok(_) => {}
            // Changes came faster than this task ran: say that something changed.
            Err(broadcast::error::RecvError::Lagged(_)) => {
                bus.publish(&LiveEvent::ConfigChanged { what: "several changes".into() });
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_failed_write_keeps_the_old_config() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.yaml");
        let manager = ConfigManager::load(&path).expect("created");
        let before = fs::read_to_string(&path).expect("read");
        // A directory where the file should be makes the rename fail.
        fs::remove_file(&path).expect("remove");
        fs::create_dir(&path).expect("mkdir");
        let result = manager.update_blocking("test", |c| {
            c.groups.push(partyline_shared::config::Group::new("A", None));
            Ok(())
        });
        assert!(matches!(result, Err(UpdateError::Write(_))), "{result:?}");
        assert!(manager.current().groups.is_empty());
        fs::remove_dir(&path).expect("rmdir");
        assert!(!before.is_empty());
    }

    #[test]
    fn written_file_has_mode_0640() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.yaml");
        ConfigManager::load(&path).expect("created");
        let mode = fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }
}
