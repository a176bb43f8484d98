//! The test card: 8-channel null sinks on a private sound server that speaks PulseAudio's
//! protocol (`PULSE_SERVER`; on PipeWire bridged opens the nodes behind it natively, through
//! PipeWire's own socket: [`SoundServer::client_env`](crate::sound_server::SoundServer::client_env)). Two servers can hold it:
//!
//! - [`PipeWireServer`] with a forced quantum ([`CardKind::PipeWire`], the default card of the
//!   media tests and benchmarks): PipeWire drives its null audio sinks from a timer in fixed
//!   blocks, so a latency measured on it is the same figure from run to run, and its ports can be
//!   linked into one recording sample-aligned ([`PipeWireServer::record_ports`]).
//! - [`PulseServer`] ([`CardKind::Pulse`]): PulseAudio's null sinks render in blocks whose size
//!   and phase depend on what the streams ask for, so each pipeline start lands at an offset of
//!   its own; kept for smoke tests of the PulseAudio path.

use crate::pipewire::PipeWireServer;
use crate::pulse::PulseServer;
use crate::sound_server::SoundServer;

/// The quantum (frames per graph cycle at 48 kHz) of the PipeWire test card: 5.33 ms.
pub const QUANTUM: u32 = 256;

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
