//! What both partyline daemons agree on.
//!
//! This crate links neither GStreamer nor axum (an architecture invariant held by
//! `control/tests/it/invariants.rs`): it is plain data, the rules that derive from it, and
//! the YAML codec behind two functions so the YAML crate can be swapped in one place. With the
//! features `janus-client` and `crypto`, it also holds the Janus HTTP client both daemons use
//! and the installation of the process's TLS provider, and with `dbus` the D-Bus contract between
//! them; without them it stays light (no HTTP or D-Bus stack) for its other users (the config
//! fuzzer).

pub mod aes67;
pub mod backoff;
#[cfg(feature = "dbus")]
pub mod bridge;
pub mod card;
pub mod config;
#[cfg(feature = "crypto")]
pub mod crypto;
pub mod janus;
#[cfg(feature = "dbus")]
pub mod rooms_bus;
pub mod sdp;
pub mod slug;
pub mod sync;
pub mod yaml;

pub use config::Config;
pub use slug::slugify;
