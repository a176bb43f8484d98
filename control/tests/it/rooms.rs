//! partyline's own rooms through control (`media.engine: bridged`): panels (str0m, full ICE, as
//! browsers) get a token, post their offer to `/api/session/media` and their talk keys to
//! `/api/session/talk`, and are heard; the users list follows the rooms' signals; what a token
//! does not hold is refused; an admin's disconnect ends the session in the rooms; WHIP and WHEP
//! clients publish and play on them; the card meets the rooms without a codec. Needs a private
//! bus, Janus, bridged and PulseAudio (the services tier).

use std::time::{Duration, Instant};

use partyline_crew::Crew;
use partyline_crew::control_api::Lines;
use partyline_testkit::SoundServer;
use partyline_testkit::audio::{RATE, Recording, Tone, channel, frequency, rms_db};
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::janus::Janus as JanusBuilder;
use partyline_testkit::pulse::PulseServer;
use partyline_testkit::webrtc_panel::{Panel, opus_packets};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Control, wait_for};
use partyline_testkit::stack::{Stack, joined, user_state};

const WAIT: Duration = Duration::from_secs(10);
const FRAME: Duration = Duration::from_millis(20);

const ROOMS_ADDRESS: (&str, &str) = ("PARTYLINE_ROOMS_ADDRESS", "127.0.0.1:0");

struct Rig {
    stack: Stack,
    bridged: Bridged,
    bus: Bus,
}

async fn rig() -> Rig {
    rig_with("  - name: Stage\n").await
}

/// A rig whose config holds `groups` (and what follows them: positions…).
async fn rig_with(groups: &str) -> Rig {
    rig_with_env(groups, &[]).await
}

/// [`rig_with`], bridged started with `env` too.
async fn rig_with_env(groups: &str, env: &[(&str, &str)]) -> Rig {
    let bus = Bus::start();
    let bridged = Bridged::start(&bus, &[&[ROOMS_ADDRESS], env].concat());
    let media = "media:\n  engine: bridged\n";
    let stack = Stack::start_custom(JanusBuilder::builder(), groups, media, &[("PARTYLINE_BUS", &bus.address)]).await;
    // control reaches the rooms on the bus a moment after it listens: until then an offer is
    // answered 503. A throwaway session's bad offer tells when the rooms judge offers.
    // Polled every 500 ms: the session's 20 offers a minute last the whole wait.
    let probe = token(&stack.control, "Probe", &["stage"], &[]).await;
    let started = Instant::now();
    loop {
        let body = json!({ "token": probe["token"], "offer": "v=0" });
        let (status, answer) = stack.control.post_json("/session/media", body).await;
        if status == StatusCode::BAD_REQUEST {
            break;
        }
        assert!(started.elapsed() < WAIT, "control not linked to the rooms within {WAIT:?}: {status} {answer}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Rig { stack, bridged, bus }
}

/// A token for `username` with these lines.
async fn token(control: &Control, username: &str, listen: &[&str], talk: &[&str]) -> Value {
    let (status, body) =
        control.post_json("/token", json!({ "username": username, "listen": listen, "talk": talk })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["engine"], "bridged", "the panel is told where its media goes: {body}");
    body
}

/// A panel with one line, joined through control.
async fn join(control: &Control, token: &Value) -> Panel {
    let (mut panel, offer) = Panel::offer("127.0.0.1", 1);
    let (status, body) = control.post_json("/session/media", json!({ "token": token["token"], "offer": offer })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    panel.accept(body["answer"].as_str().expect("an answer"));
    panel
}

async fn talk(control: &Control, token: &Value, talking: bool) -> (StatusCode, Value) {
    control.post_json("/session/talk", json!({ "token": token["token"], "groupId": "stage", "talking": talking })).await
}

/// Drives the panels for `how_long`, `talker` sending a tone's 20 ms packets on time.
fn play(panels: &mut [&mut Panel], talker: Option<usize>, how_long: Duration) {
    let tone = opus_packets(440.0, (how_long.as_millis() / FRAME.as_millis()) as usize);
    let mut next_frame = Instant::now();
    for packet in &tone {
        if let Some(talker) = talker {
            panels[talker].send(0, packet);
        }
        next_frame += FRAME;
        while Instant::now() < next_frame {
            for panel in panels.iter_mut() {
                panel.drive(Duration::from_millis(1));
            }
        }
    }
}

/// Drives the panels until the users list says `identity` is `state`.
async fn becomes(control: &Control, panels: &mut [&mut Panel], identity: &str, state: Option<&str>) {
    let started = Instant::now();
    while user_state(control, identity).await.as_deref() != state {
        assert!(started.elapsed() < WAIT, "{identity} not {state:?} within {WAIT:?}:\n{}", control.log_text());
        play(panels, None, Duration::from_millis(40));
    }
}

/// Ana, who may talk on the stage, and Ben, who listens there: their tokens, identities and
/// panels, both connected.
struct Pair {
    ana_token: Value,
    ben_token: Value,
    ana_id: String,
    ben_id: String,
    ana: Panel,
    ben: Panel,
}

async fn ana_talks_ben_listens(control: &Control) -> Pair {
    let ana_token = token(control, "Ana", &["stage"], &["stage"]).await;
    let ben_token = token(control, "Ben", &["stage"], &[]).await;
    let id = |token: &Value| token["participantIdentity"].as_str().expect("id").to_owned();
    let (ana_id, ben_id) = (id(&ana_token), id(&ben_token));
    let mut ana = join(control, &ana_token).await;
    let mut ben = join(control, &ben_token).await;
    becomes(control, &mut [&mut ana, &mut ben], &ana_id, Some("connected")).await;
    becomes(control, &mut [&mut ana, &mut ben], &ben_id, Some("connected")).await;
    Pair { ana_token, ben_token, ana_id, ben_id, ana, ben }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panels_join_the_rooms_through_control_talk_by_their_keys_and_are_heard() {
    let rig = rig().await;
    let control = &rig.stack.control;
    let Pair { ana_token, ben_token, ana_id, ben_id, mut ana, mut ben } = ana_talks_ben_listens(control).await;

    // The keys: Ben's line is listen-only; Ana's key opens her voice to the room.
    let (status, body) = talk(control, &ben_token, true).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::CONFLICT, Some("cannot_talk")), "{body}");
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(600));
    let before_key = ben.level_dbfs(0, 20);
    assert!(before_key < -60.0, "Ana's voice reached Ben before her key: {before_key:.1} dBFS");
    assert_eq!(talk(control, &ana_token, true).await.0, StatusCode::NO_CONTENT);
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(1200));
    let (ben_hears, ana_hears) = (ben.level_dbfs(0, 25), ana.level_dbfs(0, 25));
    assert!(ben_hears > -30.0, "Ben hears Ana at {ben_hears:.1} dBFS:\n{}", rig.bridged.log());
    assert!(ana_hears < -60.0, "Ana hears herself at {ana_hears:.1} dBFS");
    let (_, users) = control.get_json("/admin/users").await;
    let ana_line =
        &users["users"].as_array().expect("users").iter().find(|u| u["identity"] == ana_id).expect("Ana")["lines"][0];
    assert_eq!(ana_line["talking"], true, "the users list shows her talking: {ana_line}");

    // The admin's mute silences her at once, whatever her panel does, and refuses her key.
    let (status, body) = control.post_json(&format!("/admin/users/{ana_id}/lines/stage/mute"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(600));
    let muted = ben.level_dbfs(0, 20);
    assert!(muted < -60.0, "Ben still hears Ana muted by the admin at {muted:.1} dBFS");
    let (status, body) = talk(control, &ana_token, true).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::CONFLICT, Some("muted_by_admin")), "{body}");
    let (status, body) = control.post_json(&format!("/admin/users/{ana_id}/lines/stage/unmute"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(talk(control, &ana_token, true).await.0, StatusCode::NO_CONTENT);
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(1200));
    let released = ben.level_dbfs(0, 25);
    assert!(released > -30.0, "Ben hears Ana again once released: {released:.1} dBFS");

    assert_eq!(talk(control, &ana_token, false).await.0, StatusCode::NO_CONTENT);
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(600));
    let after_key = ben.level_dbfs(0, 20);
    assert!(after_key < -60.0, "Ana's voice still reached Ben after her key: {after_key:.1} dBFS");

    // The admin's disconnect ends Ben's media in the rooms: he hears nothing more.
    let (status, body) = control.delete(&format!("/admin/users/{ben_id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(talk(control, &ana_token, true).await.0, StatusCode::NO_CONTENT);
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(300));
    let heard = ben.heard.len();
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(600));
    assert_eq!(ben.heard.len(), heard, "Ben still hears the room after his disconnect");

    // Ana's panel closing is her leave: she is gone from the list.
    ana.close();
    becomes(control, &mut [&mut ana], &ana_id, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_that_goes_takes_its_sessions_with_it_and_a_new_one_takes_new_joins() {
    let mut rig = rig().await;
    let control = &rig.stack.control;
    let dan_token = token(control, "Dan", &["stage"], &["stage"]).await;
    let dan_id = dan_token["participantIdentity"].as_str().expect("id");
    let mut dan = join(control, &dan_token).await;
    becomes(control, &mut [&mut dan], dan_id, Some("connected")).await;

    rig.bridged.kill();
    becomes(control, &mut [&mut dan], dan_id, None).await;
    assert!(control.log_text().contains("partyline-bridged left the bus"), "a log line says why");

    rig.bridged = Bridged::start(&rig.bus, &[ROOMS_ADDRESS]);
    let eve_token = token(control, "Eve", &["stage"], &[]).await;
    let eve_id = eve_token["participantIdentity"].as_str().expect("id");
    let mut eve = wait_for("the new rooms on the bus", WAIT, async || {
        let (mut panel, offer) = Panel::offer("127.0.0.1", 1);
        let body = json!({ "token": eve_token["token"], "offer": offer });
        let (status, body) = control.post_json("/session/media", body).await;
        (status == StatusCode::OK).then(|| {
            panel.accept(body["answer"].as_str().expect("an answer"));
            panel
        })
    })
    .await;
    becomes(control, &mut [&mut eve], eve_id, Some("connected")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_control_ends_the_sessions_it_no_longer_knows() {
    let mut rig = rig().await;
    let fay_token = token(&rig.stack.control, "Fay", &["stage"], &["stage"]).await;
    let gus_token = token(&rig.stack.control, "Gus", &["stage"], &[]).await;
    let mut fay = join(&rig.stack.control, &fay_token).await;
    let mut gus = join(&rig.stack.control, &gus_token).await;
    let gus_id = gus_token["participantIdentity"].as_str().expect("id");
    becomes(&rig.stack.control, &mut [&mut fay, &mut gus], gus_id, Some("connected")).await;
    assert_eq!(talk(&rig.stack.control, &fay_token, true).await.0, StatusCode::NO_CONTENT);
    play(&mut [&mut fay, &mut gus], Some(0), Duration::from_millis(600));
    assert!(gus.level_dbfs(0, 20) > -30.0, "Gus hears Fay before the restart");

    // A new control knows no session: the rooms close both (their panels join again with new
    // tokens), and Fay's voice no longer reaches Gus.
    rig.stack.control.respawn().await;
    let started = Instant::now();
    while fay.is_alive() || gus.is_alive() {
        assert!(started.elapsed() < WAIT, "the rooms kept the sessions {WAIT:?} after control's restart");
        play(&mut [&mut fay, &mut gus], Some(0), Duration::from_millis(100));
    }
    let heard = gus.heard.len();
    play(&mut [&mut fay, &mut gus], None, Duration::from_millis(300));
    assert_eq!(gus.heard.len(), heard, "Gus still hears the room after control's restart");
    assert!(rig.bridged.log().contains("sessions control does not know ended"), "{}", rig.bridged.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_the_admin_takes_away_goes_silent_in_the_rooms_at_once() {
    let rig = rig_with("  - name: Stage\n  - name: FOH\n").await;
    let control = &rig.stack.control;
    let hal_token = token(control, "Hal", &["stage", "foh"], &["stage", "foh"]).await;
    let ivy_token = token(control, "Ivy", &["stage"], &[]).await;
    let hal_id = hal_token["participantIdentity"].as_str().expect("id");
    let (mut hal, offer) = Panel::offer("127.0.0.1", 2);
    let (status, body) =
        control.post_json("/session/media", json!({ "token": hal_token["token"], "offer": offer })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    hal.accept(body["answer"].as_str().expect("an answer"));
    let mut ivy = join(control, &ivy_token).await;
    becomes(control, &mut [&mut hal, &mut ivy], hal_id, Some("connected")).await;
    assert_eq!(talk(control, &hal_token, true).await.0, StatusCode::NO_CONTENT);
    play(&mut [&mut hal, &mut ivy], Some(0), Duration::from_millis(600));
    assert!(ivy.level_dbfs(0, 20) > -30.0, "Ivy hears Hal on Stage");

    // Stage taken from Hal: his voice leaves the room at once, his key there is refused, and
    // his other line goes on.
    let (status, body) = control.delete(&format!("/admin/users/{hal_id}/lines/stage")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    play(&mut [&mut hal, &mut ivy], Some(0), Duration::from_millis(600));
    let after = ivy.level_dbfs(0, 20);
    assert!(after < -60.0, "Ivy still hears Hal on a line taken from him: {after:.1} dBFS");
    assert_eq!(talk(control, &hal_token, true).await.0, StatusCode::FORBIDDEN);
    assert_eq!(user_state(control, hal_id).await.as_deref(), Some("connected"), "Hal keeps FOH");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_token_does_not_hold_is_refused_with_its_reason_and_nothing_joins() {
    let rig = rig().await;
    let control = &rig.stack.control;
    let cat = token(control, "Cat", &["stage"], &["stage"]).await;
    let (_, offer) = Panel::offer("127.0.0.1", 1);

    let refusals = [
        (json!({ "token": "not-a-token", "offer": offer }), StatusCode::FORBIDDEN, "forbidden"),
        (json!({ "token": cat["token"], "offer": "v=0 nonsense" }), StatusCode::BAD_REQUEST, "bad_offer"),
        (json!({ "token": cat["token"], "offer": "x".repeat(40_000) }), StatusCode::BAD_REQUEST, "bad_offer"),
        (json!({ "token": cat["token"], "offer": 7 }), StatusCode::BAD_REQUEST, "bad_request"),
    ];
    for (body, status, code) in refusals {
        let (got, answer) = control.post_json("/session/media", body).await;
        assert_eq!((got, answer["code"].as_str()), (status, Some(code)), "{answer}");
    }
    // An offer of two lines for a token of one.
    let (_, two_lines) = Panel::offer("127.0.0.1", 2);
    let (status, body) =
        control.post_json("/session/media", json!({ "token": cat["token"], "offer": two_lines })).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_offer")), "{body}");

    // m-lines named for a line the session does not hold, or for one line twice; a new offer
    // on media never joined.
    let (_, one_line) = Panel::offer("127.0.0.1", 1);
    let named = |lines: Value, renegotiation: bool| json!({ "token": cat["token"], "offer": one_line, "lines": lines, "renegotiation": renegotiation });
    let (status, body) = control.post_json("/session/media", named(json!(["foh"]), false)).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = control.post_json("/session/media", named(json!(["stage", "stage"]), false)).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_offer")), "{body}");
    let (status, body) = control.post_json("/session/media", named(json!(["stage"]), true)).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::CONFLICT, Some("no_media")), "{body}");

    // A key before any media, and on a line the token does not hold.
    let (status, body) = talk(control, &cat, true).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::CONFLICT, Some("no_media")), "{body}");
    let elsewhere = json!({ "token": cat["token"], "groupId": "nowhere", "talking": true });
    assert_eq!(control.post_json("/session/talk", elsewhere).await.0, StatusCode::FORBIDDEN);
    assert!(control.log_text().contains("the rooms refused a session's request"), "a log line names the refusal");
    assert_eq!(user_state(control, cat["participantIdentity"].as_str().expect("id")).await.as_deref(), Some("pending"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crew_joins_with_one_peer_connection_each_talks_in_turns_and_every_line_hears_its_talker() {
    const DECK: &str = "positions:\n  - name: Deck\n    listen: [stage, foh]\n    talk: [stage, foh]\n";
    let rig = rig_with(&format!("  - name: Stage\n  - name: FOH\n{DECK}")).await;
    let control = &rig.stack.control;
    let mut options = partyline_testkit::stack::crew_options(control, Lines::Position { position: "deck".into() });
    options.media_address = "127.0.0.1".parse().expect("an address");
    let mut crew = Crew::new(options).expect("a crew");
    assert_eq!(crew.add(3, Duration::from_secs(1)).await, 3, "{:?}\n{}", crew.joins, control.log_text());
    for person in &crew.people {
        let id = person.identity();
        wait_for("a member connected in the users list", WAIT, async || {
            (user_state(control, id).await.as_deref() == Some("connected")).then_some(())
        })
        .await;
    }

    // Three turns of 3 s: on each line, each member talks once and hears the other two.
    crew.heard().await;
    crew.talk_for(Duration::from_secs(9)).await;
    let heard = crew.heard().await;
    crew.silence().await;
    for person in &heard {
        assert_eq!(person.lines.len(), 2, "{} hears both lines", person.name);
        for (_, room, figures) in &person.lines {
            let (tone, other) = (figures.tone_db().expect("judged"), figures.other_db().expect("judged"));
            println!(
                "ROOMS CREW {} on {room}: {} bursts, tone {tone:.1} dBFS, other {other:.1} dBFS, mouth-to-ear {:.0?} ms, gaps {}",
                person.name, figures.bursts, figures.mouth_to_ear_ms, figures.gaps
            );
            // Two turns of 3 s as a listener: about 12 bursts of 400 ms in every 500 ms.
            assert!(figures.bursts >= 8, "{} heard {} bursts on {room}: {figures:?}", person.name, figures.bursts);
            assert!(tone > -20.0, "{} hears {room}'s talker at {tone:.1} dBFS", person.name);
            assert!(other < tone - 15.0, "{} hears another line on {room}: {other:.1} dBFS", person.name);
            assert!(!figures.mouth_to_ear_ms.is_empty(), "{}: no burst matched its talker on {room}", person.name);
        }
    }

    // Leaving closes each one's peer connection: the users list lets them go.
    let identities: Vec<String> = crew.people.iter().map(|p| p.identity().to_owned()).collect();
    crew.leave(3).await;
    for id in &identities {
        wait_for("a member who left gone from the users list", WAIT, async || {
            user_state(control, id).await.is_none().then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn with_janus_as_the_engine_the_media_routes_refuse_and_say_why() {
    let stack = Stack::start("  - name: Stage\n").await;
    let control = &stack.control;
    let (status, body) = control.post_json("/token", json!({ "username": "Dee", "groupId": "stage" })).await;
    assert_eq!((status, &body["engine"]), (StatusCode::OK, &json!("janus")), "{body}");
    let (_, offer) = Panel::offer("127.0.0.1", 1);
    let (status, refused) =
        control.post_json("/session/media", json!({ "token": body["token"], "offer": offer })).await;
    assert_eq!((status, refused["code"].as_str()), (StatusCode::CONFLICT, Some("wrong_engine")), "{refused}");
}

/// The card on the rooms: group Stage's server audio user A (input 0, output 0) meets the room
/// as its local line, no codec and no Janus, and is connected in the users list. A panel hears
/// the card's 1 kHz tone; the card's output plays the panel's 440 Hz and not its own tone back;
/// the admin's mute of the card's line silences it in the room, the release brings it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_meets_the_rooms_without_a_codec_heard_by_the_panels_and_hearing_them() {
    let pulse = PulseServer::start();
    for card in ["card_in", "card_out"] {
        pulse.add_card(card, RATE);
    }
    let _tone = Tone::play(&pulse, "card_in", 0, 1000);
    let pulse_env = pulse.server_address();
    let rig = rig_with_env("  - name: Stage\n", &[("PULSE_SERVER", &pulse_env)]).await;
    let stack = &rig.stack;
    let control = &stack.control;
    let device = json!({ "inputDeviceId": "card_in.monitor", "outputDeviceId": "card_out", "sampleRate": RATE });
    assert_eq!(control.post_json("/admin/audio/device", device).await.0, StatusCode::OK);
    let a = json!({ "name": "A", "group": "stage", "inputChannel": 0, "outputChannel": 0 });
    assert_eq!(control.post_json("/admin/server-users", a).await.0, StatusCode::CREATED);
    stack.bridge_becomes("A in the room", WAIT, |b| joined(b, &["A"])).await;
    // The users list says so, from bridged's word (Janus has no participant to list), and
    // shows the card talking: its tone is on.
    wait_for("the card connected and talking in the users list", WAIT, async || {
        let (_, users) = control.get_json("/admin/users").await;
        let card = users["users"].as_array()?.iter().find(|u| u["identity"] == "card:stage")?.clone();
        (card["state"] == "connected" && card["lines"][0]["talking"] == true).then_some(())
    })
    .await;

    let ana_token = token(control, "Ana", &["stage"], &["stage"]).await;
    let ana_id = ana_token["participantIdentity"].as_str().expect("id");
    let mut ana = join(control, &ana_token).await;
    becomes(control, &mut [&mut ana], ana_id, Some("connected")).await;
    // The card's capture starts a moment after its participant: Ana hears it from then on.
    let started = Instant::now();
    while ana.level_dbfs(0, 10) < -30.0 {
        let heard = ana.level_dbfs(0, 10);
        assert!(started.elapsed() < WAIT, "Ana hears the card at {heard:.1} dBFS:\n{}", rig.bridged.log());
        play(&mut [&mut ana], None, Duration::from_millis(200));
    }

    let output = Recording::start(&pulse, "card_out.monitor");
    assert_eq!(talk(control, &ana_token, true).await.0, StatusCode::NO_CONTENT);
    play(&mut [&mut ana], Some(0), Duration::from_millis(1500));
    let samples = channel(&output.samples(), 0);
    let last = &samples[samples.len().saturating_sub(RATE as usize / 2)..];
    let (level, hz) = (rms_db(last), frequency(last));
    assert!(level > -30.0 && (hz - 440.0).abs() < 20.0, "the card's output plays {hz:.0} Hz at {level:.1} dBFS");

    // The admin's mute of the card's line takes it out of the room; the release puts it back.
    for (action, silent) in [("mute", true), ("unmute", false)] {
        let (status, body) =
            control.post_json(&format!("/admin/users/card:stage/lines/stage/{action}"), json!({})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let started = Instant::now();
        while (ana.level_dbfs(0, 10) < -60.0) != silent {
            let heard = ana.level_dbfs(0, 10);
            assert!(started.elapsed() < WAIT, "after the {action}, Ana hears the card at {heard:.1} dBFS");
            play(&mut [&mut ana], None, Duration::from_millis(200));
        }
    }
}

/// A WHIP or WHEP offer of one line as its client makes it (`direction`: `sendonly` or
/// `recvonly`) to the stage's URL with a new stream token of that kind: the client, the
/// stream's resource and the token's secret.
async fn stream_client(control: &Control, kind: &str, direction: &str) -> (Panel, String, String) {
    let (status, body) =
        control.post_json("/admin/groups/stage/stream-tokens", json!({ "kind": kind, "name": "Vision" })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (mut client, offer) = Panel::offer("127.0.0.1", 1);
    let secret = body["secret"].as_str().expect("its secret").to_owned();
    let response = partyline_testkit::http()
        .post(body["url"].as_str().expect("its URL"))
        .bearer_auth(&secret)
        .header("content-type", "application/sdp")
        .body(offer.replace("a=sendrecv", &format!("a={direction}")))
        .send()
        .await
        .expect("control reachable");
    assert_eq!(response.status(), StatusCode::CREATED, "{kind}");
    let location = response.headers()["location"].to_str().expect("a location").to_owned();
    let answer = response.text().await.expect("an answer");
    let answered = if direction == "sendonly" { "a=recvonly" } else { "a=sendonly" };
    assert!(answer.contains(answered), "the rooms answer a {direction} client {answered}: {answer}");
    client.accept(&answer);
    (client, format!("{}{location}", control.origin), secret)
}

/// WHIP and WHEP on partyline's rooms: a publisher's tone is heard by a panel listening on the
/// line and by a WHEP player, without a talk key; each is listed while it runs and gone once
/// its client's `DELETE` ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whip_publishes_into_a_room_and_whep_plays_its_mix() {
    let rig = rig().await;
    let control = &rig.stack.control;
    let ben_token = token(control, "Ben", &["stage"], &[]).await;
    let mut ben = join(control, &ben_token).await;
    let (mut publisher, whip, whip_secret) = stream_client(control, "whip", "sendonly").await;
    let (mut player, whep, whep_secret) = stream_client(control, "whep", "recvonly").await;
    let streams = async || {
        let (_, users) = control.get_json("/admin/users").await;
        let users = users["users"].as_array().cloned().unwrap_or_default();
        users.iter().filter(|u| u["username"].as_str().is_some_and(|n| n.starts_with("Vision"))).count()
    };
    let started = Instant::now();
    while streams().await < 2 {
        assert!(started.elapsed() < WAIT, "the WHIP and WHEP sessions not listed within {WAIT:?}");
        play(&mut [&mut publisher, &mut player, &mut ben], None, Duration::from_millis(40));
    }

    play(&mut [&mut publisher, &mut player, &mut ben], Some(0), Duration::from_millis(1200));
    let (ben_hears, player_hears) = (ben.level_dbfs(0, 25), player.level_dbfs(0, 25));
    assert!(ben_hears > -30.0, "Ben hears the WHIP source at {ben_hears:.1} dBFS:\n{}", rig.bridged.log());
    assert!(player_hears > -30.0, "the WHEP player hears it at {player_hears:.1} dBFS");

    for (url, secret) in [(&whip, &whip_secret), (&whep, &whep_secret)] {
        let response = partyline_testkit::http().delete(url).bearer_auth(secret).send().await.expect("reachable");
        assert_eq!(response.status(), StatusCode::OK, "DELETE {url}");
    }
    let started = Instant::now();
    while streams().await > 0 {
        assert!(started.elapsed() < WAIT, "the ended sessions still listed after {WAIT:?}");
        play(&mut [&mut ben], None, Duration::from_millis(40));
    }
    let heard = ben.heard.len();
    play(&mut [&mut publisher, &mut ben], Some(0), Duration::from_millis(600));
    let after = ben.level_dbfs(0, 20);
    assert!(ben.heard.len() > heard && after < -60.0, "Ben still hears the ended WHIP source at {after:.1} dBFS");
}

/// As on Janus, a WHIP source whose connection stays up but sends nothing is ended once the
/// rooms have received nothing from it for 10 s (its resource gone, logged why); a WHEP player,
/// which never sends, plays on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whip_source_that_sends_nothing_for_10_s_is_ended_and_a_whep_player_plays_on() {
    let rig = rig().await;
    let control = &rig.stack.control;
    let (mut publisher, whip, whip_secret) = stream_client(control, "whip", "sendonly").await;
    let (mut player, _, _) = stream_client(control, "whep", "recvonly").await;
    let listed = async |kind: &str| {
        let (_, users) = control.get_json("/admin/users").await;
        users["users"].as_array().is_some_and(|users| users.iter().any(|u| u["stream"] == kind))
    };
    let started = Instant::now();
    while !(listed("whip").await && listed("whep").await) {
        assert!(started.elapsed() < WAIT, "the WHIP and WHEP sessions not listed within {WAIT:?}");
        play(&mut [&mut publisher, &mut player], None, Duration::from_millis(40));
    }
    play(&mut [&mut publisher, &mut player], Some(0), Duration::from_millis(1200));
    let heard = player.level_dbfs(0, 25);
    assert!(heard > -30.0, "the WHEP player hears the source at {heard:.1} dBFS");

    // The publisher's connection stays up (its client answers the rooms' checks); no audio.
    let silent = Instant::now();
    while listed("whip").await {
        assert!(silent.elapsed() < Duration::from_secs(20), "the silent WHIP source is still listed");
        play(&mut [&mut publisher, &mut player], None, Duration::from_millis(200));
    }
    let ended_after = silent.elapsed();
    assert!(ended_after >= Duration::from_secs(10), "the WHIP source ended {ended_after:?} into its silence");
    assert!(control.log_text().contains("no media from it for 10 s"), "why, logged:\n{}", control.log_text());
    assert!(listed("whep").await, "the WHEP player, which never sends, plays on");
    let response = partyline_testkit::http().delete(&whip).bearer_auth(&whip_secret).send().await.expect("reachable");
    assert_eq!(response.status(), StatusCode::NOT_FOUND, "the ended source's resource");
}

/// On partyline's rooms a crew member's token is control's alone, and Janus is not needed: with
/// it killed, panels are still issued tokens, join the rooms, are heard, muted and disconnected
/// by the admin, and nothing is left waiting for Janus. (With the tokens placed on Janus, the
/// tokens are refused 503 while no node is up.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_janus_down_panels_are_issued_tokens_join_the_rooms_and_are_disconnected() {
    let rig = rig().await;
    rig.stack.janus.kill();
    let control = &rig.stack.control;
    let Pair { ana_token, ana_id, ben_id, mut ana, mut ben, .. } = ana_talks_ben_listens(control).await;
    assert_eq!(talk(control, &ana_token, true).await.0, StatusCode::NO_CONTENT);
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(1200));
    let heard = ben.level_dbfs(0, 25);
    assert!(heard > -30.0, "Ben hears Ana at {heard:.1} dBFS:\n{}", control.log_text());

    let (status, body) = control.post_json(&format!("/admin/users/{ana_id}/lines/stage/mute"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    play(&mut [&mut ana, &mut ben], Some(0), Duration::from_millis(600));
    let muted = ben.level_dbfs(0, 20);
    assert!(muted < -60.0, "Ben still hears Ana muted by the admin at {muted:.1} dBFS");

    let (status, body) = control.delete(&format!("/admin/users/{ben_id}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(!message.contains("unreachable"), "nothing of Ben is left for Janus: {body}");
    becomes(control, &mut [&mut ana], &ben_id, None).await;
    let log = control.log_text();
    assert!(!log.contains("Janus cannot be told now"), "a rooms user's disconnect waited on Janus:\n{log}");
}
