//! The headless crew (`partyline-crew`) against the real stack: control, Janus with ICE on
//! `pl0`, and bridged on the PipeWire test card. Its members join as panels do (token, event
//! stream, `/janus` proxy, one WebRTC participant per line), talk in turns and judge what they
//! hear; a crowd joins at once; some members vanish without leaving.
//!
//! Needs root and the network namespace of `scripts/netns-run` (DESIGN §6). The figures are
//! printed (`CREW …` lines; `--nocapture` shows them).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use partyline_crew::control_api::{ControlApi, Lines};
use partyline_crew::janus_ws::JanusSession;
use partyline_crew::media::{Link, Loss, Offer, Path, direction};
use partyline_crew::{Crew, Options, PersonHeard, Report, TlsCheck};
use partyline_testkit::audio::{RATE, Recording};
use partyline_testkit::card::{CardKind, CardServer};
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::janus::Probe;
use partyline_testkit::{ICE_ADDRESS, SoundServer, require_namespace, wait_for};
use reqwest::StatusCode;
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use partyline_testkit::control::Control;
use partyline_testkit::events::Subscriber;
use partyline_testkit::stack::{Stack, becomes_revoked, crew_options as options, joined};

/// Joins and media with debug builds on a busy machine.
const SLOW: Duration = Duration::from_secs(20);
const GROUPS: &str = "  - name: Stage\n  - name: FOH\n";
/// A two-line position: both lines heard and talked on.
const DECK: &str = "positions:\n  - name: Deck\n    listen: [stage, foh]\n    talk: [stage, foh]\n";

fn deck() -> Lines {
    Lines::Position { position: "deck".into() }
}

/// The crew members control lists, with their lines' group ids.
async fn listed_crew(control: &Control) -> Vec<(String, String, Vec<String>)> {
    let (_, body) = control.get_json("/admin/users?state=all").await;
    let users = body["users"].as_array().cloned().unwrap_or_default();
    users
        .iter()
        .filter(|u| u["kind"] == "crew")
        .map(|u| {
            let lines = u["lines"].as_array().map_or_else(Vec::new, |lines| {
                lines.iter().filter_map(|l| l["groupId"].as_str().map(str::to_owned)).collect()
            });
            (
                u["identity"].as_str().unwrap_or_default().to_owned(),
                u["state"].as_str().unwrap_or_default().to_owned(),
                lines,
            )
        })
        .collect()
}

/// The line `room` of `person`'s figures.
fn line<'a>(person: &'a PersonHeard, room: &str) -> &'a partyline_crew::media::Heard {
    person
        .lines
        .iter()
        .find(|(_, r, _)| r == room)
        .map(|(_, _, h)| h)
        .unwrap_or_else(|| panic!("{} has no line {room}", person.name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_panels_talk_in_turn_and_each_line_hears_only_its_talker() {
    require_namespace();
    let card = CardServer::start(CardKind::PipeWire);
    for name in ["card_in", "card_out"] {
        card.add_card(name, RATE);
    }
    let bus = Bus::start();
    let stack = Stack::start_media(&format!("{GROUPS}{DECK}"), &bus).await;
    let control = &stack.control;
    let _bridged = Bridged::on_card(&bus, &card, &[]);
    stack.bridge_becomes("bridged seen by control", SLOW, |b| b["state"] == "idle").await;
    let device = json!({ "inputDeviceId": "card_in.monitor", "outputDeviceId": "card_out", "sampleRate": RATE });
    assert_eq!(control.post_json("/admin/audio/device", device).await.0, StatusCode::OK);
    let desk = json!({ "name": "Desk", "group": "stage", "inputChannel": 0, "outputChannel": 1 });
    assert_eq!(control.post_json("/admin/server-users", desk).await.0, StatusCode::CREATED);
    stack.bridge_becomes("Desk joined", SLOW, |b| joined(b, &["Desk"])).await;

    let mut crew = Crew::new(options(control, deck())).expect("a crew");
    assert_eq!(crew.add(3, Duration::from_secs(1)).await, 3, "{:?}\n{}", crew.joins, control.log_text());
    // control lists the three, connected, each with both lines.
    let listed = wait_for("three crew members connected", SLOW, async || {
        let listed = listed_crew(control).await;
        (listed.len() == 3 && listed.iter().all(|(_, state, _)| state == "connected")).then_some(listed)
    })
    .await;
    for (identity, _, lines) in &listed {
        assert_eq!(lines, &["stage", "foh"], "{identity}: {listed:?}");
    }
    let tones: Vec<(String, f64)> = crew.people[0]
        .credentials
        .lines
        .iter()
        .enumerate()
        .map(|(i, l)| (l.room_name.clone(), f64::from(partyline_crew::media::voice::line_tone(i))))
        .collect();
    let stage_tone = tones.iter().find(|(room, _)| room == "stage").expect("stage").1;

    // Three turns of 3 s: on each line, each member talks once and hears the other two.
    let output = Recording::start(&card, "card_out.monitor");
    crew.heard().await;
    crew.talk_for(Duration::from_secs(9)).await;
    let heard = crew.heard().await;
    crew.silence().await;
    for person in &heard {
        for (room, _) in &tones {
            let figures = line(person, room);
            let (tone, other) = (figures.tone_db(), figures.other_db());
            println!(
                "CREW {} on {room}: {} bursts, tone {tone:.1?} dBFS, other {other:.1?} dBFS, mouth-to-ear {:.0?} ms, gaps {}",
                person.name, figures.bursts, figures.mouth_to_ear_ms, figures.gaps
            );
            // Two turns of 3 s as a listener: about 12 bursts of 400 ms in every 500 ms.
            assert!(figures.bursts >= 8, "{} heard {} bursts on {room}: {figures:?}", person.name, figures.bursts);
            let (tone, other) = (tone.expect("judged"), other.expect("judged"));
            assert!(tone > -20.0, "{} hears {room}'s talker at {tone:.1} dBFS", person.name);
            assert!(
                other < tone - 15.0,
                "{} hears something else on {room}: {other:.1} dBFS against {tone:.1}",
                person.name
            );
            assert!(!figures.mouth_to_ear_ms.is_empty(), "{}: no burst matched its talker on {room}", person.name);
        }
    }
    // The card's output of the server user on Stage hears them too: Stage's tone, not FOH's.
    output.wait_tone("the crew's Stage talk on Desk's output", 1, stage_tone, 0.0, SLOW).await;
}

#[tokio::test]
async fn a_simulated_panel_cannot_join_a_line_its_token_does_not_hold() {
    require_namespace();
    let stack = Stack::start_custom(
        partyline_testkit::janus::Janus::builder().ice_iface(partyline_testkit::ICE_IFACE),
        GROUPS,
        "",
        &[],
    )
    .await;
    let control = &stack.control;
    let api = ControlApi::new(&control.origin, &TlsCheck::Insecure).expect("api");
    let stage_only = Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] };
    let credentials = api.token("Mallory", &stage_only, None).await.expect("a token for Stage");
    let address = ICE_ADDRESS.parse().expect("address");

    // Through control's proxy, as a browser: the join of FOH is refused and the connection ends.
    let (session, _) =
        JanusSession::create(api.connect_janus().await.expect("/janus"), &credentials.token).await.expect("session");
    let handle = session.attach(&credentials.participant_identity).await.expect("attach");
    let offer = Offer::new(address, &[direction(true, true)], None).await.expect("offer");
    let join = json!({"request": "join", "room": "foh", "id": credentials.participant_identity, "display": "Mallory",
                      "muted": true, "token": credentials.token});
    let refused = session.message(handle, join.clone(), Some(json!({"type": "offer", "sdp": offer.sdp}))).await;
    let error = refused.expect_err("the proxy relayed a join of another line");
    assert!(error.to_string().contains("1008"), "closed for policy: {error}");

    // Straight to Janus's own WebSocket (which a venue never exposes): the room refuses the
    // token, AudioBridge's 489.
    let mut request = stack.janus.ws_url().into_client_request().expect("request");
    request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static("janus-protocol"));
    let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("Janus's WebSocket");
    let (session, _) = JanusSession::create(socket, &credentials.token).await.expect("a session on Janus");
    let handle = session.attach(&credentials.participant_identity).await.expect("attach");
    let offer = Offer::new(address, &[direction(true, true)], None).await.expect("offer");
    let refused = session.message(handle, join, Some(json!({"type": "offer", "sdp": offer.sdp}))).await;
    assert_eq!(refused.expect_err("Janus admitted the token to FOH").code(), Some(489));
    let observer = Probe::admin(&stack.janus).await;
    assert_eq!(observer.participants("foh").await, Ok(Vec::new()), "nobody joined FOH");
}

/// The identities in `room`, as Janus lists them.
async fn in_room(observer: &Probe, room: &str) -> HashSet<String> {
    observer.participants(room).await.unwrap_or_default().into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_joins_at_once_and_panels_that_vanish_leave_no_ghost() {
    const CROWD: usize = 40;
    const VANISH: usize = CROWD / 5;
    require_namespace();
    let stack = Stack::start_media(GROUPS, &Bus::start()).await;
    let control = &stack.control;
    let mut admin_events = Subscriber::open_untimed(control).await;
    // One line each: 40 participants keep this 2-core machine (Janus, control, the crew and
    // the other tests) under its ceiling, so a gap heard is the vanishing's, not the load's.
    let stage = Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] };
    let mut crew = Crew::new(options(control, stage)).expect("a crew");

    // The crowd: 40 members within 10 s, each with its event stream, state reports and lines.
    let started = Instant::now();
    let joined = crew.add(CROWD, Duration::from_secs(10)).await;
    let report = Report::new(&crew, &[], started.elapsed(), Vec::new());
    println!("CREW crowd of {CROWD} in {:.1} s:\n{}", started.elapsed().as_secs_f64(), report.table());
    assert_eq!(
        joined,
        CROWD,
        "every join answered: {:?}",
        crew.joins.iter().filter(|j| j.is_err()).collect::<Vec<_>>()
    );
    let identities: HashSet<String> = crew.people.iter().map(|p| p.identity().to_owned()).collect();
    assert_eq!(identities.len(), CROWD, "one identity each");
    let listed = wait_for("the crowd listed connected", SLOW, async || {
        let listed = listed_crew(control).await;
        (listed.iter().filter(|(_, state, _)| state == "connected").count() == CROWD).then_some(listed)
    })
    .await;
    let listed_ids: HashSet<String> = listed.iter().map(|(identity, _, _)| identity.clone()).collect();
    assert_eq!((listed.len(), &listed_ids), (CROWD, &identities), "each listed once");
    // The admin's event stream: each member joined each line once.
    let mut joins = HashSet::new();
    let until = Instant::now() + SLOW;
    while joins.len() < CROWD && Instant::now() < until {
        let event = admin_events.next(SLOW).await;
        if event.name == "userJoined" {
            let key = (event.data["identity"].as_str().unwrap_or_default().to_owned(), event.data["groupId"].clone());
            assert!(joins.insert(key.clone()), "userJoined twice for {key:?}");
        }
    }
    assert_eq!(joins.len(), CROWD, "userJoined for every member's line");

    // A fifth vanish while the others talk: half as a killed process (its sockets closed by
    // the system), half as a phone off the network (nothing closed, nothing sent).
    crew.talk_for(Duration::from_secs(3)).await;
    crew.heard().await;
    let killed: Vec<(String, String)> =
        crew.people[CROWD - VANISH..].iter().map(|p| (p.identity().to_owned(), p.credentials.token.clone())).collect();
    let frozen = crew.vanish(VANISH / 2);
    for person in crew.people.split_off(CROWD - VANISH) {
        drop(person); // a killed process: its connections close
    }
    let vanished_at = Instant::now();
    println!("CREW vanished {:.1} s after the first join", vanished_at.duration_since(started).as_secs_f64());
    let remaining: HashSet<String> = crew.people.iter().map(|p| p.identity().to_owned()).collect();
    let observer = Probe::admin(&stack.janus).await;
    let deadline = vanished_at + Duration::from_secs(120);
    let gone = loop {
        crew.talk_for(Duration::from_secs(1)).await;
        let listed: HashSet<String> = listed_crew(control).await.into_iter().map(|(identity, _, _)| identity).collect();
        let in_stage = in_room(&observer, "stage").await;
        if listed == remaining && in_stage == remaining {
            break vanished_at.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "after {:?}, still listed: {:?}, still in the room: {:?}",
            vanished_at.elapsed(),
            listed.difference(&remaining).collect::<Vec<_>>(),
            in_stage.difference(&remaining).collect::<Vec<_>>()
        );
    };
    println!("CREW {VANISH} vanished → gone from control and the rooms in {:.1} s", gone.as_secs_f64());
    // docs/lan.md ("Connections"): a silent `/janus` connection is closed after a minute, counted
    // from its last keep-alive, which is at most 25 s before the vanishing.
    assert!(gone < Duration::from_secs(70), "the vanished were listed for {gone:?}");
    for (identity, token) in &killed {
        becomes_revoked(&stack.janus, identity, token).await;
    }
    // Those who stayed lost no packet and no stretch of audio. Janus 1.1.2's mixer stalls when
    // it removes departed participants; catching up it finds the talker's queue empty for one
    // frame (measured here: one dropout of 16–34 ms per removal, heard by every listener at
    // once, no packet lost), and takes that frame out of the talker's own mix although it was
    // never in it: the talker hears 20 ms of its own voice. The killed leave at once, each
    // silent one when its own connection's minute runs out: at most 1 + VANISH/2 removals. On a
    // busy machine the same mixer also misses a talker's late frame now and then, vanishing or
    // not (BENCHMARKS.md, "What limits one core of Janus"): with 36 in the room, up to 14 in a
    // minute were heard, in runs of the same test, in clusters; one per 3 s is allowed. A hole
    // is one frame: anything longer, or a packet lost, still fails.
    let removals = 1 + VANISH as u64 / 2;
    let dropouts = removals + gone.as_secs() / 3;
    let heard = crew.heard().await;
    println!("CREW while {VANISH} vanished:\n{}", Report::new(&crew, &heard, gone, Vec::new()).table());
    for person in &heard {
        let (_, _, figures) = &person.lines[0];
        println!("CREW {}: gaps at (ms, length) {:?}", person.name, figures.gap_times);
    }
    for person in &heard {
        let (_, _, figures) = &person.lines[0];
        assert!(
            figures.gaps <= dropouts && figures.longest_gap_ms <= 40 && figures.lost == 0,
            "{} heard gaps {:?} (ms into its stream, length) while members vanished",
            person.name,
            figures.gap_times
        );
        assert!(figures.own_voice_ms <= dropouts * 30, "{} heard itself: {figures:?}", person.name);
    }
    drop(frozen);
}

/// How many times the onset test's talker presses its key.
const PRESSES: usize = 16;

/// Every talk onset, not only the first, starts on a primed queue: a talker on a jittery link
/// (each packet 0–20 ms late, as on a busy venue Wi-Fi) presses its key again and again, and
/// its listener hears no hole in any spurt. Unprimed (AudioBridge's queue emptied by the mute and
/// an unmute that does not prebuffer again), a spurt runs on a queue of 0–1 packets, and a
/// packet landing after the mixer's tick is a 20 ms hole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_talk_onset_starts_primed_and_a_jittery_talker_is_heard_without_a_hole() {
    require_namespace();
    let bus = Bus::start();
    let stack = Stack::start_media(GROUPS, &bus).await;
    let stage = Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] };
    let wifi = Path { loss: Loss::None, jitter: Duration::from_millis(20) };
    let options = Options { link: Link { up: wifi, down: Path::CLEAN }, ..options(&stack.control, stage) };
    let mut crew = Crew::new(options).expect("a crew");
    assert_eq!(crew.add(2, Duration::ZERO).await, 2, "{:?}\n{}", crew.joins, stack.control.log_text());
    let stage_room: HashSet<String> = ["stage".to_owned()].into();
    let nobody = HashSet::new();

    // Every mix carries FEC for the loss the rooms expect (the crew offers `useinbandfec=1`),
    // `audio.expectedLossPercent` at its default.
    let expected_loss = partyline_shared::Config::default().audio.expected_loss_percent.get();
    assert!(expected_loss > 0, "no FEC in the mixes by default");
    let participants = stack.janus.participants().await;
    assert_eq!(participants.len(), 2, "{participants:?}");
    for (name, participant) in &participants {
        let fec = (&participant["fec"], &participant["expected-loss"]);
        assert_eq!(fec, (&json!(true), &json!(expected_loss)), "{name}'s mix: {participant}");
    }

    crew.heard().await;
    let mut depths = Vec::new();
    for _ in 0..PRESSES {
        crew.people[0].talk_only(&stage_room).await.expect("talk key on");
        // Into the spurt (its first burst has started): how deep the talker's queue runs.
        let talker = crew.people[0].name.clone();
        let sampled = stack.janus.incoming_queues(3, Duration::from_millis(150)).await;
        depths.extend(sampled.get(&talker).cloned().unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(600)).await;
        crew.people[0].talk_only(&nobody).await.expect("talk key off");
    }
    let heard = crew.heard().await;
    let listener = line(&heard[1], "stage");
    println!(
        "CREW onsets: {PRESSES} presses, {} bursts heard, gaps {} at {:?}, mouth-to-ear {:.0?} ms, talker's queue {depths:?}",
        listener.bursts, listener.gaps, listener.gap_times, listener.mouth_to_ear_ms
    );
    assert!(listener.bursts as usize >= 2 * PRESSES, "the listener heard every spurt: {listener:?}");
    // At most one hole, and no longer than a frame: on a loaded machine one press in 16 now and
    // then runs its queue 1 deep against Janus's tick, which never waits for a late packet (CI
    // heard one 16 ms hole so; partyline's own rooms wait, in their jitter buffer). An unprimed
    // talker fails here (a hole in most spurts) and on the queue's depth below.
    let long: Vec<&(u64, u64)> = listener.gap_times.iter().filter(|(_, ms)| *ms > 20).collect();
    assert!(long.is_empty() && listener.gaps <= 1, "holes heard in {PRESSES} talk spurts: {:?}", listener.gap_times);
    // Primed, a spurt runs on one packet over the room's prebuffering (3 at 40 ms): 3–4 packets
    // queued as the mixer's tick comes and goes, where an unprimed one runs on 0–1.
    depths.sort_unstable();
    let median = depths.get(depths.len() / 2).copied().unwrap_or_default();
    assert!(median >= 3, "the talker's queue in its spurts (sorted): {depths:?}");
}
