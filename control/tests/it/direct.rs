//! Direct lines against a real Janus: a person key opens a private room admitting exactly its
//! two ends' tokens (a third crew member is refused through the proxy and around it), each end
//! sees it in its people, the callee's reply reaches the caller, `crew.directCalls` decides who
//! may call whom, and the line closes with either end's session or by the admin.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Control, wait_for};
use partyline_testkit::janus::{Janus, Probe};
use partyline_testkit::janus_proxy::RawPanel;
use partyline_testkit::stack::Stack;

const SOON: Duration = Duration::from_secs(10);
const GROUPS: &str = "  - name: Stage\n";
const HOUSE: &str = "crew:\n  directCalls: positions\npositions:\n  - name: Director\n    listen: [stage]\n    talk: [stage]\n    talkTo: [camera-1]\n  - name: Camera 1\n    listen: [stage]\n    talk: [stage]\n";

/// A crew member online: its token answer, and its session joined to Stage straight at Janus.
struct Member {
    token: String,
    identity: String,
    panel_key: String,
    janus: Probe,
}

async fn online(control: &Control, janus: &Janus, body: Value) -> Member {
    let (status, answer) = control.post_json("/token", body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let field = |key: &str| answer[key].as_str().unwrap_or_else(|| panic!("{key} in {answer}")).to_owned();
    let (token, identity, panel_key) = (field("token"), field("participantIdentity"), field("panelKey"));
    let probe = Probe::open(janus, &token).await.expect("a session with the token");
    probe.join_result("stage", &identity, "someone").await.expect("joined Stage");
    wait_for("the member connected", SOON, async || {
        let (_, users) = control.get_json("/admin/users").await;
        users["users"]
            .as_array()?
            .iter()
            .any(|u| u["identity"] == identity.as_str() && u["state"] == "connected")
            .then_some(())
    })
    .await;
    Member { token, identity, panel_key, janus: probe }
}

/// The panel's people, as its remote control reads them.
async fn people(control: &Control, member: &Member) -> Value {
    let (status, panel) = control.get_json(&format!("/panel/{}", member.panel_key)).await;
    assert_eq!(status, StatusCode::OK, "{panel}");
    panel["people"].clone()
}

async fn open(control: &Control, from: &Member, to: Value) -> (StatusCode, Value) {
    let mut body = json!({"token": from.token});
    body.as_object_mut().expect("object").extend(to.as_object().expect("object").clone());
    control.post_json("/session/direct", body).await
}

#[tokio::test]
async fn a_person_key_opens_a_line_only_its_two_ends_can_join_and_it_closes_with_either() {
    let stack = Stack::start_custom(Janus::builder(), GROUPS, HOUSE, &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let observer = Probe::admin(janus).await;
    let ann = online(control, janus, json!({"username": "Ann", "position": "director"})).await;
    let ben = online(control, janus, json!({"username": "Ben", "position": "camera-1"})).await;
    let cat = online(control, janus, json!({"username": "Cat", "groupId": "stage"})).await;

    let keys = people(control, &ann).await["keys"].clone();
    assert_eq!(
        keys,
        json!([{"position": "camera-1", "name": "Camera 1", "identity": ben.identity, "who": "Ben", "groupId": null,
            "occupants": [{"identity": ben.identity, "who": "Ben", "groupId": null}]}])
    );

    // Who may call whom (crew.directCalls: positions).
    let (status, body) = open(control, &ben, json!({"position": "director"})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("direct_call_refused")), "{body}");
    let (status, body) = open(control, &ann, json!({"identity": cat.identity})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("direct_call_refused")), "{body}");
    let (status, body) = open(control, &ann, json!({"position": "camera-1", "identity": ben.identity})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _) = control.post_json("/session/direct", json!({"token": "nobody", "position": "camera-1"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, line) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!(status, StatusCode::CREATED, "{line}");
    let room = line["groupId"].as_str().expect("its room").to_owned();
    assert!(room.starts_with("direct-"), "{room}");
    assert_eq!((line["name"].as_str(), line["caller"].as_bool()), (Some("Ben"), Some(true)));
    let (_, again) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!(again["groupId"], room.as_str(), "pressed again: the same line");

    let ben_people = people(control, &ben).await;
    let expected = json!({"groupId": room, "name": "Ann", "with": ann.identity, "caller": false});
    assert_eq!(ben_people["direct"], json!([expected]), "{ben_people}");
    assert_eq!(ben_people["reply"], expected, "Ben's reply reaches Ann");
    assert_eq!(people(control, &ann).await["keys"][0]["groupId"], room.as_str());
    assert_eq!(people(control, &cat).await["direct"], json!([]));

    // The two ends join; a third crew member cannot, through the proxy or around it.
    let ann_end = Probe::open(janus, &ann.token).await.expect("Ann's second handle");
    ann_end.join_result(&room, &ann.identity, "Ann").await.expect("Ann joins her direct line");
    let ben_end = Probe::open(janus, &ben.token).await.expect("Ben's second handle");
    ben_end.join_result(&room, &ben.identity, "Ben").await.expect("Ben joins his direct line");
    let mut cat_panel = RawPanel::open(control, &cat.token).await;
    let handle = cat_panel.attach(&cat.identity).await;
    let frame = cat_panel.refused(cat_panel.join(handle, &room, &cat.identity, true)).await;
    assert!(frame.reason.contains("not one of the session's lines"), "{frame:?}");
    let around = Probe::open(janus, &cat.token).await.expect("Cat's session straight at Janus");
    assert_eq!(around.join_result(&room, &cat.identity, "Cat").await.err(), Some(489), "the room admits two tokens");
    let mut inside = observer.participants(&room).await.expect("the room");
    inside.sort();
    let mut ends = vec![ann.identity.clone(), ben.identity.clone()];
    ends.sort();
    assert_eq!(inside, ends);

    // The admin sees it on both and closes it; the room goes.
    let (_, users) = control.get_json("/admin/users").await;
    let direct_with = |identity: &str| {
        users["users"].as_array().expect("users").iter().find(|u| u["identity"] == identity).expect("listed")["lines"]
            .as_array()
            .expect("lines")
            .iter()
            .find(|l| l["groupId"] == room.as_str())
            .map(|l| l["directWith"].clone())
    };
    assert_eq!((direct_with(&ann.identity), direct_with(&ben.identity)), (Some(json!("Ben")), Some(json!("Ann"))));
    let (status, _) = control.delete(&format!("/admin/direct/{room}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(control.delete(&format!("/admin/direct/{room}")).await.0, StatusCode::NOT_FOUND, "closed already");
    wait_for("the direct room destroyed", SOON, async || (!observer.rooms().await.contains(&room)).then_some(())).await;
    assert_eq!(people(control, &ben).await["direct"], json!([]));
    assert_eq!(people(control, &ben).await["reply"], Value::Null);

    // Opened again, it closes when one end's session ends.
    let (status, line) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!(status, StatusCode::CREATED, "{line}");
    let room = line["groupId"].as_str().expect("its room").to_owned();
    ben.janus.destroy().await.expect("Ben leaves");
    ben_end.destroy().await.expect("Ben leaves");
    wait_for("the line closed with Ben's session", SOON, async || {
        let people = people(control, &ann).await;
        (people["direct"] == json!([]) && people["keys"][0]["identity"].is_null()).then_some(())
    })
    .await;
    wait_for("its room destroyed", SOON, async || (!observer.rooms().await.contains(&room)).then_some(())).await;
    let (status, body) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nobody at Camera 1 now: {body}");
    drop(ann_end);
}

#[tokio::test]
async fn with_direct_calls_off_no_line_opens_and_no_key_shows() {
    let off = HOUSE.replace("directCalls: positions", "directCalls: off");
    let stack = Stack::start_custom(Janus::builder(), GROUPS, &off, &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let ann = online(control, janus, json!({"username": "Ann", "position": "director"})).await;
    let ben = online(control, janus, json!({"username": "Ben", "position": "camera-1"})).await;
    let people = people(control, &ann).await;
    assert_eq!((people["directCalls"].as_str(), &people["keys"]), (Some("off"), &json!([])), "{people}");
    let (status, body) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::FORBIDDEN, Some("direct_call_refused")), "{body}");
    let (status, body) = open(control, &ann, json!({"identity": ben.identity})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let observer = Probe::admin(janus).await;
    assert_eq!(observer.rooms().await, ["stage"], "no direct room");
}

#[tokio::test]
async fn with_direct_calls_all_anyone_online_can_be_called_by_identity() {
    let all = HOUSE.replace("directCalls: positions", "directCalls: all");
    let stack = Stack::start_custom(Janus::builder(), GROUPS, &all, &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let ann = online(control, janus, json!({"username": "Ann", "position": "director"})).await;
    let cat = online(control, janus, json!({"username": "Cat", "groupId": "stage"})).await;
    let listed = people(control, &cat).await["online"].clone();
    assert_eq!(
        listed,
        json!([{"position": null, "name": "Ann", "identity": ann.identity, "who": "Ann", "groupId": null,
            "occupants": [{"identity": ann.identity, "who": "Ann", "groupId": null}]}])
    );
    let (status, line) = open(control, &cat, json!({"identity": ann.identity})).await;
    assert_eq!(status, StatusCode::CREATED, "{line}");
    assert_eq!(people(control, &ann).await["reply"]["name"], "Cat");
    let (status, body) = open(control, &cat, json!({"identity": cat.identity})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "not to itself: {body}");
}

/// Ann's and Ben's direct lines as each of their panels shows them.
async fn direct_of(control: &Control, member: &Member) -> Vec<Value> {
    people(control, member).await["direct"].as_array().expect("direct lines").clone()
}

/// The positions of [`HOUSE`], Camera 1 for one crew member at a time.
fn house_with_camera_for_one() -> String {
    format!("{HOUSE}    occupants: one\n")
}

#[tokio::test]
async fn a_position_for_one_refuses_a_second_join_but_never_its_holder_s_rejoin() {
    let stack = Stack::start_custom(Janus::builder(), GROUPS, &house_with_camera_for_one(), &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let (status, positions) = control.get_json("/admin/positions").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(positions["positions"][1]["occupants"], "one", "{positions}");

    // Ben's token, not used yet, holds Camera 1 already: his panel is joining.
    let (status, ben) = control.post_json("/token", json!({"username": "Ben", "position": "camera-1"})).await;
    assert_eq!(status, StatusCode::OK, "{ben}");
    let refused = async || {
        let (status, body) = control.post_json("/token", json!({"username": "Bob", "position": "camera-1"})).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::CONFLICT, Some("position_taken")), "{body}");
        assert!(body["error"].as_str().is_some_and(|e| e.contains("Ben") && e.contains("camera-1")), "{body}");
    };
    refused().await;
    let (status, ok) = control.post_json("/token", json!({"username": "Ann", "position": "director"})).await;
    assert_eq!(status, StatusCode::OK, "a position for many takes anyone: {ok}");
    let (_, users) = control.get_json("/admin/users?state=all").await;
    let names: Vec<&str> =
        users["users"].as_array().expect("users").iter().filter_map(|u| u["username"].as_str()).collect();
    assert!(!names.contains(&"Bob"), "nothing registered for Bob: {names:?}");
    assert!(control.log_text().contains("a second crew member asked for a position for one: refused"));

    // Connected, he still holds it; his panel's rejoin (its secrets) is never refused.
    let field = |key: &str| ben[key].as_str().expect(key).to_owned();
    let probe = Probe::open(janus, &field("token")).await.expect("Ben's session");
    probe.join_result("stage", &field("participantIdentity"), "Ben").await.expect("Ben joins");
    wait_for("Ben connected", SOON, async || {
        (partyline_testkit::stack::user_state(control, &field("participantIdentity")).await.as_deref()
            == Some("connected"))
        .then_some(())
    })
    .await;
    refused().await;
    let resume = json!({"token": field("token"), "panelKey": field("panelKey")});
    let (status, again) =
        control.post_json("/token", json!({"username": "Ben", "position": "camera-1", "resume": resume})).await;
    assert_eq!(status, StatusCode::OK, "Ben's rejoin: {again}");
    assert_eq!(again["panelKey"], ben["panelKey"], "his panel key kept");
}

#[tokio::test]
async fn a_person_key_to_a_position_for_many_reaches_every_crew_member_at_it() {
    let stack = Stack::start_custom(Janus::builder(), GROUPS, HOUSE, &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let ann = online(control, janus, json!({"username": "Ann", "position": "director"})).await;
    let ben = online(control, janus, json!({"username": "Ben", "position": "camera-1"})).await;
    let bob = online(control, janus, json!({"username": "Bob", "position": "camera-1"})).await;

    let (status, opened) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    for (member, name) in [(&ben, "Ben"), (&bob, "Bob")] {
        let lines = direct_of(control, member).await;
        assert_eq!(lines.len(), 1, "{name} is rung too: {lines:?}");
        assert_eq!((lines[0]["name"].as_str(), lines[0]["caller"].as_bool()), (Some("Ann"), Some(false)));
    }
    let ann_lines = direct_of(control, &ann).await;
    let mut with: Vec<&str> = ann_lines.iter().filter_map(|l| l["name"].as_str()).collect();
    with.sort_unstable();
    assert_eq!(with, ["Ben", "Bob"], "a line of its own to each: {ann_lines:?}");
    assert_ne!(ann_lines[0]["groupId"], ann_lines[1]["groupId"], "Ben and Bob do not hear each other");
    let key = people(control, &ann).await["keys"][0].clone();
    let occupants: Vec<&str> =
        key["occupants"].as_array().expect("occupants").iter().filter_map(|o| o["who"].as_str()).collect();
    assert_eq!(occupants, ["Ben", "Bob"], "first in first: {key}");
    let mut lines: Vec<&str> =
        opened["lines"].as_array().expect("lines").iter().filter_map(|l| l["name"].as_str()).collect();
    lines.sort_unstable();
    assert_eq!(lines, ["Ben", "Bob"], "{opened}");
}

#[tokio::test]
async fn a_callee_declines_a_direct_line_and_it_closes_on_both_panels() {
    let stack = Stack::start_custom(Janus::builder(), GROUPS, HOUSE, &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let observer = Probe::admin(janus).await;
    let ann = online(control, janus, json!({"username": "Ann", "position": "director"})).await;
    let ben = online(control, janus, json!({"username": "Ben", "position": "camera-1"})).await;
    let cat = online(control, janus, json!({"username": "Cat", "groupId": "stage"})).await;
    let (status, line) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!(status, StatusCode::CREATED, "{line}");
    let room = line["groupId"].as_str().expect("its room").to_owned();
    wait_for("the direct room made", SOON, async || observer.rooms().await.contains(&room).then_some(())).await;

    let close = async |member: &Member, room: &str| {
        control.post_json("/session/direct/close", json!({"token": member.token, "groupId": room})).await
    };
    let (status, body) = close(&cat, &room).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "not Cat's line: {body}");
    let (status, _) = control.post_json("/session/direct/close", json!({"token": "nobody", "groupId": room})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(direct_of(control, &ann).await.len(), 1, "still open");

    let (status, body) = close(&ben, &room).await;
    assert_eq!(status, StatusCode::OK, "Ben declines: {body}");
    assert_eq!(direct_of(control, &ann).await, Vec::<Value>::new(), "closed on Ann's panel");
    assert_eq!(direct_of(control, &ben).await, Vec::<Value>::new(), "and on Ben's");
    assert_eq!(people(control, &ann).await["keys"][0]["identity"], ben.identity.as_str(), "Ben still online");
    wait_for("its room destroyed", SOON, async || (!observer.rooms().await.contains(&room)).then_some(())).await;
    assert!(control.log_text().contains("declined by Ben"), "the log says who closed it");
    assert_eq!(close(&ben, &room).await.0, StatusCode::NOT_FOUND, "closed already");
    let (status, again) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!(status, StatusCode::CREATED, "Ann's key opens it again: {again}");
}

#[tokio::test]
async fn direct_calls_are_limited_per_panel_and_a_press_on_an_open_line_costs_none() {
    let house = HOUSE.replace("directCalls: positions", "directCalls: positions\n  directCallsPerMinute: 2");
    let stack = Stack::start_custom(Janus::builder(), GROUPS, &house, &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let ann = online(control, janus, json!({"username": "Ann", "position": "director"})).await;
    let dan = online(control, janus, json!({"username": "Dan", "position": "director"})).await;
    let ben = online(control, janus, json!({"username": "Ben", "position": "camera-1"})).await;
    for call in 1..=2 {
        let (status, line) = open(control, &ann, json!({"position": "camera-1"})).await;
        assert_eq!(status, StatusCode::CREATED, "call {call}: {line}");
        let (status, _) = open(control, &ann, json!({"position": "camera-1"})).await;
        assert_eq!(status, StatusCode::CREATED, "pressed again on the open line");
        let body = json!({"token": ben.token, "groupId": line["groupId"]});
        assert_eq!(control.post_json("/session/direct/close", body).await.0, StatusCode::OK, "Ben declines");
    }
    let (status, body) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::TOO_MANY_REQUESTS, Some("too_many_calls")), "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("directCallsPerMinute")), "{body}");
    assert_eq!(direct_of(control, &ben).await, Vec::<Value>::new(), "Ben is not rung");
    assert!(control.log_text().contains("over crew.directCallsPerMinute"));
    let (status, line) = open(control, &dan, json!({"position": "camera-1"})).await;
    assert_eq!(status, StatusCode::CREATED, "another panel's calls are its own: {line}");
}

#[tokio::test]
async fn opening_a_line_does_not_take_the_callee_s_reply_from_the_first_caller() {
    let all = HOUSE.replace("directCalls: positions", "directCalls: all");
    let stack = Stack::start_custom(Janus::builder(), GROUPS, &all, &[]).await;
    let (control, janus) = (&stack.control, &stack.janus);
    let ann = online(control, janus, json!({"username": "Ann", "position": "director"})).await;
    let ben = online(control, janus, json!({"username": "Ben", "position": "camera-1"})).await;
    let cat = online(control, janus, json!({"username": "Cat", "groupId": "stage"})).await;
    let (status, _) = open(control, &ann, json!({"position": "camera-1"})).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(people(control, &ben).await["reply"]["name"], "Ann", "nobody else to reply to");
    let (status, _) = open(control, &cat, json!({"identity": ben.identity})).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(direct_of(control, &ben).await.len(), 2);
    assert_eq!(people(control, &ben).await["reply"]["name"], "Ann", "Cat opened a line, but said nothing yet");
}
