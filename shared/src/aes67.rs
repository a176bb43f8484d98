//! AES67 network audio as both daemons see it: what a stream's SDP must say for partyline to
//! receive it ([`Aes67Stream::parse`], the same check in control, which refuses a bad SDP with a
//! clear error, and in bridged, which receives it), the SDP partyline announces for its own
//! send ([`Aes67Stream::to_sdp`]), and SAP's packets (RFC 2974, [`sap`]), which carry both on the
//! LAN. SDP itself is read and written by `sdp-types`; this module holds AES67's rules on top.
//!
//! AES67's media profile, as partyline takes it: RTP over IPv4 multicast, L16 or L24 at 48 kHz,
//! 1 to 8 channels, 1 ms packets (any packet time is received), clocked by a PTP grandmaster
//! (`a=ts-refclk:ptp=IEEE1588-2008:GMID:DOMAIN`) with RTP time = PTP time × 48000 + offset
//! (`a=mediaclk:direct=OFFSET`, RFC 7273).

use std::net::Ipv4Addr;

use sdp_types::{
    Attribute, Connection, MediaClock, MediaClockSource, Origin, Ptp, PtpDomain, PtpServer, ReferenceClock, RtpMap,
    Session,
};
use serde::{Deserialize, Serialize};

use crate::sdp::{self, BadSdp};

/// SAP's multicast group for administratively scoped sessions (RFC 2974), where AES67 devices
/// and Dante Controller announce and look for streams.
pub const SAP_GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 255, 255);
/// SAP's UDP port.
pub const SAP_PORT: u16 = 9875;
/// AES67's one sampling rate here.
pub const RATE: u32 = 48_000;
/// The most channels of one stream (Dante's limit in AES67 mode, and the card's).
pub const MAX_CHANNELS: u8 = 8;
/// The RTP port of AES67 streams unless configured otherwise.
pub const DEFAULT_PORT: u16 = 5004;
/// The dynamic payload type partyline sends with.
pub const PAYLOAD_TYPE: u8 = 98;

/// A stream's sample format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Encoding {
    /// 16-bit linear PCM, big-endian (RFC 3551).
    L16,
    /// 24-bit linear PCM, big-endian (RFC 3190).
    L24,
}

impl Encoding {
    /// Its name in SDP and in GStreamer's RTP caps.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::L16 => "L16",
            Encoding::L24 => "L24",
        }
    }
}

/// An AES67 stream: what partyline needs of its SDP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Aes67Stream {
    /// The session name (`s=`): what Dante Controller and the admin see.
    pub name: String,
    /// The origin's session id (`o=`): with `origin`, what identifies the stream.
    pub session_id: u64,
    /// The origin's session version: bumped whenever the description changes.
    pub version: u64,
    /// The sender's own address (`o=`).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub origin: Ipv4Addr,
    /// The multicast group the packets go to.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub group: Ipv4Addr,
    pub port: u16,
    /// The multicast TTL (`c=` … `/TTL`).
    pub ttl: u8,
    pub encoding: Encoding,
    pub channels: u8,
    pub payload_type: u8,
    /// Packet time in µs (`a=ptime`, 1 ms when absent).
    pub packet_time_us: u32,
    /// The PTP domain of the stream's reference clock.
    pub ptp_domain: u8,
    /// The grandmaster the sender follows (EUI-64 as `XX-XX-…`), when it names one.
    pub grandmaster: Option<String>,
    /// RTP time = PTP time × 48000 + this (mod 2³²).
    pub media_clock_offset: u32,
}

impl Aes67Stream {
    /// Reads an AES67 stream from its SDP, or says what makes it one partyline cannot receive:
    /// `bad_sdp`, `no_audio`, `unsupported_encoding`, `unsupported_rate`, `bad_channels`,
    /// `not_multicast` or `no_ptp_clock`.
    pub fn parse(sdp: &str) -> Result<Aes67Stream, BadSdp> {
        let session = sdp::parse(sdp).map_err(|e| BadSdp::new("bad_sdp", format!("not an SDP: {e}")))?;
        let media = session
            .medias
            .iter()
            .find(|m| m.media == "audio")
            .ok_or_else(|| BadSdp::new("no_audio", "the SDP has no audio section (m=audio)"))?;
        let payload_type: u8 = sdp::formats(media)
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| BadSdp::new("bad_sdp", format!("m=audio names no payload type ({:?})", media.fmt)))?;
        let rtpmap = sdp::rtpmaps(media)
            .find(|m| m.payload_type == payload_type)
            .ok_or_else(|| BadSdp::new("bad_sdp", format!("no a=rtpmap for payload type {payload_type}")))?;
        let encoding = match rtpmap.encoding_name.to_ascii_uppercase().as_str() {
            "L16" => Encoding::L16,
            "L24" => Encoding::L24,
            other => {
                return Err(BadSdp::new(
                    "unsupported_encoding",
                    format!("encoding {other} is not AES67's: L16 or L24 are received"),
                ));
            }
        };
        if rtpmap.clock_rate != RATE {
            return Err(BadSdp::new(
                "unsupported_rate",
                format!("the stream runs at {} Hz: partyline receives AES67 at {RATE} Hz", rtpmap.clock_rate),
            ));
        }
        let channels = rtpmap.encoding_params.as_deref().map_or(Ok(1), str::parse::<u8>).unwrap_or(0);
        if !(1..=MAX_CHANNELS).contains(&channels) {
            return Err(BadSdp::new(
                "bad_channels",
                format!("{:?} channels: 1 to {MAX_CHANNELS} are received", rtpmap.encoding_params.unwrap_or_default()),
            ));
        }
        let connection = media
            .connections
            .first()
            .or(session.connection.as_ref())
            .ok_or_else(|| BadSdp::new("bad_sdp", "the SDP has no connection line (c=)"))?;
        let address = connection.try_address().map_err(|e| BadSdp::new("bad_sdp", format!("c=: {e}")))?;
        let group = match address.ip {
            std::net::IpAddr::V4(ip) if ip.is_multicast() => ip,
            ip => {
                return Err(BadSdp::new(
                    "not_multicast",
                    format!("the stream goes to {ip}: AES67 streams are received from an IPv4 multicast group"),
                ));
            }
        };
        let packet_time_us = match media.get_first_attribute_value("ptime") {
            Some(Some(ms)) => ms
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|ms| *ms > 0.0 && *ms <= 20.0)
                .map(|ms| (ms * 1000.0).round() as u32)
                .ok_or_else(|| BadSdp::new("bad_sdp", format!("a=ptime:{ms} is not a packet time in ms")))?,
            _ => 1000,
        };
        let (ptp_domain, grandmaster) = reference_clock(&session, media)?;
        let media_clock_offset = media_clock_offset(&session, media);
        let origin = match session.origin.try_parse_unicast_ip_address() {
            Ok(std::net::IpAddr::V4(ip)) => ip,
            _ => Ipv4Addr::UNSPECIFIED,
        };
        Ok(Aes67Stream {
            name: session.session_name.clone(),
            session_id: session.origin.sess_id.parse().unwrap_or(0),
            version: session.origin.sess_version,
            origin,
            group,
            port: media.port,
            ttl: address.ttl.unwrap_or(1),
            encoding,
            channels,
            payload_type,
            packet_time_us,
            ptp_domain,
            grandmaster,
            media_clock_offset,
        })
    }

    /// The stream's SDP, complete for AES67 receivers and Dante Controller: origin, session
    /// name, connection with TTL, `m=audio` with its `rtpmap`, `ptime`, `ts-refclk` (the
    /// grandmaster followed, or the domain's traceable PTP time before one is known),
    /// `mediaclk:direct=OFFSET`, and `recvonly` (receivers only listen).
    pub fn to_sdp(&self) -> String {
        let origin =
            Origin::builder_with_ip_addr(self.session_id.to_string(), self.version, self.origin).username("-").build();
        let mut media = sdp_types::Media::builder(
            sdp_types::MediaType::Audio,
            self.port,
            sdp_types::TransportProto::RtpAvp,
            self.payload_type,
        )
        .build();
        media.add_connection(Connection::from_ip_addr_ttl(self.group, Some(self.ttl)));
        media.add_attribute(RtpMap {
            payload_type: self.payload_type,
            encoding_name: self.encoding.name().to_owned(),
            clock_rate: RATE,
            encoding_params: Some(self.channels.to_string()),
        });
        let ptime = f64::from(self.packet_time_us) / 1000.0;
        media.add_attribute(Attribute::with_value("ptime", ptime));
        media.add_attribute(self.reference_clock());
        media.add_attribute(MediaClockSource::new(sdp_types::Direct::with_offset(self.media_clock_offset)));
        media.add_attribute(Attribute::new("recvonly"));
        let mut session = Session::builder(origin, &self.name).build();
        session.add_time(sdp_types::Time::new(0, 0));
        session.add_media(media);
        let mut text = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = session.write(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    }

    fn reference_clock(&self) -> ReferenceClock {
        let grandmaster = self.grandmaster.as_deref().and_then(parse_eui64);
        match (grandmaster, PtpDomain::try_from_number(self.ptp_domain)) {
            (Some(gmid), Ok(domain)) => ReferenceClock::from_ptp_gmid_with_domain(u64::from_be_bytes(gmid), domain),
            _ => ReferenceClock::new_ptp_traceable(sdp_types::PtpVersion::Ieee1588_2008),
        }
    }
}

/// The PTP domain and grandmaster of the stream's `ts-refclk` (media level first, then the
/// session's). A stream on another clock cannot be placed in time by RFC 7273: refused.
fn reference_clock(session: &Session, media: &sdp_types::Media) -> Result<(u8, Option<String>), BadSdp> {
    let clock = media
        .get_first_attribute_typed::<ReferenceClock>()
        .or_else(|| session.get_first_attribute_typed::<ReferenceClock>())
        .and_then(Result::ok)
        .ok_or_else(|| BadSdp::new("no_ptp_clock", "the SDP names no PTP reference clock (a=ts-refclk:ptp=…)"))?;
    match clock {
        ReferenceClock::Ptp(Ptp { server: PtpServer::GmidDomain { gmid, domain }, .. }) => {
            let domain = match domain {
                Some(PtpDomain::DomainNumber(n)) => n,
                _ => 0,
            };
            Ok((domain, Some(format_eui64(&gmid.bytes))))
        }
        ReferenceClock::Ptp(_) => Ok((0, None)),
        other => Err(BadSdp::new("no_ptp_clock", format!("the stream's reference clock is {other}, not PTP"))),
    }
}

/// The offset of `a=mediaclk:direct=OFFSET` (0 when absent or on another media clock).
fn media_clock_offset(session: &Session, media: &sdp_types::Media) -> u32 {
    let source = media
        .get_first_attribute_typed::<MediaClockSource>()
        .or_else(|| session.get_first_attribute_typed::<MediaClockSource>());
    match source {
        Some(Ok(MediaClockSource { clock: MediaClock::Direct(direct), .. })) => direct.offset.unwrap_or(0),
        _ => 0,
    }
}

/// An EUI-64 as SDP and Dante write it: `00-1D-C1-FF-FE-12-34-56`.
pub fn format_eui64(bytes: &[u8; 8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join("-")
}

/// The EUI-64 [`format_eui64`] writes (or with colons).
pub fn parse_eui64(text: &str) -> Option<[u8; 8]> {
    let bytes: Vec<u8> = text.split(['-', ':']).map(|b| u8::from_str_radix(b, 16)).collect::<Result<_, _>>().ok()?;
    bytes.try_into().ok()
}

/// SAP (RFC 2974): the announcements that carry streams' SDPs on the LAN.
pub mod sap {
    use std::net::Ipv4Addr;

    /// The payload type partyline writes and the only one it reads.
    const SDP_TYPE: &[u8] = b"application/sdp\0";

    /// One SAP packet: an announcement or, with `deletion`, its withdrawal.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SapPacket {
        pub deletion: bool,
        /// The announcer's address.
        pub origin: Ipv4Addr,
        /// The message id hash: with `origin`, names the announcement; changes with its SDP.
        pub hash: u16,
        pub sdp: String,
    }

    /// Why bytes are not a SAP packet partyline reads.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[error("not a SAP announcement partyline reads: {0}")]
    pub struct BadSap(&'static str);

    impl SapPacket {
        /// The packet's bytes: version 1, IPv4 origin, no authentication, no encryption or
        /// compression, payload type `application/sdp`.
        pub fn encode(&self) -> Vec<u8> {
            let flags = 0x20 | if self.deletion { 0x04 } else { 0 };
            let mut bytes = vec![flags, 0];
            bytes.extend(self.hash.to_be_bytes());
            bytes.extend(self.origin.octets());
            bytes.extend(SDP_TYPE);
            bytes.extend(self.sdp.as_bytes());
            bytes
        }

        /// Reads a packet: SAP version 1 with an IPv4 origin and an SDP payload (typed or not);
        /// authentication data is skipped; encrypted or compressed payloads are refused.
        pub fn decode(bytes: &[u8]) -> Result<SapPacket, BadSap> {
            let [flags, auth_words, hash_hi, hash_lo, rest @ ..] = bytes else {
                return Err(BadSap("shorter than a SAP header"));
            };
            if flags >> 5 != 1 {
                return Err(BadSap("not SAP version 1"));
            }
            if flags & 0x10 != 0 {
                return Err(BadSap("an IPv6 origin"));
            }
            if flags & 0x03 != 0 {
                return Err(BadSap("an encrypted or compressed payload"));
            }
            let origin: [u8; 4] = rest.get(..4).and_then(|o| o.try_into().ok()).ok_or(BadSap("no origin"))?;
            let payload =
                rest.get(4 + usize::from(*auth_words) * 4..).ok_or(BadSap("authentication data cut short"))?;
            let sdp = if payload.starts_with(b"v=0") {
                payload
            } else {
                let end = payload.iter().position(|b| *b == 0).ok_or(BadSap("no payload type"))?;
                if !payload[..end].eq_ignore_ascii_case(&SDP_TYPE[..SDP_TYPE.len() - 1]) {
                    return Err(BadSap("a payload other than application/sdp"));
                }
                &payload[end + 1..]
            };
            Ok(SapPacket {
                deletion: flags & 0x04 != 0,
                origin: Ipv4Addr::from(origin),
                hash: u16::from_be_bytes([*hash_hi, *hash_lo]),
                sdp: String::from_utf8_lossy(sdp).into_owned(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sap::SapPacket;
    use super::*;

    /// What a Dante device in AES67 mode announces (its shape: a device's own addresses).
    const DANTE: &str = "v=0\n\
        o=- 1311738121 1311738121 IN IP4 192.168.1.232\n\
        s=Console aux 1-8\n\
        c=IN IP4 239.69.83.67/32\n\
        t=0 0\n\
        a=keywds:Dante\n\
        m=audio 5004 RTP/AVP 97\n\
        i=8 channels\n\
        a=recvonly\n\
        a=rtpmap:97 L24/48000/8\n\
        a=ptime:1\n\
        a=ts-refclk:ptp=IEEE1588-2008:00-1D-C1-FF-FE-0E-10-C4:0\n\
        a=mediaclk:direct=142217993\n";

    #[test]
    fn a_dante_stream_is_read() {
        let stream = Aes67Stream::parse(DANTE).expect("an AES67 stream");
        assert_eq!(stream.name, "Console aux 1-8");
        assert_eq!((stream.session_id, stream.version), (1_311_738_121, 1_311_738_121));
        assert_eq!(stream.origin, Ipv4Addr::new(192, 168, 1, 232));
        assert_eq!((stream.group, stream.port, stream.ttl), (Ipv4Addr::new(239, 69, 83, 67), 5004, 32));
        assert_eq!((stream.encoding, stream.channels, stream.payload_type), (Encoding::L24, 8, 97));
        assert_eq!(stream.packet_time_us, 1000);
        assert_eq!((stream.ptp_domain, stream.grandmaster.as_deref()), (0, Some("00-1D-C1-FF-FE-0E-10-C4")));
        assert_eq!(stream.media_clock_offset, 142_217_993);
    }

    #[test]
    fn partyline_s_sdp_reads_back_with_every_aes67_field() {
        let stream = Aes67Stream {
            name: "partyline outputs".into(),
            session_id: 77,
            version: 3,
            origin: Ipv4Addr::new(10, 0, 0, 5),
            group: Ipv4Addr::new(239, 69, 1, 2),
            port: 5004,
            ttl: 16,
            encoding: Encoding::L24,
            channels: 8,
            payload_type: PAYLOAD_TYPE,
            packet_time_us: 1000,
            ptp_domain: 3,
            grandmaster: Some("00-11-22-FF-FE-33-44-55".into()),
            media_clock_offset: 0,
        };
        let sdp = stream.to_sdp();
        for line in [
            "o=- 77 3 IN IP4 10.0.0.5",
            "s=partyline outputs",
            "c=IN IP4 239.69.1.2/16",
            "m=audio 5004 RTP/AVP 98",
            "a=rtpmap:98 L24/48000/8",
            "a=ptime:1",
            "a=ts-refclk:ptp=IEEE1588-2008:00-11-22-FF-FE-33-44-55:3",
            "a=mediaclk:direct=0",
        ] {
            assert!(sdp.lines().any(|l| l == line), "{line:?} missing from\n{sdp}");
        }
        assert_eq!(Aes67Stream::parse(&sdp), Ok(stream));
    }

    #[test]
    fn streams_partyline_cannot_receive_get_a_clear_error() {
        let cases = [
            ("a=rtpmap:97 L24/48000/8", "a=rtpmap:97 L24/44100/8", "unsupported_rate", "44100 Hz"),
            ("a=rtpmap:97 L24/48000/8", "a=rtpmap:97 opus/48000/2", "unsupported_encoding", "OPUS"),
            ("a=rtpmap:97 L24/48000/8", "a=rtpmap:97 L24/48000/16", "bad_channels", "\"16\" channels"),
            ("c=IN IP4 239.69.83.67/32", "c=IN IP4 192.168.1.232", "not_multicast", "192.168.1.232"),
            ("a=ts-refclk:ptp=IEEE1588-2008:00-1D-C1-FF-FE-0E-10-C4:0", "a=ts-refclk:local", "no_ptp_clock", "local"),
            ("m=audio 5004 RTP/AVP 97", "m=video 5004 RTP/AVP 97", "no_audio", "m=audio"),
            ("v=0", "hello", "bad_sdp", "not an SDP"),
        ];
        for (from, to, code, says) in cases {
            let error = Aes67Stream::parse(&DANTE.replace(from, to)).expect_err(to);
            assert_eq!(error.code, code, "{to}: {error}");
            assert!(error.message.contains(says), "{to}: {error}");
        }
    }

    #[test]
    fn sap_packets_round_trip_and_foreign_ones_are_refused() {
        let packet = SapPacket { deletion: false, origin: Ipv4Addr::new(10, 0, 0, 5), hash: 0xbeef, sdp: DANTE.into() };
        let bytes = packet.encode();
        assert_eq!(&bytes[..8], &[0x20, 0, 0xbe, 0xef, 10, 0, 0, 5]);
        assert_eq!(SapPacket::decode(&bytes), Ok(packet.clone()));
        let deletion = SapPacket { deletion: true, ..packet };
        assert_eq!(SapPacket::decode(&deletion.encode()).map(|p| p.deletion), Ok(true));
        // An untyped payload (RFC 2974 allows it) and authentication data are read.
        let mut untyped = vec![0x20, 1, 0, 1, 10, 0, 0, 6, 9, 9, 9, 9];
        untyped.extend(b"v=0\r\n");
        assert_eq!(SapPacket::decode(&untyped).map(|p| p.sdp), Ok("v=0\r\n".into()));
        for refused in [&[0x20, 0][..], &[0x00, 0, 0, 1, 10, 0, 0, 5], &[0x22, 0, 0, 1, 10, 0, 0, 5, b'v']] {
            assert!(SapPacket::decode(refused).is_err(), "{refused:?}");
        }
    }
}
