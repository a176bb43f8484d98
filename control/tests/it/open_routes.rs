//! The open routes against a hostile LAN, tried as such a person would: PINs guessed in
//! parallel, a position without a PIN of its own over a protected group, a flood of token
//! requests, and idle connections by the thousand under the packaged unit's open-file limit.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::janus::Stack;
use crate::support::Control;

const GROUPS: &str = "  - name: Backstage\n  - name: FOH\n";

async fn token(control: &Control, body: Value) -> (StatusCode, Value) {
    control.post_json("/token", body).await
}

/// `requests` copies of `body` sent to `POST /token`, `parallel` at a time: each answer's status
/// and error code (empty for a 200).
async fn flood(control: &Control, body: Value, requests: usize, parallel: usize) -> Vec<(StatusCode, String)> {
    futures_util::stream::iter(0..requests)
        .map(|_| {
            let body = body.clone();
            async move {
                let (status, answer) = token(control, body).await;
                (status, answer["code"].as_str().unwrap_or_default().to_owned())
            }
        })
        .buffer_unordered(parallel)
        .collect()
        .await
}

fn count(answers: &[(StatusCode, String)], status: StatusCode, code: &str) -> usize {
    answers.iter().filter(|(s, c)| *s == status && c == code).count()
}

/// Guesses sent in parallel from one address get no more PINs verified than sequential ones:
/// each try holds its place among the address's wrong ones before it is verified.
#[tokio::test]
async fn parallel_pin_guesses_get_five_tries_a_minute() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    assert_eq!(control.put_json("/admin/groups/backstage", json!({ "pin": "4321" })).await.0, StatusCode::OK);
    let guess = json!({ "username": "Eve", "groupId": "backstage", "pin": "1111" });
    let answers = flood(control, guess, 60, 60).await;
    let wrong = count(&answers, StatusCode::UNAUTHORIZED, "wrong_pin");
    let limited = count(&answers, StatusCode::TOO_MANY_REQUESTS, "too_many_tries");
    assert_eq!((wrong, limited), (5, 55), "{answers:?}");
    let right = json!({ "username": "Eve", "groupId": "backstage", "pin": "4321" });
    assert_eq!(token(control, right).await.0, StatusCode::TOO_MANY_REQUESTS, "the address waits its minute");
    let (_, logs) = control.get_json("/admin/logs?level=warn&limit=1000").await;
    let logged = logs["logs"].as_array().expect("logs").iter().filter(|l| l["message"] == "wrong PIN").count();
    assert_eq!(logged, 5, "each wrong PIN is logged");
}

/// A position opens no protected group its own PIN does not stand for: without a PIN of its
/// own, joining it asks for its protected groups' PINs; with one, that one.
#[tokio::test]
async fn a_position_without_a_pin_asks_for_its_protected_groups_pins() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    assert_eq!(control.put_json("/admin/groups/backstage", json!({ "pin": "4321" })).await.0, StatusCode::OK);
    let (status, saved) =
        control.post_json("/admin/positions", json!({ "name": "Stage Manager", "listen": ["backstage", "foh"] })).await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");
    assert_eq!((&saved["position"]["pin"], &saved["position"]["groupPins"]), (&json!(true), &json!(["backstage"])));
    assert!(saved["message"].as_str().is_some_and(|m| m.contains("asks for the PIN of \"backstage\"")), "{saved}");

    let join = |pin: Option<&str>| json!({ "username": "Eve", "position": "stage-manager", "pin": pin });
    let (status, error) = token(control, join(None)).await;
    assert_eq!((status, &error["code"]), (StatusCode::UNAUTHORIZED, &json!("pin_required")), "{error}");
    assert!(error["error"].as_str().is_some_and(|e| e.contains("backstage")), "names the group: {error}");
    let (status, error) = token(control, join(Some("0000"))).await;
    assert_eq!((status, &error["code"]), (StatusCode::UNAUTHORIZED, &json!("wrong_pin")), "{error}");
    assert_eq!(token(control, join(Some("4321"))).await.0, StatusCode::OK, "the group's PIN opens it");

    // A PIN of its own stands for its groups'.
    let (status, saved) = control.put_json("/admin/positions/stage-manager", json!({ "pin": "2468" })).await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!((&saved["position"]["pin"], &saved["position"]["groupPins"]), (&json!(true), &json!([])));
    assert_eq!(token(control, join(Some("2468"))).await.0, StatusCode::OK);
    assert_eq!(token(control, join(Some("4321"))).await.0, StatusCode::UNAUTHORIZED, "not the group's any more");
}

/// A flood of token requests from one address gets `crew.tokensPerMinute` grants a minute and
/// then 429s, logged once; of those, one address holds at most `crew.maxPendingPerAddress`
/// unused tokens (50; a few over while requests run at once: the count is read before Janus
/// answers).
#[tokio::test]
async fn a_token_flood_is_limited_per_address_and_overall() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let ask = json!({ "username": "Flood", "groupId": "foh" });
    let answers = flood(control, ask.clone(), 300, 16).await;
    let (granted, held, limited) = (
        count(&answers, StatusCode::OK, ""),
        count(&answers, StatusCode::TOO_MANY_REQUESTS, "too_many_pending_here"),
        count(&answers, StatusCode::TOO_MANY_REQUESTS, "too_many_tokens"),
    );
    assert_eq!(limited, 180, "the default: 120 a minute from one address");
    assert!((50..=50 + 16).contains(&granted) && granted + held == 120, "{granted} granted, {held} held back");
    let pending = control.get_json("/admin/users?state=pending").await.1["count"].clone();
    assert_eq!(pending, json!(granted), "only the granted are registered");
    let crew_file: Value =
        serde_json::from_str(&std::fs::read_to_string(control.dir().join("crew.json")).expect("crew.json"))
            .expect("JSON");
    assert_eq!(crew_file["crew"].as_array().map(Vec::len), Some(granted), "and stored");
    let (_, logs) = control.get_json("/admin/logs?level=warn&limit=1000").await;
    let warned = logs["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .filter(|l| l["message"].as_str().is_some_and(|m| m.contains("over crew.tokensPerMinute")));
    assert_eq!(warned.count(), 1, "one warning for the flood, not one per request");
}

/// Unused tokens overall stop at `crew.maxPendingTokens`, whatever the addresses.
#[tokio::test]
async fn unused_tokens_stop_at_the_cap() {
    let crew = "crew:\n  maxPendingTokens: 3\n";
    let stack = Stack::start_custom(partyline_testkit::janus::Janus::builder(), GROUPS, crew, &[]).await;
    let control = &stack.control;
    let answers = flood(control, json!({ "username": "Crowd", "groupId": "foh" }), 5, 1).await;
    assert_eq!(count(&answers, StatusCode::OK, ""), 3, "{answers:?}");
    assert_eq!(count(&answers, StatusCode::TOO_MANY_REQUESTS, "too_many_pending"), 2, "{answers:?}");
}

/// `LimitNOFILE` of the packaged unit (systemd's default soft limit, 1024, when it sets none).
fn unit_open_files() -> u64 {
    let unit = partyline_testkit::repo_path("packaging/systemd/partyline-control.service");
    let text = std::fs::read_to_string(unit).expect("the unit");
    text.lines().find_map(|l| l.strip_prefix("LimitNOFILE=")).map_or(1024, |v| v.trim().parse().expect("a number"))
}

/// Idle connections by the thousand do not starve the listener: under the unit's open-file
/// limit, `/api/health` answers within a second while 1,100 connections that send nothing are
/// open, and the listener closes them after its idle timeout.
#[tokio::test]
async fn idle_connections_do_not_starve_the_listener() {
    let control = Control::builder().open_files(unit_open_files()).start().await;
    let address = control.origin.trim_start_matches("http://").to_owned();
    let mut idle = Vec::new();
    for _ in 0..1100 {
        idle.push(tokio::net::TcpStream::connect(&address).await.expect("connect"));
    }
    let started = Instant::now();
    let health = partyline_testkit::http().get(control.url("/health")).timeout(Duration::from_secs(1)).send().await;
    let health = health.unwrap_or_else(|e| panic!("/api/health with 1,100 idle connections open: {e}"));
    // Janus is not configured here: health answers that it is unavailable, and why.
    let (status, body) = partyline_testkit::read(health).await;
    assert_eq!((status, &body["code"]), (StatusCode::SERVICE_UNAVAILABLE, &json!("unavailable")), "{body}");
    assert!(started.elapsed() < Duration::from_secs(1), "answered in {:?}", started.elapsed());
    let (_, stats) = control.get_json("/admin/stats").await;
    assert!(stats["connections"]["open"].as_u64().is_some_and(|n| n > 1100), "{}", stats["connections"]);

    // Each is closed by the server once idle for the timeout (10 s).
    let closed = futures_util::future::join_all(idle.iter_mut().map(|socket| async move {
        let mut buf = [0; 1];
        let read = tokio::time::timeout(Duration::from_secs(20), tokio::io::AsyncReadExt::read(socket, &mut buf));
        matches!(read.await, Ok(Ok(0) | Err(_)))
    }))
    .await;
    assert!(closed.iter().all(|c| *c), "{} of 1100 still open after 20 s", closed.iter().filter(|c| !**c).count());
}

/// The admin's disconnect may ban the name and/or the address for a time, so that asking for a
/// new token does not undo it; a ban is listed and can be lifted.
#[tokio::test]
async fn a_disconnect_may_ban_the_name_or_the_address() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let ask = |name: &str| json!({ "username": name, "groupId": "foh" });
    let identity = |answer: &Value| answer["participantIdentity"].as_str().expect("identity").to_owned();
    let (_, eve) = token(control, ask("Eve")).await;
    let (_, users) = control.get_json("/admin/users?state=all").await;
    assert_eq!(users["users"][0]["address"], "127.0.0.1", "the admin sees where a token went: {users}");

    let (status, body) = control.delete(&format!("/admin/users/{}?banName=true&banMinutes=5", identity(&eve))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ban"]["username"], "Eve", "{body}");
    let (status, refused) = token(control, ask("éve ")).await;
    assert_eq!((status, &refused["code"]), (StatusCode::FORBIDDEN, &json!("banned")), "the same name: {refused}");
    assert_eq!(token(control, ask("Eva")).await.0, StatusCode::OK, "another name from the same address");
    let (_, bans) = control.get_json("/admin/bans").await;
    let id = bans["bans"][0]["id"].as_u64().unwrap_or_else(|| panic!("a ban in {bans}"));
    assert_eq!(control.delete(&format!("/admin/bans/{id}")).await.0, StatusCode::OK);
    assert_eq!(control.delete(&format!("/admin/bans/{id}")).await.0, StatusCode::NOT_FOUND);
    assert_eq!(token(control, ask("Eve")).await.0, StatusCode::OK, "lifted");

    let (_, max) = token(control, ask("Max")).await;
    let (status, body) = control.delete(&format!("/admin/users/{}?banAddress=true", identity(&max))).await;
    assert_eq!((status, &body["ban"]["address"]), (StatusCode::OK, &json!("127.0.0.1")), "{body}");
    let (status, refused) = token(control, ask("Anyone")).await;
    assert_eq!((status, &refused["code"]), (StatusCode::FORBIDDEN, &json!("banned")), "the address: {refused}");
    let (status, refused) = control.delete("/admin/users/nobody-1?banMinutes=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
}
