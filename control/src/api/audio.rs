//! `/api/admin/config/audio`, `/api/admin/audio/*`, `/api/admin/devices/list`: the sound card
//! and the encoding defaults.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use partyline_shared::aes67::{Aes67Stream, RATE};
use partyline_shared::card::AES67_DEVICE;
use partyline_shared::config::{
    Aes67Config, AudioConfig, Bitrate, ChannelNames, DeviceSampleRate, DeviceSelection, JitterBufferMs, SampleRate,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::extract::present;
use super::{ApiError, ApiJson, AppState, ErrorBody};
use crate::config;
use crate::devices::{self, DeviceEntry, DeviceListing};

/// The encoding settings of `audio:`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AudioView {
    #[schema(example = 48000)]
    pub sample_rate: u32,
    #[schema(example = 64)]
    pub default_bitrate: u32,
    #[schema(example = 40)]
    pub jitter_buffer_ms: u32,
}

impl AudioView {
    fn of(audio: &AudioConfig) -> Self {
        Self {
            sample_rate: audio.sample_rate.get(),
            default_bitrate: audio.default_bitrate.get(),
            jitter_buffer_ms: audio.jitter_buffer_ms.get(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AudioChanged {
    pub message: String,
    pub audio: AudioView,
}

/// Changes to the encoding settings; absent fields keep their value.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateAudio {
    /// Hz: 8000, 12000, 16000, 24000 or 48000.
    #[schema(value_type = Option<u32>)]
    #[serde(default)]
    pub sample_rate: Option<SampleRate>,
    /// kbit/s, 6..=510.
    #[schema(value_type = Option<u32>, minimum = 6, maximum = 510)]
    #[serde(default)]
    pub default_bitrate: Option<Bitrate>,
    /// ms, 20..=1000; the rooms prebuffer this much audio (in 20 ms packets, at least two).
    #[schema(value_type = Option<u32>, minimum = 20, maximum = 1000)]
    #[serde(default)]
    pub jitter_buffer_ms: Option<JitterBufferMs>,
}

/// Change the encoding settings.
#[utoipa::path(put, path = "/api/admin/config/audio", tag = "audio", security(("admin_token" = [])), request_body = UpdateAudio,
    responses((status = 200, body = AudioChanged), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn set_audio(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<UpdateAudio>,
) -> Result<Json<AudioChanged>, ApiError> {
    let audio = state
        .config
        .update("update audio settings".into(), move |c| {
            config::set_audio(c, body.sample_rate, body.default_bitrate, body.jitter_buffer_ms);
            Ok(AudioView::of(&c.audio))
        })
        .await?;
    Ok(Json(AudioChanged { message: "Audio settings updated".into(), audio }))
}

/// The selected sound card, with what the sound server says of it now.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceView {
    /// `null`: the sound server's default input.
    pub input_device_id: Option<String>,
    /// `null`: the sound server's default output.
    pub output_device_id: Option<String>,
    #[schema(example = 48000)]
    pub sample_rate: u32,
    /// Channels of the selected input (of the default input when `inputDeviceId` is null), as
    /// the sound server listed it at most 10 s ago; 0 when it does not list it.
    pub input_channels: u32,
    pub output_channels: u32,
    /// Its name as the sound server gives it; `null` when the sound server does not list it.
    pub input_device_name: Option<String>,
    pub output_device_name: Option<String>,
}

impl DeviceView {
    /// The selection, with channel counts and names from a recent device listing.
    async fn of(device: &DeviceSelection) -> Self {
        let listing = devices::recent_devices().await;
        let (input_channels, input_device_name) = described(&listing.inputs, device.input_device_id.as_deref());
        let (output_channels, output_device_name) = described(&listing.outputs, device.output_device_id.as_deref());
        Self {
            input_device_id: device.input_device_id.clone(),
            output_device_id: device.output_device_id.clone(),
            sample_rate: device.sample_rate.get(),
            input_channels,
            output_channels,
            input_device_name,
            output_device_name,
        }
    }
}

/// Channels and name of the device `id` (`None`: the default one) among `entries`.
fn described(entries: &[DeviceEntry], id: Option<&str>) -> (u32, Option<String>) {
    let found = entries.iter().find(|entry| match id {
        Some(id) => entry.identifier == id,
        None => entry.is_default,
    });
    found.map_or((0, None), |entry| (entry.channels, Some(entry.name().to_owned())))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceResponse {
    pub device: DeviceView,
}

/// A new sound card selection; absent fields keep their value, `null` ids select the default.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectDevice {
    /// An identifier from `/admin/devices/list`.
    #[schema(value_type = Option<String>)]
    #[serde(default, deserialize_with = "present")]
    pub input_device_id: Option<Option<String>>,
    #[schema(value_type = Option<String>)]
    #[serde(default, deserialize_with = "present")]
    pub output_device_id: Option<Option<String>>,
    /// Hz, 8000..=192000.
    #[schema(value_type = Option<u32>)]
    #[serde(default)]
    pub sample_rate: Option<DeviceSampleRate>,
    /// The original system's buffer size: accepted and ignored (bridged sizes its own buffers).
    #[schema(value_type = Option<u32>, deprecated)]
    #[serde(default)]
    pub buffer_size: Option<serde::de::IgnoredAny>,
}

/// The selected sound card.
#[utoipa::path(get, path = "/api/admin/audio/device", tag = "audio", security(("admin_token" = [])),
    responses((status = 200, body = DeviceResponse), (status = 401, body = ErrorBody)))]
pub async fn get_device(State(state): State<AppState>) -> Json<DeviceResponse> {
    let device = state.config.current().audio.device.clone();
    Json(DeviceResponse { device: DeviceView::of(&device).await })
}

/// Select the sound card (the bridge rebuilds its pipeline).
#[utoipa::path(post, path = "/api/admin/audio/device", tag = "audio", security(("admin_token" = [])), request_body = SelectDevice,
    responses((status = 200, body = DeviceResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 503, description = "Server audio users exist and partyline-bridged is not running", body = ErrorBody)))]
pub async fn set_device(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SelectDevice>,
) -> Result<Json<DeviceResponse>, ApiError> {
    // With server audio users the card is in use: bridged must be there to switch it.
    if !state.config.current().server_audio_users.is_empty() {
        state.require_bridge()?;
    }
    if body.buffer_size.is_some() {
        tracing::info!("bufferSize of the device selection ignored: partyline-bridged sizes its own buffers");
    }
    let input_selected = body.input_device_id.is_some();
    let device = state
        .config
        .update("select audio device".into(), move |c| {
            config::set_device(c, body.input_device_id, body.output_device_id, body.sample_rate)
        })
        .await?;
    if input_selected {
        tokio::spawn(warn_of_input_note(device.input_device_id.clone()));
    }
    Ok(Json(DeviceResponse { device: DeviceView::of(&device).await }))
}

/// Logs a warning when the newly selected input (`None`: the sound server's default input) has
/// a [`DeviceEntry::note`], e.g. a channel map that loses partyline's channel numbering (a debug
/// line otherwise). Runs after the response: the listing may take up to its timeout, and the
/// selection stands anyway.
async fn warn_of_input_note(input_device_id: Option<String>) {
    let listing = devices::list_devices().await;
    let selected = listing.inputs.iter().find(|entry| match &input_device_id {
        Some(id) => entry.identifier == *id,
        None => entry.is_default,
    });
    let Some(entry) = selected else {
        tracing::debug!(device = input_device_id, "the selected input device is not in the device listing");
        return;
    };
    let (device, channel_map) = (&entry.identifier, entry.channel_map.as_deref());
    match &entry.note {
        Some(note) => tracing::warn!(device, channel_map, note, "selected input device {device}: {note}"),
        None => tracing::debug!(device, channel_map, "selected input device {device}: nothing to note"),
    }
}

/// The channel names: always all eight inputs and outputs, keyed `"0"`..`"7"`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelNamesResponse {
    pub channel_names: ChannelNamesView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChannelNamesView {
    pub inputs: BTreeMap<String, String>,
    pub outputs: BTreeMap<String, String>,
}

impl ChannelNamesView {
    fn of(names: &ChannelNames) -> Self {
        Self { inputs: names.inputs.to_map(), outputs: names.outputs.to_map() }
    }
}

/// New names for some channels (keys `"0"`..`"7"`, at most 64 characters, trimmed).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetChannelNames {
    #[serde(default)]
    pub inputs: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub outputs: Option<BTreeMap<String, String>>,
}

/// The names of the card's channels.
#[utoipa::path(get, path = "/api/admin/audio/channels/names", tag = "audio", security(("admin_token" = [])),
    responses((status = 200, body = ChannelNamesResponse), (status = 401, body = ErrorBody)))]
pub async fn get_channel_names(State(state): State<AppState>) -> Json<ChannelNamesResponse> {
    Json(ChannelNamesResponse { channel_names: ChannelNamesView::of(&state.config.current().audio.channel_names) })
}

/// Name some of the card's channels; the others keep their names.
#[utoipa::path(put, path = "/api/admin/audio/channels/names", tag = "audio", security(("admin_token" = [])),
    request_body = SetChannelNames,
    responses((status = 200, body = ChannelNamesResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn set_channel_names(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SetChannelNames>,
) -> Result<Json<ChannelNamesResponse>, ApiError> {
    let names = state
        .config
        .update("rename audio channels".into(), move |c| {
            config::set_channel_names(c, body.inputs.as_ref(), body.outputs.as_ref())
        })
        .await?;
    Ok(Json(ChannelNamesResponse { channel_names: ChannelNamesView::of(&names) }))
}

/// A device as the original system's admin pages read it (PortAudio's device fields), with
/// partyline's own fields beside them. A PulseAudio source or sink is one direction: its
/// `maxInputChannels` or its `maxOutputChannels` is 0.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AudioDevice {
    /// The identifier to select it with (`inputDeviceId`/`outputDeviceId`).
    pub id: String,
    /// Its name, without the direction.
    pub name: String,
    pub max_input_channels: u32,
    pub max_output_channels: u32,
    #[schema(example = 48000)]
    pub default_sample_rate: u32,
    /// The sound system it belongs to: `PulseAudio`, `PipeWire`, `ALSA` or `default`.
    #[serde(rename = "hostAPIName")]
    #[schema(example = "PulseAudio")]
    pub host_api_name: &'static str,
    pub is_default: DefaultFor,
    /// `input` or `output`.
    pub kind: &'static str,
    /// As in `/admin/devices/list`.
    pub identifier: String,
    pub description: String,
    pub channels: u32,
    pub sample_rate: u32,
    pub channel_map: Option<String>,
    pub note: Option<String>,
}

/// Which direction a device is the sound server's default for.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct DefaultFor {
    pub input: bool,
    pub output: bool,
}

impl AudioDevice {
    fn of(entry: DeviceEntry, kind: &'static str, host_api_name: &'static str) -> Self {
        let input = kind == "input";
        let channels = |wanted: bool| if wanted { entry.channels } else { 0 };
        Self {
            id: entry.identifier.clone(),
            name: entry.name().to_owned(),
            max_input_channels: channels(input),
            max_output_channels: channels(!input),
            default_sample_rate: entry.sample_rate,
            host_api_name,
            is_default: DefaultFor { input: input && entry.is_default, output: !input && entry.is_default },
            kind,
            identifier: entry.identifier,
            description: entry.description,
            channels: entry.channels,
            sample_rate: entry.sample_rate,
            channel_map: entry.channel_map,
            note: entry.note,
        }
    }
}

/// The name the original system's pages show for a listing's platform.
fn host_api_name(platform: &str) -> &'static str {
    match platform {
        "pulseaudio" => "PulseAudio",
        "pipewire" => "PipeWire",
        "alsa" => "ALSA",
        _ => "default",
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevicesResponse {
    /// Inputs first, then outputs.
    pub devices: Vec<AudioDevice>,
    /// The sound server's default input, or `null`.
    pub default_input: Option<AudioDevice>,
    pub default_output: Option<AudioDevice>,
}

/// Every input and output device, with the defaults, in the original system's shape.
#[utoipa::path(get, path = "/api/admin/audio/devices", tag = "audio", security(("admin_token" = [])),
    responses((status = 200, body = DevicesResponse), (status = 401, body = ErrorBody)))]
pub async fn devices(State(state): State<AppState>) -> Json<DevicesResponse> {
    let mut listing = devices::list_devices().await;
    add_aes67(&mut listing, &state.config.current().audio.aes67);
    let api = host_api_name(&listing.platform);
    let devices: Vec<AudioDevice> = (listing.inputs.into_iter().map(|d| AudioDevice::of(d, "input", api)))
        .chain(listing.outputs.into_iter().map(|d| AudioDevice::of(d, "output", api)))
        .collect();
    let default_input = devices.iter().find(|d| d.is_default.input).cloned();
    let default_output = devices.iter().find(|d| d.is_default.output).cloned();
    Json(DevicesResponse { devices, default_input, default_output })
}

/// Input and output devices of the sound server (identifiers as `audio.device` uses them).
#[utoipa::path(get, path = "/api/admin/devices/list", tag = "audio", security(("admin_token" = [])),
    responses((status = 200, body = DeviceListing), (status = 401, body = ErrorBody)))]
pub async fn devices_list(State(state): State<AppState>) -> Json<DeviceListing> {
    let mut listing = devices::list_devices().await;
    add_aes67(&mut listing, &state.config.current().audio.aes67);
    Json(listing)
}

/// With a media network configured (`audio.aes67.interface`), AES67 is one more device each
/// way: the received stream's channels in, partyline's stream out.
fn add_aes67(listing: &mut DeviceListing, aes67: &Aes67Config) {
    let Some(interface) = &aes67.interface else { return };
    let inputs = aes67.receive_sdp.as_deref().and_then(|sdp| Aes67Stream::parse(sdp).ok());
    let entry = |direction: &str, channels: u32, what: String| DeviceEntry {
        identifier: AES67_DEVICE.to_owned(),
        description: format!("{direction}: AES67 on {interface} ({what})"),
        channels,
        sample_rate: RATE,
        is_default: false,
        channel_map: None,
        note: None,
    };
    let received = inputs.map_or(("no stream chosen".to_owned(), 0), |s| (s.name, u32::from(s.channels)));
    listing.inputs.push(entry("Input", received.1, received.0));
    listing.outputs.push(entry("Output", u32::from(aes67.send.channels), aes67.send.name.clone()));
}
