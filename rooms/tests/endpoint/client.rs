//! The endpoint's tests drive it and testkit's panels (str0m with full ICE, as browsers) in one
//! loop.

use std::time::{Duration, Instant};

use partyline_rooms::endpoint::{Endpoint, EndpointEvent};
pub use partyline_testkit::webrtc_panel::{Panel, opus_packets};

/// Drives the endpoint and the clients until `done` says so (on what the endpoint reported so
/// far), at most `within`: the endpoint waits on its socket at most 2 ms at a time, then each
/// client takes what arrived. Returns the endpoint's events.
pub fn drive_until(
    endpoint: &mut Endpoint,
    clients: &mut [&mut Panel],
    within: Duration,
    mut done: impl FnMut(&[EndpointEvent], &Endpoint, &[&mut Panel]) -> bool,
) -> Vec<EndpointEvent> {
    let deadline = Instant::now() + within;
    let mut events = Vec::new();
    loop {
        if done(&events, endpoint, clients) {
            return events;
        }
        assert!(Instant::now() < deadline, "not done within {within:?}; events so far: {events:?}");
        endpoint.receive_until(Instant::now() + Duration::from_millis(2)).expect("the endpoint's socket");
        while let Some(event) = endpoint.poll_event() {
            events.push(event);
        }
        for client in clients.iter_mut() {
            client.drive(Duration::ZERO);
        }
    }
}
