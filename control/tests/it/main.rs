//! Integration tests of `partyline-control`: the real binary, real files, real sockets.
//! One test crate (rust-analyzer's layout) so the binary links once.
//!
//! Two tiers. Without features, the tests need only the binary and run anywhere, as any user
//! (`cargo test`). With the feature `services`, the tests that need more run too: a real Janus,
//! PulseAudio, a private D-Bus with partyline-bridged, root (a tmpfs, a network namespace):
//! `scripts/test` runs them inside `scripts/netns-run` with `--features services`.

mod support;

mod aes67;
mod api;
#[cfg(feature = "services")]
mod bridge;
mod compat;
mod concurrency;
mod crash;
#[cfg(feature = "services")]
mod devices;
#[cfg(feature = "services")]
mod direct;
mod events;
#[cfg(feature = "services")]
mod full_disk;
mod groups;
mod hostile;
mod invariants;
#[cfg(feature = "services")]
mod janus_link;
mod metrics;
#[cfg(feature = "services")]
mod open_routes;
mod openapi;
mod panel;
mod persistence;
#[cfg(feature = "services")]
mod prometheus;
#[cfg(feature = "services")]
mod proxy;
mod reload;
mod report;
#[cfg(feature = "services")]
mod restart;
#[cfg(feature = "services")]
mod rooms;
#[cfg(feature = "services")]
mod streams;
mod tls;
mod web;
