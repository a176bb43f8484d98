//! The test card: 8-channel null sinks on a private sound server that speaks PulseAudio's
//! protocol (`PULSE_SERVER`; on PipeWire bridged opens the nodes behind it natively, through
//! PipeWire's own socket: [`SoundServer::client_env`]). Two servers can hold it:
//!
//! - [`PipeWireServer`] with a forced quantum ([`CardKind::PipeWire`], the default card of the
//!   media tests and benchmarks): PipeWire drives its null audio sinks from a timer in fixed
//!   blocks, so a latency measured on it is the same figure from run to run, and its ports can be
//!   linked into one recording sample-aligned ([`PipeWireServer::record_ports`]).
//! - [`PulseServer`] ([`CardKind::Pulse`]): PulseAudio's null sinks render in blocks whose size
//!   and phase depend on what the streams ask for, so each pipeline start lands at an offset of
//!   its own; kept for smoke tests of the PulseAudio path.

use std::process::Output;

use crate::pipewire::PipeWireServer;
use crate::pulse::{CARD_MAP, PulseServer};

/// The quantum (frames per graph cycle at 48 kHz) of the PipeWire test card: 5.33 ms.
pub const QUANTUM: u32 = 256;

/// A running sound server a test's card lives on.
pub trait SoundServer: std::fmt::Debug + Send + Sync {
    /// The address to put in `PULSE_SERVER` (or pass to `pactl --server`).
    fn server_address(&self) -> String;

    /// The environment a client of this server runs with, as a desktop session gives it: the
    /// PulseAudio server (`PULSE_SERVER`) and, on PipeWire, PipeWire's own socket
    /// (`PIPEWIRE_RUNTIME_DIR`), which bridged opens the card through when it can.
    fn client_env(&self) -> Vec<(&'static str, String)> {
        vec![("PULSE_SERVER", self.server_address())]
    }

    /// `pactl ARGS` on this server.
    fn pactl(&self, args: &[&str]) -> Output {
        crate::pulse::pactl(&self.server_address(), args)
    }

    /// `pactl load-module NAME ARGS`; returns the module index. Panics with pactl's stderr.
    fn load_module(&self, name: &str, args: &str) -> u32 {
        crate::pulse::load_module(&self.server_address(), name, args)
    }

    /// A null sink `name` shaped like the card bridged expects: 8 channels at `rate`, in
    /// [`CARD_MAP`] order; its monitor is `NAME.monitor`. Returns the module index.
    fn add_card(&self, name: &str, rate: u32) -> u32 {
        self.add_card_with_map(name, rate, CARD_MAP)
    }

    /// [`SoundServer::add_card`] with the channel map `map` (8 positions, e.g.
    /// [`crate::pulse::AUX_MAP`]).
    fn add_card_with_map(&self, name: &str, rate: u32, map: &str) -> u32 {
        self.load_module("module-null-sink", &format!("sink_name={name} channels=8 rate={rate} channel_map={map}"))
    }
}

/// Which sound server holds a test card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardKind {
    /// PipeWire (with WirePlumber and pipewire-pulse) at the forced quantum [`QUANTUM`].
    PipeWire,
    /// PulseAudio.
    Pulse,
}

/// The sound server of a test card, of either kind.
#[derive(Debug)]
pub enum CardServer {
    PipeWire(PipeWireServer),
    Pulse(PulseServer),
}

impl CardServer {
    /// Starts the sound server of `kind`, ready for [`SoundServer::add_card`].
    pub fn start(kind: CardKind) -> CardServer {
        match kind {
            CardKind::PipeWire => {
                let server = PipeWireServer::start();
                server.force_quantum(QUANTUM);
                CardServer::PipeWire(server)
            }
            CardKind::Pulse => CardServer::Pulse(PulseServer::start()),
        }
    }
}

impl SoundServer for CardServer {
    fn server_address(&self) -> String {
        match self {
            CardServer::PipeWire(server) => server.server_address(),
            CardServer::Pulse(server) => server.server_address(),
        }
    }

    fn client_env(&self) -> Vec<(&'static str, String)> {
        match self {
            CardServer::PipeWire(server) => server.client_env(),
            CardServer::Pulse(server) => server.client_env(),
        }
    }
}
