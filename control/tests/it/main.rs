//! Integration tests of `partyline-control`: the real binary, real files, real sockets.
//! One test crate (rust-analyzer's layout) so the binary links once.

mod support;

mod api;
mod groups;
mod invariants;
mod openapi;
mod persistence;
