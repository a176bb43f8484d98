//! The serial tests that time packets to the microsecond: AES67's clocks and streams, whose
//! receive and send lateness are judged against a network's media time. `scripts/test` runs
//! them last, with nothing beside them (beside a compile, a stream reached the mix up to 10 ms
//! off its time).

mod aes67_clocks;
mod aes67_lan;
pub(crate) mod aes67_media;
mod aes67_rig;
