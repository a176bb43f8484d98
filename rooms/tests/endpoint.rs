//! The endpoint against in-process str0m clients (full ICE, as browsers are) on loopback: the
//! answer's directions, connection, audio each way within the lines' rights, sessions kept
//! apart, garbage and bad offers counted or refused, closing and the connect deadline.

#[path = "endpoint/browsers.rs"]
mod browsers;
#[path = "endpoint/client.rs"]
mod client;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Panel, drive_until, opus_packets};
use partyline_rooms::endpoint::{
    EndReason, Endpoint, EndpointConfig, EndpointError, EndpointEvent, LineRights, OfferError, SendError, SessionId,
};

const WITHIN: Duration = Duration::from_secs(10);
const PACKETS: usize = 10;

fn endpoint() -> Endpoint {
    Endpoint::bind(EndpointConfig::new("127.0.0.1:0".parse().expect("an address"))).expect("the endpoint binds")
}

fn rights(talk: bool, listen: bool) -> LineRights {
    LineRights { line: format!("line-{talk}-{listen}"), talk, listen }
}

/// The direction attribute of each m-section of `sdp`.
fn directions(sdp: &str) -> Vec<&str> {
    sdp.split("m=")
        .skip(1)
        .map(|section| {
            let lines = section.lines().map(str::trim);
            let mut found =
                lines.filter(|line| ["a=sendrecv", "a=sendonly", "a=recvonly", "a=inactive"].contains(line));
            found.next().expect("a direction")
        })
        .collect()
}

/// The answer as a panel that ignores its directions sees it: sendrecv everywhere.
fn ignoring_directions(answer: &str) -> String {
    answer.replace("a=sendonly", "a=sendrecv").replace("a=recvonly", "a=sendrecv")
}

/// A client connected to `endpoint` with `lines`' rights; returns it with its session.
fn connect(endpoint: &mut Endpoint, lines: &[LineRights], tamper: fn(&str) -> String) -> (Panel, SessionId, String) {
    let (mut client, offer) = Panel::offer("127.0.0.1", lines.len());
    let (session, answer) = endpoint.accept(&offer, lines, Instant::now()).expect("the offer is accepted");
    client.accept(&tamper(&answer));
    let events = drive_until(endpoint, &mut [&mut client], WITHIN, |events, _, clients| {
        clients[0].connected && events.contains(&EndpointEvent::Connected(session))
    });
    assert_eq!(events, vec![EndpointEvent::Connected(session)]);
    (client, session, answer)
}

/// The endpoint's audio events: (session, line, seq, payload).
fn audio(events: &[EndpointEvent]) -> Vec<(SessionId, usize, u16, Vec<u8>)> {
    events
        .iter()
        .filter_map(|event| match event {
            EndpointEvent::Audio { session, line, seq, payload, .. } => Some((*session, *line, *seq, payload.to_vec())),
            _ => None,
        })
        .collect()
}

fn consecutive(seqs: &[u64]) -> bool {
    seqs.windows(2).all(|pair| pair[1] == pair[0] + 1)
}

#[test]
fn a_panel_talks_and_listens_within_its_lines_rights() {
    let mut endpoint = endpoint();
    let lines = [rights(true, true), rights(false, true)];
    let (mut client, session, answer) = connect(&mut endpoint, &lines, ignoring_directions);

    assert_eq!(directions(&answer), ["a=sendrecv", "a=sendonly"], "{answer}");
    assert!(answer.contains("a=ice-lite"), "{answer}");
    let mids: Vec<&str> = answer.lines().filter_map(|line| line.trim().strip_prefix("a=mid:")).collect();
    assert!(answer.contains(&format!("a=group:BUNDLE {}", mids.join(" "))), "{answer}");
    assert_eq!(answer.matches("a=rtcp-mux").count(), 2, "{answer}");
    let port = endpoint.local_addr().port();
    assert_eq!(answer.matches("a=candidate:").count(), 1, "one host candidate: {answer}");
    assert!(answer.contains(&format!("127.0.0.1 {port} typ host")), "{answer}");

    // The panel talks on both lines, although the second is listen-only.
    let talked = opus_packets(440.0, PACKETS);
    for packet in &talked {
        client.send(0, packet);
        client.send(1, packet);
    }
    let events = drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, endpoint, _| {
        audio(events).len() >= PACKETS && endpoint.stats().refused_rtp >= PACKETS as u64
    });
    let heard = audio(&events);
    assert!(heard.iter().all(|(s, line, ..)| *s == session && *line == 0), "only line 0 talks: {heard:?}");
    assert_eq!(heard.iter().map(|(.., payload)| payload.clone()).collect::<Vec<_>>(), talked);
    let seqs: Vec<u64> = heard.iter().map(|(_, _, seq, _)| u64::from(*seq)).collect();
    assert!(consecutive(&seqs), "{seqs:?}");
    assert_eq!(endpoint.stats().refused_rtp, PACKETS as u64);

    // The server sends on both lines: it listens on both.
    let mixed = opus_packets(660.0, PACKETS);
    for (frame, packet) in mixed.iter().enumerate() {
        for line in 0..2 {
            let payload: Arc<[u8]> = packet.as_slice().into();
            endpoint.send_frame(session, line, payload, frame as u64 * 960, Instant::now()).expect("sent");
        }
    }
    drive_until(&mut endpoint, &mut [&mut client], WITHIN, |_, _, clients| clients[0].heard.len() >= 2 * PACKETS);
    for line in 0..2 {
        let on_line: Vec<_> = client.heard.iter().filter(|heard| heard.line == line).collect();
        assert_eq!(on_line.iter().map(|heard| heard.payload.clone()).collect::<Vec<_>>(), mixed, "line {line}");
        let seqs: Vec<u64> = on_line.iter().map(|heard| heard.seq).collect();
        assert!(consecutive(&seqs), "line {line}: {seqs:?}");
    }
}

#[test]
fn a_renegotiation_adds_a_line_and_changes_a_lines_rights() {
    let mut endpoint = endpoint();
    let (mut client, session, _) = connect(&mut endpoint, &[rights(true, true), rights(false, true)], str::to_owned);
    let offer = client.reoffer(1, &[1]);
    let lines = [rights(true, true), rights(true, true), rights(true, false)];
    let answer = endpoint.renegotiate(session, &offer, &lines, Instant::now()).expect("the new offer is accepted");
    assert_eq!(directions(&answer), ["a=sendrecv", "a=sendrecv", "a=recvonly"], "{answer}");
    client.accept(&answer);

    let talked = opus_packets(440.0, PACKETS);
    for packet in &talked {
        client.send(1, packet);
        client.send(2, packet);
    }
    let events =
        drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, _, _| audio(events).len() >= 2 * PACKETS);
    for line in [1, 2] {
        let heard: Vec<_> = audio(&events).into_iter().filter(|(_, l, ..)| *l == line).map(|(.., p)| p).collect();
        assert_eq!(heard, talked, "line {line}");
    }
    assert_eq!(endpoint.stats().refused_rtp, 0);
    let refused = endpoint.send_frame(session, 2, talked[0].as_slice().into(), 0, Instant::now());
    assert!(matches!(refused, Err(SendError::NotListening { line: 2, .. })), "{refused:?}");
    let wrong = endpoint.renegotiate(session, &offer, &lines[..2], Instant::now());
    assert!(matches!(wrong, Err(EndpointError::Offer(OfferError::LineCount { offered: 3, expected: 2 }))), "{wrong:?}");
}

#[test]
fn a_panel_that_trickles_its_candidates_elsewhere_connects_from_its_checks() {
    // A browser's offer has no candidates when it trickles them: the lite endpoint learns the
    // panel's address from its first binding request (peer-reflexive).
    let mut endpoint = endpoint();
    let (mut client, offer) = Panel::offer("127.0.0.1", 1);
    let without: String =
        offer.lines().filter(|line| !line.starts_with("a=candidate")).map(|l| format!("{l}\r\n")).collect();
    assert_ne!(without.len(), offer.len(), "the client's offer had a candidate");
    let (session, answer) = endpoint.accept(&without, &[rights(true, true)], Instant::now()).expect("accepted");
    client.accept(&answer);
    drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, _, clients| {
        clients[0].connected && events.contains(&EndpointEvent::Connected(session))
    });
}

#[test]
fn an_ice_restart_keeps_the_session_and_its_audio() {
    let mut endpoint = endpoint();
    let (mut client, session, first) = connect(&mut endpoint, &[rights(true, true)], str::to_owned);
    let offer = client.ice_restart();
    let answer = endpoint.renegotiate(session, &offer, &[rights(true, true)], Instant::now()).expect("accepted");
    assert_ne!(ufrag(&answer), ufrag(&first), "new credentials");
    client.accept(&answer);
    let packets = opus_packets(440.0, PACKETS);
    for packet in &packets {
        client.send(0, packet);
    }
    let events = drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, _, _| audio(events).len() >= PACKETS);
    assert_eq!(audio(&events).into_iter().map(|(.., payload)| payload).collect::<Vec<_>>(), packets);
    assert!(!events.iter().any(|event| matches!(event, EndpointEvent::Disconnected(..))), "{events:?}");
}

#[test]
fn two_sessions_are_kept_apart() {
    let mut endpoint = endpoint();
    let (mut first, first_id, _) = connect(&mut endpoint, &[rights(true, true), rights(true, true)], str::to_owned);
    let (mut second, second_id, answer) =
        connect(&mut endpoint, &[rights(true, false), rights(true, true)], str::to_owned);
    assert_ne!(first_id, second_id);
    assert_eq!(directions(&answer), ["a=recvonly", "a=sendrecv"]);

    let (from_first, from_second) = (opus_packets(300.0, PACKETS), opus_packets(900.0, PACKETS));
    for (a, b) in from_first.iter().zip(&from_second) {
        first.send(1, a);
        second.send(1, b);
    }
    let events = drive_until(&mut endpoint, &mut [&mut first, &mut second], WITHIN, |events, _, _| {
        audio(events).len() >= 2 * PACKETS
    });
    for (session, sent) in [(first_id, &from_first), (second_id, &from_second)] {
        let heard: Vec<_> = audio(&events).into_iter().filter(|(s, ..)| *s == session).collect();
        assert!(heard.iter().all(|(_, line, ..)| *line == 1));
        assert_eq!(&heard.into_iter().map(|(.., payload)| payload).collect::<Vec<_>>(), sent, "{session}");
    }

    let (to_first, to_second) = (opus_packets(500.0, PACKETS), opus_packets(700.0, PACKETS));
    for (frame, (a, b)) in to_first.iter().zip(&to_second).enumerate() {
        let rtp_time = frame as u64 * 960;
        endpoint.send_frame(first_id, 0, a.as_slice().into(), rtp_time, Instant::now()).expect("sent");
        endpoint.send_frame(second_id, 1, b.as_slice().into(), rtp_time, Instant::now()).expect("sent");
    }
    let refused = endpoint.send_frame(second_id, 0, to_second[0].as_slice().into(), 0, Instant::now());
    assert!(matches!(refused, Err(SendError::NotListening { line: 0, .. })), "{refused:?}");
    drive_until(&mut endpoint, &mut [&mut first, &mut second], WITHIN, |_, _, clients| {
        clients.iter().all(|client| client.heard.len() >= PACKETS)
    });
    for (client, sent, line) in [(&first, &to_first, 0), (&second, &to_second, 1)] {
        assert!(client.heard.iter().all(|heard| heard.line == line));
        assert_eq!(&client.heard.iter().map(|heard| heard.payload.clone()).collect::<Vec<_>>(), sent);
    }
}

/// A STUN binding request for `ufrag` whose MESSAGE-INTEGRITY is made up: well formed, so only
/// the session's password check can refuse it.
fn stun_request(ufrag: &str) -> Vec<u8> {
    let username = format!("{ufrag}:stranger");
    let mut attributes = Vec::new();
    attributes.extend_from_slice(&[0x00, 0x06]);
    attributes.extend_from_slice(&u16::try_from(username.len()).expect("short").to_be_bytes());
    attributes.extend_from_slice(username.as_bytes());
    attributes.resize(attributes.len().next_multiple_of(4), 0);
    attributes.extend_from_slice(&[0x00, 0x24, 0x00, 0x04, 0x6e, 0x00, 0x1e, 0xff]);
    attributes.extend_from_slice(&[0x00, 0x08, 0x00, 0x14]);
    attributes.extend_from_slice(&[0xAB; 20]);
    let mut message = vec![0x00, 0x01];
    message.extend_from_slice(&u16::try_from(attributes.len()).expect("short").to_be_bytes());
    message.extend_from_slice(&[0x21, 0x12, 0xA4, 0x42]);
    message.extend_from_slice(&[9; 12]);
    message.extend_from_slice(&attributes);
    message
}

/// The server's ufrag in an answer.
fn ufrag(answer: &str) -> &str {
    answer.lines().find_map(|line| line.trim().strip_prefix("a=ice-ufrag:")).expect("an ufrag")
}

#[test]
fn garbage_and_strangers_are_counted_and_go_nowhere() {
    let mut endpoint = endpoint();
    let (mut client, session, answer) = connect(&mut endpoint, &[rights(true, true)], str::to_owned);
    let stranger = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let rtp = [0x80, 111, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 1, 2, 3];
    let stranger_datagrams: [&[u8]; 4] = [&[0xFF; 40], &[], &rtp, &stun_request(ufrag(&answer))];
    for datagram in stranger_datagrams {
        stranger.send_to(datagram, endpoint.local_addr()).expect("sent");
    }
    // Garbage from the panel's own address is garbage too.
    endpoint.handle_datagram(client.address(), &[0xFF; 12], Instant::now());

    let events = drive_until(&mut endpoint, &mut [&mut client], WITHIN, |_, endpoint, _| {
        let stats = endpoint.stats();
        stats.garbage + stats.unknown_source >= 5
    });
    let stats = endpoint.stats();
    assert_eq!((stats.garbage, stats.unknown_source), (3, 2), "{stats:?}");
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(endpoint.session_count(), 1);
    // The session still works.
    client.send(0, &opus_packets(440.0, 1)[0]);
    let events = drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, _, _| !events.is_empty());
    assert!(matches!(events[0], EndpointEvent::Audio { session: s, line: 0, .. } if s == session), "{events:?}");
}

#[test]
fn bad_offers_are_refused_with_what_is_wrong() {
    let mut config = EndpointConfig::new("127.0.0.1:0".parse().expect("an address"));
    config.max_sessions = 1;
    let mut endpoint = Endpoint::bind(config).expect("binds");
    let (_client, offer) = Panel::offer("127.0.0.1", 2);
    let two = [rights(true, true), rights(true, false)];
    let refusal = |endpoint: &mut Endpoint, offer: &str, lines: &[LineRights]| match endpoint.accept(
        offer,
        lines,
        Instant::now(),
    ) {
        Err(EndpointError::Offer(error)) => error,
        other => panic!("not an offer's refusal: {other:?}"),
    };

    assert!(matches!(refusal(&mut endpoint, "hello", &two), OfferError::NotSdp(_)));
    assert_eq!(refusal(&mut endpoint, &offer, &two[..1]), OfferError::LineCount { offered: 2, expected: 1 });
    let no_opus = offer.replace("opus/48000/2", "PCMU/8000");
    assert_eq!(refusal(&mut endpoint, &no_opus, &two), OfferError::NoOpus { index: 0 });
    let bundle = offer.lines().find(|line| line.starts_with("a=group:BUNDLE")).expect("a bundle");
    let first_only = bundle.rsplit_once(' ').expect("two mids").0;
    let unbundled = offer.replace(bundle, first_only);
    assert_eq!(refusal(&mut endpoint, &unbundled, &two), OfferError::NotBundled);
    let no_audio: String =
        offer.lines().take_while(|line| !line.starts_with("m=")).map(|line| format!("{line}\r\n")).collect();
    assert_eq!(refusal(&mut endpoint, &no_audio, &two), OfferError::NoAudio);
    assert_eq!(endpoint.session_count(), 0);

    endpoint.accept(&offer, &two, Instant::now()).expect("a good offer");
    let (_other, another) = Panel::offer("127.0.0.1", 2);
    let full = endpoint.accept(&another, &two, Instant::now());
    assert!(matches!(full, Err(EndpointError::Full { max: 1 })), "{full:?}");
    assert_eq!(endpoint.stats().refused_full, 1);
}

#[test]
fn a_closed_session_says_nothing_more() {
    let mut endpoint = endpoint();
    let (mut client, session, _) = connect(&mut endpoint, &[rights(true, true)], str::to_owned);
    let packets = opus_packets(440.0, PACKETS);
    client.send(0, &packets[0]);
    drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, _, _| !events.is_empty());
    let before = endpoint.stats().unknown_source;

    assert!(endpoint.close(session, Instant::now()));
    assert!(!endpoint.close(session, Instant::now()), "closed once");
    for packet in &packets[1..] {
        client.send(0, packet);
    }
    let events = drive_until(&mut endpoint, &mut [&mut client], WITHIN, |_, endpoint, _| {
        endpoint.stats().unknown_source > before
    });
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(endpoint.session_count(), 0);
    let sent = endpoint.send_frame(session, 0, packets[0].as_slice().into(), 0, Instant::now());
    assert!(matches!(sent, Err(SendError::UnknownSession(s)) if s == session), "{sent:?}");
}

#[test]
fn a_panel_that_closes_ends_its_session() {
    let mut endpoint = endpoint();
    let (mut client, session, _) = connect(&mut endpoint, &[rights(true, true)], str::to_owned);
    client.close();
    let events = drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, _, _| !events.is_empty());
    assert_eq!(events, vec![EndpointEvent::Disconnected(session, EndReason::Closed)]);
    assert_eq!(endpoint.session_count(), 0);
}

#[test]
fn a_session_that_never_connects_is_dropped_at_its_deadline() {
    let mut config = EndpointConfig::new("127.0.0.1:0".parse().expect("an address"));
    config.connect_within = Duration::from_millis(200);
    config.answer_ptime = Some(10);
    let mut endpoint = Endpoint::bind(config).expect("binds");
    let (mut client, offer) = Panel::offer("127.0.0.1", 1);
    let accepted_at = Instant::now();
    let (session, answer) = endpoint.accept(&offer, &[rights(true, true)], accepted_at).expect("accepted");
    assert!(answer.contains("a=ptime:10\r\n") && answer.contains("a=maxptime:10\r\n"), "{answer}");
    client.accept(&answer);

    // The client never drives: no check reaches the endpoint.
    let events = drive_until(&mut endpoint, &mut [], WITHIN, |events, _, _| !events.is_empty());
    assert_eq!(events, vec![EndpointEvent::Disconnected(session, EndReason::NeverConnected)]);
    assert!(accepted_at.elapsed() >= Duration::from_millis(200));
    assert_eq!(endpoint.session_count(), 0);
}

/// The m-section of `sdp` whose a=mid is `mid`.
fn section<'a>(sdp: &'a str, mid: &str) -> &'a str {
    let tag = format!("a=mid:{mid}\r\n");
    sdp.split("m=").find(|section| section.contains(&tag)).expect("the m-section")
}

#[test]
fn browsers_offers_are_answered_with_their_opus_and_the_servers_directions() {
    let mut endpoint = endpoint();
    let lines = [rights(true, true), rights(false, true)];
    for (browser, offer, opus) in [
        ("chromium", browsers::chromium(), 111),
        ("firefox", browsers::firefox(false), 109),
        ("firefox max-bundle", browsers::firefox(true), 109),
    ] {
        let (_, answer) = endpoint.accept(&offer, &lines, Instant::now()).unwrap_or_else(|e| panic!("{browser}: {e}"));
        str0m::change::SdpAnswer::from_sdp_string(&answer).unwrap_or_else(|e| panic!("{browser}: {e}: {answer}"));
        assert_eq!(directions(&answer), ["a=sendrecv", "a=sendonly"], "{browser}: {answer}");
        assert!(answer.contains("a=group:BUNDLE 0 1\r\n"), "{browser}: {answer}");
        for mid in ["0", "1"] {
            let section = section(&answer, mid);
            assert!(section.starts_with(&format!("audio 9 UDP/TLS/RTP/SAVPF {opus}")), "{browser}: {section}");
            assert!(section.contains(&format!("a=rtpmap:{opus} opus/48000/2")), "{browser}: {section}");
            assert!(section.contains("a=rtcp-mux"), "{browser}: {section}");
            assert!(section.contains("a=setup:passive") || section.contains("a=setup:active"), "{browser}: {section}");
        }
    }
}

#[test]
fn an_offer_missing_any_one_line_is_answered_or_refused_without_panic() {
    let mut endpoint = endpoint();
    let offer = browsers::chromium();
    let lines: Vec<&str> = offer.lines().collect();
    for dropped in 0..lines.len() {
        let cut: String =
            lines.iter().enumerate().filter(|(i, _)| *i != dropped).map(|(_, l)| format!("{l}\n")).collect();
        if let Ok((session, _)) = endpoint.accept(&cut, &[rights(true, true), rights(true, false)], Instant::now()) {
            assert!(endpoint.close(session, Instant::now()));
        }
    }
    assert_eq!(endpoint.session_count(), 0);
}

/// A small seeded generator (xorshift): the same datagrams every run.
fn noise(seed: &mut u64, length: usize) -> Vec<u8> {
    (0..length)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

#[test]
fn noise_from_a_connected_panels_address_leaves_its_session_working() {
    let mut config = EndpointConfig::new("127.0.0.1:0".parse().expect("an address"));
    // All of it to str0m, none cut by the budget.
    config.datagrams_per_second = u32::MAX;
    let mut endpoint = Endpoint::bind(config).expect("binds");
    let (mut client, session, _) = connect(&mut endpoint, &[rights(true, true)], str::to_owned);
    let mut seed = 0x2545_F491_4F6C_DD1D;
    // Each first byte (STUN, DTLS, RTP, RTCP and none), random lengths and contents.
    for round in 0..2_000 {
        let mut datagram = noise(&mut seed, 1 + round % 300);
        datagram[0] = (round % 256) as u8;
        endpoint.handle_datagram(client.address(), &datagram, Instant::now());
    }
    let packet = &opus_packets(440.0, 1)[0];
    client.send(0, packet);
    let events = drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, _, _| !events.is_empty());
    assert!(
        matches!(&events[0], EndpointEvent::Audio { session: s, payload, .. } if *s == session && **payload == **packet),
        "{events:?}"
    );
}

#[test]
fn a_flood_from_a_panels_address_is_cut_to_its_sessions_budget() {
    let mut config = EndpointConfig::new("127.0.0.1:0".parse().expect("an address"));
    config.datagrams_per_second = 500;
    let mut endpoint = Endpoint::bind(config).expect("binds");
    let (mut client, session, _) = connect(&mut endpoint, &[rights(true, true)], str::to_owned);
    let rtp = [0x80, 111, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 1, 2, 3];
    let now = Instant::now();
    for _ in 0..1_000 {
        endpoint.handle_datagram(client.address(), &rtp, now);
    }
    // At most a fifth of a second's worth (100) went through.
    let limited = endpoint.stats().rate_limited;
    assert!((900..=1_000).contains(&limited), "{limited}");
    // The budget refills: the panel is heard again.
    client.send(0, &opus_packets(440.0, 1)[0]);
    let events = drive_until(&mut endpoint, &mut [&mut client], WITHIN, |events, _, _| !events.is_empty());
    assert!(matches!(events[0], EndpointEvent::Audio { session: s, .. } if s == session), "{events:?}");
}

#[test]
fn the_endpoint_needs_an_address_panels_can_reach() {
    let unspecified: SocketAddr = "0.0.0.0:0".parse().expect("an address");
    let refused = Endpoint::bind(EndpointConfig::new(unspecified));
    assert!(matches!(refused, Err(EndpointError::UnspecifiedAddress(_))), "{refused:?}");
}

/// A panel gone without a word (a closed tab, a phone out of reach: no DTLS close, its consent
/// checks stopped) is ended once ICE-lite's consent window (15 s in str0m's ICE agent) and the
/// agent's idle timer have passed.
#[test]
fn a_panel_that_vanishes_is_ended_when_its_consent_checks_stop() {
    let mut endpoint = endpoint();
    let (client, session, _) = connect(&mut endpoint, &[rights(true, true)], str::to_owned);
    drop(client);
    let gone = Instant::now();
    let events = drive_until(&mut endpoint, &mut [], Duration::from_secs(40), |events, _, _| !events.is_empty());
    assert_eq!(events, vec![EndpointEvent::Disconnected(session, EndReason::IceLost)]);
    let after = gone.elapsed();
    assert!(after >= Duration::from_secs(14), "ended after {after:?}, before its consent window");
    assert_eq!(endpoint.session_count(), 0);
}
