//! A talker's own mix (mix-minus) and how a listener moves between the shared stream and it
//! without a click.
//!
//! A listener's decoder follows one encoder's stream. Handing it packets from an encoder that
//! has just been created is a discontinuity: the new encoder's prediction state (SILK's LPC
//! and pitch history, CELT's band energies, its mode and bandwidth decisions) is not the one
//! the decoder has followed. [`SwitchMethod::Primed`] makes the new encoder's state approach
//! the shared encoder's before the listener hears it:
//! 1. **Primed.** When a listener starts talking its encoder is created and fed the room's last
//!    frames of the full mix (the history the shared encoder just encoded), output discarded.
//! 2. **Run in parallel.** Until its own voice is in the mix, its mix-minus is the full mix:
//!    its encoder keeps encoding the same input as the shared one while the listener still
//!    receives the shared packets. It moves to its own stream on the first tick its own voice
//!    is mixed.
//! 3. **Hangover.** When it stops talking its last frame is still mixed (faded out) and the
//!    shared encoder's state holds its voice for a few frames: the member stays on its own
//!    encoder for `hangover_ticks` more ticks, while both encode the same full mix, then moves
//!    back to the shared stream and its encoder is dropped.
//!
//! Measured by the test `a_listener_who_starts_and_stops_talking_hears_no_click` (figures in
//! [`crate::mixer`]): the naive method's click at the press is the cold encoder's first
//! frames; one tick of running in parallel already removes it (the two warm encoders never
//! produce the same bytes again, yet a decoder follows either without a click). The priming
//! covers a voice mixed on the very tick after the press (its first packet late against an
//! earlier spurt's baseline) for 5 encodes per press. Without the hangover the talker hears
//! its own faded last frame at the release (5.3 times the test's 1 kHz floor; 0.92 with it).
//!
//! [`SwitchMethod::Fresh`] is the naive method, kept to measure against: a new encoder at the
//! talk press, heard at once, and dropped at the release.

use crate::mixer::encoder::{EncoderConfig, MixEncoder};
use crate::mixer::history::MixHistory;

/// Ticks a released talker stays on its own encoder by default: as many as the history
/// primes a new one with, the frames it takes the shared encoder to forget the talker's voice.
pub const HANGOVER_TICKS: u32 = 5;

/// How a listener who starts or stops talking is moved between streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchMethod {
    /// Primed from the mix's history, run in parallel, back after a hangover.
    Primed {
        /// Frames of the full mix the new encoder is primed with.
        history_frames: usize,
        /// Ticks on the own encoder after the talk release.
        hangover_ticks: u32,
    },
    /// A fresh encoder heard at once and dropped at once (the naive method; for comparison).
    Fresh,
}

impl Default for SwitchMethod {
    fn default() -> SwitchMethod {
        SwitchMethod::Primed { history_frames: crate::mixer::history::HISTORY_FRAMES, hangover_ticks: HANGOVER_TICKS }
    }
}

/// A talker's own encoder and whether the talker hears it.
#[derive(Debug)]
pub(crate) struct OwnMix {
    encoder: MixEncoder,
    /// Whether the member receives this encoder's packets (else the shared ones).
    routed: bool,
    /// Ticks since the talk release.
    hangover: u32,
}

impl OwnMix {
    /// The own mix of a member who just pressed talk: primed from `history` by `method`.
    /// Returns the encodes spent on priming too.
    pub(crate) fn start(
        config: EncoderConfig,
        method: SwitchMethod,
        history: &MixHistory,
    ) -> Result<(OwnMix, u64), audiopus::Error> {
        let mut encoder = MixEncoder::new(config)?;
        let mut primed = 0;
        match method {
            SwitchMethod::Primed { history_frames, .. } => {
                for frame in history.last(history_frames) {
                    encoder.encode(frame)?;
                    primed += 1;
                }
            }
            SwitchMethod::Fresh => {}
        }
        let routed = method == SwitchMethod::Fresh;
        Ok((OwnMix { encoder, routed, hangover: 0 }, primed))
    }

    /// Encodes this tick's mix-minus; `false` when the encoder idles in a silence.
    pub(crate) fn encode(&mut self, mix_minus: &[f32]) -> Result<bool, audiopus::Error> {
        self.encoder.encode(mix_minus)
    }

    pub(crate) fn packet(&self) -> &[u8] {
        self.encoder.packet()
    }

    pub(crate) fn is_routed(&self) -> bool {
        self.routed
    }

    /// Decides, after this tick's encodes, which stream the member hears; `false` when the
    /// own encoder is no longer needed (talk released and the hangover over).
    pub(crate) fn route(&mut self, method: SwitchMethod, talking: bool, voiced: bool) -> bool {
        let SwitchMethod::Primed { hangover_ticks, .. } = method else { return talking };
        self.routed |= voiced;
        if talking {
            self.hangover = 0;
            return true;
        }
        self.hangover += 1;
        self.hangover <= hangover_ticks
    }
}
