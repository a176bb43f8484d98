//! What a test card's sound server is to a test, whichever server it is ([`SoundServer`]): an
//! address that speaks PulseAudio's protocol, driven with `pactl`, and the channel maps a card
//! is made with. Below the servers ([`crate::pulse`], [`crate::pipewire`]) and the card
//! ([`crate::card`]) that use it.

use std::process::{Command, Output, Stdio};

/// GStreamer's 7.1 order: bridged opens the card as 7.1 and card channel k is position k of
/// this list (bridged/README.md, "Channel order"), so a test card has this channel map.
/// The same constant as [`partyline_shared::card::CARD_CHANNEL_MAP`].
pub use partyline_shared::card::CARD_CHANNEL_MAP as CARD_MAP;

/// The map of a pro multichannel card (ALSA's "multichannel" and "pro-audio" profiles): channels
/// without positions. bridged's playback puts output channel k on its channel k all the same.
pub const AUX_MAP: &str = "aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7";

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
        pactl(&self.server_address(), args)
    }

    /// `pactl load-module NAME ARGS`; returns the module index. Panics with pactl's stderr.
    fn load_module(&self, name: &str, args: &str) -> u32 {
        load_module(&self.server_address(), name, args)
    }

    /// A null sink `name` shaped like the card bridged expects: 8 channels at `rate`, in
    /// [`CARD_MAP`] order; its monitor is `NAME.monitor`. Returns the module index.
    fn add_card(&self, name: &str, rate: u32) -> u32 {
        self.add_card_with_map(name, rate, CARD_MAP)
    }

    /// [`SoundServer::add_card`] with the channel map `map` (8 positions, e.g.
    /// [`AUX_MAP`]).
    fn add_card_with_map(&self, name: &str, rate: u32, map: &str) -> u32 {
        self.load_module("module-null-sink", &format!("sink_name={name} channels=8 rate={rate} channel_map={map}"))
    }
}

/// `pactl ARGS` on the server at `address` (PulseAudio, or PipeWire's PulseAudio server).
fn pactl(address: &str, args: &[&str]) -> Output {
    Command::new("pactl")
        .arg(format!("--server={address}"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run pactl (is pulseaudio-utils installed?)")
}

/// `pactl load-module NAME ARGS` on the server at `address`; returns the module index. Panics
/// with pactl's stderr.
fn load_module(address: &str, name: &str, args: &str) -> u32 {
    let mut command_args = vec!["load-module", name];
    if !args.trim().is_empty() {
        command_args.push(args);
    }
    let output = pactl(address, &command_args);
    assert!(
        output.status.success(),
        "pactl load-module {name} {args} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.trim().parse().unwrap_or_else(|_| panic!("module index from pactl: {stdout:?}"))
}
