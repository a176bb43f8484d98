//! A panel's SDP offer, as control hands it to the rooms: arbitrary bytes as the offer's text,
//! for a session of two lines (one sendrecv, one listen-only).
//!
//! Invariants: no offer panics the rooms; an offer taken is answered with one audio m-line per
//! line, and its session ends cleanly (the rooms never fill up with the fuzzer's sessions).

#![no_main]

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use partyline_rooms::endpoint::{Endpoint, EndpointConfig, LineRights};

fn endpoint() -> &'static Mutex<Endpoint> {
    static ENDPOINT: OnceLock<Mutex<Endpoint>> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        let config = EndpointConfig::new("127.0.0.1:0".parse().expect("an address"));
        Mutex::new(Endpoint::bind(config).expect("the rooms' socket"))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(offer) = std::str::from_utf8(data) else { return };
    let lines = [
        LineRights { line: "stage".to_owned(), talk: true, listen: true },
        LineRights { line: "foh".to_owned(), talk: false, listen: true },
    ];
    let mut endpoint = endpoint().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let now = Instant::now();
    if let Ok((session, answer)) = endpoint.accept(offer, &lines, now) {
        assert_eq!(answer.matches("\r\nm=audio").count(), lines.len(), "an answer of one m-line per line:\n{answer}");
        assert!(endpoint.close(session, now), "the session taken is open");
    }
});
