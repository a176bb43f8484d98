//! `audio.aes67`: AES67 network audio as the card (Dante in AES67 mode, RAVENNA, Livewire+,
//! Q-SYS). With an `interface`, bridged follows the venue's PTP grandmaster there, receives the
//! stream of `receiveSdp` as card inputs 1..N and sends the card's outputs as a stream of its own,
//! announced by SAP; the device id [`crate::card::AES67_DEVICE`] selects it as a direction of the
//! card (`audio.device`).
//!
//! ```yaml
//! audio:
//!   device: { inputDeviceId: aes67, outputDeviceId: aes67 }
//!   aes67:
//!     interface: eth1          # the media network
//!     ptpDomain: 0
//!     grandmasters: [00-1D-C1-FF-FE-12-34-56]   # the only grandmasters followed
//!     receiveSdp: |            # pasted, or copied from a SAP announcement by the admin UI
//!       v=0
//!       …
//!     receiveLatencyMs: 2
//!     send: { name: partyline, address: 239.69.12.34, port: 5004, channels: 8 }
//! ```

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::aes67::{Aes67Stream, DEFAULT_PORT, MAX_CHANNELS, format_eui64, parse_eui64};

/// The receive latency when none is configured: the jitter buffer in front of the card, on top
/// of one card period (bridged mixes 5 ms blocks).
pub const DEFAULT_RECEIVE_LATENCY_MS: u32 = 2;
/// The most receive latency allowed (AES67 devices offer up to a few tens of ms).
pub const MAX_RECEIVE_LATENCY_MS: u32 = 100;
/// The most grandmasters `grandmasters` lists (a venue has one and a spare or two).
pub const MAX_GRANDMASTERS: usize = 8;
/// Dante's multicast range in AES67 mode, where partyline's send goes by default.
pub const DEFAULT_SEND_RANGE: &str = "239.69.0.0/16";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Aes67Config {
    /// The network interface of the media network (PTP and the streams); `null`: AES67 is off.
    #[cfg_attr(feature = "openapi", schema(example = "eth1"))]
    pub interface: Option<String>,
    /// The PTP domain of the venue's grandmaster (0..=127).
    pub ptp_domain: u8,
    /// The clock identities (EUI-64, as SDP's `ts-refclk` writes them) of the grandmasters
    /// partyline follows; any other that wins the domain is not followed (partyline's clock
    /// holds, running free, and warns). Empty: any grandmaster is followed.
    #[cfg_attr(feature = "openapi", schema(example = json!(["00-1D-C1-FF-FE-12-34-56"])))]
    pub grandmasters: Vec<String>,
    /// The SDP of the stream heard on the card's inputs (its channel k on input k); `null`:
    /// none, the inputs are silent.
    pub receive_sdp: Option<String>,
    /// The receive jitter buffer, 1..=100 ms.
    pub receive_latency_ms: u32,
    pub send: Aes67Send,
}

impl Default for Aes67Config {
    fn default() -> Self {
        Self {
            interface: None,
            ptp_domain: 0,
            grandmasters: Vec::new(),
            receive_sdp: None,
            receive_latency_ms: DEFAULT_RECEIVE_LATENCY_MS,
            send: Aes67Send::default(),
        }
    }
}

/// `audio.aes67.send`: the stream of the card's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Aes67Send {
    /// The session name Dante Controller shows.
    pub name: String,
    /// The multicast group; `null`: one in `range` derived from the name and the interface's
    /// address (stable across restarts).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "239.69.12.34"))]
    pub address: Option<Ipv4Addr>,
    /// Where a derived address is taken from, `A.B.C.D/LEN` inside 239.0.0.0/8.
    pub range: String,
    pub port: u16,
    /// Card outputs 1..channels are sent, 1..=8.
    pub channels: u8,
    /// Multicast TTL (routers on the way decrement it).
    pub ttl: u8,
}

impl Default for Aes67Send {
    fn default() -> Self {
        Self {
            name: "partyline".into(),
            address: None,
            range: DEFAULT_SEND_RANGE.into(),
            port: DEFAULT_PORT,
            channels: MAX_CHANNELS,
            ttl: 16,
        }
    }
}

/// A multicast range `A.B.C.D/LEN` inside the administratively scoped 239.0.0.0/8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MulticastRange {
    pub base: Ipv4Addr,
    pub prefix: u8,
}

impl MulticastRange {
    pub fn parse(text: &str) -> Result<MulticastRange, String> {
        let (base, prefix) = text.split_once('/').ok_or_else(|| format!("{text:?} is not A.B.C.D/LEN"))?;
        let base: Ipv4Addr = base.parse().map_err(|_| format!("{base:?} is not an IPv4 address"))?;
        let prefix: u8 = prefix.parse().ok().filter(|p| (8..=30).contains(p)).ok_or("LEN must be 8..=30")?;
        if base.octets()[0] != 239 {
            return Err(format!("{text:?} is outside 239.0.0.0/8, the administratively scoped multicast range"));
        }
        Ok(MulticastRange { base, prefix })
    }

    fn mask(self) -> u32 {
        u32::MAX << (32 - u32::from(self.prefix))
    }

    pub fn contains(self, address: Ipv4Addr) -> bool {
        u32::from(address) & self.mask() == u32::from(self.base) & self.mask()
    }

    /// An address of the range picked by `seed`, never the range's first or last.
    pub fn pick(self, seed: u64) -> Ipv4Addr {
        let hosts = !self.mask();
        let host = (seed % u64::from(hosts - 1)) as u32 + 1;
        Ipv4Addr::from(u32::from(self.base) & self.mask() | host)
    }
}

impl Aes67Config {
    pub fn is_default(&self) -> bool {
        *self == Aes67Config::default()
    }

    /// `grandmasters` as bridged takes them: each written as [`format_eui64`] writes it.
    pub fn grandmaster_ids(&self) -> Result<Vec<String>, String> {
        if self.grandmasters.len() > MAX_GRANDMASTERS {
            return Err(format!("{} listed: at most {MAX_GRANDMASTERS}", self.grandmasters.len()));
        }
        let mut ids = Vec::new();
        for text in &self.grandmasters {
            let id = parse_eui64(text)
                .map(|bytes| format_eui64(&bytes))
                .ok_or_else(|| format!("{text:?} is not a clock identity (an EUI-64: 00-1D-C1-FF-FE-12-34-56)"))?;
            if ids.contains(&id) {
                return Err(format!("{id} is listed twice"));
            }
            ids.push(id);
        }
        Ok(ids)
    }

    /// Checks the section; `Err((field, message))` names the field under `audio.aes67`.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(interface) = &self.interface {
            let valid = !interface.is_empty()
                && interface.len() <= 15
                && interface.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c));
            if !valid {
                return Err(("interface", format!("{interface:?} is not a network interface name")));
            }
        }
        if self.ptp_domain > 127 {
            return Err(("ptpDomain", format!("{}: PTP domains are 0..=127", self.ptp_domain)));
        }
        self.grandmaster_ids().map_err(|m| ("grandmasters", m))?;
        if let Some(sdp) = &self.receive_sdp {
            Aes67Stream::parse(sdp).map_err(|e| ("receiveSdp", e.message))?;
        }
        if !(1..=MAX_RECEIVE_LATENCY_MS).contains(&self.receive_latency_ms) {
            return Err(("receiveLatencyMs", format!("{}: 1..={MAX_RECEIVE_LATENCY_MS} ms", self.receive_latency_ms)));
        }
        let send = &self.send;
        if send.name.trim().is_empty() || send.name.len() > 64 || send.name.chars().any(char::is_control) {
            return Err(("send.name", "1 to 64 characters, no control characters".into()));
        }
        let range = MulticastRange::parse(&send.range).map_err(|m| ("send.range", m))?;
        if let Some(address) = send.address {
            if address.octets()[0] != 239 {
                return Err(("send.address", format!("{address} is not in the multicast range 239.0.0.0/8")));
            }
            if !range.contains(address) {
                return Err(("send.address", format!("{address} is outside send.range {}", send.range)));
            }
        }
        if send.port < 1024 {
            return Err(("send.port", format!("{}: 1024..=65535", send.port)));
        }
        if !(1..=MAX_CHANNELS).contains(&send.channels) {
            return Err(("send.channels", format!("{}: 1..={MAX_CHANNELS}", send.channels)));
        }
        if send.ttl == 0 {
            return Err(("send.ttl", "at least 1".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_derived_address_stays_inside_its_range() {
        let range = MulticastRange::parse(DEFAULT_SEND_RANGE).expect("the default range");
        for seed in [0, 1, 65_533, 65_534, u64::MAX] {
            let address = range.pick(seed);
            assert!(range.contains(address), "{address}");
            assert!(![Ipv4Addr::new(239, 69, 0, 0), Ipv4Addr::new(239, 69, 255, 255)].contains(&address));
        }
        assert!(MulticastRange::parse("224.1.0.0/16").is_err());
        assert!(MulticastRange::parse("239.69.0.0").is_err());
    }

    #[test]
    fn the_section_s_mistakes_are_named() {
        type Break = fn(&mut Aes67Config);
        let cases: [(Break, &str); 9] = [
            (|c| c.interface = Some("eth0; rm".into()), "interface"),
            (|c| c.ptp_domain = 128, "ptpDomain"),
            (|c| c.grandmasters = vec!["00-1D-C1-FF-FE-12-34".into()], "grandmasters"),
            (
                |c| c.grandmasters = vec!["00-1d-c1-ff-fe-12-34-56".into(), "00:1D:C1:FF:FE:12:34:56".into()],
                "grandmasters",
            ),
            (|c| c.grandmasters = (0..9).map(|n| format!("00-1D-C1-FF-FE-12-34-{n:02}")).collect(), "grandmasters"),
            (|c| c.receive_sdp = Some("v=0\r\nhello".into()), "receiveSdp"),
            (|c| c.receive_latency_ms = 0, "receiveLatencyMs"),
            (|c| c.send.address = Some(Ipv4Addr::new(239, 70, 0, 1)), "send.address"),
            (|c| c.send.channels = 9, "send.channels"),
        ];
        for (break_it, field) in cases {
            let mut config = Aes67Config { interface: Some("eth1".into()), ..Aes67Config::default() };
            assert_eq!(config.check(), Ok(()));
            break_it(&mut config);
            assert_eq!(config.check().map_err(|(f, _)| f), Err(field));
        }
    }

    #[test]
    fn grandmasters_are_written_one_way_whatever_way_they_were_typed() {
        let config = Aes67Config {
            grandmasters: vec!["00-1d-c1-ff-fe-12-34-56".into(), "02:00:00:FF:FE:79:00:11".into()],
            ..Aes67Config::default()
        };
        assert_eq!(
            config.grandmaster_ids(),
            Ok(vec!["00-1D-C1-FF-FE-12-34-56".into(), "02-00-00-FF-FE-79-00-11".into()])
        );
    }
}
