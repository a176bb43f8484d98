//! Panels: positions (the admin's prepared panels), one token for several lines admitted by
//! exactly those rooms, PINs, taking one line away, and the call signal. Real control, real
//! Janus.

#[cfg(feature = "services")]
use std::time::Duration;

#[cfg(feature = "services")]
use partyline_shared::janus::codes;
#[cfg(feature = "services")]
use partyline_testkit::janus::Probe;
use reqwest::StatusCode;
use serde_json::{Value, json};

#[cfg(feature = "services")]
use crate::support::wait_for;
use crate::support::{Control, parse_config};
#[cfg(feature = "services")]
use partyline_testkit::events::session_events;
#[cfg(feature = "services")]
use partyline_testkit::stack::{Stack, user_state};

#[cfg(feature = "services")]
const SOON: Duration = Duration::from_secs(5);
/// PINs long enough that the log's timestamps (microseconds) and ids never hold them by chance,
/// as they may a four-digit one.
const POSITION_PIN: &str = "73915082";
#[cfg(feature = "services")]
const GROUP_PIN: &str = "58203147";
#[cfg(feature = "services")]
const WRONG_PIN: &str = "90817263";
#[cfg(feature = "services")]
const GROUPS: &str = "  - name: Stage Left\n  - name: Backstage\n  - name: FOH\n";

fn lines(body: &Value) -> Vec<(String, bool, bool)> {
    body["lines"]
        .as_array()
        .unwrap_or_else(|| panic!("lines in {body}"))
        .iter()
        .map(|l| (l["groupId"].as_str().unwrap_or_default().to_owned(), l["listen"] == true, l["talk"] == true))
        .collect()
}

fn line(group: &str, listen: bool, talk: bool) -> (String, bool, bool) {
    (group.to_owned(), listen, talk)
}

#[tokio::test]
async fn positions_crud_and_the_rules_they_share_with_groups() {
    let control = Control::start().await;
    for name in ["Stage Left", "Backstage", "FOH"] {
        assert_eq!(control.post_json("/admin/groups", json!({ "name": name })).await.0, StatusCode::CREATED);
    }
    let body = json!({ "name": "Stage Manager", "listen": ["stage-left", "backstage"], "talk": ["stage-left", "foh"] });
    let (status, created) = control.post_json("/admin/positions", body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let position = &created["position"];
    assert_eq!((&position["id"], &position["pin"]), (&json!("stage-manager"), &json!(false)));
    let want = [line("stage-left", true, true), line("backstage", true, false), line("foh", false, true)];
    assert_eq!(lines(position), want, "listened lines first, then the talk-only one");

    // Refused: each with the JSON error naming the problem, nothing written.
    let before = control.config_text();
    for (body, status, mentions) in [
        (json!({ "name": "Empty" }), 400, "at least one line"),
        (json!({ "name": "Ghost", "listen": ["nowhere"] }), 400, "nowhere"),
        (json!({ "name": "STAGE manager", "listen": ["foh"] }), 409, "stage-manager"),
        (json!({ "name": "X", "listen": ["foh"], "pin": "12" }), 400, "pin"),
        (json!({ "name": "X", "listen": ["foh"], "id": "x" }), 400, "id"),
        (json!({ "name": "X", "listen": ["foh"], "announce": true }), 400, "announce"),
    ] {
        let (got, error) = control.post_json("/admin/positions", body.clone()).await;
        assert_eq!(got.as_u16(), status, "{body}: {error}");
        assert!(error["error"].as_str().is_some_and(|e| e.contains(mentions)), "{body}: {error}");
    }
    assert_eq!(control.config_text(), before, "refused writes change nothing");

    // A group rename follows into the position; a group a position holds cannot be deleted.
    assert_eq!(control.put_json("/admin/groups/foh", json!({ "name": "Front of House" })).await.0, StatusCode::OK);
    let (_, list) = control.get_json("/admin/positions").await;
    assert_eq!(list["positions"][0]["talk"], json!(["stage-left", "front-of-house"]), "{list}");
    let (status, error) = control.delete("/admin/groups/backstage").await;
    assert_eq!(status, StatusCode::CONFLICT, "{error}");
    assert!(error["error"].as_str().is_some_and(|e| e.contains("Stage Manager")), "names the position: {error}");

    // An announce key: in the view and the file.
    let (status, updated) = control.put_json("/admin/positions/stage-manager", json!({ "announce": true })).await;
    assert_eq!((status, &updated["position"]["announce"]), (StatusCode::OK, &json!(true)), "{updated}");
    assert!(control.config_text().contains("announce: true"), "{}", control.config_text());

    // The panel's open list, and the file: no id, the PIN only as a hash.
    let (status, updated) = control.put_json("/admin/positions/stage-manager", json!({ "pin": POSITION_PIN })).await;
    assert_eq!((status, &updated["position"]["pin"]), (StatusCode::OK, &json!(true)), "{updated}");
    let open = reqwest::get(control.url("/positions")).await.expect("GET").json::<Value>().await.expect("json");
    assert_eq!((&open["positions"][0]["id"], &open["positions"][0]["pin"]), (&json!("stage-manager"), &json!(true)));
    assert_eq!(open["positions"][0]["lines"][0]["name"], "Stage Left", "{open}");
    let text = control.config_text();
    assert!(!text.contains(POSITION_PIN) && text.contains("pin: pbkdf2-sha256$"), "{text}");
    assert!(!control.log_text().contains(POSITION_PIN), "the PIN is never logged");
    assert_eq!(parse_config(&text).positions.len(), 1);
    let (_, config) = control.get_json("/admin/config").await;
    assert!(!config.to_string().contains("pbkdf2"), "the hash is redacted: {config}");

    let (status, _) = control.delete("/admin/positions/stage-manager").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(control.delete("/admin/groups/backstage").await.0, StatusCode::OK, "free once no position holds it");
    assert_eq!(control.delete("/admin/positions/stage-manager").await.0, StatusCode::NOT_FOUND);
}

#[cfg(feature = "services")]
async fn token(control: &Control, body: Value) -> (StatusCode, Value) {
    control.post_json("/token", body).await
}

#[cfg(feature = "services")]
#[tokio::test]
async fn one_token_several_lines_admitted_by_exactly_those_rooms() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let body = json!({ "name": "Stage Manager", "listen": ["stage-left", "backstage"], "talk": ["stage-left"] });
    assert_eq!(control.post_json("/admin/positions", body).await.0, StatusCode::CREATED);

    let (status, bea) = token(control, json!({ "username": "Bea", "position": "stage-manager" })).await;
    assert_eq!(status, StatusCode::OK, "{bea}");
    assert_eq!(lines(&bea), [line("stage-left", true, true), line("backstage", true, false)]);
    assert!(bea.get("roomName").is_none(), "several lines: no single room");
    let (token_b, bea_id) = (bea["token"].as_str().expect("token"), bea["participantIdentity"].as_str().expect("id"));

    // One identity in both rooms, with the one token; FOH refuses it.
    let in_stage = Probe::open(&stack.janus, token_b).await.expect("session");
    in_stage.join_result("stage-left", bea_id, "Bea").await.expect("stage-left admits it");
    let in_backstage = Probe::open(&stack.janus, token_b).await.expect("session");
    in_backstage.join_result("backstage", bea_id, "Bea").await.expect("backstage admits it");
    let elsewhere = Probe::open(&stack.janus, token_b).await.expect("session");
    assert_eq!(elsewhere.join_result("foh", bea_id, "Bea").await.err(), Some(codes::NOT_ALLOWED));

    let both_joined = async || {
        let (_, users) = control.get_json("/admin/users").await;
        let bea = users["users"].as_array()?.iter().find(|u| u["identity"] == bea_id)?.clone();
        let joined = bea["lines"].as_array()?.iter().filter(|l| l["joined"] == true).count();
        (joined == 2).then_some(bea)
    };
    let shown = wait_for("Bea on both lines in /admin/users", SOON, both_joined).await;
    assert_eq!((&shown["state"], &shown["groupId"]), (&json!("connected"), &json!("stage-left")));

    // An ad-hoc panel: listen to FOH, talk to Backstage.
    let (status, ad_hoc) = token(control, json!({ "username": "Cy", "listen": ["foh"], "talk": ["backstage"] })).await;
    assert_eq!(status, StatusCode::OK, "{ad_hoc}");
    assert_eq!(lines(&ad_hoc), [line("foh", true, false), line("backstage", false, true)]);
    for (body, status) in [
        (json!({ "username": "D", "groupId": "foh", "position": "stage-manager" }), 400),
        (json!({ "username": "D" }), 400),
        (json!({ "username": "D", "position": "nobody" }), 404),
        (json!({ "username": "D", "listen": ["foh", "foh"] }), 400),
        (json!({ "username": "D", "listen": [] }), 400),
    ] {
        let (got, error) = token(control, body.clone()).await;
        assert_eq!(got.as_u16(), status, "{body}: {error}");
    }

    // The admin takes Backstage away from Bea: kicked there, refused there, Stage Left goes on.
    let path = format!("/admin/users/{bea_id}/lines/backstage");
    let (status, removed) = control.delete(&path).await;
    assert_eq!(status, StatusCode::OK, "{removed}");
    assert_eq!(lines(&removed["user"]).len(), 1, "{removed}");
    let observer = Probe::admin(&stack.janus).await;
    wait_for("Bea kicked from backstage", SOON, async || {
        let present = observer.participants("backstage").await.unwrap_or_default();
        (!present.iter().any(|id| id == bea_id)).then_some(())
    })
    .await;
    let again = Probe::open(&stack.janus, token_b).await.expect("the token still opens sessions");
    assert_eq!(again.join_result("backstage", bea_id, "Bea").await.err(), Some(codes::NOT_ALLOWED));
    assert!(observer.participants("stage-left").await.unwrap_or_default().iter().any(|id| id == bea_id));
    assert_eq!(user_state(control, bea_id).await.as_deref(), Some("connected"), "still on Stage Left");
    assert_eq!(control.delete(&path).await.0, StatusCode::NOT_FOUND, "no such line any more");

    // Her last line: a disconnect, token revoked.
    let (status, _) = control.delete(&format!("/admin/users/{bea_id}/lines/stage-left")).await;
    assert_eq!(status, StatusCode::OK);
    wait_for("Bea gone", SOON, async || user_state(control, bea_id).await.is_none().then_some(())).await;
    partyline_testkit::stack::becomes_revoked(&stack.janus, "Bea's", token_b).await;
}

#[cfg(feature = "services")]
#[tokio::test]
async fn a_pin_guards_a_group_and_wrong_ones_are_rate_limited() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    assert_eq!(control.put_json("/admin/groups/backstage", json!({ "pin": GROUP_PIN })).await.0, StatusCode::OK);
    let (_, groups) = control.get_json("/groups").await;
    let pins: Vec<(Value, Value)> =
        groups["groups"].as_array().expect("groups").iter().map(|g| (g["id"].clone(), g["pin"].clone())).collect();
    assert!(pins.contains(&(json!("backstage"), json!(true))) && pins.contains(&(json!("foh"), json!(false))));

    let ask = |pin: Option<&str>| json!({ "username": "Eve", "groupId": "backstage", "pin": pin });
    let (status, error) = token(control, json!({ "username": "Eve", "groupId": "backstage" })).await;
    assert_eq!((status, &error["code"]), (StatusCode::UNAUTHORIZED, &json!("pin_required")), "{error}");
    let (status, error) = token(control, ask(Some("0000"))).await;
    assert_eq!((status, &error["code"]), (StatusCode::UNAUTHORIZED, &json!("wrong_pin")), "{error}");
    let (status, body) = token(control, ask(Some(GROUP_PIN))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = token(control, json!({ "username": "Eve", "listen": ["foh", "backstage"] })).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "an ad-hoc panel with a protected group needs its PIN too");
    let (status, _) = token(control, json!({ "username": "Eve", "groupId": "foh" })).await;
    assert_eq!(status, StatusCode::OK, "other groups ask nothing");

    // Five wrong PINs in a minute from one address: the sixth try is refused, even a right one.
    for _ in 0..4 {
        assert_eq!(token(control, ask(Some(WRONG_PIN))).await.0, StatusCode::UNAUTHORIZED);
    }
    let (status, error) = token(control, ask(Some(GROUP_PIN))).await;
    assert_eq!((status, &error["code"]), (StatusCode::TOO_MANY_REQUESTS, &json!("too_many_tries")), "{error}");
    let log = control.log_text();
    assert!(!log.contains(GROUP_PIN) && !log.contains(WRONG_PIN), "PINs are never logged");
    let (_, logs) = control.get_json("/admin/logs?level=warn&limit=1000").await;
    let wrong = logs["logs"].as_array().expect("logs").iter().filter(|l| l["message"] == "wrong PIN").count();
    assert_eq!(wrong, 5, "each wrong PIN is logged: {logs}");
}

#[cfg(feature = "services")]
#[tokio::test]
async fn a_call_reaches_every_panel_on_the_line_and_no_other() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let issue = async |name: &str, body: Value| {
        let mut body = body;
        body["username"] = json!(name);
        let (status, answer) = token(control, body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        (
            answer["token"].as_str().expect("token").to_owned(),
            answer["participantIdentity"].as_str().expect("id").to_owned(),
        )
    };
    let (ann, _) = issue("Ann", json!({ "groupId": "stage-left" })).await;
    let (bob, _) = issue("Bob", json!({ "listen": ["stage-left", "backstage"], "talk": ["stage-left"] })).await;
    let (cid, _) = issue("Cid", json!({ "groupId": "backstage" })).await;
    let (mut to_ann, mut to_bob, mut to_cid) = (
        session_events(control, &ann, "call").await,
        session_events(control, &bob, "call").await,
        session_events(control, &cid, "call").await,
    );

    let t0 = std::time::Instant::now();
    let (status, _) = control.post_json("/call", json!({ "token": ann, "groupId": "stage-left" })).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for (who, stream) in [("Ann", &mut to_ann), ("Bob", &mut to_bob)] {
        let call = tokio::time::timeout(Duration::from_secs(1), stream.recv()).await.expect(who).expect(who);
        assert_eq!((&call["groupId"], &call["from"]), (&json!("stage-left"), &json!("Ann")), "{who}: {call}");
    }
    println!("PANEL call reached both panels on the line in {:?}", t0.elapsed());
    let (_, users) = control.get_json("/admin/users?state=all").await;
    let flashing: Vec<&Value> = users["users"]
        .as_array()
        .expect("users")
        .iter()
        .flat_map(|u| u["lines"].as_array().expect("lines"))
        .filter(|l| l["call"] == true)
        .collect();
    assert_eq!(flashing.len(), 2, "the admin's view flashes Stage Left on Ann's and Bob's rows: {users}");

    // Cid (Backstage only) heard nothing of it; a call on Backstage reaches Bob and Cid.
    let (status, _) = control.post_json("/call", json!({ "token": cid, "groupId": "backstage" })).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let first_for_cid = tokio::time::timeout(SOON, to_cid.recv()).await.expect("Cid's call").expect("event");
    assert_eq!(first_for_cid["groupId"], "backstage", "the Stage Left call never reached Cid");
    assert_eq!(tokio::time::timeout(SOON, to_bob.recv()).await.expect("Bob").expect("event")["groupId"], "backstage");
    assert!(to_ann.try_recv().is_err(), "Ann is not on Backstage");

    // A line the caller does not hold, or a token that is no session: 403.
    for body in [json!({ "token": cid, "groupId": "stage-left" }), json!({ "token": "nope", "groupId": "backstage" })] {
        assert_eq!(control.post_json("/call", body).await.0, StatusCode::FORBIDDEN);
    }
    let (status, _) = control.get_json("/session/events?token=nope").await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // The admin calls Stage Left: Ann's and Bob's panels have it, from "Admin"; Cid's not.
    let (status, called) = control.post_json("/admin/groups/stage-left/call", json!({})).await;
    assert_eq!((status, &called["groupId"]), (StatusCode::OK, &json!("stage-left")), "{called}");
    for (who, stream) in [("Ann", &mut to_ann), ("Bob", &mut to_bob)] {
        let call = tokio::time::timeout(SOON, stream.recv()).await.expect(who).expect(who);
        let want = (&json!("stage-left"), &json!("Admin"), &json!("admin"));
        assert_eq!((&call["groupId"], &call["from"], &call["identity"]), want, "{who}: {call}");
    }
    // An unknown group: 404 in the one error shape, and the refusal logged; no token: 401.
    let (status, error) = control.post_json("/admin/groups/nowhere/call", json!({})).await;
    assert_eq!((status, &error["code"]), (StatusCode::NOT_FOUND, &json!("not_found")), "{error}");
    let refusal = |l: &str| l.contains("refused request") && l.contains("/api/admin/groups/nowhere/call");
    wait_for("the refused call logged", SOON, async || control.log_text().lines().any(refusal).then_some(())).await;
    let response = partyline_testkit::http()
        .post(control.url("/admin/groups/stage-left/call"))
        .send()
        .await
        .expect("POST without a token");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(to_cid.try_recv().is_err(), "Cid is not on Stage Left");
}

#[tokio::test]
async fn an_unknown_panel_key_is_404_and_never_reaches_a_log_line() {
    let control = Control::start().await;
    let key = "5ec2e75ec2e75ec2e75ec2e75ec2e7aa";
    for (method, path, body) in [
        (reqwest::Method::GET, format!("/panel/{key}"), None),
        (reqwest::Method::GET, format!("/panel/{key}/events"), None),
        (reqwest::Method::POST, format!("/panel/{key}/lines/foh/talk"), Some(json!({ "state": "on" }))),
        (reqwest::Method::POST, format!("/panel/{key}/lines/foh/volume"), Some(json!({ "value": 10 }))),
        (reqwest::Method::POST, format!("/panel/{key}/nothing/here"), Some(json!({}))),
        (reqwest::Method::DELETE, format!("/panel/{key}"), None),
    ] {
        let (status, error) = control.send(method.clone(), &path, body).await;
        assert!(matches!(status.as_u16(), 404 | 405), "{method} {path}: {status} {error}");
        assert!(!error.to_string().contains(key), "{method} {path} echoes the key: {error}");
    }
    let (_, logs) = control.get_json("/admin/logs?limit=1000&level=trace").await;
    assert!(logs.to_string().contains("/api/panel/{key}"), "the refused writes are logged, key left out: {logs}");
    assert!(!logs.to_string().contains(key), "a log entry holds the key: {logs}");
    assert!(!control.log_text().contains(key), "control's stderr holds the key");
}

/// A crew member's secrets and identity, from its token answer.
#[cfg(feature = "services")]
struct Issued {
    token: String,
    identity: String,
    panel_key: String,
}

/// Bea on Stage Left, joined in Janus (signalling only) under the token issued to her and
/// connected in control's view: what she was issued and her Janus session.
#[cfg(feature = "services")]
async fn bea_joined(stack: &Stack) -> (Issued, Probe) {
    let control = &stack.control;
    let (status, bea) = token(control, json!({ "username": "Bea", "groupId": "stage-left" })).await;
    assert_eq!(status, StatusCode::OK, "{bea}");
    let (token_b, bea_id) = (bea["token"].as_str().expect("token"), bea["participantIdentity"].as_str().expect("id"));
    let session = Probe::open(&stack.janus, token_b).await.expect("session");
    session.join_result("stage-left", bea_id, "Bea").await.expect("joined");
    wait_for("Bea connected", SOON, async || {
        (user_state(control, bea_id).await.as_deref() == Some("connected")).then_some(())
    })
    .await;
    let text = |key: &str| bea[key].as_str().unwrap_or_else(|| panic!("{key} in {bea}")).to_owned();
    (Issued { token: text("token"), identity: text("participantIdentity"), panel_key: text("panelKey") }, session)
}

/// Whether `id` is muted in `room`, as Janus lists it (`None`: not there).
#[cfg(feature = "services")]
async fn muted_in(observer: &Probe, room: &str, id: &str) -> Option<bool> {
    let answer = observer.audiobridge(json!({ "request": "listparticipants", "room": room })).await.ok()?;
    answer["participants"].as_array()?.iter().find(|p| p["id"] == id).map(|p| p["muted"] == true)
}

#[cfg(feature = "services")]
#[tokio::test]
async fn a_participant_muted_by_the_admin_that_unmutes_itself_is_muted_again() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let (bea, bea_janus) = bea_joined(&stack).await;
    let (token_b, bea_id, key) = (bea.token.as_str(), bea.identity.as_str(), bea.panel_key.as_str());
    assert_ne!(key, token_b, "the panel key is a secret of its own");
    let observer = Probe::admin(&stack.janus).await;
    let muted = async || muted_in(&observer, "stage-left", bea_id).await;
    // She joined muted (as a panel does); she unmutes herself: Janus lets her.
    bea_janus.audiobridge(json!({ "request": "configure", "muted": false })).await.expect("configure");
    wait_for("Bea unmuted", SOON, async || (muted().await == Some(false)).then_some(())).await;

    let path = format!("/admin/users/{bea_id}/lines/stage-left");
    let (status, answer) = control.post_json(&format!("{path}/mute"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["user"]["lines"][0]["mutedByAdmin"], true, "{answer}");
    wait_for("Bea muted by the admin in the room", SOON, async || (muted().await == Some(true)).then_some(())).await;
    // Her own unmute, straight to Janus (around her panel), is undone by control.
    bea_janus.audiobridge(json!({ "request": "configure", "muted": false })).await.expect("configure");
    wait_for("the self-unmute undone", SOON, async || {
        let logged = control.log_text().contains("a participant muted by the admin unmuted itself: muted again");
        (logged && muted().await == Some(true)).then_some(())
    })
    .await;
    let (status, refused) =
        control.post_json(&format!("/panel/{key}/lines/stage-left/talk"), json!({ "state": "on" })).await;
    assert_eq!((status, &refused["code"]), (StatusCode::CONFLICT, &json!("muted_by_admin")), "{refused}");

    // Released: she may unmute herself again.
    assert_eq!(control.post_json(&format!("{path}/unmute"), json!({})).await.0, StatusCode::OK);
    let (_, users) = control.get_json("/admin/users").await;
    assert_eq!(users["users"][0]["lines"][0]["mutedByAdmin"], false, "{users}");
    bea_janus.audiobridge(json!({ "request": "configure", "muted": false })).await.expect("configure");
    wait_for("Bea unmuted by herself", SOON, async || (muted().await == Some(false)).then_some(())).await;
    assert!(!control.log_text().contains(key), "the panel key is in control's log");
}

/// A panel that obeys its session stream's commands only on paper: it reports each one applied
/// (talk `remote`) and unmutes itself in the room, then never acts again, as a page that hung.
#[cfg(feature = "services")]
async fn hung_panel(control: &Control, token: &str, janus: Probe) -> tokio::task::JoinHandle<()> {
    let response = control
        .request(reqwest::Method::GET, &format!("/session/events?token={token}"))
        .send()
        .await
        .expect("GET /session/events");
    assert_eq!(response.status(), StatusCode::OK);
    let (client, report_url, token) = (reqwest::Client::new(), control.url("/session/state"), token.to_owned());
    tokio::spawn(async move {
        let (mut response, mut text) = (response, String::new());
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let event: String = text.drain(..end + 2).collect();
                if !event.lines().any(|l| l == "event: command") {
                    continue;
                }
                let Some(data) = event.lines().find_map(|l| l.strip_prefix("data:")) else { continue };
                let command: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
                if command["talk"] == "on" {
                    janus.audiobridge(json!({ "request": "configure", "muted": false })).await.expect("configure");
                }
                let line = json!({ "groupId": command["groupId"], "listen": true, "volume": 80, "talk": "remote" });
                let report = json!({ "token": token, "ack": command["id"], "lines": [line] });
                client.post(&report_url).json(&report).send().await.expect("POST /session/state");
            }
        }
    })
}

#[cfg(feature = "services")]
#[tokio::test]
async fn a_remote_talk_whose_surface_goes_silent_is_muted_in_the_room_even_if_its_panel_hangs() {
    let crew = "crew:\n  maxRemoteTalkSeconds: 1\n";
    let stack = Stack::start_custom(partyline_testkit::janus::Janus::builder(), GROUPS, crew, &[]).await;
    let control = &stack.control;
    let (bea, bea_janus) = bea_joined(&stack).await;
    let (token_b, bea_id, key) = (bea.token.as_str(), bea.identity.as_str(), bea.panel_key.as_str());
    let panel = hung_panel(control, token_b, bea_janus).await;
    let observer = Probe::admin(&stack.janus).await;
    let muted = async || muted_in(&observer, "stage-left", bea_id).await;
    let online = async || control.get_json(&format!("/panel/{key}")).await.1["online"].as_bool().filter(|o| *o);
    wait_for("Bea's panel online", SOON, online).await;

    let (status, line) =
        control.post_json(&format!("/panel/{key}/lines/stage-left/talk"), json!({ "state": "on" })).await;
    assert_eq!((status, &line["talk"]), (StatusCode::OK, &json!("remote")), "{line}");
    let pressed = std::time::Instant::now();
    wait_for("Bea talking in the room", SOON, async || (muted().await == Some(false)).then_some(())).await;
    // The surface goes silent; the panel never lets go: control mutes her in the room.
    wait_for("Bea muted in the room after the silence", SOON, async || (muted().await == Some(true)).then_some(()))
        .await;
    let after = pressed.elapsed();
    assert!(after >= Duration::from_millis(900), "released after {after:?}, before crew.maxRemoteTalkSeconds");
    assert!(control.log_text().contains("remote talk released: the control surface went silent"));
    assert!(!control.log_text().contains(key), "the panel key is in control's log");
    panel.abort();
}

#[cfg(feature = "services")]
#[tokio::test]
async fn a_panel_rejoining_after_it_left_keeps_its_key_and_mutes_with_both_secrets() {
    let mut stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let (first, session) = bea_joined(&stack).await;
    let (token_a, bea_id, key) = (first.token.as_str(), first.identity.as_str(), first.panel_key.as_str());
    let mute = format!("/admin/users/{bea_id}/lines/stage-left/mute");
    assert_eq!(control.post_json(&mute, json!({})).await.0, StatusCode::OK);

    // Her session ends by leaving the room (a network loss, a closed page): the key with it.
    session.destroy().await.expect("destroy");
    wait_for("Bea gone", SOON, async || user_state(control, bea_id).await.is_none().then_some(())).await;
    assert_eq!(control.get_json(&format!("/panel/{key}")).await.0, StatusCode::NOT_FOUND, "revoked meanwhile");

    // The key alone (what a surface knows) does not bring it back.
    let body = |token: &str| json!({ "username": "Bea", "groupId": "stage-left", "resume": { "token": token, "panelKey": key } });
    let (status, stranger) = token(control, body("not-her-token")).await;
    assert_eq!(status, StatusCode::OK, "{stranger}");
    assert_ne!(stranger["panelKey"], json!(key), "a new key without her token");
    // Her panel rejoining while Janus is down is refused, and the refusal costs her nothing.
    stack.janus.kill();
    let (status, refused) = token(control, body(token_a)).await;
    assert_eq!((status, refused["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{refused}");
    stack.janus.restart();
    wait_for("control in step with Janus again", SOON, async || {
        (control.get_json("/admin/stats").await.1["janus"]["state"] == "up").then_some(())
    })
    .await;
    // Her panel rejoining (both secrets): the same key, now for the new session, still muted.
    let (status, again) = token(control, body(token_a)).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["panelKey"], json!(key), "{again}");
    let (status, panel) = control.get_json(&format!("/panel/{key}")).await;
    assert_eq!(status, StatusCode::OK, "{panel}");
    assert_eq!((&panel["identity"], &panel["lines"][0]["mutedByAdmin"]), (&again["participantIdentity"], &json!(true)));
    let (_, once_more) = token(control, body(token_a)).await;
    assert_ne!(once_more["panelKey"], json!(key), "once only");
    assert!(!control.log_text().contains(key), "the panel key is in control's log");
}

/// A panel's link report (WebRTC statistics of its lines) is judged, answered, shown in the
/// admin's users list, and a change of judgement is an event and a warning; bad reports are
/// refused naming what is wrong, and leave the last figures as they were.
#[cfg(feature = "services")]
#[tokio::test]
async fn a_panel_s_link_report_is_judged_shown_to_the_admin_and_a_change_is_an_event() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let (status, issued) = token(control, json!({ "username": "Ann", "groupId": "stage-left" })).await;
    assert_eq!(status, StatusCode::OK, "{issued}");
    let ann = issued["token"].as_str().expect("token").to_owned();
    let mut events = partyline_testkit::events::Subscriber::open_untimed(control).await;
    let report = |loss: f64, jitter: f64| json!({ "token": ann, "lines": [{ "groupId": "stage-left", "lossPercent": loss, "jitterMs": jitter, "rttMs": 12.0 }] });
    let link_of = async || {
        let (_, users) = control.get_json("/admin/users?state=all").await;
        users["users"][0]["lines"][0]["link"].clone()
    };

    let (status, judged) = control.post_json("/session/link", report(0.5, 4.0)).await;
    assert_eq!((status, &judged["lines"]), (StatusCode::OK, &json!([{ "groupId": "stage-left", "quality": "good" }])));
    let shown = link_of().await;
    assert_eq!(shown, json!({ "lossPercent": 0.5, "jitterMs": 4.0, "rttMs": 12.0, "quality": "good" }));
    let (status, body) = control.post_json("/session/link", report(12.0, 4.0)).await;
    assert_eq!((status, &body["code"]), (StatusCode::TOO_MANY_REQUESTS, &json!("too_many_reports")), "{body}");

    // A second later, 12 % loss: poor, an event, a warning.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (status, judged) = control.post_json("/session/link", report(12.0, 4.0)).await;
    assert_eq!((status, &judged["lines"][0]["quality"]), (StatusCode::OK, &json!("poor")), "{judged}");
    let event = events.next_named("linkChanged").await;
    assert_eq!((&event.data["username"], &event.data["groupId"]), (&json!("Ann"), &json!("stage-left")));
    assert_eq!((&event.data["quality"], &event.data["lossPercent"]), (&json!("poor"), &json!(12.0)));
    wait_for("the warning", SOON, async || control.log_text().contains("a crew member's link degraded").then_some(()))
        .await;

    // Refused, each naming the problem; the figures stay the last good report's.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let line = |fields: Value| {
        let mut line = json!({ "groupId": "stage-left", "lossPercent": 1.0, "jitterMs": 1.0 });
        line.as_object_mut().expect("object").extend(fields.as_object().expect("object").clone());
        json!({ "token": ann, "lines": [line] })
    };
    for (body, status, names) in [
        (line(json!({ "groupId": "backstage" })), StatusCode::BAD_REQUEST, "backstage"),
        (line(json!({ "lossPercent": 150.0 })), StatusCode::BAD_REQUEST, "lossPercent"),
        (line(json!({ "jitterMs": -1.0 })), StatusCode::BAD_REQUEST, "jitterMs"),
        (line(json!({ "codec": "opus" })), StatusCode::BAD_REQUEST, "codec"),
        (json!({ "token": "nope", "lines": [] }), StatusCode::FORBIDDEN, ""),
    ] {
        let (got, answer) = control.post_json("/session/link", body.clone()).await;
        assert_eq!(got, status, "{body}: {answer}");
        assert!(answer["error"].as_str().is_some_and(|e| e.contains(names)), "{body}: {answer}");
    }
    assert_eq!(link_of().await["quality"], "poor", "the last report's judgement stays");
}

/// One address cannot hold every unused token (`crew.maxPendingPerAddress`), a full
/// `crew.maxPendingTokens` refuses new joins but never a panel rejoining after a network drop,
/// and the log names the address holding the most.
#[cfg(feature = "services")]
#[tokio::test]
async fn one_address_cannot_hold_every_unused_token_and_a_rejoin_is_never_refused_for_them() {
    let limits = "crew:\n  maxPendingTokens: 20\n  maxPendingPerAddress: 8\n";
    let stack = Stack::start_custom(partyline_testkit::janus::Janus::builder(), GROUPS, limits, &[]).await;
    let control = &stack.control;
    let from = |last: u8| {
        let client = reqwest::Client::builder().no_proxy().local_address(std::net::IpAddr::from([127, 0, 0, last]));
        client.build().expect("a client")
    };
    let ask = async |client: &reqwest::Client, name: &str, resume: Option<Value>| {
        let mut body = json!({ "username": name, "groupId": "stage-left" });
        if let Some(resume) = resume {
            body["resume"] = resume;
        }
        let response = client.post(control.url("/token")).json(&body).send().await.expect("control");
        (response.status(), response.json::<Value>().await.expect("JSON"))
    };
    let (attacker, victim) = (from(2), from(3));
    let mut answers = Vec::new();
    for k in 0..12 {
        answers.push(ask(&attacker, &format!("Bot {k}"), None).await);
    }
    let issued = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    let refused: Vec<&Value> =
        answers.iter().filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS).map(|(_, b)| b).collect();
    assert_eq!((issued, refused.len()), (8, 4), "{answers:?}");
    assert!(refused.iter().all(|b| b["code"] == "too_many_pending_here"), "{refused:?}");
    let (status, ann) = ask(&victim, "Ann", None).await;
    assert_eq!(status, StatusCode::OK, "another address joins: {ann}");

    // The overall cap filled from two more addresses: a new join waits, a rejoin does not.
    for (last, count) in [(4, 8), (5, 3)] {
        for k in 0..count {
            assert_eq!(ask(&from(last), &format!("Crew {last}-{k}"), None).await.0, StatusCode::OK);
        }
    }
    let (status, body) = ask(&from(6), "Ben", None).await;
    assert_eq!((status, &body["code"]), (StatusCode::TOO_MANY_REQUESTS, &json!("too_many_pending")), "{body}");
    assert!(control.log_text().contains("holder=127.0.0."), "the log names who holds the tokens");
    let resume = json!({ "token": ann["token"], "panelKey": ann["panelKey"] });
    let (status, rejoined) = ask(&victim, "Ann", Some(resume)).await;
    assert_eq!(status, StatusCode::OK, "a rejoin is never refused for the overall cap: {rejoined}");
}
