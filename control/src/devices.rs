//! Sound-card device listing for the admin UI (`GET /admin/devices/list`, `GET /admin/audio/devices`).
//!
//! On Linux the sound server is asked through `pactl` (PulseAudio, or PipeWire's pulse
//! compatibility), so identifiers are the source/sink names that `pulsesrc`/`pulsesink` take as
//! `device` — exactly what `audio.device.inputDeviceId`/`outputDeviceId` hold. When no sound server
//! answers, the ALSA PCM devices of `/proc/asound/pcm` are listed (ids for `alsasrc`/`alsasink`),
//! and when that gives nothing either, one built-in `default` device per direction.
//!
//! The listing never blocks the async runtime: `pactl` runs as a tokio child process, the whole
//! sound-server query is bounded by [`SOUND_SERVER_TIMEOUT`], and a timed-out `pactl` is killed.

use std::time::Duration;

use partyline_shared::card::CARD_CHANNEL_MAP;
use serde::Serialize;
use utoipa::ToSchema;

/// How long the sound server may take to answer the whole listing before the fallback is used.
pub const SOUND_SERVER_TIMEOUT: Duration = Duration::from_secs(2);

/// Channel count reported when the real one is unknown (ALSA hints, built-in fallback).
const UNKNOWN_CHANNELS: u32 = 2;
/// Sample rate reported when the real one is unknown (ALSA hints, built-in fallback).
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
    /// "pulseaudio", "alsa", "fallback", "coreaudio" or "windows-placeholder".
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
    use std::path::Path;

    use super::{DeviceListing, SOUND_SERVER_TIMEOUT, alsa, fallback_listing, pulse};

    const PROC_ASOUND_PCM: &str = "/proc/asound/pcm";

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
        match alsa::list(Path::new(PROC_ASOUND_PCM)).await {
            Ok(listing) => listing,
            Err(err) => {
                tracing::warn!(
                    error = format!("{err:#}"),
                    "no ALSA device either; offering the built-in default devices"
                );
                fallback_listing("fallback")
            }
        }
    }
}

/// The sound server, asked through `pactl`.
#[cfg(target_os = "linux")]
mod pulse {
    use std::collections::HashMap;
    use std::process::Stdio;

    use anyhow::{Context as _, bail};
    use tokio::process::Command;

    use super::{DeviceEntry, DeviceListing, UNKNOWN_CHANNELS, UNKNOWN_SAMPLE_RATE, input_note};

    /// A row of `pactl list short sources|sinks`.
    #[derive(Debug, Clone, PartialEq)]
    pub(super) struct ShortEntry {
        pub name: String,
        /// `None` when the sample-spec column could not be read.
        pub spec: Option<(u32, u32)>,
    }

    /// What the long `pactl list sources|sinks` says of one device, when it says it.
    #[derive(Debug, Clone, Default, PartialEq)]
    pub(super) struct Details {
        pub description: Option<String>,
        pub channel_map: Option<String>,
    }

    /// Queries the sound server. Callers bound this with a timeout; dropping the future kills
    /// every `pactl` still running (`kill_on_drop`).
    pub(super) async fn list() -> anyhow::Result<DeviceListing> {
        let (sources, sinks, info, source_details, sink_details) = tokio::try_join!(
            pactl(&["list", "short", "sources"]),
            pactl(&["list", "short", "sinks"]),
            pactl(&["info"]),
            details("sources"),
            details("sinks"),
        )?;
        Ok(listing(&sources, &sinks, &info, &source_details, &sink_details))
    }

    /// Builds the listing from what `pactl list short sources`, `pactl list short sinks` and
    /// `pactl info` printed, plus the optional details by name. Monitor sources are dropped:
    /// they are the loopback of a sink, not an input of the card.
    pub(super) fn listing(
        sources: &str,
        sinks: &str,
        info: &str,
        source_details: &HashMap<String, Details>,
        sink_details: &HashMap<String, Details>,
    ) -> DeviceListing {
        let (default_sink, default_source) = parse_defaults(info);
        let mut sources = parse_short_list(sources);
        sources.retain(|source| !source.name.ends_with(".monitor"));
        let sinks = parse_short_list(sinks);
        DeviceListing {
            inputs: entries(&sources, "Input", source_details, default_source.as_deref()),
            outputs: entries(&sinks, "Output", sink_details, default_sink.as_deref()),
            platform: "pulseaudio".to_owned(),
        }
    }

    /// Runs `pactl ARGS` and returns its stdout, or an error with its stderr.
    async fn pactl(args: &[&str]) -> anyhow::Result<String> {
        let output = Command::new("pactl")
            .args(args)
            // `pactl info` and the long listings are translated; the parsers read English labels.
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .context("cannot run pactl")?;
        if !output.status.success() {
            bail!(
                "`pactl {}` failed ({}): {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        String::from_utf8(output.stdout).context("pactl printed invalid UTF-8")
    }

    /// Descriptions and channel maps by name, from the long listing (`sources` or `sinks`). Best
    /// effort: the short listing alone is enough, so a failure here only costs the nicer
    /// descriptions and the channel maps (then `null`).
    async fn details(kind: &str) -> anyhow::Result<HashMap<String, Details>> {
        Ok(match pactl(&["list", kind]).await {
            Ok(text) => parse_details(&text),
            Err(err) => {
                tracing::debug!(error = format!("{err:#}"), "no device details from pactl");
                HashMap::new()
            }
        })
    }

    fn entries(
        rows: &[ShortEntry],
        direction: &str,
        details: &HashMap<String, Details>,
        default: Option<&str>,
    ) -> Vec<DeviceEntry> {
        let details: Vec<Option<&Details>> = rows.iter().map(|row| details.get(&row.name)).collect();
        let labels: Vec<&str> = rows
            .iter()
            .zip(&details)
            .map(|(row, details)| details.and_then(|d| d.description.as_deref()).unwrap_or(&row.name))
            .collect();
        rows.iter()
            .zip(&labels)
            .zip(details)
            .map(|((row, label), details)| {
                let (channels, sample_rate) = row.spec.unwrap_or((UNKNOWN_CHANNELS, UNKNOWN_SAMPLE_RATE));
                let channel_map = details.and_then(|d| d.channel_map.clone());
                let note = channel_map.as_deref().filter(|_| direction == "Input").and_then(input_note);
                DeviceEntry {
                    identifier: row.name.clone(),
                    description: describe(direction, label, &row.name, &labels),
                    channels,
                    sample_rate,
                    is_default: default == Some(row.name.as_str()),
                    channel_map,
                    note,
                }
            })
            .collect()
    }

    /// "Output: Null Output"; the name is appended when another device has the same label
    /// (two null sinks are both "Null Output"), so every choice in the UI is distinguishable.
    fn describe(direction: &str, label: &str, name: &str, labels: &[&str]) -> String {
        let shared = labels.iter().filter(|other| **other == label).count() > 1;
        if shared && label != name { format!("{direction}: {label} ({name})") } else { format!("{direction}: {label}") }
    }

    /// Parses `pactl list short sources|sinks`: tab-separated
    /// `index  name  driver  sample-spec  state`. Rows without a name are skipped.
    pub(super) fn parse_short_list(text: &str) -> Vec<ShortEntry> {
        text.lines()
            .filter_map(|line| {
                let mut columns = line.split('\t').skip(1);
                let name = columns.next()?.trim();
                if name.is_empty() {
                    return None;
                }
                let spec = columns.nth(1).and_then(parse_sample_spec);
                Some(ShortEntry { name: name.to_owned(), spec })
            })
            .collect()
    }

    /// Parses a PulseAudio sample spec such as `s16le 2ch 44100Hz` into (channels, rate).
    pub(super) fn parse_sample_spec(spec: &str) -> Option<(u32, u32)> {
        let mut channels = None;
        let mut rate = None;
        for word in spec.split_whitespace() {
            if let Some(n) = word.strip_suffix("ch") {
                channels = n.parse().ok();
            } else if let Some(n) = word.strip_suffix("Hz") {
                rate = n.parse().ok();
            }
        }
        Some((channels?, rate?))
    }

    /// (default sink, default source) from `pactl info`; "(null)" or absent means none.
    pub(super) fn parse_defaults(info: &str) -> (Option<String>, Option<String>) {
        let field = |label: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(label))
                .map(str::trim)
                .filter(|value| !value.is_empty() && *value != "(null)")
                .map(str::to_owned)
        };
        (field("Default Sink:"), field("Default Source:"))
    }

    /// Name → details from the long `pactl list sources|sinks` form, where each device is a
    /// block opened by an unindented `Source #N` line, with one-tab-indented `Name:`, then
    /// `Description:` and `Channel Map:` lines. Lines before a block's `Name:` are ignored, and
    /// so are empty values.
    pub(super) fn parse_details(text: &str) -> HashMap<String, Details> {
        let mut devices = HashMap::new();
        let mut current: Option<&mut Details> = None;
        for line in text.lines() {
            let Some(field) = line.strip_prefix('\t') else {
                current = None; // "Source #N", "Sink #N" or a blank line: another block.
                continue;
            };
            let Some((label, value)) = field.split_once(": ") else { continue };
            let value = value.trim();
            match (label, current.as_deref_mut()) {
                ("Name", _) if !value.is_empty() => current = Some(devices.entry(value.to_owned()).or_default()),
                ("Description", Some(details)) if !value.is_empty() => details.description = Some(value.to_owned()),
                ("Channel Map", Some(details)) if !value.is_empty() => details.channel_map = Some(value.to_owned()),
                _ => {}
            }
        }
        devices
    }
}

/// ALSA PCM devices from `/proc/asound/pcm`, for machines without a sound server.
#[cfg(target_os = "linux")]
mod alsa {
    use std::path::Path;

    use anyhow::{Context as _, bail};

    use super::{DeviceEntry, DeviceListing, UNKNOWN_CHANNELS, UNKNOWN_SAMPLE_RATE};

    /// A row of `/proc/asound/pcm`.
    #[derive(Debug, Clone, PartialEq)]
    pub(super) struct PcmHint {
        pub card: u32,
        pub device: u32,
        pub name: String,
        pub playback: bool,
        pub capture: bool,
    }

    /// Lists the PCM devices; an error when the file cannot be read or lists none.
    ///
    /// `/proc/asound/pcm` says nothing about channels or rates (they depend on the hw params a
    /// client asks for), so every entry reports 2 channels at 48000 Hz. Card 0 device 0 is marked
    /// default: it is what ALSA's `default` PCM opens when no configuration says otherwise.
    pub(super) async fn list(path: &Path) -> anyhow::Result<DeviceListing> {
        let text = tokio::fs::read_to_string(path).await.with_context(|| format!("cannot read {}", path.display()))?;
        let hints = parse_proc_asound_pcm(&text);
        let inputs = entries(hints.iter().filter(|hint| hint.capture), "Input");
        let outputs = entries(hints.iter().filter(|hint| hint.playback), "Output");
        if inputs.is_empty() && outputs.is_empty() {
            bail!("{} lists no PCM device", path.display());
        }
        Ok(DeviceListing { inputs, outputs, platform: "alsa".to_owned() })
    }

    fn entries<'a>(hints: impl Iterator<Item = &'a PcmHint>, direction: &str) -> Vec<DeviceEntry> {
        hints
            .map(|hint| DeviceEntry {
                identifier: format!("hw:{},{}", hint.card, hint.device),
                description: format!("{direction}: {}", hint.name),
                channels: UNKNOWN_CHANNELS,
                sample_rate: UNKNOWN_SAMPLE_RATE,
                is_default: hint.card == 0 && hint.device == 0,
                channel_map: None,
                note: None,
            })
            .collect()
    }

    /// Parses `/proc/asound/pcm`: `CC-DD: id : name : playback N : capture N`, where the
    /// playback and capture parts are each present only when the device has that direction.
    pub(super) fn parse_proc_asound_pcm(text: &str) -> Vec<PcmHint> {
        text.lines().filter_map(parse_pcm_line).collect()
    }

    fn parse_pcm_line(line: &str) -> Option<PcmHint> {
        let (numbers, rest) = line.split_once(": ")?;
        let (card, device) = numbers.split_once('-')?;
        let mut fields = rest.split(" : ").map(str::trim);
        let id = fields.next()?;
        let name = fields.next().filter(|name| !name.is_empty()).unwrap_or(id);
        let (mut playback, mut capture) = (false, false);
        for field in fields {
            playback |= field.starts_with("playback");
            capture |= field.starts_with("capture");
        }
        Some(PcmHint {
            card: card.trim().parse().ok()?,
            device: device.trim().parse().ok()?,
            name: name.to_owned(),
            playback,
            capture,
        })
    }
}

/// CoreAudio through cpal, as the issue asks. UNTESTED HERE: cpal cannot be built on the Linux
/// development machine, so this stub only offers the built-in devices under the platform name
/// "coreaudio"; a macOS build should replace it with a cpal enumeration (run in
/// `spawn_blocking`, since cpal's calls block).
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::collections::HashMap;
    use std::io::Write as _;

    use super::alsa::{PcmHint, parse_proc_asound_pcm};
    use super::pulse::{
        Details, ShortEntry, listing, parse_defaults, parse_details, parse_sample_spec, parse_short_list,
    };
    use super::{CARD_CHANNEL_MAP, DeviceEntry, DeviceListing, alsa, fallback_listing, input_note};

    // Captured from PulseAudio 16.1 on Debian 12 with two 8-channel null sinks (card_out,
    // card_in), `module-remap-source source_name=card_mic master=card_in.monitor channels=2
    // master_channel_map=aux0,aux1 channel_map=left,right`, and two 8-channel null sources:
    // `pro_in` with `channel_map=aux0,…,aux7` (a pro card's map) and `card_71` in partyline's order.
    const SHORT_SOURCES: &str = "\
0\tcard_out.monitor\tmodule-null-sink.c\ts16le 8ch 48000Hz\tIDLE
1\tcard_in.monitor\tmodule-null-sink.c\ts16le 8ch 48000Hz\tRUNNING
2\tcard_mic\tmodule-remap-source.c\ts16le 2ch 48000Hz\tIDLE
3\tpro_in\tmodule-null-source.c\ts16le 8ch 48000Hz\tIDLE
4\tcard_71\tmodule-null-source.c\ts16le 8ch 48000Hz\tIDLE
";
    const SHORT_SINKS: &str = "\
0\tcard_out\tmodule-null-sink.c\ts16le 8ch 48000Hz\tIDLE
1\tcard_in\tmodule-null-sink.c\ts16le 8ch 48000Hz\tIDLE
";
    const INFO: &str = "\
Server String: unix:/tmp/tmp.QrSL31VkvT/native
Library Protocol Version: 35
Server Protocol Version: 35
Is Local: yes
Client Index: 1
Tile Size: 65472
User Name: root
Host Name: vm
Server Name: pulseaudio
Server Version: 16.1
Default Sample Specification: s16le 2ch 44100Hz
Default Channel Map: front-left,front-right
Default Sink: card_out
Default Source: card_mic
Cookie: ed71:0840
";
    // The same server's `pactl list sources`, card_out.monitor's block and the Volume, Latency
    // and Flags lines left out.
    const LONG_SOURCES: &str = "\
Source #1
\tState: RUNNING
\tName: card_in.monitor
\tDescription: Monitor of Null Output
\tDriver: module-null-sink.c
\tSample Specification: s16le 8ch 48000Hz
\tChannel Map: front-left,front-left-of-center,front-center,front-right,front-right-of-center,rear-center,aux0,aux1
\tOwner Module: 2
\tMute: no
\tMonitor of Sink: card_in
\tProperties:
\t\tdevice.description = \"Monitor of Null Output\"
\t\tdevice.class = \"monitor\"
\t\tdevice.icon_name = \"audio-input-microphone\"
\tFormats:
\t\tpcm

Source #2
\tState: IDLE
\tName: card_mic
\tDescription: Remapped Monitor of Null Output
\tDriver: module-remap-source.c
\tSample Specification: s16le 2ch 48000Hz
\tChannel Map: front-left,front-right
\tOwner Module: 3
\tMute: no
\tMonitor of Sink: n/a
\tProperties:
\t\tdevice.master_device = \"card_in.monitor\"
\t\tdevice.class = \"filter\"
\t\tdevice.description = \"Remapped Monitor of Null Output\"
\t\tdevice.icon_name = \"audio-input-microphone\"
\tFormats:
\t\tpcm

Source #3
\tState: IDLE
\tName: pro_in
\tDescription: Null Input
\tDriver: module-null-source.c
\tSample Specification: s16le 8ch 48000Hz
\tChannel Map: aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7
\tOwner Module: 4
\tMute: no
\tMonitor of Sink: n/a
\tProperties:
\t\tdevice.description = \"Null Input\"
\t\tdevice.class = \"abstract\"
\t\tdevice.icon_name = \"audio-input-microphone\"
\tFormats:
\t\tpcm

Source #4
\tState: IDLE
\tName: card_71
\tDescription: Null Input
\tDriver: module-null-source.c
\tSample Specification: s16le 8ch 48000Hz
\tChannel Map: front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right
\tOwner Module: 5
\tMute: no
\tMonitor of Sink: n/a
\tProperties:
\t\tdevice.description = \"Null Input\"
\t\tdevice.class = \"abstract\"
\t\tdevice.icon_name = \"audio-input-microphone\"
\tFormats:
\t\tpcm
";
    const AUX_MAP: &str = "aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7";
    // The kernel's format (sound/core/pcm.c), as on a typical HDA machine; this one has none.
    const PROC_ASOUND_PCM: &str = "\
00-00: ALC892 Analog : ALC892 Analog : playback 1 : capture 1
00-01: ALC892 Digital : ALC892 Digital : playback 1
00-02: ALC892 Alt Analog : ALC892 Alt Analog : capture 2
01-03: HDMI 0 : HDMI 0 : playback 1
";

    fn entry(identifier: &str, description: &str, channels: u32, is_default: bool) -> DeviceEntry {
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

    /// A PulseAudio input with its channel map, and the note that map calls for.
    fn input(identifier: &str, description: &str, channels: u32, is_default: bool, map: &str) -> DeviceEntry {
        DeviceEntry {
            channel_map: Some(map.to_owned()),
            note: input_note(map),
            ..entry(identifier, description, channels, is_default)
        }
    }

    fn short(name: &str, channels: u32, rate: u32) -> ShortEntry {
        ShortEntry { name: name.to_owned(), spec: Some((channels, rate)) }
    }

    #[test]
    fn short_sources_keep_every_row_including_monitors() {
        assert_eq!(
            parse_short_list(SHORT_SOURCES),
            [
                short("card_out.monitor", 8, 48_000),
                short("card_in.monitor", 8, 48_000),
                short("card_mic", 2, 48_000),
                short("pro_in", 8, 48_000),
                short("card_71", 8, 48_000),
            ]
        );
    }

    #[test]
    fn short_sinks() {
        assert_eq!(parse_short_list(SHORT_SINKS), [short("card_out", 8, 48_000), short("card_in", 8, 48_000)]);
    }

    #[test]
    fn short_list_skips_blank_and_broken_rows_and_tolerates_a_bad_spec() {
        let text = "\n0\n1\tcard\tmodule-null-sink.c\tweird\tIDLE\n";
        assert_eq!(parse_short_list(text), [ShortEntry { name: "card".to_owned(), spec: None }]);
        assert_eq!(parse_short_list(""), []);
    }

    #[test]
    fn sample_specs() {
        assert_eq!(parse_sample_spec("s16le 2ch 44100Hz"), Some((2, 44_100)));
        assert_eq!(parse_sample_spec("float32le 8ch 48000Hz"), Some((8, 48_000)));
        assert_eq!(parse_sample_spec("s24-32le 18ch 96000Hz"), Some((18, 96_000)));
        assert_eq!(parse_sample_spec("s16le 2ch"), None);
        assert_eq!(parse_sample_spec(""), None);
    }

    #[test]
    fn defaults_from_info() {
        assert_eq!(parse_defaults(INFO), (Some("card_out".to_owned()), Some("card_mic".to_owned())));
        // A server without devices, as captured before any module was loaded.
        let empty = "Default Sink: (null)\nDefault Source: (null)\n";
        assert_eq!(parse_defaults(empty), (None, None));
    }

    #[test]
    fn details_from_the_long_listing() {
        let details = |description: &str, map: &str| Details {
            description: Some(description.to_owned()),
            channel_map: Some(map.to_owned()),
        };
        assert_eq!(
            parse_details(LONG_SOURCES),
            HashMap::from([
                (
                    "card_in.monitor".to_owned(),
                    details(
                        "Monitor of Null Output",
                        "front-left,front-left-of-center,front-center,front-right,front-right-of-center,rear-center,aux0,aux1"
                    )
                ),
                ("card_mic".to_owned(), details("Remapped Monitor of Null Output", "front-left,front-right")),
                ("pro_in".to_owned(), details("Null Input", AUX_MAP)),
                ("card_71".to_owned(), details("Null Input", CARD_CHANNEL_MAP)),
            ])
        );
    }

    #[test]
    fn details_belong_to_their_own_block_and_may_be_missing() {
        // A block without a description or map (another server's output), and fields of a block
        // whose Name line is missing, never attributed to the previous device.
        let text = "Sink #0\n\tName: bare\n\tDriver: x\n\nSink #1\n\tDescription: Orphan\n\tChannel Map: mono\n";
        assert_eq!(parse_details(text), HashMap::from([("bare".to_owned(), Details::default())]));
        assert_eq!(parse_details(""), HashMap::new());
    }

    #[test]
    fn only_inputs_that_renumber_channels_get_a_note() {
        assert_eq!(input_note(CARD_CHANNEL_MAP), None);
        // ALSA's 7.1 order: the same names, another order.
        let alsa_71 = "front-left,front-right,rear-left,rear-right,front-center,lfe,side-left,side-right";
        for map in [AUX_MAP, alsa_71, "front-right,front-left", "aux0,aux1"] {
            let note = input_note(map).expect("a note");
            assert!(note.contains(&format!("({map})")) && note.contains("remap source"), "{note}");
        }
        // The card's first channels in its order, or mono: every channel keeps its number.
        for map in ["front-left,front-right", "front-left,front-right,front-center,lfe", "mono"] {
            assert_eq!(input_note(map), None, "{map}");
        }
    }

    #[test]
    fn proc_asound_pcm() {
        let hint = |card, device, name: &str, playback, capture| PcmHint {
            card,
            device,
            name: name.to_owned(),
            playback,
            capture,
        };
        assert_eq!(
            parse_proc_asound_pcm(PROC_ASOUND_PCM),
            [
                hint(0, 0, "ALC892 Analog", true, true),
                hint(0, 1, "ALC892 Digital", true, false),
                hint(0, 2, "ALC892 Alt Analog", false, true),
                hint(1, 3, "HDMI 0", true, false),
            ]
        );
        assert_eq!(parse_proc_asound_pcm("garbage\n\n"), []);
    }

    #[test]
    fn pulse_listing_drops_monitors_marks_defaults_and_notes_foreign_input_maps() {
        let sink =
            |map: &str| Details { description: Some("Null Output".to_owned()), channel_map: Some(map.to_owned()) };
        let sink_details =
            HashMap::from([("card_out".to_owned(), sink(CARD_CHANNEL_MAP)), ("card_in".to_owned(), sink(AUX_MAP))]);
        let source_details = parse_details(LONG_SOURCES);
        let devices = listing(SHORT_SOURCES, SHORT_SINKS, INFO, &source_details, &sink_details);
        assert_eq!(
            devices,
            DeviceListing {
                inputs: vec![
                    input("card_mic", "Input: Remapped Monitor of Null Output", 2, true, "front-left,front-right"),
                    // Both null sources are "Null Input": the name tells them apart.
                    input("pro_in", "Input: Null Input (pro_in)", 8, false, AUX_MAP),
                    input("card_71", "Input: Null Input (card_71)", 8, false, CARD_CHANNEL_MAP),
                ],
                outputs: vec![
                    // Both null sinks are "Null Output": the name tells them apart. Outputs have
                    // their map and never a note: playback keeps every channel whatever the map.
                    DeviceEntry {
                        channel_map: Some(CARD_CHANNEL_MAP.to_owned()),
                        ..entry("card_out", "Output: Null Output (card_out)", 8, true)
                    },
                    DeviceEntry {
                        channel_map: Some(AUX_MAP.to_owned()),
                        ..entry("card_in", "Output: Null Output (card_in)", 8, false)
                    },
                ],
                platform: "pulseaudio".to_owned(),
            }
        );
    }

    #[test]
    fn pulse_listing_without_descriptions_uses_the_names() {
        let none = HashMap::new();
        let listing = listing(SHORT_SOURCES, SHORT_SINKS, "", &none, &none);
        // No long listing, no channel map: no note either.
        assert_eq!(
            listing.inputs,
            [
                entry("card_mic", "Input: card_mic", 2, false),
                entry("pro_in", "Input: pro_in", 8, false),
                entry("card_71", "Input: card_71", 8, false)
            ]
        );
        assert_eq!(
            listing.outputs,
            [entry("card_out", "Output: card_out", 8, false), entry("card_in", "Output: card_in", 8, false)]
        );
    }

    #[tokio::test]
    async fn alsa_listing_from_a_pcm_file() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(PROC_ASOUND_PCM.as_bytes()).expect("write");
        let listing = alsa::list(file.path()).await.expect("devices");
        assert_eq!(
            listing,
            DeviceListing {
                inputs: vec![
                    entry("hw:0,0", "Input: ALC892 Analog", 2, true),
                    entry("hw:0,2", "Input: ALC892 Alt Analog", 2, false),
                ],
                outputs: vec![
                    entry("hw:0,0", "Output: ALC892 Analog", 2, true),
                    entry("hw:0,1", "Output: ALC892 Digital", 2, false),
                    entry("hw:1,3", "Output: HDMI 0", 2, false),
                ],
                platform: "alsa".to_owned(),
            }
        );
    }

    #[tokio::test]
    async fn alsa_listing_fails_without_devices() {
        let empty = tempfile::NamedTempFile::new().expect("temp file");
        let err = alsa::list(empty.path()).await.expect_err("no device");
        assert!(err.to_string().ends_with("lists no PCM device"), "{err}");
        let dir = tempfile::tempdir().expect("temp dir");
        let err = alsa::list(&dir.path().join("missing")).await.expect_err("no file");
        assert!(err.to_string().starts_with("cannot read"), "{err}");
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
