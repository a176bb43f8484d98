//! The sound card as both daemons see it: its channel order.

/// The PulseAudio channel map of partyline's sound card: GStreamer's 7.1 order, in which bridged
/// captures and plays the card (`bridged/README.md`, "Channel order"). PulseAudio matches a
/// capture stream's channels to the source's by position name, so capture keeps card input k =
/// device channel k only from a source with exactly this map (these names, in this order; a
/// source with fewer channels: the first of them, or mono); any other source (`aux0…aux7`,
/// 7.1 in ALSA's order) needs a `module-remap-source` with this map in front of it. Playback
/// keeps every index whatever the sink's map.
pub const CARD_CHANNEL_MAP: &str = "front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right";
