//! A datagram on the rooms' UDP port from anyone on the LAN: arbitrary bytes from a stranger's
//! address, with one panel's session open (its offer taken, its media not up).
//!
//! Invariants: no datagram panics the rooms or makes a session of its own.

#![no_main]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use partyline_rooms::endpoint::{Endpoint, EndpointConfig, LineRights};
use str0m::media::{Direction, MediaKind};
use str0m::{Candidate, RtcConfig};

fn endpoint() -> &'static Mutex<Endpoint> {
    static ENDPOINT: OnceLock<Mutex<Endpoint>> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        let config = EndpointConfig::new("127.0.0.1:0".parse().expect("an address"));
        let mut endpoint = Endpoint::bind(config).expect("the rooms' socket");
        // A panel's offer, as a browser makes it (str0m here, without a network).
        let now = Instant::now();
        let mut panel = RtcConfig::new()
            .set_crypto_provider(Arc::new(str0m::crypto::from_feature_flags()))
            .clear_codecs()
            .enable_opus(true, false)
            .build(now);
        let address: SocketAddr = "127.0.0.1:9".parse().expect("an address");
        panel.add_local_candidate(Candidate::host(address, "udp").expect("a candidate"));
        let mut change = panel.sdp_api();
        change.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
        let (offer, _) = change.apply().expect("an offer");
        let stage = [LineRights { line: "stage".to_owned(), talk: true, listen: true }];
        endpoint.accept(&offer.to_sdp_string(), &stage, now).expect("the panel's offer taken");
        Mutex::new(endpoint)
    })
}

fuzz_target!(|data: &[u8]| {
    let stranger: SocketAddr = "127.0.0.1:4000".parse().expect("an address");
    let mut endpoint = endpoint().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let now = Instant::now();
    endpoint.handle_datagram(stranger, data, now);
    endpoint.handle_timeouts(now);
    while endpoint.poll_event().is_some() {}
    // The panel's session may end by itself (no ICE check from it within its timeout).
    assert!(endpoint.session_count() <= 1, "a datagram made a session");
});
