//! partyline's own rooms in the real `partyline-bridged` on a private bus: panels (str0m, full
//! ICE, as browsers) join through `org.partyline.Rooms1` as control will call it, talk and are
//! heard on loopback; the interface's refusals are typed, and its sessions' comings and goings
//! are signals. Needs `dbus-daemon` (the services tier).

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use partyline_shared::rooms_bus::{Joined, RoomLine, RoomsError, RoomsProxy};
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::webrtc_panel::{Panel, opus_packets};

const WAIT: Duration = Duration::from_secs(10);
const FRAME: Duration = Duration::from_millis(20);

fn stage(talk: bool, listen: bool) -> Vec<RoomLine> {
    vec![RoomLine { room: "stage".to_owned(), talk, listen }]
}

async fn join(rooms: &RoomsProxy<'_>, lines: &[RoomLine]) -> (Panel, Joined) {
    let (mut panel, offer) = Panel::offer("127.0.0.1", lines.len());
    let joined = rooms.join(&offer, lines).await.expect("the rooms take the offer");
    panel.accept(&joined.answer);
    (panel, joined)
}

/// Drives the panels (each waiting up to 2 ms for a datagram in turn) until `done`, at most
/// [`WAIT`].
fn drive_until(panels: &mut [&mut Panel], mut done: impl FnMut(&mut [&mut Panel]) -> bool) {
    let started = Instant::now();
    while !done(panels) {
        assert!(started.elapsed() < WAIT, "not done within {WAIT:?}");
        for panel in panels.iter_mut() {
            panel.drive(Duration::from_millis(2));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panels_join_talk_and_are_heard_through_the_rooms_interface() {
    let bus = Bus::start();
    let bridged = Bridged::start(&bus, &[("PARTYLINE_ROOMS_ADDRESS", "127.0.0.1:0")]);
    let connection = bus.connect().await;
    let rooms = RoomsProxy::new(&connection).await.expect("the rooms' proxy");
    let address = rooms.address().await.expect("Address");
    assert!(address.starts_with("127.0.0.1:") && !address.ends_with(":0"), "{address}");
    let mut connected = rooms.receive_session_connected().await.expect("SessionConnected");
    let mut ended = rooms.receive_session_ended().await.expect("SessionEnded");

    let (mut ana, ana_joined) = join(&rooms, &stage(true, true)).await;
    let (mut ben, ben_joined) = join(&rooms, &stage(false, true)).await;
    assert!(ana_joined.answer.contains(&address.replace(':', " ")), "the answer's candidate is the rooms' address");
    drive_until(&mut [&mut ana, &mut ben], |panels| panels.iter().all(|p| p.connected));
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let signal = tokio::time::timeout(WAIT, connected.next()).await.expect("in time").expect("a signal");
        sessions.push(signal.args().expect("its argument").session);
    }
    sessions.sort_unstable();
    assert_eq!(sessions, vec![ana_joined.session, ben_joined.session], "SessionConnected for both");

    rooms.set_talking(ana_joined.session, 0, true).await.expect("Ana's talk key");
    let refused = rooms.set_talking(ben_joined.session, 0, true).await;
    assert!(matches!(refused, Err(RoomsError::NotAllowed(_))), "a listen-only line has no talk key: {refused:?}");
    let tone = opus_packets(440.0, 60);
    let mut next_frame = Instant::now();
    for packet in &tone {
        ana.send(0, packet);
        next_frame += FRAME;
        while Instant::now() < next_frame {
            for panel in [&mut ana, &mut ben] {
                panel.drive(Duration::from_millis(1));
            }
        }
    }
    let (ben_hears, ana_hears) = (ben.level_dbfs(0, 25), ana.level_dbfs(0, 25));
    assert!(ben_hears > -30.0, "Ben hears Ana at {ben_hears:.1} dBFS:\n{}", bridged.log());
    assert!(ana_hears < -60.0, "Ana hears herself at {ana_hears:.1} dBFS");

    ben.close();
    let signal = tokio::time::timeout(WAIT, ended.next()).await.expect("SessionEnded in time").expect("a signal");
    assert_eq!(signal.args().expect("its argument").session, ben_joined.session);
    assert!(rooms.leave(ana_joined.session).await.expect("Leave"), "Ana's session ends");
    assert!(!rooms.leave(ana_joined.session).await.expect("Leave"), "once");
}

/// A crew arriving together: 150 four-line panels join at once and every one connects (their
/// DTLS flights arrive in one burst on the rooms' one socket, whose buffers bridged sizes for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_joining_at_once_all_connects() {
    const CROWD: usize = 150;
    let bus = Bus::start();
    let bridged = Bridged::start(&bus, &[("PARTYLINE_ROOMS_ADDRESS", "127.0.0.1:0")]);
    let connection = bus.connect().await;
    let rooms = RoomsProxy::new(&connection).await.expect("the rooms' proxy");
    let lines: Vec<RoomLine> =
        (1..=4).map(|n| RoomLine { room: format!("line-{n}"), talk: true, listen: true }).collect();
    let (mut panels, offers): (Vec<Panel>, Vec<String>) = (0..CROWD).map(|_| Panel::offer("127.0.0.1", 4)).unzip();
    let joins = futures_util::future::join_all(offers.iter().map(|offer| rooms.join(offer, &lines))).await;
    for (panel, joined) in panels.iter_mut().zip(joins) {
        panel.accept(&joined.expect("the rooms take the offer").answer);
    }
    let started = Instant::now();
    while panels.iter().any(|panel| !panel.connected) {
        let connected = panels.iter().filter(|panel| panel.connected).count();
        assert!(started.elapsed() < WAIT, "{connected} of {CROWD} connected:\n{}", bridged.log());
        panels.iter_mut().for_each(|panel| panel.drive(Duration::ZERO));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rooms_refuse_with_typed_errors() {
    let bus = Bus::start();
    let _bridged = Bridged::start(&bus, &[("PARTYLINE_ROOMS_ADDRESS", "127.0.0.1:0")]);
    let connection = bus.connect().await;
    let rooms = RoomsProxy::new(&connection).await.expect("the rooms' proxy");
    let refused = rooms.join("v=0 this is not SDP", &stage(true, true)).await;
    assert!(matches!(refused, Err(RoomsError::BadOffer(_))), "{refused:?}");
    let (_, offer) = Panel::offer("127.0.0.1", 1);
    let refused = rooms.join(&offer, &[stage(true, true), stage(false, true)].concat()).await;
    assert!(matches!(refused, Err(RoomsError::BadOffer(_))), "two lines for one m-line: {refused:?}");
    let refused = rooms.set_talking(4242, 0, true).await;
    assert!(matches!(refused, Err(RoomsError::UnknownSession(_))), "{refused:?}");
}

/// Without an address for them, bridged runs no rooms and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_address_the_rooms_are_disabled() {
    let bus = Bus::start();
    let _bridged = Bridged::start(&bus, &[]);
    let connection = bus.connect().await;
    let rooms = RoomsProxy::new(&connection).await.expect("the rooms' proxy");
    assert_eq!(rooms.address().await.expect("Address"), "");
    let (_, offer) = Panel::offer("127.0.0.1", 1);
    let refused = rooms.join(&offer, &stage(true, true)).await;
    assert!(matches!(refused, Err(RoomsError::Disabled(_))), "{refused:?}");
}
