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

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::slug::slugify;

mod aes67;
mod direct;
mod ifb;
mod streams;
pub use aes67::{
    Aes67Config, Aes67Send, DEFAULT_RECEIVE_LATENCY_MS, DEFAULT_SEND_RANGE, MAX_RECEIVE_LATENCY_MS, MulticastRange,
};
pub use direct::{
    DIRECT_ROOM_PREFIX, DirectCalls, Occupants, check_group_id_not_direct, check_talk_to, is_direct_room,
};
pub use ifb::{DEFAULT_IFB_DIM_DB, Ifb, IfbDim, IfbProgram, MIN_IFB_DIM_DB};
pub use streams::{STREAM_TOKEN_SCHEME, StreamKind, StreamToken, check_stream_tokens};

/// The longest name (group, server audio user, channel) the system accepts, in characters.
pub const MAX_NAME_CHARS: usize = 64;
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
    /// Legacy: the original system's routing matrix.
    #[serde(skip_serializing)]
    routing: Option<IgnoredAny>,
}

/// `server:` the one listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "ServerFile", rename_all = "camelCase")]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Plain-HTTP listener for Janus's event handler posts: loopback, or a private address
    /// (RFC 1918, IPv6 unique or link local) where the Janus nodes of a pool on other hosts
    /// reach it.
    pub events_listen: SocketAddr,
    pub tls: Tls,
    /// Admin token; `PARTYLINE_ADMIN_TOKEN` and the state directory's `admin-token` file win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<Secret>,
    /// Where the admin UI and API (`/admin`, `/api/admin/…`, `/metrics`) answer from: other
    /// addresses get 403 even with the admin token. Default: loopback and the private ranges.
    #[serde(skip_serializing_if = "network::is_private_ranges")]
    pub admin_allow_from: Vec<AddressRange>,
    /// The original system's keys found in the file, until [`Config::take_legacy`] takes them.
    #[serde(skip)]
    legacy: Option<LegacyServer>,
}

/// The original system's `server.host` + `server.port` (mapped to `listen` unless the file
/// gives `listen` too) and `server.livekit` (dropped).
#[derive(Debug, Clone, PartialEq)]
struct LegacyServer {
    host: Option<String>,
    port: Option<u16>,
    livekit: bool,
    /// The file gives `listen` as well: it wins.
    listen_given: bool,
}

/// `server:` as the file has it: whether `listen` is given matters when legacy keys are too.
#[derive(Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
struct ServerFile {
    listen: Option<SocketAddr>,
    events_listen: SocketAddr,
    tls: Tls,
    admin_token: Option<Secret>,
    admin_allow_from: Vec<AddressRange>,
    host: Option<String>,
    port: Option<u16>,
    livekit: Option<IgnoredAny>,
}

impl Default for ServerFile {
    fn default() -> Self {
        let ServerConfig { events_listen, tls, admin_token, admin_allow_from, .. } = ServerConfig::default();
        ServerFile {
            listen: None,
            events_listen,
            tls,
            admin_token,
            admin_allow_from,
            host: None,
            port: None,
            livekit: None,
        }
    }
}

impl From<ServerFile> for ServerConfig {
    fn from(file: ServerFile) -> Self {
        let ServerFile { listen, events_listen, tls, admin_token, admin_allow_from, host, port, livekit } = file;
        let legacy = (host.is_some() || port.is_some() || livekit.is_some()).then(|| LegacyServer {
            host,
            port,
            livekit: livekit.is_some(),
            listen_given: listen.is_some(),
        });
        let listen = listen.unwrap_or(ServerConfig::default().listen);
        ServerConfig { listen, events_listen, tls, admin_token, admin_allow_from, legacy }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            events_listen: SocketAddr::from(([127, 0, 0, 1], 7089)),
            tls: Tls::default(),
            admin_token: None,
            admin_allow_from: private_ranges(),
            legacy: None,
        }
    }
}

/// `server.tls`: `false` for plain HTTP, or certificate and key files; both `null` (the
/// default) means a self-signed certificate generated into the state directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged, expecting = "`false`, `true`, or `{ cert: PATH, key: PATH }`")]
pub enum Tls {
    Enabled(bool),
    Files(TlsFiles),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsFiles {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl Default for Tls {
    fn default() -> Self {
        Tls::Files(TlsFiles::default())
    }
}

/// What the listener does with TLS, once the file's shorthand is resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum TlsMode {
    Off,
    SelfSigned,
    Files { cert: PathBuf, key: PathBuf },
}

impl Tls {
    pub fn mode(&self) -> TlsMode {
        match self {
            Tls::Enabled(false) => TlsMode::Off,
            Tls::Enabled(true) | Tls::Files(TlsFiles { cert: None, key: None }) => TlsMode::SelfSigned,
            Tls::Files(TlsFiles { cert, key }) => {
                TlsMode::Files { cert: cert.clone().unwrap_or_default(), key: key.clone().unwrap_or_default() }
            }
        }
    }
}

/// `janus:` where the media server's APIs are (all loopback in a normal install).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct JanusConfig {
    pub url: String,
    pub admin_url: String,
    pub ws_url: String,
    /// Janus admin API secret; `PARTYLINE_JANUS_ADMIN_SECRET` and the state directory win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_secret: Option<Secret>,
    /// AudioBridge `admin_key` (room creation); `PARTYLINE_JANUS_ROOM_ADMIN_KEY` and the state
    /// directory win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub room_admin_key: Option<Secret>,
    /// Password of the event handler's posts (basic auth, user `janus`);
    /// `PARTYLINE_JANUS_EVENT_SECRET` and the state directory win.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_secret: Option<Secret>,
    /// A pool of Janus nodes; empty: one node, `local`, at `url`, `adminUrl` and `wsUrl`
    /// (which a pool does not use). The first node is the one beside partyline-bridged: the
    /// card's participants join there, and it holds every group's room.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<JanusNode>,
}

/// Participants (one per line of a panel) a node carries when its config gives no capacity:
/// one core of Janus 1.1.2 at the default room settings (BENCHMARKS.md, "Capacity").
pub const DEFAULT_NODE_CAPACITY: u32 = 64;

/// `janus.nodes[]`: one Janus of the pool. Its Janus admin secret and AudioBridge admin key are
/// the pool's unless it names its own (a node another team runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JanusNode {
    /// Its name in placements, stats and logs: lowercase letters, digits and `-`.
    pub name: String,
    pub url: String,
    pub admin_url: String,
    pub ws_url: String,
    /// Where the node is (a building, a truck): a position or a join may ask for a site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// Participants it carries; sessions are placed by load against it.
    #[serde(default = "default_node_capacity")]
    pub capacity: u32,
    /// Its Janus admin API secret, when not the pool's (`janus.adminSecret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_secret: Option<Secret>,
    /// Its AudioBridge `admin_key`, when not the pool's (`janus.roomAdminKey`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room_admin_key: Option<Secret>,
    /// The password its event handler posts with (basic auth, user: its name). Every node but
    /// the first has one of its own, so that a node's events are known to be its own; the
    /// first's defaults to the pool's (`janus.eventSecret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_secret: Option<Secret>,
}

fn default_node_capacity() -> u32 {
    DEFAULT_NODE_CAPACITY
}

impl JanusConfig {
    /// The pool: `nodes`, or the one node at `url`, `adminUrl` and `wsUrl`.
    pub fn pool(&self) -> Vec<JanusNode> {
        if !self.nodes.is_empty() {
            return self.nodes.clone();
        }
        vec![JanusNode {
            name: "local".into(),
            url: self.url.clone(),
            admin_url: self.admin_url.clone(),
            ws_url: self.ws_url.clone(),
            site: None,
            capacity: DEFAULT_NODE_CAPACITY,
            admin_secret: None,
            room_admin_key: None,
            event_secret: None,
        }]
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let pool = self.pool();
        for (index, node) in pool.iter().enumerate() {
            let at = |field: &str| {
                if self.nodes.is_empty() { format!("janus.{field}") } else { format!("janus.nodes[{index}].{field}") }
            };
            let valid_name = !node.name.is_empty()
                && node.name.len() <= 32
                && node.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !valid_name {
                return Err(ConfigError::new(at("name"), format!("{:?}: 1 to 32 of a-z, 0-9 and -", node.name)));
            }
            if pool[..index].iter().any(|n| n.name == node.name) {
                return Err(ConfigError::new(at("name"), format!("{:?} names two nodes", node.name)));
            }
            for (field, url, schemes) in [
                ("url", &node.url, ["http://", "https://"]),
                ("adminUrl", &node.admin_url, ["http://", "https://"]),
                ("wsUrl", &node.ws_url, ["ws://", "wss://"]),
            ] {
                if !schemes.iter().any(|s| url.starts_with(s)) {
                    let expected = schemes.join(" or ");
                    return Err(ConfigError::new(at(field), format!("{url:?} does not start with {expected}")));
                }
            }
            if node.capacity == 0 {
                return Err(ConfigError::new(at("capacity"), "at least 1 participant"));
            }
            if node.site.as_deref().is_some_and(|site| site.trim().is_empty()) {
                return Err(ConfigError::new(at("site"), "empty: give a name or leave it out"));
            }
            self.validate_event_secret(&pool, index).map_err(|message| ConfigError::new(at("eventSecret"), message))?;
        }
        Ok(())
    }

    /// A node's events are accepted as its own only if no other node (nor the pool's default,
    /// which the first node may use) knows its password.
    fn validate_event_secret(&self, pool: &[JanusNode], index: usize) -> Result<(), String> {
        let Some(secret) = &pool[index].event_secret else {
            return match index {
                0 => Ok(()),
                _ => Err("required: every node but the first posts its events with a password of its own".into()),
            };
        };
        if secret.0.len() < 16 {
            return Err("at least 16 characters".into());
        }
        if self.event_secret.as_ref() == Some(secret) {
            return Err("the same as janus.eventSecret: give each node its own".into());
        }
        match pool[..index].iter().position(|other| other.event_secret.as_ref() == Some(secret)) {
            Some(other) => Err(format!("the same as node {:?}'s: give each node its own", pool[other].name)),
            None => Ok(()),
        }
    }
}

impl Default for JanusConfig {
    fn default() -> Self {
        Self {
            url: "http://127.0.0.1:8088/janus".into(),
            admin_url: "http://127.0.0.1:7088/admin".into(),
            ws_url: "ws://127.0.0.1:8188".into(),
            admin_secret: None,
            room_admin_key: None,
            event_secret: None,
            nodes: Vec::new(),
        }
    }
}

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
    channels: Option<IgnoredAny>,
    #[serde(skip_serializing)]
    frame_size: Option<IgnoredAny>,
    #[serde(skip_serializing)]
    routing: Option<IgnoredAny>,
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
    buffer_size: Option<IgnoredAny>,
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

/// `groups[]`: a party line. Its id is derived from its name, never stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Group {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_bitrate: Option<Bitrate>,
    /// Asked of a crew member joining this group (stored hashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<PinHash>,
    /// A program line (the show's sound): the crew only listen to it, and their panels dim it
    /// while someone talks to them (`crew.programDimDb`); its sources are the card's inputs
    /// (server audio users).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub program: bool,
    /// Tokens that let other systems publish into this line (WHIP) or listen to it (WHEP).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_tokens: Vec<StreamToken>,
    /// Legacy keys of the original system.
    #[serde(default, skip_serializing)]
    id: Option<IgnoredAny>,
    #[serde(default, skip_serializing)]
    description: Option<IgnoredAny>,
    #[serde(default, skip_serializing)]
    channels: Option<IgnoredAny>,
}

impl Group {
    pub fn new(name: impl Into<String>, audio_bitrate: Option<Bitrate>) -> Self {
        Self {
            name: name.into(),
            audio_bitrate,
            pin: None,
            program: false,
            stream_tokens: Vec::new(),
            id: None,
            description: None,
            channels: None,
        }
    }

    /// The group's id: the slug of its name (also its Janus room id).
    pub fn id(&self) -> String {
        slugify(&self.name)
    }
}

/// `server_audio_users[]`: one input channel of the card sent into a group, and (unless
/// `output_channel` is null) that group's mix played on one output channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerAudioUser {
    pub name: String,
    /// A group id.
    pub group: String,
    pub input_channel: Channel,
    #[serde(default)]
    pub output_channel: Option<Channel>,
    /// The output is an IFB: it plays a program that the interrupt group's talk dips ([`Ifb`]),
    /// instead of the user's group minus itself. Needs an output channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifb: Option<Ifb>,
}

impl ServerAudioUser {
    /// The id used in URLs (`/admin/server-users/:id`): the slug of the name.
    pub fn id(&self) -> String {
        slugify(&self.name)
    }

    /// The groups this user's output hears beside its own: its IFB's interrupt and program.
    pub fn heard_groups(&self) -> impl Iterator<Item = &str> {
        let ifb = self.ifb.as_ref();
        let program = ifb.and_then(|ifb| match &ifb.program {
            IfbProgram::Group(group) => Some(group.as_str()),
            IfbProgram::Input(_) => None,
        });
        ifb.map(|ifb| ifb.interrupt.as_str()).into_iter().chain(program)
    }

    /// Whether the card takes part in `group` for this user: it sends into it, or hears it.
    pub fn uses_group(&self, group: &str) -> bool {
        self.group == group || self.heard_groups().any(|g| g == group)
    }

    /// Points every reference of this user to the group `from` (its group, its IFB's) at `to`.
    pub fn rename_group(&mut self, from: &str, to: &str) {
        let mut groups = vec![&mut self.group];
        if let Some(ifb) = &mut self.ifb {
            groups.push(&mut ifb.interrupt);
            if let IfbProgram::Group(group) = &mut ifb.program {
                groups.push(group);
            }
        }
        for group in groups.into_iter().filter(|g| **g == from) {
            to.clone_into(group);
        }
    }
}

/// The most lines a position (a panel) holds.
pub const MAX_LINES: usize = 12;

/// `positions[]`: a prepared panel, a name and the groups it listens to and talks to. A group
/// in both is one line with a listen and a talk key; a talk-only or listen-only line is allowed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Position {
    pub name: String,
    /// Group ids heard on this position.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<String>,
    /// Group ids this position talks to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub talk: Vec<String>,
    /// Asked of a crew member joining this position (stored hashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<PinHash>,
    /// The site (`janus.nodes[].site`) whose nodes its sessions are placed on while one is up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// The panel has an announce key: one press talks on every one of its talk lines.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub announce: bool,
    /// Person keys: the positions (ids) this panel opens a direct line to with one press.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub talk_to: Vec<String>,
    /// Whether a second crew member may join while someone holds it (`one` or `many`).
    #[serde(default, skip_serializing_if = "Occupants::is_default")]
    pub occupants: Occupants,
}

/// One line of a panel: a group, heard and/or talked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSpec {
    pub group: String,
    pub listen: bool,
    pub talk: bool,
}

impl Position {
    /// The id used in URLs (`/?position=ID`, `/admin/positions/:id`): the slug of the name.
    pub fn id(&self) -> String {
        slugify(&self.name)
    }

    pub fn lines(&self) -> Vec<LineSpec> {
        lines_of(&self.listen, &self.talk)
    }

    /// An announce key talks on the position's talk lines: it needs one. The error names the
    /// field and why, as [`check_lines`] does.
    pub fn check_announce(&self) -> Result<(), (String, String)> {
        if self.announce && self.talk.is_empty() {
            return Err(("announce".into(), "the position talks on no line: nothing to announce on".into()));
        }
        Ok(())
    }
}

/// The lines of `listen` and `talk` group lists: every listened group in its order, then the
/// talk-only ones in theirs.
pub fn lines_of(listen: &[String], talk: &[String]) -> Vec<LineSpec> {
    let mut lines: Vec<LineSpec> =
        listen.iter().map(|g| LineSpec { group: g.clone(), listen: true, talk: talk.contains(g) }).collect();
    lines.extend(talk.iter().filter(|g| !listen.contains(g)).map(|g| LineSpec {
        group: g.clone(),
        listen: false,
        talk: true,
    }));
    lines
}

/// Checks a panel's group lists: known groups, none twice in one list, 1 to [`MAX_LINES`] lines.
/// `known` says whether a group id exists.
pub fn check_lines(listen: &[String], talk: &[String], known: impl Fn(&str) -> bool) -> Result<(), (String, String)> {
    for (field, list) in [("listen", listen), ("talk", talk)] {
        for (i, group) in list.iter().enumerate() {
            if !known(group) {
                return Err((format!("{field}[{i}]"), format!("no group has id {group:?}")));
            }
            if list[..i].contains(group) {
                return Err((format!("{field}[{i}]"), format!("{group:?} is listed twice")));
            }
        }
    }
    match lines_of(listen, talk).len() {
        0 => Err(("listen".into(), "a panel needs at least one line (listen or talk)".into())),
        n if n > MAX_LINES => Err(("listen".into(), format!("{n} lines: at most {MAX_LINES}"))),
        _ => Ok(()),
    }
}

/// Checks a server audio user's IFB: it needs the user's output, and its groups must exist.
/// The error names the key under `ifb` that is wrong (`None`: `ifb` itself).
pub fn check_ifb(
    ifb: &Ifb,
    has_output: bool,
    known: impl Fn(&str) -> bool,
) -> Result<(), (Option<&'static str>, String)> {
    if !has_output {
        return Err((None, "an IFB plays on the user's output: set output_channel".into()));
    }
    if !known(&ifb.interrupt) {
        return Err((Some("interrupt"), format!("no group has id {:?}", ifb.interrupt)));
    }
    match &ifb.program {
        IfbProgram::Group(group) if !known(group) => Err((Some("program"), format!("no group has id {group:?}"))),
        IfbProgram::Group(group) if *group == ifb.interrupt => {
            Err((Some("program"), format!("{group:?} is also the interrupt group: the program would dip itself")))
        }
        _ => Ok(()),
    }
}

/// A PIN as the config keeps it: `pbkdf2-sha256$ITERATIONS$SALT$HASH` (base64), never the PIN.
/// Made and checked by control; shown by the API only as "has a PIN".
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PinHash(pub String);

impl PinHash {
    /// The scheme prefix every stored PIN hash has.
    pub const SCHEME: &'static str = "pbkdf2-sha256$";
}

impl fmt::Debug for PinHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PinHash(********)")
    }
}

/// How a group participant's media goes to and from Janus; a string on the bus and in the
/// config (`bridge.transport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "dbus", derive(zbus::zvariant::Type), zvariant(signature = "s"))]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// AudioBridge's plain-RTP participant: Opus in RTP over UDP on loopback, no ICE, DTLS or
    /// SRTP. For a Janus on bridged's own host (its plain-RTP sockets bind to loopback only):
    /// the lowest latency and CPU.
    #[default]
    Rtp,
    /// A WebRTC PeerConnection (webrtcbin: ICE, DTLS-SRTP), as a browser joins: for a Janus
    /// on another host.
    Webrtc,
}

/// `bridge:` how control drives bridged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct BridgeConfig {
    /// How bridged's group participants reach Janus: `rtp` (plain RTP on loopback, Janus on
    /// this host: the default) or `webrtc` (as a browser does, for a Janus elsewhere).
    pub transport: Transport,
    /// Local addresses bridged's ICE may use towards Janus (`transport: webrtc`); empty: every
    /// usable interface. Needed where Janus is reached over an interface libnice would not
    /// pick on its own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ice_addresses: Vec<std::net::IpAddr>,
    /// Buffering of the server audio users, each way: Janus's prebuffering of their input (in
    /// 20 ms packets: at least one over plain RTP, two over WebRTC) and bridged's jitter buffer
    /// for their room's mix. Separate
    /// from `audio.jitterBufferMs`, which sizes the crew's buffers for a venue network: bridged
    /// and Janus share a host, where 20 ms of jitter buffer is enough.
    pub jitter_buffer_ms: JitterBufferMs,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self { transport: Transport::Rtp, ice_addresses: Vec::new(), jitter_buffer_ms: JitterBufferMs(20) }
    }
}

/// `crew:` the crew's panels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct CrewConfig {
    /// A talk key held on through a panel's remote control (`state: on`) is released when the
    /// control surface has sent nothing with the panel's key for this long: a surface that
    /// crashed must not leave a live microphone. A latched talk (`toggle`) stays.
    pub max_remote_talk_seconds: RemoteTalkSeconds,
    /// Tokens one client address may get per minute (`POST /api/token`): a crew behind one NAT
    /// shares an address, so this is sized for a whole crew joining within a minute.
    pub tokens_per_minute: TokenRate,
    /// Tokens issued and not used yet, from everyone together: past this, new ones wait until
    /// some are used or expire (10 minutes after their issue). A rejoining panel (`resume`) is
    /// never refused for it.
    pub max_pending_tokens: PendingTokens,
    /// Tokens issued and not used yet from one client address (an IPv6 /64): one host cannot
    /// hold the whole of `maxPendingTokens` and lock every other join out.
    pub max_pending_per_address: PendingTokens,
    /// How far a panel dims its program lines while someone talks on its other lines or its
    /// user talks: -60 to 0 dB (0: no dimming).
    pub program_dim_db: i32,
    /// Who may open a direct line: `all` (anyone online, from a panel's People list),
    /// `positions` (the person keys of `positions[].talkTo` only), `off`.
    pub direct_calls: DirectCalls,
    /// Direct lines one panel may open a minute (person keys pressed where no line was open):
    /// a callee who declines cannot be rung again and again, nor Janus filled with rooms.
    pub direct_calls_per_minute: CallRate,
}

impl Default for CrewConfig {
    fn default() -> Self {
        Self {
            max_remote_talk_seconds: RemoteTalkSeconds(30),
            tokens_per_minute: TokenRate(120),
            max_pending_tokens: PendingTokens(200),
            // A quarter of the overall cap: a crew behind one NAT joining at once holds a few
            // dozen pending at a time (a join takes about a second); one address cannot hold
            // the whole overall cap.
            max_pending_per_address: PendingTokens(50),
            program_dim_db: -14,
            direct_calls: DirectCalls::default(),
            // Twice the person keys a panel shows at most: a director ringing every position
            // in a busy minute is never refused.
            direct_calls_per_minute: CallRate(20),
        }
    }
}

/// `logging:`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct LoggingConfig {
    pub level: LogLevel,
    #[serde(skip_serializing)]
    log_latency: Option<IgnoredAny>,
    #[serde(skip_serializing)]
    log_audio_stats: Option<IgnoredAny>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Trace,
    Debug,
    #[default]
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
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

/// `audio.sampleRate`: the rate of the rooms. The original system also wrote card rates there
/// (its device form offered 44100 and 96000 Hz, among others); Opus and the AudioBridge run at
/// none of them, so such a file loads with rooms at 48000 Hz and
/// [`Config::take_legacy`] names the rate it replaced. Anything else is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct RoomRate {
    rate: SampleRate,
    /// The card rate found in the file, until [`Config::take_legacy`] takes it.
    replaced: Option<u32>,
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

/// Checks a display name (group, server audio user, channel): no control characters, at most
/// [`MAX_NAME_CHARS`] characters. Emptiness is the caller's rule.
pub fn check_name_chars(name: &str) -> Result<(), String> {
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("is longer than {MAX_NAME_CHARS} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err("contains a control character".into());
    }
    if name.chars().any(is_invisible_format) {
        return Err("contains an invisible formatting character (bidi override, zero-width)".into());
    }
    Ok(())
}

/// Characters that change how a name is shown without being seen (`Stage\u{202E}Left`
/// displays reversed): bidi controls, zero-width characters, the byte-order mark.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Checks a name that must yield a non-empty id.
pub fn check_entity_name(name: &str) -> Result<String, String> {
    if name.trim() != name {
        return Err("has leading or trailing white space".into());
    }
    check_name_chars(name)?;
    let id = slugify(name);
    if id.is_empty() {
        return Err(format!("{name:?} gives an empty id: use at least one letter a-z or digit"));
    }
    Ok(id)
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

    /// Checks the rules that span several entries: names and unique ids, references from
    /// server audio users to groups, TLS files given in pairs.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut group_ids = BTreeMap::new();
        for (i, group) in self.groups.iter().enumerate() {
            let path = format!("groups[{i}].name");
            let id = check_entity_name(&group.name)
                .and_then(|id| check_group_id_not_direct(&id).map(|()| id))
                .map_err(|m| ConfigError::new(&path, m))?;
            check_stream_tokens(&group.stream_tokens)
                .map_err(|(field, message)| ConfigError::new(format!("groups[{i}].{field}"), message))?;
            if let Some(other) = group_ids.insert(id.clone(), i) {
                return Err(ConfigError::new(
                    path,
                    format!("id {id:?} of {:?} collides with groups[{other}]", group.name),
                ));
            }
        }
        let mut user_ids = BTreeMap::new();
        // An IFB's dip belongs to its output: one IFB per output channel.
        let mut ifb_outputs = BTreeMap::new();
        for (i, user) in self.server_audio_users.iter().enumerate() {
            let path = format!("server_audio_users[{i}]");
            let id = check_entity_name(&user.name).map_err(|m| ConfigError::new(format!("{path}.name"), m))?;
            if let Some(other) = user_ids.insert(id.clone(), i) {
                return Err(ConfigError::new(
                    format!("{path}.name"),
                    format!("id {id:?} of {:?} collides with server_audio_users[{other}]", user.name),
                ));
            }
            if !group_ids.contains_key(&user.group) {
                return Err(ConfigError::new(format!("{path}.group"), format!("no group has id {:?}", user.group)));
            }
            if let Some(ifb) = &user.ifb {
                let at = |key: Option<&str>| format!("{path}.ifb{}", key.map(|k| format!(".{k}")).unwrap_or_default());
                check_ifb(ifb, user.output_channel.is_some(), |g| group_ids.contains_key(g))
                    .map_err(|(key, message)| ConfigError::new(at(key), message))?;
                if let Some(other) = user.output_channel.and_then(|output| ifb_outputs.insert(output, i)) {
                    let message = format!("its output already plays the IFB of server_audio_users[{other}]");
                    return Err(ConfigError::new(at(None), message));
                }
            }
        }
        let mut position_ids = BTreeMap::new();
        for (i, position) in self.positions.iter().enumerate() {
            let path = format!("positions[{i}]");
            let id = check_entity_name(&position.name).map_err(|m| ConfigError::new(format!("{path}.name"), m))?;
            if let Some(other) = position_ids.insert(id.clone(), i) {
                return Err(ConfigError::new(
                    format!("{path}.name"),
                    format!("id {id:?} of {:?} collides with positions[{other}]", position.name),
                ));
            }
            check_lines(&position.listen, &position.talk, |g| group_ids.contains_key(g))
                .map_err(|(field, message)| ConfigError::new(format!("{path}.{field}"), message))?;
        }
        for (i, position) in self.positions.iter().enumerate() {
            check_talk_to(&position.id(), &position.talk_to, |p| position_ids.contains_key(p))
                .map_err(|(field, message)| ConfigError::new(format!("positions[{i}].{field}"), message))?;
        }
        let pins = self.groups.iter().enumerate().map(|(i, g)| (format!("groups[{i}].pin"), &g.pin));
        let pins = pins.chain(self.positions.iter().enumerate().map(|(i, p)| (format!("positions[{i}].pin"), &p.pin)));
        for (path, pin) in pins {
            if pin.as_ref().is_some_and(|p| !p.0.starts_with(PinHash::SCHEME)) {
                return Err(ConfigError::new(path, "not a PIN hash: set PINs through the admin API or UI"));
            }
        }
        if let TlsMode::Files { cert, key } = self.server.tls.mode()
            && (cert.as_os_str().is_empty() || key.as_os_str().is_empty())
        {
            return Err(ConfigError::new("server.tls", "give both `cert` and `key`, or neither"));
        }
        if !is_private(self.server.events_listen.ip()) {
            return Err(ConfigError::new(
                "server.eventsListen",
                "must be a loopback or private address (127.0.0.1, 10.x, 172.16-31.x, 192.168.x, fc00::/7, fe80::/10)",
            ));
        }
        self.janus.validate()?;
        self.network.validate().map_err(|(field, message)| ConfigError::new(format!("network.{field}"), message))?;
        self.audio
            .aes67
            .check()
            .map_err(|(field, message)| ConfigError::new(format!("audio.aes67.{field}"), message))?;
        if !(-60..=0).contains(&self.crew.program_dim_db) {
            return Err(ConfigError::new("crew.programDimDb", "-60 to 0 dB (0: no dimming)"));
        }
        for (i, position) in self.positions.iter().enumerate() {
            self.check_program_talk(&position.talk)
                .and_then(|()| position.check_announce())
                .map_err(|(field, message)| ConfigError::new(format!("positions[{i}].{field}"), message))?;
        }
        for (index, position) in self.positions.iter().enumerate() {
            if let Some(site) = &position.site
                && !self.janus.pool().iter().any(|n| n.site.as_ref() == Some(site))
            {
                return Err(ConfigError::new(
                    format!("positions[{index}].site"),
                    format!("{site:?}: no Janus node has this site"),
                ));
            }
        }
        Ok(())
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

/// Loopback, or an address no one outside the venue's own networks can send to.
fn is_private(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        std::net::IpAddr::V6(v6) => v6.is_loopback() || v6.is_unique_local() || v6.is_unicast_link_local(),
    }
}

fn parse_host(host: &str) -> Option<std::net::IpAddr> {
    match host {
        "localhost" => Some([127, 0, 0, 1].into()),
        _ => host.parse().ok(),
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

    #[test]
    fn validate_rejects_collisions_and_dangling_refs() {
        let mut config = Config {
            groups: vec![Group::new("Stage Left", None), Group::new("stage  left", None)],
            ..Config::default()
        };
        assert_eq!(config.validate().expect_err("collision").path, "groups[1].name");
        config.groups.pop();
        config.server_audio_users.push(ServerAudioUser {
            name: "FOH".into(),
            group: "nowhere".into(),
            input_channel: Channel(0),
            output_channel: None,
            ifb: None,
        });
        assert_eq!(config.validate().expect_err("dangling").path, "server_audio_users[0].group");
    }

    #[test]
    fn a_program_line_is_listen_only_for_positions_and_its_dim_is_checked() {
        let yaml = "groups:\n  - name: Show\n    program: true\n  - name: Stage\npositions:\n  - name: Desk\n    listen: [show, stage]\n    talk: [stage]\n";
        let config = Config::from_yaml(yaml).expect("parses");
        assert_eq!(config.validate(), Ok(()));
        assert!(config.is_program("show") && !config.is_program("stage"));
        assert_eq!(config.crew.program_dim_db, -14, "the default dim");
        let talks = Config::from_yaml(&yaml.replace("talk: [stage]", "talk: [stage, show]")).expect("parses");
        let err = talks.validate().expect_err("a position talking on a program line");
        assert_eq!(err.path, "positions[0].talk[1]");
        assert!(err.message.contains("program line"), "{}", err.message);
        let loud = Config::from_yaml(&format!("{yaml}crew:\n  programDimDb: 6\n")).expect("parses");
        assert_eq!(loud.validate().expect_err("a dim above 0").path, "crew.programDimDb");
    }

    #[test]
    fn an_ifb_needs_an_output_and_groups_that_exist() {
        let yaml = |ifb: &str, output: &str| {
            format!(
                "groups:\n  - name: Show\n  - name: Director\nserver_audio_users:\n  - name: Presenter\n    group: director\n    input_channel: 0\n{output}    ifb: {ifb}\n"
            )
        };
        let output = "    output_channel: 1\n";
        let cases = [
            (yaml("{program: 2, interrupt: director}", output), None),
            (yaml("{program: show, interrupt: director, dimDb: cut}", output), None),
            (yaml("{program: 2, interrupt: director}", ""), Some("server_audio_users[0].ifb")),
            (yaml("{program: 2, interrupt: nowhere}", output), Some("server_audio_users[0].ifb.interrupt")),
            (yaml("{program: nowhere, interrupt: director}", output), Some("server_audio_users[0].ifb.program")),
            (yaml("{program: director, interrupt: director}", output), Some("server_audio_users[0].ifb.program")),
            // Two IFBs on one output.
            (
                format!(
                    "{}  - name: Guest\n    group: show\n    input_channel: 3\n    output_channel: 1\n    ifb: {{program: 4, interrupt: director}}\n",
                    yaml("{program: 2, interrupt: director}", output)
                ),
                Some("server_audio_users[1].ifb"),
            ),
        ];
        for (text, error) in cases {
            let config = Config::from_yaml(&text).expect("parses");
            assert_eq!(config.validate().err().map(|e| e.path), error.map(str::to_owned), "{text}");
        }
        let config = Config::from_yaml(&yaml("{program: show, interrupt: director}", output)).expect("parses");
        let user = &config.server_audio_users[0];
        assert!(user.uses_group("show") && user.uses_group("director"), "{user:?}");
        assert!(crate::yaml::to_string(&config).is_ok_and(|t| t.contains("ifb:") && t.contains("program: show")));
    }

    #[test]
    fn an_announce_key_needs_a_talk_line() {
        let yaml = "groups:\n  - name: Stage\npositions:\n  - name: Desk\n    listen: [stage]\n    announce: true\n";
        let err = Config::from_yaml(yaml).expect("parses").validate().expect_err("nothing to announce on");
        assert_eq!((err.path.as_str(), err.message.contains("talks on no line")), ("positions[0].announce", true));
        let config = Config::from_yaml(&yaml.replace("listen: [stage]", "talk: [stage]")).expect("parses");
        assert_eq!(config.validate(), Ok(()));
        assert!(config.positions[0].announce);
        assert!(crate::yaml::to_string(&config).is_ok_and(|text| text.contains("announce: true")));
    }

    /// Without `nodes`, the pool is one node at the three URLs (today's files work unchanged);
    /// with them, each node is checked and named in the error by its index.
    #[test]
    fn janus_nodes_make_the_pool_and_each_bad_one_is_named() {
        let one = Config::from_yaml("janus:\n  url: http://10.0.0.1:8088/janus\n").expect("parses");
        let pool = one.janus.pool();
        assert_eq!(pool.len(), 1);
        assert_eq!((pool[0].name.as_str(), pool[0].url.as_str()), ("local", "http://10.0.0.1:8088/janus"));
        assert_eq!(pool[0].capacity, DEFAULT_NODE_CAPACITY);
        let node = |name: &str, extra: &str| {
            format!(
                "    - name: {name}\n      url: http://{name}:8088/janus\n      adminUrl: http://{name}:7088/admin\n      wsUrl: ws://{name}:8188\n{extra}"
            )
        };
        let own_events = "      eventSecret: b-posts-under-its-own\n";
        let two = format!(
            "janus:\n  nodes:\n{}{}",
            node("a", ""),
            node("b", &format!("      site: truck\n      capacity: 100\n{own_events}"))
        );
        let two_hosts = Config::from_yaml(&format!("{two}server:\n  eventsListen: 10.1.0.1:7089\n")).expect("parses");
        assert_eq!(two_hosts.validate(), Ok(()), "events from nodes on a private network");
        let pool = Config::from_yaml(&two).expect("parses").janus.pool();
        let names: Vec<(&str, Option<&str>, u32)> =
            pool.iter().map(|n| (n.name.as_str(), n.site.as_deref(), n.capacity)).collect();
        assert_eq!(names, [("a", None, DEFAULT_NODE_CAPACITY), ("b", Some("truck"), 100)]);
        for (yaml, path, says) in [
            (format!("janus:\n  nodes:\n{}{}", node("a", ""), node("a", "")), "janus.nodes[1].name", "names two nodes"),
            (format!("janus:\n  nodes:\n{}", node("A", "")), "janus.nodes[0].name", "a-z"),
            (
                format!("janus:\n  nodes:\n{}", node("a", "      capacity: 0\n")),
                "janus.nodes[0].capacity",
                "at least 1",
            ),
            (format!("janus:\n  nodes:\n{}", node("a", "      site: ' '\n")), "janus.nodes[0].site", "empty"),
            (two.replace("ws://b", "http://b"), "janus.nodes[1].wsUrl", "ws:// or wss://"),
            (two.replace(own_events, ""), "janus.nodes[1].eventSecret", "a password of its own"),
            (two.replace("b-posts-under-its-own", "short"), "janus.nodes[1].eventSecret", "at least 16"),
            (
                format!("{two}  eventSecret: b-posts-under-its-own\n"),
                "janus.nodes[1].eventSecret",
                "the same as janus.eventSecret",
            ),
            (
                two.replacen("wsUrl: ws://a:8188\n", &format!("wsUrl: ws://a:8188\n{own_events}"), 1),
                "janus.nodes[1].eventSecret",
                "the same as node \"a\"'s",
            ),
            ("janus:\n  adminUrl: 127.0.0.1:7088\n".to_owned(), "janus.adminUrl", "http:// or https://"),
            ("server:\n  eventsListen: 0.0.0.0:7089\n".to_owned(), "server.eventsListen", "loopback or private"),
            ("server:\n  eventsListen: 203.0.113.5:7089\n".to_owned(), "server.eventsListen", "loopback or private"),
            (
                format!("{two}groups:\n  - name: G\npositions:\n  - name: P\n    listen: [g]\n    site: moon\n"),
                "positions[0].site",
                "no Janus node has this site",
            ),
        ] {
            let err = Config::from_yaml(&yaml).expect("parses").validate().expect_err(path);
            assert_eq!(err.path, path, "{yaml}");
            assert!(err.message.contains(says), "{path}: {}", err.message);
        }
    }

    #[test]
    fn tls_shorthands() {
        let off: Config = Config::from_yaml("server:\n  tls: false\n").expect("parses");
        assert_eq!(off.server.tls.mode(), TlsMode::Off);
        assert_eq!(Config::default().server.tls.mode(), TlsMode::SelfSigned);
        let files = Config::from_yaml("server:\n  tls: {cert: /a.pem, key: /b.pem}\n").expect("parses");
        assert!(matches!(files.server.tls.mode(), TlsMode::Files { .. }));
    }
}
