//! What both partyline daemons agree on.
//!
//! This crate links neither GStreamer nor axum (an architecture invariant held by
//! `control/tests/it/invariants.rs`): it is plain data, the rules that derive from it, and
//! the YAML codec behind two functions so the YAML crate can be swapped in one place.

pub mod bridge;
pub mod card;
pub mod config;
pub mod janus;
pub mod slug;
pub mod yaml;

pub use config::Config;
pub use slug::slugify;
