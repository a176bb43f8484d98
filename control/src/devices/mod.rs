//! Sound-card device listing for the admin UI (`GET /admin/devices/list`, `GET /admin/audio/devices`).
//!
//! On Linux the sound server is asked first, through `pactl --format=json` (PulseAudio, or
//! PipeWire through its PulseAudio server, `pipewire-pulse`): identifiers are the source and sink
//! names that `pulsesrc`/`pulsesink` take as `device`. When no sound server answers, the ALSA
//! cards and PCMs are listed through alsa-lib (identifiers `alsa:NAME`, which bridged opens
//! with `alsasrc`/`alsasink`), each with the channel count and rate the device offers; when that
//! finds nothing either, one built-in `default` device per direction. Identifiers are exactly
//! what `audio.device.inputDeviceId`/`outputDeviceId` hold ([`partyline_shared::card::DeviceId`]).
//!
//! The listing never blocks the async runtime: `pactl` runs as a tokio child process and ALSA on
//! a blocking thread, each bounded by [`SOUND_SERVER_TIMEOUT`]; a timed-out `pactl` is killed.

use std::time::Duration;

use partyline_shared::card::CARD_CHANNEL_MAP;
use serde::Serialize;
use utoipa::ToSchema;

#[cfg(target_os = "linux")]
mod alsa;
#[cfg(target_os = "linux")]
mod pulse;

#[cfg(target_os = "linux")]
use pulse::{CLIENT_CONFIG_VAR, client_config};

/// The environment variable and its value that make libpulse, in control and in what it starts,
/// read control's client config, which forbids starting a sound server (`pulse.rs`); `main`
/// sets it before any thread exists. `None` where there is no libpulse to tell, or when the
/// config cannot be made (the ALSA listing then refuses to run, pactl too).
#[cfg(target_os = "linux")]
pub fn pulse_client_config_env() -> Option<(&'static str, std::path::PathBuf)> {
    client_config().ok().map(|path| (CLIENT_CONFIG_VAR, path))
}

#[cfg(not(target_os = "linux"))]
pub fn pulse_client_config_env() -> Option<(&'static str, std::path::PathBuf)> {
    None
}

/// How long the sound server, then ALSA, may take to answer before the next fallback is used.
pub const SOUND_SERVER_TIMEOUT: Duration = Duration::from_secs(2);
/// Channel count reported when the real one is unknown (a busy ALSA device never seen free, the
/// built-in fallback).
const UNKNOWN_CHANNELS: u32 = 2;
/// Sample rate reported when the real one is unknown (as [`UNKNOWN_CHANNELS`]).
const UNKNOWN_SAMPLE_RATE: u32 = 48_000;

/// One capture or playback device.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceEntry {
    /// The id to store in `audio.device.inputDeviceId`/`outputDeviceId`.
    pub identifier: String,
    /// Human-readable, prefixed with "Input: " or "Output: ".
    pub description: String,
    pub channels: u32,
    pub sample_rate: u32,
    /// The sound server's default device for this direction.
    pub is_default: bool,
    /// The device's PulseAudio channel map as `pactl` prints it (comma-separated position names,
    /// channel 0 first), e.g. `aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7`; `null` when unknown
    /// (ALSA and built-in listings, or a sound server that did not say).
    #[schema(example = "front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right")]
    pub channel_map: Option<String>,
    /// Inputs only: set when the channel map is known and is not partyline's card order
    /// (`front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right`, or
    /// its first channels for a device with fewer, or mono).
    /// Capturing from such a source, card inputs are silent or not the device's channels; the
    /// note says so and how to fix it. `null` for outputs (playback keeps every channel
    /// whatever the map), for inputs in card order, and when the map is unknown.
    pub note: Option<String>,
}

impl DeviceEntry {
    /// The device's name: its description without the direction.
    pub fn name(&self) -> &str {
        ["Input: ", "Output: "].into_iter().find_map(|p| self.description.strip_prefix(p)).unwrap_or(&self.description)
    }
}

/// The note of an input device whose channel map is `map` (see [`DeviceEntry::note`]). Card
/// input k is the device's channel k when the device's channels are the first ones of the card's,
/// in order (a stereo source: front-left, front-right), or when it is mono (PulseAudio feeds it to
/// the front channels, so input 0 carries it).
fn input_note(map: &str) -> Option<String> {
    let names: Vec<&str> = map.split(',').collect();
    let card: Vec<&str> = CARD_CHANNEL_MAP.split(',').collect();
    let keeps_numbers = map == "mono" || card.get(..names.len()) == Some(&names[..]);
    (!keeps_numbers).then(|| {
        format!(
            "its channel map ({map}) is not partyline's card order ({CARD_CHANNEL_MAP}): card inputs \
             will be silent or swapped; put a remap source with partyline's order in front of it \
             (bridged/README.md, \"Channel order\")"
        )
    })
}

/// Every device found, and where the list came from.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceListing {
    pub inputs: Vec<DeviceEntry>,
    pub outputs: Vec<DeviceEntry>,
    /// "pulseaudio", "pipewire" (PipeWire's PulseAudio server), "alsa", "fallback", "coreaudio"
    /// or "windows-placeholder".
    pub platform: String,
}

/// Lists the sound card's inputs and outputs. Never fails: falls back as the module doc says.
pub async fn list_devices() -> DeviceListing {
    platform::list().await
}

/// How old a listing [`recent_devices`] may hand out.
const RECENT: Duration = Duration::from_secs(10);

/// A listing at most [`RECENT`] old, for answers that describe the selected devices on the
/// side (`/admin/audio/device`, polled by admin pages): asking the sound server may take up to
/// [`SOUND_SERVER_TIMEOUT`], which those answers must not pay each time. Callers wait for one
/// listing at a time.
pub async fn recent_devices() -> DeviceListing {
    static LAST: tokio::sync::Mutex<Option<(std::time::Instant, DeviceListing)>> = tokio::sync::Mutex::const_new(None);
    let mut last = LAST.lock().await;
    match &*last {
        Some((at, listing)) if at.elapsed() < RECENT => listing.clone(),
        _ => {
            let listing = list_devices().await;
            *last = Some((std::time::Instant::now(), listing.clone()));
            listing
        }
    }
}

/// The built-in devices used when nothing better is known: one `default` device per direction.
fn fallback_listing(platform: &str) -> DeviceListing {
    let entry = |description: &str| DeviceEntry {
        identifier: "default".to_owned(),
        description: description.to_owned(),
        channels: UNKNOWN_CHANNELS,
        sample_rate: UNKNOWN_SAMPLE_RATE,
        is_default: true,
        channel_map: None,
        note: None,
    };
    DeviceListing {
        inputs: vec![entry("Input: default device")],
        outputs: vec![entry("Output: default device")],
        platform: platform.to_owned(),
    }
}

#[cfg(target_os = "linux")]
mod platform {
    use super::{DeviceListing, SOUND_SERVER_TIMEOUT, alsa, fallback_listing, pulse};

    pub(super) async fn list() -> DeviceListing {
        match tokio::time::timeout(SOUND_SERVER_TIMEOUT, pulse::list()).await {
            Ok(Ok(listing)) => return listing,
            Ok(Err(err)) => tracing::warn!(
                error = format!("{err:#}"),
                "no sound server answered pactl; listing ALSA devices instead"
            ),
            Err(_) => tracing::warn!(
                timeout_ms = SOUND_SERVER_TIMEOUT.as_millis(),
                "the sound server did not answer pactl in time; listing ALSA devices instead"
            ),
        }
        let error = match tokio::time::timeout(SOUND_SERVER_TIMEOUT, alsa::list()).await {
            Ok(Ok(listing)) => return listing,
            Ok(Err(err)) => format!("{err:#}"),
            Err(_) => format!("ALSA did not answer within {} ms", SOUND_SERVER_TIMEOUT.as_millis()),
        };
        tracing::warn!(error, "no ALSA device either; offering the built-in default devices");
        fallback_listing("fallback")
    }
}

#[cfg(target_os = "macos")]
mod coreaudio {
    use super::{DeviceListing, fallback_listing};

    pub(super) fn list() -> DeviceListing {
        tracing::warn!("CoreAudio device listing is not implemented; offering the default devices");
        fallback_listing("coreaudio")
    }
}

#[cfg(target_os = "macos")]
mod platform {
    use super::{DeviceListing, coreaudio};

    pub(super) async fn list() -> DeviceListing {
        coreaudio::list()
    }
}

/// Windows has no device enumeration yet: a named placeholder with the built-in devices.
#[cfg(windows)]
mod platform {
    use super::{DeviceListing, fallback_listing};

    pub(super) async fn list() -> DeviceListing {
        tracing::warn!("device listing is not implemented on Windows; offering the default devices");
        fallback_listing("windows-placeholder")
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
mod platform {
    use super::{DeviceListing, fallback_listing};

    pub(super) async fn list() -> DeviceListing {
        tracing::warn!("no device listing for this operating system; offering the default devices");
        fallback_listing("fallback")
    }
}

#[cfg(test)]
mod tests {
    use super::{CARD_CHANNEL_MAP, DeviceEntry, fallback_listing, input_note};

    /// A device without a channel map (ALSA and built-in listings).
    pub(super) fn entry(identifier: &str, description: &str, channels: u32, is_default: bool) -> DeviceEntry {
        DeviceEntry {
            identifier: identifier.to_owned(),
            description: description.to_owned(),
            channels,
            sample_rate: 48_000,
            is_default,
            channel_map: None,
            note: None,
        }
    }

    #[test]
    fn only_inputs_that_renumber_channels_get_a_note() {
        assert_eq!(input_note(CARD_CHANNEL_MAP), None);
        // ALSA's 7.1 order: the same names, another order.
        let alsa_71 = "front-left,front-right,rear-left,rear-right,front-center,lfe,side-left,side-right";
        let aux = "aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7";
        for map in [aux, alsa_71, "front-right,front-left", "aux0,aux1"] {
            let note = input_note(map).expect("a note");
            assert!(note.contains(&format!("({map})")) && note.contains("remap source"), "{note}");
        }
        // The card's first channels in its order, or mono: every channel keeps its number.
        for map in ["front-left,front-right", "front-left,front-right,front-center,lfe", "mono"] {
            assert_eq!(input_note(map), None, "{map}");
        }
    }

    #[test]
    fn built_in_fallback() {
        let listing = fallback_listing("fallback");
        assert_eq!(listing.inputs, [entry("default", "Input: default device", 2, true)]);
        assert_eq!(listing.outputs, [entry("default", "Output: default device", 2, true)]);
        assert_eq!(listing.platform, "fallback");
    }

    #[test]
    fn serialises_in_camel_case() {
        let json = serde_json::to_value(fallback_listing("fallback")).expect("json");
        assert_eq!(
            json["inputs"][0],
            serde_json::json!({
                "identifier": "default",
                "description": "Input: default device",
                "channels": 2,
                "sampleRate": 48000,
                "isDefault": true,
                "channelMap": null,
                "note": null
            })
        );
    }
}
