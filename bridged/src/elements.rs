//! The GStreamer elements of the card side, built one way (`gst::ElementFactory::make(…)
//! .property(…).build()`): the card's caps, the capture's source and the playback's sink of a
//! PulseAudio or ALSA device with their buffering, and the two corrections of channel order
//! (PulseAudio's remapping by name, ALSA's 7.1 reorder), so that card channel k is the device's
//! channel k whatever the API. A direction on a PipeWire node has no elements: it is a stream of
//! bridged's own (`pipewire_card.rs`).

use std::str::FromStr as _;

use anyhow::Context as _;

use crate::card::{Api, Endpoint, PERIOD_US};
use crate::mix::CHANNELS;

/// Capture buffering of pulsesrc/alsasrc (µs): what the server (or ALSA) may hold; it delivers a
/// block every card period ([`PERIOD_US`], its `latency-time`), and each block is mixed and
/// played at once.
const CAPTURE_BUFFER_US: i64 = 10_000;
/// Playback buffering of pulsesink/alsasink (µs): what the playback may queue, the card → card
/// latency's main part (PipeWire's playback takes a block per cycle: `pipewire_card.rs`).
const PLAYBACK_BUFFER_US: i64 = 20_000;
const PLAYBACK_PERIOD_US: i64 = 5_000;

/// The GStreamer source and sink of an API, and the package that brings them.
struct Factories {
    source: &'static str,
    sink: &'static str,
    package: &'static str,
}

const PULSE: Factories = Factories { source: "pulsesrc", sink: "pulsesink", package: "gstreamer1.0-pulseaudio" };
const ALSA: Factories = Factories { source: "alsasrc", sink: "alsasink", package: "gstreamer1.0-alsa" };

/// The elements that open a direction on `api`: ALSA's, else PulseAudio's. (A PipeWire node is
/// opened by streams of bridged's own, never by GStreamer's elements.)
fn factories(api: Api) -> &'static Factories {
    if api == Api::Alsa { &ALSA } else { &PULSE }
}

/// The message for a missing `factory` of `api`: which package brings it.
fn missing(api: Api, factory: &str) -> String {
    format!("GStreamer element {factory} is missing ({})", factories(api).package)
}

/// The builder of `endpoint`'s source or sink (`factory`) named `name`: on its device, under
/// the client name the sound server shows (ALSA has no client name).
fn device_element<'a>(
    endpoint: &'a Endpoint,
    factory: &'a str,
    name: &'a str,
) -> gst::element_factory::ElementBuilder<'a> {
    gst::ElementFactory::make(factory).name(name).property_if_some("device", endpoint.device.as_deref()).property_if(
        "client-name",
        "partyline-bridged",
        endpoint.api == Api::Pulse,
    )
}

/// GStreamer's 7.1 layout, in its canonical order: front-left, front-right, front-center, lfe,
/// rear-left, rear-right, side-left, side-right. The card's channels are numbers, not speakers,
/// but GStreamer 1.22 needs positions: pulsesrc maps unpositioned channels to no PulseAudio
/// position and, for more than 6 channels, fails to create its stream ("Invalid argument"), and
/// audioconvert fixates an unpositioned 8-channel output back to this layout. So inside the
/// pipeline card channel k is position k of this list; on capture PulseAudio matches these
/// positions by name against the device's (README, "Channel order"); playback drops them
/// ([`PLAYBACK_CAPS`]).
const CARD_CHANNEL_MASK: u64 = 0xc3f;

/// What the playback's caps become just before pulsesink: the same samples, unpositioned. For
/// unpositioned caps pulsesink 1.22 creates its stream without a channel map, and PulseAudio
/// then gives the stream the sink's own map, so it copies output channel k to the device's
/// channel k whatever that map is (`aux0…aux7`, 7.1 in ALSA's order, …). With the 7.1 positions
/// PulseAudio would match names instead: silence on an `aux` device, channels swapped on a 7.1
/// device in another order. A `capssetter` only rewrites the caps: no copy, no remap.
const PLAYBACK_CAPS: &str = "audio/x-raw, channel-mask=(bitmask)0x0";

/// `audio/x-raw` F32 interleaved at `rate`, mono or the card's 8 channels.
pub fn raw_caps(rate: u32, channels: u32) -> gst::Caps {
    let mut caps = gst::Caps::builder("audio/x-raw")
        .field("format", "F32LE")
        .field("layout", "interleaved")
        .field("rate", i32::try_from(rate).unwrap_or(48_000))
        .field("channels", i32::try_from(channels).unwrap_or(1));
    if channels == CHANNELS as u32 {
        caps = caps.field("channel-mask", gst::Bitmask::new(CARD_CHANNEL_MASK));
    }
    caps.build()
}

/// The card's capture on a PulseAudio or ALSA `endpoint`: the server (or ALSA) buffers
/// `buffer-time` and delivers a block every `latency-time`; each block is mixed and played at
/// once.
pub fn capture_source(endpoint: &Endpoint) -> anyhow::Result<gst::Element> {
    let factory = factories(endpoint.api).source;
    device_element(endpoint, factory, "capture")
        .property("buffer-time", CAPTURE_BUFFER_US)
        .property("latency-time", PERIOD_US)
        .build()
        .with_context(|| missing(endpoint.api, factory))
}

/// The card's playback on a PulseAudio or ALSA `endpoint`. It plays what it is given as soon
/// as it has room (`sync` off: its pace is the card's), and starts without waiting for a first
/// block (`async` off: the appsrc in front of it is fed only in PLAYING, so waiting for it to
/// preroll would wait forever).
pub fn playback_sink(endpoint: &Endpoint) -> anyhow::Result<gst::Element> {
    let factory = factories(endpoint.api).sink;
    device_element(endpoint, factory, "playback")
        .property("sync", false)
        .property("async", false)
        .property("buffer-time", PLAYBACK_BUFFER_US)
        .property("latency-time", PLAYBACK_PERIOD_US)
        .build()
        .with_context(|| missing(endpoint.api, factory))
}

/// The `capssetter` that makes the playback's caps [`PLAYBACK_CAPS`]. PulseAudio only: the
/// remapping by name it avoids is PulseAudio's.
pub fn unposition() -> anyhow::Result<gst::Element> {
    let caps = gst::Caps::from_str(PLAYBACK_CAPS).context("PLAYBACK_CAPS")?;
    gst::ElementFactory::make("capssetter")
        .name("playback-unpositioned")
        .property("caps", &caps)
        .property("join", true)
        .property("replace", false)
        .build()
        .context("GStreamer element capssetter is missing (gstreamer1.0-plugins-good)")
}

/// For each card channel k, the channel of GStreamer's 7.1 order (front-left, front-right,
/// front-center, lfe, rear-left, rear-right, side-left, side-right) that ALSA's 7.1 order
/// (front-left, front-right, rear-left, rear-right, front-center, lfe, side-left, side-right)
/// has at k. alsasrc and alsasink reorder 8 positioned channels between the two orders, and
/// they take 8 channels only positioned, so without this card channels 2..5 would be the
/// device's 4, 5, 2, 3 (measured with an ALSA `file` device). (bridged's own PipeWire streams
/// announce [`crate::card::CARD_POSITIONS`] in the card's order and need none.) The mapping is its own
/// inverse: the same matrix serves capture and playback.
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
