//! Which sound API opens the card, each direction on its own, from the plan's device ids
//! ([`DeviceId`]): `alsa:NAME` is the ALSA PCM `NAME`, opened directly with `alsasrc`/`alsasink`
//! whatever sound server runs; any other id (or none: the default) is the sound server's
//! (PulseAudio, or PipeWire's PulseAudio server) through `pulsesrc`/`pulsesink`, and where no
//! sound server answers, ALSA's (ids listed before ALSA ids had their prefix, such as `hw:0,0`).

use gst::prelude::*;
use partyline_shared::bridge::Plan;
use partyline_shared::card::DeviceId;

use crate::mix::CHANNELS;

/// The API a direction of the card is opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Pulse,
    Alsa,
}

impl Api {
    pub fn source(self) -> &'static str {
        match self {
            Api::Pulse => "pulsesrc",
            Api::Alsa => "alsasrc",
        }
    }

    pub fn sink(self) -> &'static str {
        match self {
            Api::Pulse => "pulsesink",
            Api::Alsa => "alsasink",
        }
    }

    /// The message for a missing `factory` of this API: which package brings it.
    pub fn missing(self, factory: &str) -> String {
        let package = match self {
            Api::Pulse => "gstreamer1.0-pulseaudio",
            Api::Alsa => "gstreamer1.0-alsa",
        };
        format!("GStreamer element {factory} is missing ({package})")
    }
}

/// One direction of the card: its API and device (`None`: the API's default device).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub api: Api,
    pub device: Option<String>,
}

impl Endpoint {
    /// The builder of this endpoint's source or sink (`factory`) named `name`: on its device,
    /// under the client name the sound server shows.
    pub fn builder<'a>(&'a self, factory: &'a str, name: &'a str) -> gst::element_factory::ElementBuilder<'a> {
        gst::ElementFactory::make(factory).name(name).property_if_some("device", self.device.as_deref()).property_if(
            "client-name",
            "partyline-bridged",
            self.api == Api::Pulse,
        )
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
    /// The sound server's source and sink names, when one answered.
    pub server: Option<ServerDevices>,
    /// GStreamer has `alsasrc` and `alsasink`.
    pub alsa: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ServerDevices {
    pub sources: Vec<String>,
    pub sinks: Vec<String>,
}

impl Available {
    /// Asks what there is for `plan`: the sound server only when one of its ids needs it (two
    /// `alsa:` ids never talk to a sound server). Blocking: call it off the async threads.
    pub fn probe(plan: &Plan) -> Available {
        let alsa = gst::ElementFactory::find("alsasrc").is_some() && gst::ElementFactory::find("alsasink").is_some();
        let only_alsa = [&plan.input_device, &plan.output_device]
            .iter()
            .all(|id| matches!(DeviceId::parse(id), Some(DeviceId::Alsa(_))));
        let server = if only_alsa { None } else { server_devices() };
        Available { server, alsa }
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
        listed: impl Fn(&ServerDevices) -> &Vec<String>,
        kind: &str,
    ) -> Result<Endpoint, String> {
        let alsa = |device: Option<&str>| {
            if self.alsa {
                Ok(Endpoint { api: Api::Alsa, device: device.map(str::to_owned) })
            } else {
                Err(format!("{field}: GStreamer has no ALSA elements (gstreamer1.0-alsa)"))
            }
        };
        match (DeviceId::parse(id), &self.server) {
            (None, _) => Err(format!("{field}: {id:?} names no ALSA PCM")),
            (Some(DeviceId::Alsa(pcm)), _) => alsa(Some(pcm)),
            (Some(DeviceId::Default), Some(_)) => Ok(Endpoint { api: Api::Pulse, device: None }),
            (Some(DeviceId::Server(name)), Some(server)) if listed(server).iter().any(|n| n == name) => {
                Ok(Endpoint { api: Api::Pulse, device: Some(name.to_owned()) })
            }
            (Some(DeviceId::Server(name)), Some(_)) => Err(format!("{field}: the sound server has no {kind} {name:?}")),
            (Some(DeviceId::Default), None) if !self.alsa => {
                Err("no sound server: no PulseAudio server answers and GStreamer has no ALSA elements".into())
            }
            (Some(DeviceId::Default), None) => alsa(None),
            (Some(DeviceId::Server(name)), None) => alsa(Some(name)),
        }
    }
}

/// The sound server's sources and sinks, through GStreamer's PulseAudio device provider (which
/// PipeWire's PulseAudio server answers too); `None` when no server answers.
fn server_devices() -> Option<ServerDevices> {
    let provider = gst::DeviceProviderFactory::by_name("pulsedeviceprovider")?;
    provider.start().ok()?;
    let mut devices = ServerDevices::default();
    for device in provider.devices() {
        let Some(name) = internal_name(&device) else { continue };
        if device.has_classes("Audio/Source") {
            devices.sources.push(name);
        } else if device.has_classes("Audio/Sink") {
            devices.sinks.push(name);
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

/// For each card channel k, the channel of GStreamer's 7.1 order (front-left, front-right,
/// front-center, lfe, rear-left, rear-right, side-left, side-right) that ALSA's 7.1 order
/// (front-left, front-right, rear-left, rear-right, front-center, lfe, side-left, side-right)
/// has at k. alsasrc and alsasink reorder 8 positioned channels between the two orders, and
/// they take 8 channels only positioned, so without this card channels 2..5 would be the
/// device's 4, 5, 2, 3 (measured with an ALSA `file` device). The mapping is its own inverse:
/// the same matrix serves capture and playback.
const ALSA_ORDER: [usize; CHANNELS] = [0, 1, 4, 5, 2, 3, 6, 7];

/// The `audioconvert` (and the caps that keep its output the card's) that puts device channel
/// k of an ALSA device on card channel k, and card channel k on device channel k: after
/// alsasrc, before alsasink. Holds for devices that report no channel map or ALSA's 7.1 order
/// (both put GStreamer's positions in ALSA's order); a device reporting another map gets its
/// channels by position name.
pub fn alsa_order(card_caps: &gst::Caps, name: &str) -> anyhow::Result<[gst::Element; 2]> {
    let rows = ALSA_ORDER
        .map(|from| gst::Array::new((0..ALSA_ORDER.len()).map(|column| if column == from { 1.0_f32 } else { 0.0 })));
    let matrix = gst::Array::new(rows);
    let convert = gst::ElementFactory::make("audioconvert").name(name).property("mix-matrix", matrix).build()?;
    let caps =
        gst::ElementFactory::make("capsfilter").name(format!("{name}-caps")).property("caps", card_caps).build()?;
    Ok([convert, caps])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(input: &str, output: &str) -> Plan {
        Plan { input_device: input.into(), output_device: output.into(), ..Plan::default() }
    }

    fn endpoint(api: Api, device: Option<&str>) -> Endpoint {
        Endpoint { api, device: device.map(str::to_owned) }
    }

    fn with_server() -> Available {
        Available {
            server: Some(ServerDevices { sources: vec!["mic".into()], sinks: vec!["speakers".into()] }),
            alsa: true,
        }
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
        let bare = Available { server: None, alsa: true };
        let card = bare.choose(&plan("", "hw:0,0")).expect("a card");
        assert_eq!(card.input, endpoint(Api::Alsa, None));
        assert_eq!(card.output, endpoint(Api::Alsa, Some("hw:0,0")));
        let nothing = Available { server: None, alsa: false };
        let err = nothing.choose(&plan("", "")).expect_err("nothing to open");
        assert!(err.starts_with("no sound server"), "{err}");
        let err = nothing.choose(&plan("alsa:hw:0,0", "")).expect_err("no ALSA elements");
        assert_eq!(err, "input_device: GStreamer has no ALSA elements (gstreamer1.0-alsa)");
    }

    #[test]
    fn alsa_order_is_a_permutation_that_undoes_itself() {
        let mut seen = [false; CHANNELS];
        for (k, from) in ALSA_ORDER.iter().enumerate() {
            seen[*from] = true;
            assert_eq!(ALSA_ORDER[*from], k, "not its own inverse at {k}");
        }
        assert!(seen.iter().all(|s| *s));
    }
}
