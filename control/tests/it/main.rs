//! Integration tests of `partyline-control`: the real binary, real files, real sockets.
//! One test crate (rust-analyzer's layout) so the binary links once.

mod janus;
mod support;

mod api;
mod audio_path;
mod bridge;
mod compat;
mod concurrency;
mod crash;
mod devices;
mod faults;
mod full_disk;
mod groups;
mod hostile;
mod invariants;
mod janus_link;
mod openapi;
mod panel;
mod persistence;
mod reload;
mod restart;
mod web;
