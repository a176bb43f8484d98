//! The sound server (PulseAudio, or PipeWire's PulseAudio server), asked through
//! `pactl --format=json` (pactl 16 and later; Debian 12 has 16.1).
//!
//! Nothing control runs starts a sound server: without one, libpulse may "autospawn" a PulseAudio
//! for the calling user (a non-root user whose client config allows it, as
//! `/run/pulseaudio-enable-autospawn` does on a machine without systemd; root never does), which
//! would then hold the card, and its runtime directory would outlive it. Every pactl run, and
//! libpulse inside control (alsa-lib's PulseAudio hook, set up by `main`), reads a client config
//! of control's own ([`client_config`]) that says `autospawn = no`: the supported way,
//! `PULSE_CLIENTCONFIG` (pulse-client.conf(5)), since pactl has no option for it.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use tokio::process::Command;

use super::{DeviceEntry, DeviceListing, UNKNOWN_CHANNELS, UNKNOWN_SAMPLE_RATE, input_note};

/// What control keeps of `pactl --format=json info`; a missing field is empty.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(super) struct ServerInfo {
    pub server_name: String,
    /// Absent or a name that is no device (PipeWire without a session manager says
    /// `@DEFAULT_SINK@`): no device is the default.
    pub default_sink_name: Option<String>,
    pub default_source_name: Option<String>,
}

/// What control keeps of one source or sink of `pactl --format=json list sources|sinks`; a
/// missing field is empty.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(super) struct Device {
    pub name: String,
    pub description: Option<String>,
    /// `s16le 8ch 48000Hz`.
    pub sample_specification: String,
    pub channel_map: Option<String>,
    /// For a source: the sink it is the monitor of (pactl's JSON names "Monitor of Sink" so),
    /// empty for a real source; for a sink: its monitor source.
    pub monitor_source: Option<String>,
    pub properties: HashMap<String, serde_json::Value>,
}

impl Device {
    /// A source that is the loopback of a sink, not an input of the card.
    fn is_monitor(&self) -> bool {
        let of_sink = self.monitor_source.as_deref().is_some_and(|sink| !sink.is_empty() && sink != "n/a");
        of_sink || self.properties.get("device.class").and_then(serde_json::Value::as_str) == Some("monitor")
    }
}

/// Queries the sound server. Callers bound this with a timeout; dropping the future kills
/// every `pactl` still running (`kill_on_drop`).
pub(super) async fn list() -> anyhow::Result<DeviceListing> {
    let (info, sources, sinks) =
        tokio::try_join!(pactl(&["info"]), pactl(&["list", "sources"]), pactl(&["list", "sinks"]))?;
    let info: ServerInfo = serde_json::from_str(&info).context("pactl info printed unexpected JSON")?;
    let sources: Vec<Device> = serde_json::from_str(&sources).context("pactl list sources printed unexpected JSON")?;
    let sinks: Vec<Device> = serde_json::from_str(&sinks).context("pactl list sinks printed unexpected JSON")?;
    Ok(listing(&info, sources, &sinks))
}

/// The listing of a server that said `info`, `sources` and `sinks`. Monitor sources are dropped.
pub(super) fn listing(info: &ServerInfo, mut sources: Vec<Device>, sinks: &[Device]) -> DeviceListing {
    sources.retain(|source| !source.is_monitor());
    // "PulseAudio (on PipeWire 0.3.65)": PipeWire's own PulseAudio server.
    let platform = if info.server_name.contains("PipeWire") { "pipewire" } else { "pulseaudio" };
    DeviceListing {
        inputs: entries(&sources, "Input", info.default_source_name.as_deref()),
        outputs: entries(sinks, "Output", info.default_sink_name.as_deref()),
        platform: platform.to_owned(),
    }
}

/// Runs `pactl --format=json ARGS` and returns its stdout, or an error with its stderr.
async fn pactl(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("pactl")
        .arg("--format=json")
        .args(args)
        .env(CLIENT_CONFIG_VAR, client_config()?)
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

/// The variable libpulse reads its client config's path from.
pub const CLIENT_CONFIG_VAR: &str = "PULSE_CLIENTCONFIG";

/// What every pactl run of control reads instead of the machine's and the user's client config.
/// Only the autospawn setting differs from the defaults; the server is still found the usual way
/// (`PULSE_SERVER`, then the user's and the system's sockets).
const CLIENT_CONFIG: &str = "# partyline-control's pactl: never start a sound server.\nautospawn = no\n";

/// A path to [`CLIENT_CONFIG`] that pactl can open: an unlinked temporary file that this process
/// keeps open, reached through `/proc/PID/fd/N` (pactl runs as the same user). Nothing is left
/// on disk whichever way control ends, and no temp cleaner can take it away.
pub fn client_config() -> anyhow::Result<PathBuf> {
    static FILE: OnceLock<Result<std::fs::File, String>> = OnceLock::new();
    let file = FILE.get_or_init(|| {
        let mut file = tempfile::tempfile().map_err(|e| format!("cannot create pactl's client config: {e}"))?;
        file.write_all(CLIENT_CONFIG.as_bytes()).map_err(|e| format!("cannot write pactl's client config: {e}"))?;
        Ok(file)
    });
    let file = file.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd())))
}

fn entries(devices: &[Device], direction: &str, default: Option<&str>) -> Vec<DeviceEntry> {
    let labels: Vec<&str> = devices.iter().map(|d| d.description.as_deref().unwrap_or(&d.name)).collect();
    devices
        .iter()
        .zip(&labels)
        .map(|(device, label)| {
            let (channels, sample_rate) =
                parse_sample_spec(&device.sample_specification).unwrap_or((UNKNOWN_CHANNELS, UNKNOWN_SAMPLE_RATE));
            let channel_map = device.channel_map.clone().filter(|map| !map.is_empty());
            let note = channel_map.as_deref().filter(|_| direction == "Input").and_then(input_note);
            DeviceEntry {
                identifier: device.name.clone(),
                description: describe(direction, label, &device.name, &labels),
                channels,
                sample_rate,
                is_default: default == Some(device.name.as_str()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::tests::entry;
    use partyline_shared::card::CARD_CHANNEL_MAP;

    const AUX_MAP: &str = "aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7";

    // Captured from PulseAudio 16.1 on Debian 12 (volume, ports and formats left out) with two
    // 8-channel null sinks, card_out and card_in (`channel_map=aux0,…,aux7`), `module-remap-source
    // source_name=card_mic master=card_in.monitor channels=2 master_channel_map=aux0,aux1
    // channel_map=left,right`, and an 8-channel null source `pro_in` with the aux map.
    const PULSE_INFO: &str = r#"{"server_string":"unix:/tmp/patest/native","library_protocol_version":35,
        "server_protocol_version":35,"is_local":"yes","client_index":4,"tile_size":"65472","user_name":"root",
        "host_name":"vm","server_name":"pulseaudio","server_version":"16.1",
        "default_sample_specification":"s16le 2ch 44100Hz","default_channel_map":"front-left,front-right",
        "default_sink_name":"card_out","default_source_name":"card_mic","cookie":"518f:a34d"}"#;
    const PULSE_SOURCES: &str = r#"[
        {"index":0,"state":"IDLE","name":"card_out.monitor","description":"Monitor of Null Output",
         "driver":"module-null-sink.c","sample_specification":"s16le 8ch 48000Hz",
         "channel_map":"front-left,front-left-of-center,front-center,front-right,front-right-of-center,rear-center,aux0,aux1",
         "owner_module":1,"mute":false,"balance":0.0,"monitor_source":"card_out",
         "latency":{"actual":0.0,"configured":2000000.0},"flags":["DECIBEL_VOLUME","LATENCY"],
         "properties":{"device.description":"Monitor of Null Output","device.class":"monitor",
         "device.icon_name":"audio-input-microphone"},"active_port":null},
        {"index":1,"state":"RUNNING","name":"card_in.monitor","description":"Monitor of Null Output",
         "driver":"module-null-sink.c","sample_specification":"s16le 8ch 48000Hz",
         "channel_map":"aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7","owner_module":2,"mute":false,
         "balance":0.0,"monitor_source":"card_in","latency":{"actual":0.0,"configured":2000000.0},
         "flags":["DECIBEL_VOLUME","LATENCY"],"properties":{"device.description":"Monitor of Null Output",
         "device.class":"monitor","device.icon_name":"audio-input-microphone"},"active_port":null},
        {"index":2,"state":"IDLE","name":"card_mic","description":"Remapped Monitor of Null Output",
         "driver":"module-remap-source.c","sample_specification":"s16le 2ch 48000Hz",
         "channel_map":"front-left,front-right","owner_module":3,"mute":false,"balance":0.0,
         "monitor_source":"","latency":{"actual":0.0,"configured":2000000.0},
         "flags":["DECIBEL_VOLUME","LATENCY"],"properties":{"device.master_device":"card_in.monitor",
         "device.class":"filter","device.description":"Remapped Monitor of Null Output",
         "device.icon_name":"audio-input-microphone"},"active_port":null},
        {"index":3,"state":"IDLE","name":"pro_in","description":"Null Input","driver":"module-null-source.c",
         "sample_specification":"s16le 8ch 48000Hz","channel_map":"aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7",
         "owner_module":4,"mute":false,"balance":0.0,"monitor_source":"",
         "latency":{"actual":8480.0,"configured":2000000.0},"flags":["DECIBEL_VOLUME","LATENCY"],
         "properties":{"device.description":"Null Input","device.class":"abstract",
         "device.icon_name":"audio-input-microphone"},"active_port":null}]"#;
    const PULSE_SINKS: &str = r#"[
        {"index":0,"state":"IDLE","name":"card_out","description":"Null Output","driver":"module-null-sink.c",
         "sample_specification":"s16le 8ch 48000Hz",
         "channel_map":"front-left,front-left-of-center,front-center,front-right,front-right-of-center,rear-center,aux0,aux1",
         "owner_module":1,"mute":false,"balance":0.0,"monitor_source":"card_out.monitor",
         "latency":{"actual":1972912.0,"configured":2000000.0},"flags":["DECIBEL_VOLUME","LATENCY","SET_FORMATS"],
         "properties":{"device.description":"Null Output","device.class":"abstract","device.icon_name":"audio-card"},
         "active_port":null},
        {"index":1,"state":"IDLE","name":"card_in","description":"Null Output","driver":"module-null-sink.c",
         "sample_specification":"s16le 8ch 48000Hz","channel_map":"aux0,aux1,aux2,aux3,aux4,aux5,aux6,aux7",
         "owner_module":2,"mute":false,"balance":0.0,"monitor_source":"card_in.monitor",
         "latency":{"actual":1977394.0,"configured":2000000.0},"flags":["DECIBEL_VOLUME","LATENCY","SET_FORMATS"],
         "properties":{"device.description":"Null Output","device.class":"abstract","device.icon_name":"audio-card"},
         "active_port":null}]"#;

    // Captured from PipeWire 0.3.65 (pipewire-pulse, WirePlumber 0.4.13) on Debian 12, trimmed
    // the same way: a null sink card_out (8 channels in the card's order) and its monitor, with
    // no real source, so that the default source is that monitor (WirePlumber's choice then).
    const PIPEWIRE_INFO: &str = r#"{"server_string":"/tmp/pwtest/pulse/native","library_protocol_version":35,
        "server_protocol_version":35,"is_local":"yes","client_index":105,"tile_size":"65472",
        "user_name":"root","host_name":"vm","server_name":"PulseAudio (on PipeWire 0.3.65)",
        "server_version":"15.0.0","default_sample_specification":"float32le 2ch 48000Hz",
        "default_channel_map":"front-left,front-right","default_sink_name":"card_out",
        "default_source_name":"card_out.monitor","cookie":"54c6:3c2e"}"#;
    const PIPEWIRE_SOURCES: &str = r#"[
        {"index":38,"state":"SUSPENDED","name":"card_out.monitor","description":"Monitor of card_out Audio/Sink sink",
         "driver":"PipeWire","sample_specification":"float32le 8ch 48000Hz",
         "channel_map":"front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right",
         "owner_module":536870913,"mute":false,"balance":0.0,"monitor_source":"card_out",
         "latency":{"actual":0.0,"configured":0.0},"flags":["DECIBEL_VOLUME","LATENCY"],
         "properties":{"node.name":"card_out","audio.channels":"8","media.class":"Audio/Sink",
         "device.class":"monitor"},"active_port":null}]"#;
    const PIPEWIRE_SINKS: &str = r#"[
        {"index":38,"state":"SUSPENDED","name":"card_out","description":"card_out Audio/Sink sink",
         "driver":"PipeWire","sample_specification":"float32le 8ch 48000Hz",
         "channel_map":"front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right",
         "owner_module":536870913,"mute":false,"balance":0.0,"monitor_source":"card_out.monitor",
         "latency":{"actual":0.0,"configured":0.0},"flags":["DECIBEL_VOLUME","LATENCY"],
         "properties":{"node.name":"card_out","audio.rate":"48000","audio.channels":"8",
         "media.class":"Audio/Sink","factory.name":"support.null-audio-sink"},"active_port":null}]"#;

    fn parse<T: serde::de::DeserializeOwned>(json: &str) -> T {
        serde_json::from_str(json).expect("pactl's JSON")
    }

    /// A device with its channel map, and the note that map calls for.
    fn mapped(identifier: &str, description: &str, channels: u32, is_default: bool, map: &str) -> DeviceEntry {
        let input = description.starts_with("Input");
        DeviceEntry {
            channel_map: Some(map.to_owned()),
            note: input.then(|| input_note(map)).flatten(),
            ..entry(identifier, description, channels, is_default)
        }
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
    fn pulseaudio_listing_drops_monitors_marks_defaults_and_notes_foreign_input_maps() {
        let pulse_71 =
            "front-left,front-left-of-center,front-center,front-right,front-right-of-center,rear-center,aux0,aux1";
        let devices = listing(&parse(PULSE_INFO), parse(PULSE_SOURCES), &parse::<Vec<Device>>(PULSE_SINKS));
        assert_eq!(
            devices,
            DeviceListing {
                inputs: vec![
                    mapped("card_mic", "Input: Remapped Monitor of Null Output", 2, true, "front-left,front-right"),
                    mapped("pro_in", "Input: Null Input", 8, false, AUX_MAP),
                ],
                // Both null sinks are "Null Output": the name tells them apart. Outputs have
                // their map and never a note: playback keeps every channel whatever the map.
                outputs: vec![
                    mapped("card_out", "Output: Null Output (card_out)", 8, true, pulse_71),
                    mapped("card_in", "Output: Null Output (card_in)", 8, false, AUX_MAP),
                ],
                platform: "pulseaudio".to_owned(),
            }
        );
        assert!(devices.inputs[1].note.as_deref().is_some_and(|note| note.contains("remap source")));
    }

    #[test]
    fn pipewire_listing_says_pipewire_and_drops_its_monitors() {
        let devices = listing(&parse(PIPEWIRE_INFO), parse(PIPEWIRE_SOURCES), &parse::<Vec<Device>>(PIPEWIRE_SINKS));
        assert_eq!(
            devices,
            DeviceListing {
                // The default source is a monitor: no input is the default.
                inputs: vec![],
                outputs: vec![mapped("card_out", "Output: card_out Audio/Sink sink", 8, true, CARD_CHANNEL_MAP)],
                platform: "pipewire".to_owned(),
            }
        );
    }

    #[test]
    fn missing_fields_fall_back_to_names_and_unknown_specs() {
        // A server that says little: no description, no map, an unreadable sample spec, and a
        // default that names no device (PipeWire without a session manager).
        let info: ServerInfo = parse(r#"{"server_name":"pulseaudio","default_sink_name":"@DEFAULT_SINK@"}"#);
        let sinks: Vec<Device> = parse(r#"[{"name":"bare","sample_specification":"weird"}]"#);
        let devices = listing(&info, vec![], &sinks);
        assert_eq!(devices.outputs, [entry("bare", "Output: bare", UNKNOWN_CHANNELS, false)]);
        assert_eq!(devices.outputs[0].sample_rate, UNKNOWN_SAMPLE_RATE);
    }

    #[test]
    fn the_client_config_forbids_autospawn_and_can_be_read_again_and_again() {
        let path = client_config().expect("client config");
        assert!(CLIENT_CONFIG.lines().any(|line| line.trim() == "autospawn = no"));
        // Every pactl opens it anew from the start.
        for _ in 0..2 {
            assert_eq!(std::fs::read_to_string(&path).expect("read"), CLIENT_CONFIG);
        }
        assert_eq!(client_config().expect("the same file"), path);
    }
}
