//! The config file's schema (`config.yaml`): types, defaults, validation and legacy keys.
//!
//! Keys are camelCase, except `server_audio_users`, which keeps the original system's
//! snake_case on disk. Group ids are not part of the file: [`Group::id`] derives them from the
//! name at every load. Range checks live in small newtypes ([`Bitrate`], [`Channel`], …) so
//! that the YAML parser reports them with the line they are on; checks that span several
//! entries live in [`Config::validate`].
//!
//! Keys of older files ([`Config::take_legacy`]) are accepted on load and dropped on the next
//! save; any other unknown key is an error naming the key and its line.

use std::fmt;
use std::net::SocketAddr;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use server::{LegacyServer, parse_host};

mod aes67;
mod audio;
mod bridge;
mod crew;
mod direct;
mod groups;
mod ifb;
mod janus;
mod logging;
mod names;
mod positions;
mod server;
mod server_users;
mod streams;
mod validate;
pub use aes67::{
    Aes67Config, Aes67Send, DEFAULT_RECEIVE_LATENCY_MS, DEFAULT_SEND_RANGE, MAX_RECEIVE_LATENCY_MS, MulticastRange,
};
pub use audio::{AudioConfig, ChannelNameMap, ChannelNames, DeviceSelection, RoomRate};
pub use bridge::{BridgeConfig, Transport};
pub use crew::CrewConfig;
pub use direct::{
    DIRECT_ROOM_PREFIX, DirectCalls, Occupants, check_group_id_not_direct, check_talk_to, is_direct_room,
};
pub use groups::{Group, PinHash};
pub use ifb::{DEFAULT_IFB_DIM_DB, Ifb, IfbDim, IfbProgram, MIN_IFB_DIM_DB};
pub use janus::{DEFAULT_NODE_CAPACITY, JanusConfig, JanusNode};
pub use logging::{LogLevel, LoggingConfig};
pub use names::{MAX_NAME_CHARS, check_entity_name, check_name_chars};
pub use positions::{LineSpec, MAX_LINES, Position, check_lines, lines_of};
pub use server::{ServerConfig, Tls, TlsFiles, TlsMode};
pub use server_users::{ServerAudioUser, check_ifb};
pub use streams::{STREAM_TOKEN_SCHEME, StreamKind, StreamToken, check_stream_tokens};

/// Channels on each side of the sound card.
pub const CHANNELS: usize = 8;

/// The whole config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub janus: JanusConfig,
    pub audio: AudioConfig,
    pub groups: Vec<Group>,
    #[serde(rename = "server_audio_users", alias = "serverAudioUsers")]
    pub server_audio_users: Vec<ServerAudioUser>,
    /// Prepared panels: a crew member joining one gets its lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub positions: Vec<Position>,
    pub logging: LoggingConfig,
    pub bridge: BridgeConfig,
    pub crew: CrewConfig,
    /// How crew off the venue's LAN get in (a relay, a public media address).
    #[serde(skip_serializing_if = "NetworkConfig::is_default")]
    pub network: NetworkConfig,
    /// Which media server carries the panels' audio.
    #[serde(skip_serializing_if = "MediaConfig::is_default")]
    pub media: MediaConfig,
    /// Legacy: the original system's routing matrix.
    #[serde(skip_serializing)]
    routing: Option<IgnoredAny>,
}

/// A secret (token, password): stored in the file as is, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(********)")
    }
}

/// What redacted secrets read as.
pub const REDACTED: &str = "********";

/// Declares a `u32`-like newtype whose deserialisation checks its range, so a bad value in
/// the file is reported with its line.
macro_rules! checked_number {
    ($(#[$doc:meta])* $name:ident($inner:ty), $check:expr, $expect:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "u64", into = "u64")]
        pub struct $name($inner);

        impl $name {
            /// What a valid value is, for error messages.
            pub const EXPECTED: &'static str = $expect;

            pub fn get(self) -> $inner {
                self.0
            }
        }

        impl TryFrom<u64> for $name {
            type Error = String;
            fn try_from(value: u64) -> Result<Self, String> {
                let check: fn(u64) -> bool = $check;
                match <$inner>::try_from(value) {
                    Ok(v) if check(value) => Ok(Self(v)),
                    _ => Err(format!("{value} is out of range: expected {}", $expect)),
                }
            }
        }

        impl TryFrom<$inner> for $name {
            type Error = String;
            fn try_from(value: $inner) -> Result<Self, String> {
                Self::try_from(u64::from(value))
            }
        }

        impl From<$name> for u64 {
            fn from(value: $name) -> u64 {
                value.0.into()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

// After `checked_number!`, which it uses.
mod media;
pub use media::{MediaConfig, MediaEngine};
mod network;
pub use network::{
    AddressRange, CredentialSeconds, IceUrl, NetworkConfig, OFF_SITE_MIN_PIN_DIGITS, RelayEndpoint, TurnConfig,
    private_ranges,
};

checked_number!(
    /// Opus bitrate in kbit/s.
    Bitrate(u32), |v| (6..=510).contains(&v), "a bitrate of 6 to 510 kbit/s"
);
checked_number!(
    /// A sampling rate Opus and the AudioBridge both take.
    SampleRate(u32), |v| [8_000, 12_000, 16_000, 24_000, 48_000].contains(&v),
    "one of 8000, 12000, 16000, 24000, 48000 Hz"
);
checked_number!(
    /// The sound card's own rate.
    DeviceSampleRate(u32), |v| (8_000..=192_000).contains(&v), "8000 to 192000 Hz"
);
checked_number!(
    /// Seconds a remote talk may outlive the last word of its control surface.
    RemoteTalkSeconds(u32), |v| (1..=3_600).contains(&v), "1 to 3600 s"
);

checked_number!(
    /// `crew.tokensPerMinute`: tokens per client address per minute.
    TokenRate(u32), |v| (1..=100_000).contains(&v), "1 to 100000 tokens a minute"
);

checked_number!(
    /// `crew.directCallsPerMinute`: direct lines one panel opens per minute.
    CallRate(u32), |v| (1..=600).contains(&v), "1 to 600 direct lines a minute"
);

checked_number!(
    /// `crew.maxPendingTokens`: unused tokens at once.
    PendingTokens(u32), |v| (1..=100_000).contains(&v), "1 to 100000 tokens"
);
checked_number!(
    /// Opus's complexity, 1 (cheapest) to 10 (AudioBridge's `quality`).
    OpusComplexity(u8), |v| (1..=10).contains(&v), "an Opus complexity of 1 to 10"
);
checked_number!(
    /// The packet loss Opus encodes for, 0 to 20 % (AudioBridge's range).
    ExpectedLossPercent(u32), |v| v <= 20, "0 to 20 %"
);
checked_number!(
    /// Room jitter buffer in ms.
    JitterBufferMs(u32), |v| (20..=1_000).contains(&v), "20 to 1000 ms"
);
checked_number!(
    /// A sound-card channel, 0 to 7. Made only through its checks, like every newtype here:
    ///
    /// ```compile_fail
    /// let _ = partyline_shared::config::Channel(99);
    /// ```
    /// ```
    /// use partyline_shared::config::Channel;
    /// assert!(Channel::try_from(7u8).is_ok() && Channel::try_from(8u8).is_err());
    /// ```
    Channel(u8), |v| v < CHANNELS as u64, "a channel from 0 to 7"
);

/// A config that breaks a rule spanning several entries; `path` names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

impl Config {
    /// Parses a config file's text. Legacy keys are kept for [`Config::take_legacy`].
    pub fn from_yaml(text: &str) -> Result<Config, crate::yaml::YamlError> {
        // An emptied file is far more likely a botched edit than a wish for the defaults:
        // taking it would drop every group on the next save.
        if text.trim().is_empty() {
            return Err(crate::yaml::YamlError::new("the file is empty (delete it to start over with defaults)"));
        }
        crate::yaml::from_str(text)
    }

    /// Renders the file's text (legacy keys and ids are never written).
    pub fn to_yaml(&self) -> Result<String, crate::yaml::YamlError> {
        crate::yaml::to_string(self)
    }

    /// Removes the legacy keys, mapping those that still mean something (`server.host` +
    /// `server.port` → `server.listen`, a card rate in `audio.sampleRate` → 48000 Hz), and
    /// returns their names (with what became of a mapped value) for a warning.
    pub fn take_legacy(&mut self) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        let mut take = |present: bool, name: &str| {
            if present && !found.iter().any(|f| f == name) {
                found.push(name.to_owned());
            }
        };
        take(self.routing.take().is_some(), "routing");
        let server = &mut self.server;
        let legacy = server.legacy.take();
        if let Some(LegacyServer { host, port, listen_given, .. }) = legacy.clone() {
            if listen_given && (host.is_some() || port.is_some()) {
                // Both ways of saying it: the file's own `listen` is what was meant last.
                take(true, &format!("server.host/server.port (ignored: server.listen {} is given)", server.listen));
            } else {
                take(host.is_some(), "server.host");
                take(port.is_some(), "server.port");
                let ip = host.and_then(|h| parse_host(&h)).unwrap_or(server.listen.ip());
                server.listen = SocketAddr::new(ip, port.unwrap_or(server.listen.port()));
            }
        }
        let audio = &mut self.audio;
        take(audio.channels.take().is_some(), "audio.channels");
        take(audio.frame_size.take().is_some(), "audio.frameSize");
        take(audio.routing.take().is_some(), "audio.routing");
        take(audio.device.buffer_size.take().is_some(), "audio.device.bufferSize");
        if let Some(card) = audio.sample_rate.replaced.take() {
            take(true, &format!("audio.sampleRate ({card} Hz: the rooms run at {} Hz)", audio.sample_rate.get()));
        }
        take(legacy.is_some_and(|l| l.livekit), "server.livekit");
        take(self.logging.log_latency.take().is_some(), "logging.logLatency");
        take(self.logging.log_audio_stats.take().is_some(), "logging.logAudioStats");
        for group in &mut self.groups {
            take(group.id.take().is_some(), "groups[].id");
            take(group.description.take().is_some(), "groups[].description");
            take(group.channels.take().is_some(), "groups[].channels");
        }
        found
    }

    /// The bitrate a group's room uses, in kbit/s.
    pub fn group_bitrate(&self, group: &Group) -> Bitrate {
        group.audio_bitrate.unwrap_or(self.audio.default_bitrate)
    }

    /// The index and entry of the group with this id.
    pub fn group(&self, id: &str) -> Option<(usize, &Group)> {
        self.groups.iter().enumerate().find(|(_, g)| g.id() == id)
    }

    /// The index and entry of the position with this id.
    pub fn position(&self, id: &str) -> Option<(usize, &Position)> {
        self.positions.iter().enumerate().find(|(_, p)| p.id() == id)
    }

    /// The index and entry of the server audio user with this id.
    pub fn server_audio_user(&self, id: &str) -> Option<(usize, &ServerAudioUser)> {
        self.server_audio_users.iter().enumerate().find(|(_, u)| u.id() == id)
    }

    /// Whether group `id` is a program line.
    pub fn is_program(&self, id: &str) -> bool {
        self.group(id).is_some_and(|(_, group)| group.program)
    }

    /// A crew panel's `talk` list may not hold a program line: the crew only listen to one.
    /// The error names the list item (`talk[1]`) and why, as [`check_lines`] does.
    pub fn check_program_talk(&self, talk: &[String]) -> Result<(), (String, String)> {
        match talk.iter().position(|group| self.is_program(group)) {
            Some(j) => {
                Err((format!("talk[{j}]"), format!("{:?} is a program line: the crew only listen to it", talk[j])))
            }
            None => Ok(()),
        }
    }

    /// The same config with every secret replaced by [`REDACTED`], for display.
    pub fn redacted(&self) -> Config {
        let mut shown = self.clone();
        let hide = |s: &mut Option<Secret>| {
            if let Some(secret) = s {
                secret.0 = REDACTED.into();
            }
        };
        hide(&mut shown.server.admin_token);
        hide(&mut shown.janus.admin_secret);
        hide(&mut shown.janus.room_admin_key);
        hide(&mut shown.janus.event_secret);
        for node in &mut shown.janus.nodes {
            hide(&mut node.admin_secret);
            hide(&mut node.room_admin_key);
            hide(&mut node.event_secret);
        }
        let pins = shown.groups.iter_mut().map(|g| &mut g.pin).chain(shown.positions.iter_mut().map(|p| &mut p.pin));
        for pin in pins.flatten() {
            pin.0 = REDACTED.into();
        }
        for token in shown.groups.iter_mut().flat_map(|g| &mut g.stream_tokens) {
            token.hash = REDACTED.into();
        }
        if let Some(turn) = &mut shown.network.turn {
            turn.secret.0 = REDACTED.into();
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_without_ids() {
        let mut config = Config::default();
        config.groups.push(Group::new("Stage Left", Some(Bitrate(96))));
        let text = config.to_yaml().expect("serialises");
        assert!(!text.contains("id:"), "ids are never written:\n{text}");
        let back = Config::from_yaml(&text).expect("parses");
        assert_eq!(back, config);
        assert_eq!(back.groups[0].id(), "stage-left");
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let err = Config::from_yaml("server:\n  listen: 0.0.0.0:1\ngroups:\n  - name: A\n    colour: red\n")
            .expect_err("unknown key");
        let msg = err.to_string();
        assert!(msg.contains("colour") && msg.contains("line 5"), "{msg}");
    }

    #[test]
    fn out_of_range_names_line() {
        let err = Config::from_yaml("audio:\n  defaultBitrate: 5000\n").expect_err("range");
        let msg = err.to_string();
        assert!(msg.contains("5000") && msg.contains("line 2"), "{msg}");
    }

    #[test]
    fn legacy_keys_are_taken_and_mapped() {
        let text = "server:\n  host: 127.0.0.1\n  port: 3000\n  livekit: {url: x}\naudio:\n  channels: 2\n  frameSize: 480\ngroups:\n  - id: foh\n    name: FOH\n    description: front\n    channels: []\nlogging:\n  logLatency: true\n";
        let mut config = Config::from_yaml(text).expect("legacy file parses");
        let found = config.take_legacy();
        assert_eq!(
            found,
            [
                "server.host",
                "server.port",
                "audio.channels",
                "audio.frameSize",
                "server.livekit",
                "logging.logLatency",
                "groups[].id",
                "groups[].description",
                "groups[].channels"
            ]
        );
        assert_eq!(config.server.listen, "127.0.0.1:3000".parse().expect("addr"));
        let saved = config.to_yaml().expect("serialises");
        // As keys (`bridge.transport` holds "port" too).
        for key in [" host:", " port:", "livekit", "frameSize", "description", "logLatency", "id:"] {
            assert!(!saved.contains(key), "{key} dropped:\n{saved}");
        }
    }

    /// The original system's `host` and `port` beside an explicit `listen` (a file moved to
    /// partyline and edited): `listen` wins, and the warning says the others are ignored.
    #[test]
    fn an_explicit_listen_wins_over_the_original_host_and_port() {
        let text = "server:\n  host: 0.0.0.0\n  port: 3000\n  listen: 127.0.0.1:8443\n";
        let mut config = Config::from_yaml(text).expect("parses");
        let found = config.take_legacy();
        assert_eq!(config.server.listen, "127.0.0.1:8443".parse().expect("addr"), "listen wins");
        assert_eq!(found, ["server.host/server.port (ignored: server.listen 127.0.0.1:8443 is given)"]);
        assert_eq!(config.server, ServerConfig { listen: config.server.listen, ..ServerConfig::default() });
        let modern = Config::from_yaml("server:\n  listen: 127.0.0.1:9000\n").expect("parses");
        assert_eq!(modern.server.listen.port(), 9000);
        assert!(Config::from_yaml("server:\n  lisen: 127.0.0.1:9000\n").is_err(), "unknown keys still refused");
    }

    /// The original system's device form wrote card rates as `audio.sampleRate` and a buffer
    /// size under `audio.device`: such files load (rooms at 48000 Hz) and say what was mapped.
    #[test]
    fn the_original_systems_rates_and_buffer_size_load() {
        for (card, expected) in [("44100", 48_000), ("96000", 48_000), ("16000", 16_000)] {
            let text =
                format!("audio:\n  sampleRate: {card}\n  device:\n    bufferSize: 256\n    sampleRate: {card}\n");
            let mut config = Config::from_yaml(&text).expect("the original's file parses");
            let found = config.take_legacy();
            assert_eq!(config.audio.sample_rate.get(), expected, "{card}");
            assert_eq!(config.audio.device.sample_rate.get().to_string(), card, "the card keeps its rate");
            assert!(found.iter().any(|f| f == "audio.device.bufferSize"), "{found:?}");
            let named = found.iter().any(|f| f.starts_with(&format!("audio.sampleRate ({card} Hz")));
            assert_eq!(named, expected.to_string() != card, "{card}: {found:?}");
            let saved = config.to_yaml().expect("serialises");
            assert!(!saved.contains("bufferSize") && saved.contains(&format!("sampleRate: {expected}")), "{saved}");
        }
        for bad in ["12345", "0", "44100.5", "fast"] {
            let err = Config::from_yaml(&format!("audio:\n  sampleRate: {bad}\n")).expect_err(bad).to_string();
            assert!(err.contains("sampleRate") || err.contains("line 2"), "{bad}: {err}");
        }
    }
}
