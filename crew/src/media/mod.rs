//! The media of a simulated line: one WebRTC peer connection (str0m, driven by a tokio task on
//! its own UDP socket, and a TURN [`relay`] where the token answer names one), sending a
//! talker's [`voice`] and judging what it hears with an [`ear`].

pub mod ear;
pub mod heard;
pub mod line;
pub mod link;
mod peer;
pub mod relay;
pub mod voice;

pub use heard::{Heard, Onsets};
pub use line::{LineMedia, MediaError, Offer, direction};
pub use link::{Link, Loss, Path};
pub use relay::{Relay, RelayError, RelayServer};
pub use voice::Voice;
