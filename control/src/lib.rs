//! partyline's control plane.
//!
//! One HTTP(S) listener serves the admin API (`/api/admin`), the user API (`/api`), the pages
//! and the `/janus` proxy. This process is the only writer of the config file
//! (`config::ConfigManager`); every other component reads snapshots of it and subscribes to
//! its events.

// The library's API is what the binary, the integration tests and the fuzz target use: the
// HTTP API's types and OpenAPI document, the application with its state, the CLI, and the
// environment the binary sets before anything starts.
pub mod api;
pub mod app;
pub mod state;
pub use cli::Cli;
pub use devices::pulse_client_config_env;
pub use server::run;

mod bans;
mod bridged_link;
mod calls;
mod cli;
mod config;
mod devices;
mod events;
mod events_listener;
mod files;
mod janus;
mod janus_proxy;
mod journal;
mod limits;
mod linger;
mod links;
mod logring;
mod metrics;
mod panels;
mod per_address;
mod pin;
mod rendered;
mod report;
mod rooms_link;
mod secrets;
mod server;
mod stats;
mod streams;
mod tls;
mod turn;
mod users;
mod web;
