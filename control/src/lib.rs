//! partyline's control plane.
//!
//! One HTTP(S) listener serves the admin API (`/api/admin`), the user API (`/api`) and, in
//! later issues, the pages. This process is the only writer of the config file
//! ([`config::ConfigManager`]); every other component reads snapshots of it and subscribes to
//! its events.

pub mod api;
pub mod app;
pub mod bridge;
pub mod calls;
pub mod config;
pub mod devices;
pub mod janus;
pub mod janus_proxy;
pub mod logring;
pub mod pin;
pub mod secrets;
pub mod stats;
pub mod tls;
pub mod users;
pub mod web;

mod cli;
mod linger;
mod server;

pub use cli::Cli;
pub use server::run;
