//! `audio:` the rooms' rate and encoding defaults, the sound card (`audio.device`) and the names
//! of its channels (`audio.channelNames`).

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::{
    Aes67Config, Bitrate, CHANNELS, DeviceSampleRate, ExpectedLossPercent, JitterBufferMs, OpusComplexity, SampleRate,
    check_name_chars,
};

/// `audio:` the sound card and the encoding defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct AudioConfig {
    /// Rate of the rooms and of the pipeline's encoders.
    pub sample_rate: RoomRate,
    /// kbit/s of a group without `audioBitrate`.
    pub default_bitrate: Bitrate,
    /// Rooms' jitter buffer; becomes AudioBridge prebuffering in 20 ms packets.
    pub jitter_buffer_ms: JitterBufferMs,
    /// The Opus complexity of the mix Janus encodes for each crew line (AudioBridge's
    /// `quality`): Janus's main cost per participant. Set by control in every crew join.
    pub opus_complexity: OpusComplexity,
    /// The packet loss (%) the rooms' mixes are encoded for (AudioBridge's
    /// `default_expectedloss`): Opus then carries each frame's low-bitrate copy in the next
    /// packet (in-band FEC), so a listener's decoder rebuilds a single lost packet instead of
    /// concealing it. 0 sends no FEC at all, even where the listener negotiated it.
    pub expected_loss_percent: ExpectedLossPercent,
    pub device: DeviceSelection,
    pub channel_names: ChannelNames,
    /// AES67 network audio: off (and not written) until an interface is set.
    #[serde(skip_serializing_if = "Aes67Config::is_default")]
    pub aes67: Aes67Config,
    /// Legacy keys of the original system.
    #[serde(skip_serializing)]
    pub(super) channels: Option<IgnoredAny>,
    #[serde(skip_serializing)]
    pub(super) frame_size: Option<IgnoredAny>,
    #[serde(skip_serializing)]
    pub(super) routing: Option<IgnoredAny>,
}

impl Default for AudioConfig {
    fn default() -> Self {
        Self {
            sample_rate: RoomRate::from(SampleRate(48_000)),
            default_bitrate: Bitrate(64),
            jitter_buffer_ms: JitterBufferMs(40),
            opus_complexity: OpusComplexity(4),
            // Panels are on venue Wi-Fi and phones: BENCHMARKS' "Lossy links".
            expected_loss_percent: ExpectedLossPercent(10),
            device: DeviceSelection::default(),
            channel_names: ChannelNames::default(),
            aes67: Aes67Config::default(),
            channels: None,
            frame_size: None,
            routing: None,
        }
    }
}

/// `audio.device`: the sound card. `null` ids mean the sound server's default device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct DeviceSelection {
    pub input_device_id: Option<String>,
    pub output_device_id: Option<String>,
    pub sample_rate: DeviceSampleRate,
    /// Legacy: the original system's audio buffer size (bridged sizes its own buffers).
    #[serde(skip_serializing)]
    pub(super) buffer_size: Option<IgnoredAny>,
}

impl DeviceSelection {
    pub fn new(
        input_device_id: Option<String>,
        output_device_id: Option<String>,
        sample_rate: DeviceSampleRate,
    ) -> Self {
        Self { input_device_id, output_device_id, sample_rate, buffer_size: None }
    }
}

impl Default for DeviceSelection {
    fn default() -> Self {
        Self::new(None, None, DeviceSampleRate(48_000))
    }
}

/// `audio.channelNames`: a name for each of the card's 8 inputs and 8 outputs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelNames {
    pub inputs: ChannelNameMap,
    pub outputs: ChannelNameMap,
}

/// Names keyed `"0"`..`"7"`; a channel without a name has the empty string.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelNameMap(pub [String; CHANNELS]);

impl ChannelNameMap {
    /// Sets the names given (keys `"0"`..`"7"`), trimmed; the others keep theirs.
    pub fn merge(&mut self, names: &BTreeMap<String, String>) -> Result<(), String> {
        for (key, name) in names {
            let index = channel_key(key)?;
            let name = name.trim();
            check_name_chars(name).map_err(|m| format!("the name of channel {key:?} {m}"))?;
            self.0[index] = name.to_owned();
        }
        Ok(())
    }

    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.0.iter().enumerate().map(|(i, n)| (i.to_string(), n.clone())).collect()
    }
}

fn channel_key(key: &str) -> Result<usize, String> {
    match key.parse::<usize>() {
        Ok(i) if i < CHANNELS && key.len() == 1 => Ok(i),
        _ => Err(format!("channel key {key:?} is not one of \"0\"..\"7\"")),
    }
}

/// On disk only named channels are listed, to keep the file short.
impl Serialize for ChannelNameMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = self.to_map();
        map.retain(|_, name| !name.is_empty());
        map.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ChannelNameMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let names = BTreeMap::<String, String>::deserialize(d)?;
        let mut map = ChannelNameMap::default();
        map.merge(&names).map_err(serde::de::Error::custom)?;
        Ok(map)
    }
}

/// `audio.sampleRate`: the rate of the rooms. The original system also wrote card rates there
/// (its device form offered 44100 and 96000 Hz, among others); Opus and the AudioBridge run at
/// none of them, so such a file loads with rooms at 48000 Hz and
/// [`Config::take_legacy`](super::Config::take_legacy) names the rate it replaced. Anything else is
/// refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct RoomRate {
    rate: SampleRate,
    /// The card rate found in the file, until [`Config::take_legacy`](super::Config::take_legacy)
    /// takes it.
    pub(super) replaced: Option<u32>,
}

/// Card rates the original system wrote as `audio.sampleRate`: loaded as 48000 Hz.
const LEGACY_CARD_RATES: [u32; 8] = [11_025, 22_050, 32_000, 44_100, 88_200, 96_000, 176_400, 192_000];

impl RoomRate {
    pub fn get(self) -> u32 {
        self.rate.get()
    }
}

impl From<SampleRate> for RoomRate {
    fn from(rate: SampleRate) -> Self {
        Self { rate, replaced: None }
    }
}

impl TryFrom<u64> for RoomRate {
    type Error = String;
    fn try_from(value: u64) -> Result<Self, String> {
        match SampleRate::try_from(value) {
            Ok(rate) => Ok(rate.into()),
            Err(_) => match LEGACY_CARD_RATES.into_iter().find(|&card| u64::from(card) == value) {
                Some(card) => Ok(Self { rate: SampleRate(48_000), replaced: Some(card) }),
                None => Err(format!("{value} is out of range: expected {}", SampleRate::EXPECTED)),
            },
        }
    }
}

impl From<RoomRate> for u64 {
    fn from(value: RoomRate) -> u64 {
        value.get().into()
    }
}
