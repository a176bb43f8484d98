//! Integration tests of `partyline-control`: the real binary, real files, real sockets.
//! One test crate (rust-analyzer's layout) so the binary links once.

mod dbus;
mod janus;
mod pulse;
mod support;

mod api;
mod bridge;
mod concurrency;
mod crash;
mod devices;
mod groups;
mod invariants;
mod janus_link;
mod openapi;
mod persistence;
mod reload;
mod web;
