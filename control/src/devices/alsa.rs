//! ALSA cards and PCMs through alsa-lib (the `alsa` crate), for machines without a sound server.
//!
//! Two kinds of entry, each with the channel count and rate the device offers (its hardware
//! parameters, asked by opening it without playing anything):
//! - every PCM device of every card, as `alsa:plughw:CARD=ID,DEV=N`: the card's own id (stable
//!   across reboots, unlike its index) behind ALSA's `plug` layer, which converts the sample
//!   format bridged uses (32-bit float) to what the hardware takes. Channels and rates are the
//!   hardware's (`hw:CARD=ID,DEV=N`). A device another program holds cannot be opened: it is
//!   listed with what it offered the last time this process saw it free, else as unknown.
//! - every PCM of the ALSA configuration with a fixed channel count (`pcm.NAME` in
//!   `/etc/asound.conf` or `~/.asoundrc`: a `multi` of several cards, a `dsnoop` or `dmix` of
//!   one), as `alsa:NAME`. Parametrised names (`hw:…`, `front:…`, `dmix:…`) are the cards',
//!   listed above; PCMs that accept any channel count (`null`, `plug`, the rate converters)
//!   are converters, not devices, and are left out (they can still be selected by id); so are
//!   the bridges to other sound systems (`pulse`, `pipewire`, `jack`, `oss`), which are never
//!   opened here, as opening them could reach, or start, a sound server.
//!
//! The default device (card 0, device 0) is what ALSA's `default` PCM opens when no
//! configuration says otherwise.

use std::collections::BTreeMap;
use std::sync::Mutex;

use alsa::pcm::HwParams;
use alsa::{Direction, PCM};
use anyhow::{Context as _, bail};
use partyline_shared::card::DeviceId;
use partyline_shared::sync::lock;

use super::{DeviceEntry, DeviceListing, UNKNOWN_CHANNELS, UNKNOWN_SAMPLE_RATE};

/// The rate reported when the device offers it (every card bridged is likely to open does).
const PREFERRED_RATE: u32 = 48_000;
/// More channels than this is ALSA's way of saying "any number" (a plugin that adapts).
const MAX_DEVICE_CHANNELS: u32 = 1024;
/// The bridges to other sound systems in ALSA's configuration (libasound2-plugins,
/// pipewire-alsa): never opened.
const OTHER_SOUND_SYSTEMS: [&str; 4] = ["pulse", "pipewire", "jack", "oss"];

/// Lists the cards and PCMs; an error when there is none. alsa-lib blocks (it opens devices):
/// this runs on a blocking thread.
pub(super) async fn list() -> anyhow::Result<DeviceListing> {
    // alsa-lib's PulseAudio hook (libasound2-plugins) connects to PulseAudio with libpulse in
    // this process, which then reads the client config named in control's environment: only
    // control's own forbids starting a server (`main` sets it).
    let ours = super::client_config()?;
    if std::env::var_os(super::CLIENT_CONFIG_VAR).is_none_or(|set| set != ours.as_os_str()) {
        bail!("{} is not control's client config: ALSA is not asked", super::CLIENT_CONFIG_VAR);
    }
    tokio::task::spawn_blocking(enumerate).await.context("the ALSA listing thread failed")?
}

/// One capture or playback PCM found, before it becomes an entry.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Found {
    /// The PCM name bridged opens (`plughw:CARD=PCH,DEV=0`, `stage`).
    pub pcm: String,
    pub label: String,
    pub direction: Direction,
    /// (channels, rate); `None` when unknown.
    pub offers: Option<(u32, u32)>,
    pub is_default: bool,
}

fn enumerate() -> anyhow::Result<DeviceListing> {
    // alsa-lib's configuration is process-wide state: one listing at a time.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = lock(&ONE_AT_A_TIME);
    let mut found = cards();
    found.extend(configured()?);
    let listing = listing(found);
    if listing.inputs.is_empty() && listing.outputs.is_empty() {
        bail!("ALSA has no card and no PCM with a fixed channel count");
    }
    Ok(listing)
}

/// The entries, inputs and outputs apart, in the order found.
pub(super) fn listing(found: Vec<Found>) -> DeviceListing {
    let entry = |found: Found, direction: &str| {
        let (channels, sample_rate) = found.offers.unwrap_or((UNKNOWN_CHANNELS, UNKNOWN_SAMPLE_RATE));
        DeviceEntry {
            identifier: DeviceId::alsa(&found.pcm),
            description: format!("{direction}: {}", found.label),
            channels,
            sample_rate,
            is_default: found.is_default,
            channel_map: None,
            note: None,
        }
    };
    let (inputs, outputs): (Vec<Found>, Vec<Found>) =
        found.into_iter().partition(|found| found.direction == Direction::Capture);
    DeviceListing {
        inputs: inputs.into_iter().map(|found| entry(found, "Input")).collect(),
        outputs: outputs.into_iter().map(|found| entry(found, "Output")).collect(),
        platform: "alsa".to_owned(),
    }
}

/// Every PCM device of every card, each direction it has.
fn cards() -> Vec<Found> {
    let mut found = Vec::new();
    for card in alsa::card::Iter::new().filter_map(Result::ok) {
        let ctl = match alsa::Ctl::from_card(&card, false) {
            Ok(ctl) => ctl,
            Err(err) => {
                tracing::debug!(card = card.get_index(), error = %err, "ALSA card without a control device");
                continue;
            }
        };
        let Ok(info) = ctl.card_info() else { continue };
        let (Ok(id), Ok(card_name)) = (info.get_id(), info.get_name()) else { continue };
        for device in alsa::ctl::DeviceIter::new(&ctl) {
            let Ok(device) = u32::try_from(device) else { continue };
            for direction in [Direction::Capture, Direction::Playback] {
                let Ok(pcm_info) = ctl.pcm_info(device, 0, direction) else { continue };
                let pcm_name = pcm_info.get_name().unwrap_or_default();
                let hw = format!("hw:CARD={id},DEV={device}");
                found.push(Found {
                    pcm: format!("plughw:CARD={id},DEV={device}"),
                    label: format!("{card_name}: {pcm_name} ({id}, device {device})"),
                    direction,
                    offers: remembered(&hw, direction, offers(&hw, direction)),
                    is_default: card.get_index() == 0 && device == 0,
                });
            }
        }
    }
    found
}

/// The PCMs of the configuration with a fixed channel count (see the module doc).
fn configured() -> anyhow::Result<Vec<Found>> {
    let hints = alsa::device_name::HintIter::new_str(None, "pcm").context("ALSA lists no PCM hints")?;
    let mut found = Vec::new();
    for hint in hints {
        let Some(name) = hint.name else { continue };
        if name.contains(':') || OTHER_SOUND_SYSTEMS.contains(&name.as_str()) {
            continue;
        }
        // A hint's direction is None when the PCM does both.
        let directions = match hint.direction {
            Some(direction) => vec![direction],
            None => vec![Direction::Capture, Direction::Playback],
        };
        let label = match hint.desc.as_deref().and_then(|desc| desc.lines().next()) {
            Some(desc) => format!("{desc} ({name})"),
            None => name.clone(),
        };
        for direction in directions {
            match offers(&name, direction) {
                Ok(offers) if offers.0 <= MAX_DEVICE_CHANNELS => found.push(Found {
                    pcm: name.clone(),
                    label: label.clone(),
                    direction,
                    offers: Some(offers),
                    is_default: false,
                }),
                Ok(_) => tracing::debug!(pcm = name, "ALSA PCM takes any channel count: a converter, not listed"),
                Err(err) => tracing::debug!(pcm = name, error = %err, "ALSA PCM does not open: not listed"),
            }
        }
    }
    Ok(found)
}

/// (channels, rate) the PCM offers in `direction`: its most channels, and [`PREFERRED_RATE`]
/// when it takes it, else its rate nearest to it. Opens the PCM without blocking and closes it.
fn offers(pcm: &str, direction: Direction) -> alsa::Result<(u32, u32)> {
    let pcm = PCM::new(pcm, direction, true)?;
    let params = HwParams::any(&pcm)?;
    let channels = params.get_channels_max()?;
    let rate = if params.test_rate(PREFERRED_RATE).is_ok() {
        PREFERRED_RATE
    } else {
        PREFERRED_RATE.clamp(params.get_rate_min()?, params.get_rate_max()?)
    };
    Ok((channels, rate))
}

/// What a card's PCM offers, remembered per PCM and direction for the times it is busy (bridged
/// holds the selected card while it runs): the last answer this process got, else `None`.
fn remembered(pcm: &str, direction: Direction, now: alsa::Result<(u32, u32)>) -> Option<(u32, u32)> {
    /// (PCM, capture?) → (channels, rate).
    type Seen = BTreeMap<(String, bool), (u32, u32)>;
    static SEEN: Mutex<Seen> = Mutex::new(BTreeMap::new());
    let mut seen = lock(&SEEN);
    let key = (pcm.to_owned(), direction == Direction::Capture);
    match now {
        Ok(offers) => {
            seen.insert(key, offers);
            Some(offers)
        }
        Err(err) => {
            tracing::debug!(pcm, error = %err, "ALSA device does not open (busy?): channels as last seen");
            seen.get(&key).copied()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::tests::entry;

    fn found(pcm: &str, label: &str, direction: Direction, offers: Option<(u32, u32)>, is_default: bool) -> Found {
        Found { pcm: pcm.to_owned(), label: label.to_owned(), direction, offers, is_default }
    }

    #[test]
    fn entries_by_direction_with_alsa_ids() {
        let card = "plughw:CARD=PCH,DEV=0";
        let listing = listing(vec![
            found(card, "HDA Intel PCH: ALC892 Analog (PCH, device 0)", Direction::Capture, Some((2, 48_000)), true),
            found(card, "HDA Intel PCH: ALC892 Analog (PCH, device 0)", Direction::Playback, Some((8, 48_000)), true),
            found("stage", "Stage box (stage)", Direction::Capture, Some((18, 96_000)), false),
            // Busy and never seen free.
            found("plughw:CARD=USB,DEV=0", "USB: USB Audio (USB, device 0)", Direction::Playback, None, false),
        ]);
        assert_eq!(
            listing,
            DeviceListing {
                inputs: vec![
                    entry("alsa:plughw:CARD=PCH,DEV=0", "Input: HDA Intel PCH: ALC892 Analog (PCH, device 0)", 2, true),
                    DeviceEntry { sample_rate: 96_000, ..entry("alsa:stage", "Input: Stage box (stage)", 18, false) },
                ],
                outputs: vec![
                    entry(
                        "alsa:plughw:CARD=PCH,DEV=0",
                        "Output: HDA Intel PCH: ALC892 Analog (PCH, device 0)",
                        8,
                        true
                    ),
                    entry(
                        "alsa:plughw:CARD=USB,DEV=0",
                        "Output: USB: USB Audio (USB, device 0)",
                        UNKNOWN_CHANNELS,
                        false
                    ),
                ],
                platform: "alsa".to_owned(),
            }
        );
    }

    #[test]
    fn a_busy_device_keeps_what_it_offered_when_free() {
        let busy = || PCM::new("hw:CARD=NoSuchCard,DEV=0", Direction::Playback, true).map(|_| (0, 0));
        assert!(busy().is_err());
        let pcm = "hw:CARD=Remembered,DEV=3";
        assert_eq!(remembered(pcm, Direction::Playback, busy()), None);
        assert_eq!(remembered(pcm, Direction::Playback, Ok((8, 44_100))), Some((8, 44_100)));
        assert_eq!(remembered(pcm, Direction::Playback, busy()), Some((8, 44_100)));
        // Per direction.
        assert_eq!(remembered(pcm, Direction::Capture, busy()), None);
    }
}
