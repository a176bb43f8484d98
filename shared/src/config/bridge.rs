//! `bridge:` how control drives bridged: the transport to Janus, ICE addresses and buffering.

use serde::{Deserialize, Serialize};

use super::JitterBufferMs;

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
    /// partyline's own rooms in bridged itself: the group's send and the room's mix as PCM, no
    /// codec and no network. control's choice when `media.engine` is `bridged`, never written
    /// in `bridge.transport` (the config refuses it there).
    Rooms,
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
