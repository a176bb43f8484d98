//! Test harness: the real `partyline-control` binary (`partyline_testkit::control`), started on
//! 127.0.0.1:0 in a temp directory, and a client for its API.

pub use partyline_testkit::control::{Control, LOOPBACK_PLAIN};
pub use partyline_testkit::{http, read, wait_for};

/// Parses a YAML config the way control writes it.
pub fn parse_config(text: &str) -> partyline_shared::Config {
    partyline_shared::Config::from_yaml(text).expect("config on disk parses")
}
