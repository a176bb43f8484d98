//! The sound card as both daemons see it: its channel order and what a device id names.

/// The PulseAudio channel map of partyline's sound card: GStreamer's 7.1 order, in which bridged
/// captures and plays the card (`bridged/README.md`, "Channel order"). PulseAudio matches a
/// capture stream's channels to the source's by position name, so capture keeps card input k =
/// device channel k only from a source with exactly this map (these names, in this order; a
/// source with fewer channels: the first of them, or mono); any other source (`aux0…aux7`,
/// 7.1 in ALSA's order) needs a `module-remap-source` with this map in front of it. Playback
/// keeps every index whatever the sink's map.
pub const CARD_CHANNEL_MAP: &str = "front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right";

/// The prefix of a device id that names an ALSA PCM: `alsa:hw:1,0`, `alsa:plughw:CARD=PCH,DEV=0`,
/// `alsa:mypcm`. No PulseAudio or PipeWire device name contains a colon, so the prefix is never
/// ambiguous.
pub const ALSA_PREFIX: &str = "alsa:";

/// The device id of AES67 network audio (`audio.aes67`): as the input, the received stream's
/// channels; as the output, partyline's sent stream. No sound server or ALSA device has this
/// name (theirs have dots, underscores or a prefix).
pub const AES67_DEVICE: &str = "aes67";

/// What a device id names (`audio.device.inputDeviceId`/`outputDeviceId`, a plan's
/// `input_device`/`output_device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceId<'a> {
    /// No id (empty): the sound server's default device; where no sound server answers,
    /// ALSA's `default` PCM.
    Default,
    /// `alsa:NAME`: the ALSA PCM `NAME` (never empty), opened directly, whether a sound server
    /// runs or not.
    Alsa(&'a str),
    /// [`AES67_DEVICE`]: AES67 network audio.
    Aes67,
    /// Any other id: a source or sink of the sound server (PulseAudio, or PipeWire through its
    /// PulseAudio server); where no sound server answers, an ALSA PCM name (ids listed before
    /// ALSA ids had their prefix, e.g. `hw:0,0`).
    Server(&'a str),
}

impl<'a> DeviceId<'a> {
    /// Reads an id; `None` for `alsa:` with no PCM name.
    pub fn parse(id: &'a str) -> Option<DeviceId<'a>> {
        match id.strip_prefix(ALSA_PREFIX) {
            Some("") => None,
            Some(pcm) => Some(DeviceId::Alsa(pcm)),
            None if id.is_empty() => Some(DeviceId::Default),
            None if id == AES67_DEVICE => Some(DeviceId::Aes67),
            None => Some(DeviceId::Server(id)),
        }
    }

    /// The id of the ALSA PCM `pcm`.
    pub fn alsa(pcm: &str) -> String {
        format!("{ALSA_PREFIX}{pcm}")
    }
}

#[cfg(test)]
mod tests {
    use super::DeviceId;

    #[test]
    fn device_ids() {
        assert_eq!(DeviceId::parse(""), Some(DeviceId::Default));
        assert_eq!(DeviceId::parse("alsa:hw:1,0"), Some(DeviceId::Alsa("hw:1,0")));
        assert_eq!(DeviceId::parse("alsa:plughw:CARD=PCH,DEV=0"), Some(DeviceId::Alsa("plughw:CARD=PCH,DEV=0")));
        assert_eq!(DeviceId::parse("alsa:"), None);
        // PulseAudio names made by ALSA cards start with "alsa_", never "alsa:".
        let pulse = "alsa_output.pci-0000_00_1f.3.analog-stereo";
        assert_eq!(DeviceId::parse(pulse), Some(DeviceId::Server(pulse)));
        assert_eq!(DeviceId::parse("hw:0,0"), Some(DeviceId::Server("hw:0,0")));
        assert_eq!(DeviceId::alsa("hw:1,0"), "alsa:hw:1,0");
        assert_eq!(DeviceId::parse("aes67"), Some(DeviceId::Aes67));
    }
}
