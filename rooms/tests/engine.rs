//! The rooms end to end on loopback: panels (str0m clients with full ICE, as browsers) join a
//! line through the [`Engine`], one talks a tone, and what each hears is decoded and measured.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use partyline_rooms::endpoint::{Endpoint, EndpointConfig, LineRights, SessionId};
use partyline_rooms::engine::{Engine, LocalLine, QUIET_AFTER, SessionEvent};
use partyline_rooms::mixer::MixConfig;
use partyline_testkit::audio::tone_db;
use partyline_testkit::webrtc_panel::{Panel, opus_packets};

const TICK: Duration = Duration::from_millis(20);
/// Connecting takes a few round trips on loopback; this is far beyond them.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

fn stage(talk: bool, listen: bool) -> Vec<LineRights> {
    vec![LineRights { line: "stage".to_owned(), talk, listen }]
}

fn engine() -> Engine {
    let endpoint = Endpoint::bind(EndpointConfig::new("127.0.0.1:0".parse().expect("an address"))).expect("bound");
    Engine::new(endpoint, MixConfig::default())
}

/// A panel joined with `rights`: its client and its session.
fn join(engine: &mut Engine, rights: &[LineRights]) -> (Panel, SessionId) {
    let (mut client, offer) = Panel::offer("127.0.0.1", rights.len());
    let (session, answer) = engine.join(&offer, rights, Instant::now()).expect("the offer is accepted");
    client.accept(&answer);
    (client, session)
}

/// Runs the engine's ticks, each followed by the clients taking what arrived and `each_tick`,
/// for `ticks` ticks; the sessions' events.
fn run(
    engine: &mut Engine,
    clients: &mut [&mut Panel],
    ticks: usize,
    mut each_tick: impl FnMut(&mut Engine, &mut [&mut Panel]),
) -> Vec<SessionEvent> {
    let mut events = Vec::new();
    let mut deadline = Instant::now();
    for _ in 0..ticks {
        deadline += TICK;
        events.extend(engine.run_tick(deadline).expect("the socket"));
        for client in clients.iter_mut() {
            client.drive(Duration::ZERO);
        }
        each_tick(engine, clients);
    }
    events
}

/// Runs ticks until every session in `sessions` has connected.
fn connect(engine: &mut Engine, clients: &mut [&mut Panel], sessions: &[SessionId]) {
    let started = Instant::now();
    let mut connected = Vec::new();
    while !sessions.iter().all(|s| connected.contains(&SessionEvent::Connected(*s))) {
        assert!(started.elapsed() < CONNECT_WITHIN, "not connected: {connected:?}");
        connected.extend(run(engine, clients, 1, |_, _| {}));
    }
    assert!(clients.iter().all(|c| c.connected), "every client says it is connected");
}

/// Ana talks a 440 Hz tone on the stage line: Ben, listening, hears it; Ana hears her mix-minus
/// (silence); Ben's packets while his key is off are dropped before decoding; the shared mix is
/// encoded once for Ben and Ana's own once.
#[test]
fn a_talker_is_heard_by_the_listeners_and_not_by_herself() {
    let mut engine = engine();
    let (mut ana, ana_session) = join(&mut engine, &stage(true, true));
    let (mut ben, ben_session) = join(&mut engine, &stage(true, true));
    connect(&mut engine, &mut [&mut ana, &mut ben], &[ana_session, ben_session]);
    engine.set_talking(ana_session, 0, true).expect("Ana's talk key");

    let tone = opus_packets(440.0, 75);
    let hum = opus_packets(660.0, 75);
    let mut sent = 0;
    let events = run(&mut engine, &mut [&mut ana, &mut ben], 75, |_, clients| {
        clients[0].send(0, &tone[sent]);
        clients[1].send(0, &hum[sent]);
        sent += 1;
    });
    let came_or_went: Vec<_> = events.iter().filter(|e| !matches!(e, SessionEvent::Receiving(..))).collect();
    assert_eq!(came_or_went, Vec::<&SessionEvent>::new(), "nobody came or went");

    let (ben_hears, ana_hears) = (ben.level_dbfs(0, 25), ana.level_dbfs(0, 25));
    assert!(ben_hears > -30.0, "Ben hears Ana at {ben_hears:.1} dBFS");
    assert!(ana_hears < -60.0, "Ana hears herself (or Ben's muted hum) at {ana_hears:.1} dBFS");
    let stats = engine.room("stage").expect("the stage room").stats();
    assert_eq!(stats.last_tick_encodes, 2, "the shared mix for Ben, Ana's own mix-minus: {stats:?}");
    assert!(stats.dropped_not_talking >= 60, "Ben's packets are dropped undecoded: {stats:?}");
    assert_eq!(engine.send_failures(), 0);
}

/// A local line that sends a 660 Hz tone and keeps what it hears.
#[derive(Debug, Default)]
struct Card {
    sent: Mutex<usize>,
    heard: Mutex<Vec<f32>>,
}

impl LocalLine for Card {
    fn send(&self, frame: &mut [f32]) -> bool {
        let mut sent = self.sent.lock().expect("lock");
        let first = *sent * frame.len();
        for (n, sample) in frame.iter_mut().enumerate() {
            let t = (first + n) as f32 / 48_000.0;
            *sample = 0.25 * (std::f32::consts::TAU * 660.0 * t).sin();
        }
        *sent += 1;
        true
    }

    fn hear(&self, frame: &[f32]) {
        self.heard.lock().expect("lock").extend_from_slice(frame);
    }
}

/// The card meets the room as a local line, without a codec: Ben hears it, it hears Ana (and
/// not itself), and it costs no encode; taken away, it is neither heard nor fed.
#[test]
fn a_local_line_is_heard_by_the_panels_and_hears_them_without_itself() {
    let mut engine = engine();
    let card = Arc::new(Card::default());
    engine.attach_local("stage", card.clone()).expect("attached");
    let (mut ana, ana_session) = join(&mut engine, &stage(true, true));
    let (mut ben, ben_session) = join(&mut engine, &stage(false, true));
    connect(&mut engine, &mut [&mut ana, &mut ben], &[ana_session, ben_session]);
    engine.set_talking(ana_session, 0, true).expect("Ana's talk key");

    let tone = opus_packets(440.0, 75);
    let mut sent = 0;
    card.heard.lock().expect("lock").clear();
    run(&mut engine, &mut [&mut ana, &mut ben], 75, |_, clients| {
        clients[0].send(0, &tone[sent]);
        sent += 1;
    });
    let ben_hears = ben.level_dbfs(0, 25);
    assert!(ben_hears > -20.0, "Ben hears Ana and the card at {ben_hears:.1} dBFS");
    assert!(ana.level_dbfs(0, 25) > -30.0, "Ana hears the card");
    let heard = card.heard.lock().expect("lock").clone();
    assert_eq!(heard.len(), 75 * 960, "the card hears every tick");
    let steady = &heard[960 * 40..];
    let (ana_heard, own_heard) = (tone_db(steady, 440.0), tone_db(steady, 660.0));
    assert!(ana_heard > -30.0, "the card hears Ana's 440 Hz at {ana_heard:.1} dBFS");
    assert!(own_heard < ana_heard - 40.0, "the card hears its own 660 Hz at {own_heard:.1} dBFS");
    let stats = engine.room("stage").expect("the stage room").stats();
    assert_eq!(stats.last_tick_encodes, 2, "the shared mix and Ana's own, no more: {stats:?}");

    assert!(engine.detach_local("stage"), "it had one");
    engine.set_talking(ana_session, 0, false).expect("Ana's key off");
    let fed = card.heard.lock().expect("lock").len();
    run(&mut engine, &mut [&mut ana, &mut ben], 50, |_, _| {});
    assert_eq!(card.heard.lock().expect("lock").len(), fed, "a card taken away is not fed");
    let ben_hears = ben.level_dbfs(0, 10);
    assert!(ben_hears < -60.0, "Ben hears nothing once the card is gone: {ben_hears:.1} dBFS");
}

/// A listen-only panel's line cannot talk: its packets never reach the room, and it hears.
#[test]
fn a_listen_only_line_hears_and_cannot_talk() {
    let mut engine = engine();
    let (mut ana, ana_session) = join(&mut engine, &stage(true, true));
    let (mut cy, cy_session) = join(&mut engine, &stage(false, true));
    connect(&mut engine, &mut [&mut ana, &mut cy], &[ana_session, cy_session]);
    engine.set_talking(ana_session, 0, true).expect("Ana's talk key");
    assert!(engine.set_talking(cy_session, 0, true).is_err(), "a listen-only line has no talk key");

    let tone = opus_packets(440.0, 50);
    let mut sent = 0;
    run(&mut engine, &mut [&mut ana, &mut cy], 50, |_, clients| {
        clients[0].send(0, &tone[sent]);
        clients[1].send(0, &tone[sent]);
        sent += 1;
    });
    assert!(cy.level_dbfs(0, 25) > -30.0, "Cy hears Ana");
    assert!(engine.endpoint().stats().refused_rtp > 0, "Cy's packets are refused at the endpoint");
    let stats = engine.room("stage").expect("the stage room").stats();
    assert_eq!(stats.dropped_not_talking, 0, "nothing of Cy's reaches the room: {stats:?}");
}

/// What was said of `session`'s inflow, in order.
fn receiving(events: &[SessionEvent], session: SessionId) -> Vec<bool> {
    events
        .iter()
        .filter_map(|event| match *event {
            SessionEvent::Receiving(s, receiving) if s == session => Some(receiving),
            _ => None,
        })
        .collect()
}

/// Ana sends, falls silent, sends again: she is said to be receiving at her first packet, not
/// receiving one [`QUIET_AFTER`] after her last, receiving again at her next; Ben, who only
/// listens and never sends, is said not to be receiving once (what control ends an idle WHIP
/// source on).
#[test]
fn a_session_that_stops_sending_is_said_quiet_after_a_second_and_receiving_at_its_next_packet() {
    let mut engine = engine();
    let (mut ana, ana_session) = join(&mut engine, &stage(true, false));
    let (mut ben, ben_session) = join(&mut engine, &stage(false, true));
    connect(&mut engine, &mut [&mut ana, &mut ben], &[ana_session, ben_session]);
    let tone = opus_packets(440.0, 25);
    let mut sent = 0;
    let mut events = run(&mut engine, &mut [&mut ana, &mut ben], 25, |_, clients| {
        clients[0].send(0, &tone[sent]);
        sent += 1;
    });
    assert_eq!(receiving(&events, ana_session), [true], "Ana sends: {events:?}");

    let last_packet = Instant::now();
    while !receiving(&events, ana_session).ends_with(&[false]) {
        assert!(last_packet.elapsed() < QUIET_AFTER * 3, "Ana's silence not said: {events:?}");
        events.extend(run(&mut engine, &mut [&mut ana, &mut ben], 1, |_, _| {}));
    }
    let said_after = last_packet.elapsed();
    assert!(
        said_after >= QUIET_AFTER - TICK && said_after <= QUIET_AFTER + 5 * TICK,
        "Ana's silence said {said_after:?} after her last packet"
    );
    events.extend(run(&mut engine, &mut [&mut ana, &mut ben], 3, |_, clients| {
        clients[0].send(0, &tone[0]);
    }));
    events.extend(run(&mut engine, &mut [&mut ana, &mut ben], 60, |_, _| {}));
    assert_eq!(receiving(&events, ana_session), [true, false, true, false], "Ana: {events:?}");
    assert_eq!(receiving(&events, ben_session), [false], "Ben, a listener: {events:?}");
}

/// A panel that closes its PeerConnection leaves its room; one that leaves is no longer sent to.
#[test]
fn a_closed_panel_leaves_its_room() {
    let mut engine = engine();
    let (mut ana, ana_session) = join(&mut engine, &stage(true, true));
    let (mut ben, ben_session) = join(&mut engine, &stage(false, true));
    connect(&mut engine, &mut [&mut ana, &mut ben], &[ana_session, ben_session]);
    assert_eq!(engine.room("stage").map(|r| r.len()), Some(2));

    ben.close();
    let started = Instant::now();
    let mut events = Vec::new();
    while !events.contains(&SessionEvent::Disconnected(ben_session)) {
        assert!(started.elapsed() < CONNECT_WITHIN, "Ben's close is not seen: {events:?}");
        events.extend(run(&mut engine, &mut [&mut ana], 1, |_, _| {}));
    }
    assert_eq!(engine.room("stage").map(|r| r.len()), Some(1), "Ben left the room");
    assert!(engine.leave(ana_session, Instant::now()), "Ana leaves");
    assert_eq!(engine.room("stage").map(|r| r.len()), Some(0));
    assert!(!engine.leave(ana_session, Instant::now()), "once");
}

/// A panel's new offer adds a line (a direct line opening): it hears that room from then on,
/// its first line's member untouched; the line stopped again leaves the room.
#[test]
fn a_line_added_by_a_new_offer_is_heard_and_a_stopped_one_leaves_its_room() {
    let mut engine = engine();
    let (mut ana, ana_session) = join(&mut engine, &stage(true, true));
    let foh = vec![LineRights { line: "foh".to_owned(), talk: true, listen: true }];
    let (mut ben, ben_session) = join(&mut engine, &foh);
    connect(&mut engine, &mut [&mut ana, &mut ben], &[ana_session, ben_session]);
    engine.set_talking(ana_session, 0, true).expect("Ana's key on Stage");
    engine.set_talking(ben_session, 0, true).expect("Ben's key on FOH");

    let offer = ana.reoffer(1, &[]);
    let both = [stage(true, true), foh.clone()].concat();
    let answer = engine.renegotiate(ana_session, &offer, &both, Instant::now()).expect("the new offer");
    ana.accept(&answer);
    assert_eq!(engine.room("foh").map(|r| r.len()), Some(2), "Ana joined FOH");
    assert_eq!(engine.room("stage").map(|r| r.len()), Some(1), "Ana is still on Stage");
    engine.set_talking(ana_session, 0, true).expect("her Stage key, kept by its member");
    let tone = opus_packets(440.0, 50);
    let mut sent = 0;
    run(&mut engine, &mut [&mut ana, &mut ben], 50, |_, clients| {
        clients[1].send(0, &tone[sent]);
        sent += 1;
    });
    assert!(ana.level_dbfs(1, 25) > -30.0, "Ana hears Ben on her new line");

    let stopped = [stage(true, true), vec![LineRights { line: "foh".to_owned(), talk: false, listen: false }]].concat();
    // The panel's next offer (an ICE restart here: this client cannot stop a line), with FOH's
    // line stopped by the server's rights.
    let offer = ana.ice_restart();
    let answer = engine.renegotiate(ana_session, &offer, &stopped, Instant::now()).expect("the offer");
    ana.accept(&answer);
    assert_eq!(engine.room("foh").map(|r| r.len()), Some(1), "Ana left FOH");
    assert!(engine.set_talking(ana_session, 1, true).is_err(), "no key on a stopped line");
    let heard = ana.heard.iter().filter(|h| h.line == 1).count();
    sent = 0;
    run(&mut engine, &mut [&mut ana, &mut ben], 25, |_, clients| {
        clients[1].send(0, &tone[sent]);
        sent += 1;
    });
    assert_eq!(ana.heard.iter().filter(|h| h.line == 1).count(), heard, "nothing sent on the stopped line");
}
