//! Which sound API opens the card, each direction on its own, from the plan's device ids
//! ([`DeviceId`]): `alsa:NAME` is the ALSA PCM `NAME`, opened directly with `alsasrc`/`alsasink`
//! whatever sound server runs; any other id (or none: the default) is the sound server's. When
//! that server is PipeWire's PulseAudio server (pipewire-pulse), the device is opened natively,
//! with a stream of bridged's own (`pipewire_card.rs`) on the PipeWire node behind it: the
//! PulseAudio protocol layer of pipewire-pulse costs more latency than everything else on the
//! card → card path (BENCHMARKS.md, "The matrix"). PulseAudio proper, and a PipeWire whose own socket bridged cannot
//! reach, go through `pulsesrc`/`pulsesink`; where no sound server answers, ALSA's (ids listed
//! before ALSA ids had their prefix, such as `hw:0,0`).
//!
//! What answers is learnt from the devices themselves: pipewire-pulse hands each source and sink
//! the properties of its PipeWire node (`node.name`, `object.serial`), which PulseAudio's never
//! carry. The node is then looked up on PipeWire's own socket (`PIPEWIRE_REMOTE`,
//! `PIPEWIRE_RUNTIME_DIR` or `XDG_RUNTIME_DIR`, as every PipeWire client finds it), by name and
//! serial, so a PipeWire other than the one behind `PULSE_SERVER` is never opened by mistake.
//!
//! It also holds the card's period ([`PERIOD_US`], [`period_frames`]): one number that the
//! GStreamer elements' buffering, the PipeWire streams' quantum and the queues' trimming windows
//! all follow, whichever API opened each direction.

use gst::prelude::*;
use partyline_shared::bridge::Plan;
use partyline_shared::card::DeviceId;

/// The card's period (µs): the capture delivers a block this often (on PipeWire, the graph's
/// quantum that holds it: [`period_frames`]), and each block is mixed and played at once.
pub const PERIOD_US: i64 = 5_000;
/// Card blocks in a second: the window over which the queues trim.
pub const BLOCKS_PER_SECOND: usize = 1_000_000 / PERIOD_US as usize;

/// The frames of one card period on `api`: [`PERIOD_US`], or on PipeWire the graph's
/// quantum that holds it (PipeWire runs its graph in power-of-two quanta: asking for 240
/// frames would get 128, twice the wake-ups for nothing).
pub fn period_frames(api: Api, rate: u32) -> u32 {
    let frames = (u64::from(rate) * PERIOD_US as u64 / 1_000_000) as u32;
    if api == Api::PipeWire { frames.next_power_of_two() } else { frames }
}

/// The API a direction of the card is opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Pulse,
    PipeWire,
    Alsa,
    /// AES67 network audio: pipelines of their own on the PTP clock (`aes67/`).
    Aes67,
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Api::Pulse => "pulseaudio",
            Api::PipeWire => "pipewire",
            Api::Alsa => "alsa",
            Api::Aes67 => "aes67",
        })
    }
}

/// One direction of the card: its API and device (`None`: the API's default device). For
/// [`Api::PipeWire`] the device is a node name, and `monitor` says the capture records what a
/// sink node plays (PulseAudio's `NAME.monitor` source is sink node `NAME`'s monitor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub api: Api,
    pub device: Option<String>,
    pub monitor: bool,
}

impl Endpoint {
    fn new(api: Api, device: Option<&str>) -> Endpoint {
        Endpoint { api, device: device.map(str::to_owned), monitor: false }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let device = self.device.as_deref().unwrap_or("the default device");
        match (self.api, self.monitor) {
            (Api::PipeWire, true) => write!(f, "{device}'s monitor through {}", self.api),
            (Api::PipeWire, false) => write!(f, "node {device} through {}", self.api),
            _ => write!(f, "{device} through {}", self.api),
        }
    }
}

/// Both directions of the card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub input: Endpoint,
    pub output: Endpoint,
}

/// What is there to open the card with.
#[derive(Debug, Clone, Default)]
pub struct Available {
    /// The sound server's sources and sinks, when one answered.
    pub server: Option<ServerDevices>,
    /// The nodes PipeWire's own socket lists, when the sound server is PipeWire's and that
    /// socket answered; `None` otherwise.
    pub pipewire: Option<Vec<Node>>,
    /// GStreamer has `alsasrc` and `alsasink`.
    pub alsa: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ServerDevices {
    pub sources: Vec<ServerDevice>,
    pub sinks: Vec<ServerDevice>,
}

impl ServerDevices {
    /// Whether PipeWire answers: its devices carry their nodes.
    fn is_pipewire(&self) -> bool {
        self.sources.iter().chain(&self.sinks).any(|d| d.node.is_some())
    }
}

/// A source or sink of the sound server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerDevice {
    pub name: String,
    /// The server's default source or sink.
    pub is_default: bool,
    /// PipeWire's node behind it (pipewire-pulse only): for a monitor source, the sink's node.
    pub node: Option<Node>,
    /// A sink's monitor (PulseAudio's `device.class` `monitor`).
    pub monitor: bool,
    /// Its channel positions in PipeWire's names (`audio.position`, pipewire-pulse only).
    pub positions: Option<String>,
}

/// The card's channel map ([`partyline_shared::card::CARD_CHANNEL_MAP`]) in PipeWire's names.
/// Only a node with exactly these positions is opened natively: PipeWire matches a stream's
/// channels to a node's by position name and WirePlumber remixes what does not match (a stream
/// linked to a node of `AUX0…AUX7` is given two ports, `FL` and `FR`: eight card outputs mixed
/// into the node's first two channels), while through pipewire-pulse an unpositioned playback
/// keeps every channel's index on any map (`elements.rs`, `PLAYBACK_CAPS`).
pub const CARD_POSITIONS: &str = "FL,FR,FC,LFE,RL,RR,SL,SR";

/// A PipeWire node: its name (what `target-object` takes) and its serial (never reused while
/// the server runs, unlike names, so two servers with the same devices are told apart).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub serial: Option<String>,
}

impl Available {
    /// Asks what there is for `plan`: the sound server only when one of its ids needs it (two
    /// `alsa:` ids never talk to a sound server), PipeWire's own socket only when the sound
    /// server is PipeWire's. Blocking: call it off the async threads.
    pub fn probe(plan: &Plan) -> Available {
        let alsa = has_elements("alsasrc", "alsasink");
        let only_alsa = [&plan.input_device, &plan.output_device]
            .iter()
            .all(|id| matches!(DeviceId::parse(id), Some(DeviceId::Alsa(_) | DeviceId::Aes67)));
        let server = if only_alsa { None } else { server_devices() };
        let pipewire = match &server {
            Some(devices) if devices.is_pipewire() => pipewire_nodes(),
            _ => None,
        };
        Available { server, pipewire, alsa }
    }

    /// The card for `plan`, or what is missing (the message names the plan's field).
    pub fn choose(&self, plan: &Plan) -> Result<Card, String> {
        Ok(Card {
            input: self.endpoint("input_device", &plan.input_device, |s| &s.sources, "source")?,
            output: self.endpoint("output_device", &plan.output_device, |s| &s.sinks, "sink")?,
        })
    }

    fn endpoint(
        &self,
        field: &str,
        id: &str,
        listed: impl Fn(&ServerDevices) -> &Vec<ServerDevice>,
        kind: &str,
    ) -> Result<Endpoint, String> {
        let alsa = |device: Option<&str>| {
            if self.alsa {
                Ok(Endpoint::new(Api::Alsa, device))
            } else {
                Err(format!("{field}: GStreamer has no ALSA elements (gstreamer1.0-alsa)"))
            }
        };
        match (DeviceId::parse(id), &self.server) {
            (None, _) => Err(format!("{field}: {id:?} names no ALSA PCM")),
            (Some(DeviceId::Alsa(pcm)), _) => alsa(Some(pcm)),
            (Some(DeviceId::Aes67), _) => Ok(Endpoint::new(Api::Aes67, None)),
            // PulseAudio's default follows the server's; PipeWire's is opened by its node, so
            // that both APIs mean the device the sound server calls its default.
            (Some(DeviceId::Default), Some(server)) => Ok(match listed(server).iter().find(|d| d.is_default) {
                Some(device) => self.server_endpoint(field, device, false),
                None => Endpoint::new(Api::Pulse, None),
            }),
            (Some(DeviceId::Server(name)), Some(server)) => match listed(server).iter().find(|d| d.name == name) {
                Some(device) => Ok(self.server_endpoint(field, device, true)),
                None => Err(format!("{field}: the sound server has no {kind} {name:?}")),
            },
            (Some(DeviceId::Default), None) if !self.alsa => {
                Err("no sound server: no PulseAudio server answers and GStreamer has no ALSA elements".into())
            }
            (Some(DeviceId::Default), None) => alsa(None),
            (Some(DeviceId::Server(name)), None) => alsa(Some(name)),
        }
    }

    /// The sound server's `device`: natively when PipeWire's own socket has its node (`named`:
    /// the plan named it; otherwise it is the default, which PulseAudio finds by itself).
    fn server_endpoint(&self, field: &str, device: &ServerDevice, named: bool) -> Endpoint {
        let pulse = Endpoint::new(Api::Pulse, named.then_some(device.name.as_str()));
        let (Some(node), Some(nodes)) = (&device.node, &self.pipewire) else {
            // PulseAudio, or PipeWire whose socket did not answer (`pipewire_nodes` said why).
            return pulse;
        };
        if device.positions.as_deref() != Some(CARD_POSITIONS) {
            tracing::info!(
                "{field}: {:?} has the channel positions {}, not the card's ({CARD_POSITIONS}): opened through \
                 pipewire-pulse, which keeps every channel number (PipeWire's own streams match channels by position name)",
                device.name,
                device.positions.as_deref().unwrap_or("(none)")
            );
            return pulse;
        }
        let same =
            |n: &Node| n.name == node.name && (n.serial.is_none() || node.serial.is_none() || n.serial == node.serial);
        if nodes.iter().any(same) {
            Endpoint { api: Api::PipeWire, device: Some(node.name.clone()), monitor: device.monitor }
        } else {
            tracing::warn!(
                "{field}: PipeWire's own socket has no node {:?} (serial {}), which the sound server's {:?} is: \
                 it is another PipeWire than PULSE_SERVER's; opening {:?} through pipewire-pulse (more latency)",
                node.name,
                node.serial.as_deref().unwrap_or("?"),
                device.name,
                device.name
            );
            pulse
        }
    }
}

fn has_elements(source: &str, sink: &str) -> bool {
    gst::ElementFactory::find(source).is_some() && gst::ElementFactory::find(sink).is_some()
}

/// The sound server's sources and sinks, through GStreamer's PulseAudio device provider (which
/// PipeWire's PulseAudio server answers too); `None` when no server answers.
fn server_devices() -> Option<ServerDevices> {
    let provider = gst::DeviceProviderFactory::by_name("pulsedeviceprovider")?;
    provider.start().ok()?;
    let mut devices = ServerDevices::default();
    for device in provider.devices() {
        let Some(name) = internal_name(&device) else { continue };
        let properties = device.properties();
        let text = |key: &str| properties.as_ref().and_then(|p| p.get::<String>(key).ok());
        let server_device = ServerDevice {
            name,
            is_default: properties.as_ref().and_then(|p| p.get::<bool>("is-default").ok()).unwrap_or(false),
            node: text("node.name").map(|name| Node { name, serial: text("object.serial") }),
            monitor: text("device.class").as_deref() == Some("monitor"),
            positions: text("audio.position"),
        };
        if device.has_classes("Audio/Source") {
            devices.sources.push(server_device);
        } else if device.has_classes("Audio/Sink") {
            devices.sinks.push(server_device);
        }
    }
    provider.stop();
    Some(devices)
}

fn internal_name(device: &gst::Device) -> Option<String> {
    if device.has_property("internal-name") {
        return device.property::<Option<String>>("internal-name");
    }
    device.properties().and_then(|p| p.get::<String>("device.name").ok())
}

/// The nodes PipeWire's own socket lists, or `None`, with a warning saying why the card then
/// goes through pipewire-pulse. Asked with `pw-dump` (pipewire-bin, which PipeWire installs),
/// in a process of its own: GStreamer's PipeWire device provider (0.3.65) crashes the process
/// that uses it now and then (SIGSEGV in its resync on the pipewire-main-loop thread, about one
/// bridged start in sixty, with start/stop and with a one-shot probe alike).
fn pipewire_nodes() -> Option<Vec<Node>> {
    let fallback = |why: &str| {
        tracing::warn!("the sound server is PipeWire but {why}: the card goes through pipewire-pulse (more latency)");
        None
    };
    let dump =
        match std::process::Command::new("pw-dump").arg("--no-colors").stdin(std::process::Stdio::null()).output() {
            Ok(dump) if dump.status.success() => dump,
            Ok(_) => {
                return fallback(
                    "its own socket (PIPEWIRE_REMOTE, PIPEWIRE_RUNTIME_DIR, XDG_RUNTIME_DIR) does not answer pw-dump",
                );
            }
            Err(error) => return fallback(&format!("pw-dump does not run ({error}; pipewire-bin)")),
        };
    let nodes = nodes_of_dump(&dump.stdout);
    if nodes.is_empty() {
        return fallback("its own socket (PIPEWIRE_REMOTE, PIPEWIRE_RUNTIME_DIR, XDG_RUNTIME_DIR) lists no node");
    }
    Some(nodes)
}

/// The nodes of `pw-dump`'s output: every object of type `PipeWire:Interface:Node` with its
/// `node.name` and `object.serial` (a number there). pw-dump prints one JSON array, then one
/// more for each change while it runs (`{"id": N, "info": null}`: object N is gone), so the
/// output is read as a stream of arrays, in order.
fn nodes_of_dump(json: &[u8]) -> Vec<Node> {
    let mut nodes = std::collections::BTreeMap::new();
    let arrays = serde_json::Deserializer::from_slice(json).into_iter::<Vec<serde_json::Value>>();
    for object in arrays.map_while(Result::ok).flatten() {
        let Some(id) = object["id"].as_u64() else { continue };
        if object["info"].is_null() {
            nodes.remove(&id);
            continue;
        }
        if object["type"] != "PipeWire:Interface:Node" {
            continue;
        }
        let props = &object["info"]["props"];
        let Some(name) = props["node.name"].as_str() else { continue };
        let serial = match &props["object.serial"] {
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::String(s) => Some(s.clone()),
            _ => None,
        };
        nodes.insert(id, Node { name: name.to_owned(), serial });
    }
    nodes.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(input: &str, output: &str) -> Plan {
        Plan { input_device: input.into(), output_device: output.into(), ..Plan::default() }
    }

    fn endpoint(api: Api, device: Option<&str>) -> Endpoint {
        Endpoint::new(api, device)
    }

    fn device(name: &str, node: Option<(&str, &str)>) -> ServerDevice {
        ServerDevice {
            name: name.into(),
            node: node.map(|(name, serial)| Node { name: name.into(), serial: Some(serial.into()) }),
            monitor: name.ends_with(".monitor"),
            positions: node.map(|_| CARD_POSITIONS.to_owned()),
            ..ServerDevice::default()
        }
    }

    fn with_server() -> Available {
        Available {
            server: Some(ServerDevices { sources: vec![device("mic", None)], sinks: vec![device("speakers", None)] }),
            pipewire: None,
            alsa: true,
        }
    }

    /// pipewire-pulse's view of a PipeWire with a microphone and speakers; `native`: the nodes
    /// its own socket lists.
    fn with_pipewire(native: Option<Vec<(&str, &str)>>) -> Available {
        let mut sources =
            vec![device("mic", Some(("alsa_input.mic", "40"))), device("speakers.monitor", Some(("speakers", "41")))];
        sources[0].is_default = true;
        let mut sinks = vec![device("speakers", Some(("speakers", "41")))];
        sinks[0].is_default = true;
        Available {
            server: Some(ServerDevices { sources, sinks }),
            pipewire: native.map(|nodes| {
                nodes
                    .into_iter()
                    .map(|(name, serial)| Node { name: name.into(), serial: Some(serial.into()) })
                    .collect()
            }),
            alsa: true,
        }
    }

    #[test]
    fn the_nodes_of_a_pw_dump() {
        // Shaped as pw-dump 0.3.65 prints it (trimmed): the objects, then an array per change
        // while it ran (here node 35 went away).
        let dump = br#"[
          {"id": 31, "type": "PipeWire:Interface:Node", "version": 3,
           "info": {"props": {"node.name": "card_out", "object.serial": 41, "media.class": "Audio/Sink"}}},
          {"id": 32, "type": "PipeWire:Interface:Port", "info": {"props": {"port.name": "playback_FL"}}},
          {"id": 33, "type": "PipeWire:Interface:Node", "info": {"props": {"node.name": "card_in"}}},
          {"id": 35, "type": "PipeWire:Interface:Node", "info": {"props": {"node.name": "a-player"}}},
          {"id": 34, "type": "PipeWire:Interface:Client", "info": {"props": {"application.name": "pw-dump"}}}
        ]
        [
          {"id": 35, "info": null}
        ]"#;
        assert_eq!(
            nodes_of_dump(dump),
            [
                Node { name: "card_out".into(), serial: Some("41".into()) },
                Node { name: "card_in".into(), serial: None }
            ]
        );
        assert_eq!(nodes_of_dump(b"not json"), []);
    }

    #[test]
    fn pipewire_devices_open_natively_by_their_node() {
        let native = with_pipewire(Some(vec![("alsa_input.mic", "40"), ("speakers", "41")]));
        let card = native.choose(&plan("speakers.monitor", "speakers")).expect("a card");
        assert_eq!(card.input, Endpoint { api: Api::PipeWire, device: Some("speakers".into()), monitor: true });
        assert_eq!(card.output, Endpoint { api: Api::PipeWire, device: Some("speakers".into()), monitor: false });
        // The defaults are the server's, by their nodes.
        let card = native.choose(&plan("", "")).expect("a card");
        assert_eq!(card.input, Endpoint { api: Api::PipeWire, device: Some("alsa_input.mic".into()), monitor: false });
        assert_eq!(card.output.device.as_deref(), Some("speakers"));
        let err = native.choose(&plan("nope", "")).expect_err("no such source");
        assert_eq!(err, "input_device: the sound server has no source \"nope\"");
        // ALSA ids stay ALSA's.
        let card = native.choose(&plan("alsa:hw:1,0", "speakers")).expect("a card");
        assert_eq!(card.input, endpoint(Api::Alsa, Some("hw:1,0")));
    }

    #[test]
    fn pipewire_devices_go_through_pipewire_pulse_when_the_native_node_is_not_theirs() {
        // PipeWire's own socket does not answer: pipewire-pulse.
        let card = with_pipewire(None).choose(&plan("mic", "speakers")).expect("a card");
        assert_eq!(card.input, endpoint(Api::Pulse, Some("mic")));
        assert_eq!(card.output, endpoint(Api::Pulse, Some("speakers")));
        // Another PipeWire answers there: same names, other serials, or the node missing.
        let other = with_pipewire(Some(vec![("alsa_input.mic", "90"), ("other", "41")]));
        let card = other.choose(&plan("mic", "")).expect("a card");
        assert_eq!(card.input, endpoint(Api::Pulse, Some("mic")));
        assert_eq!(card.output, endpoint(Api::Pulse, None));
        // A node whose channels are not the card's map keeps PulseAudio's copy by index.
        let mut aux = with_pipewire(Some(vec![("alsa_input.mic", "40"), ("speakers", "41")]));
        if let Some(server) = aux.server.as_mut() {
            server.sinks[0].positions = Some("AUX0,AUX1,AUX2,AUX3,AUX4,AUX5,AUX6,AUX7".into());
        }
        let card = aux.choose(&plan("mic", "speakers")).expect("a card");
        assert_eq!(card.input.api, Api::PipeWire);
        assert_eq!(card.output, endpoint(Api::Pulse, Some("speakers")));
    }

    #[test]
    fn alsa_ids_open_alsa_even_beside_a_sound_server() {
        let card = with_server().choose(&plan("alsa:hw:1,0", "alsa:plughw:CARD=USB,DEV=0")).expect("a card");
        assert_eq!(card.input, endpoint(Api::Alsa, Some("hw:1,0")));
        assert_eq!(card.output, endpoint(Api::Alsa, Some("plughw:CARD=USB,DEV=0")));
        // One direction each way.
        let card = with_server().choose(&plan("mic", "alsa:stage")).expect("a card");
        assert_eq!(card.input, endpoint(Api::Pulse, Some("mic")));
        assert_eq!(card.output, endpoint(Api::Alsa, Some("stage")));
    }

    #[test]
    fn other_ids_are_the_sound_servers_and_must_exist() {
        let card = with_server().choose(&plan("", "speakers")).expect("a card");
        assert_eq!(card.input, endpoint(Api::Pulse, None));
        assert_eq!(card.output, endpoint(Api::Pulse, Some("speakers")));
        let err = with_server().choose(&plan("nope", "")).expect_err("no such source");
        assert_eq!(err, "input_device: the sound server has no source \"nope\"");
        let err = with_server().choose(&plan("", "mic")).expect_err("a source is no sink");
        assert_eq!(err, "output_device: the sound server has no sink \"mic\"");
        let err = with_server().choose(&plan("alsa:", "")).expect_err("no PCM");
        assert_eq!(err, "input_device: \"alsa:\" names no ALSA PCM");
    }

    #[test]
    fn without_a_sound_server_everything_is_alsa() {
        let bare = Available { server: None, pipewire: None, alsa: true };
        let card = bare.choose(&plan("", "hw:0,0")).expect("a card");
        assert_eq!(card.input, endpoint(Api::Alsa, None));
        assert_eq!(card.output, endpoint(Api::Alsa, Some("hw:0,0")));
        let nothing = Available { server: None, pipewire: None, alsa: false };
        let err = nothing.choose(&plan("", "")).expect_err("nothing to open");
        assert!(err.starts_with("no sound server"), "{err}");
        let err = nothing.choose(&plan("alsa:hw:0,0", "")).expect_err("no ALSA elements");
        assert_eq!(err, "input_device: GStreamer has no ALSA elements (gstreamer1.0-alsa)");
    }
}
