//! partyline-crew: a headless crew. Each simulated member joins a partyline server exactly as
//! the join page's panel does (token, session events, control's `/janus` proxy, one AudioBridge
//! participant per line with real WebRTC) and talks and listens on its lines, so a box can be
//! load-tested before a show and its ceiling measured (`bench/capacity`).
//!
//! - [`control_api`]: control's public routes; [`tls`]: how its certificate is checked.
//! - [`janus_ws`]: one Janus session through the proxy, as janus.js speaks it.
//! - [`media`]: a line's WebRTC (str0m), the talker's encoded voice, the listener's ear.
//! - [`person`]: one simulated panel; [`crew`]: many, talking in turns.
//! - [`run`]: a steady run or a ramp to the knee; [`report`], [`cpu`]: their figures.

pub mod control_api;
pub mod cpu;
pub mod crew;
pub mod janus_ws;
pub mod media;
pub mod person;
pub mod report;
pub mod run;
pub mod tls;

pub use control_api::Lines;
pub use crew::{Crew, Options, PersonHeard};
pub use media::Link;
pub use report::{Report, Summary};
pub use tls::TlsCheck;
