//! The whole-stack tests (see the crate's `src/lib.rs`). One test crate, so that it links once.

#![cfg(feature = "services")]

mod pool;
mod serial;
