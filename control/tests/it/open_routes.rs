//! The open routes against a hostile LAN, tried as such a person would: PINs guessed in
//! parallel, a position without a PIN of its own over a protected group, a flood of token
//! requests, idle connections by the thousand under the packaged unit's open-file limit, and
//! the events listener as a stranger on the LAN sees it.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::Control;
use partyline_testkit::stack::Stack;

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

/// Guesses spread over many addresses stop at the PIN's own budget (20 wrong a minute from
/// everyone): a fresh address is refused `pin_locked` too, while another group's PIN is tried.
#[tokio::test]
async fn guesses_from_many_addresses_stop_at_the_pin_s_budget() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    for group in ["backstage", "foh"] {
        assert_eq!(
            control.put_json(&format!("/admin/groups/{group}"), json!({ "pin": "4321" })).await.0,
            StatusCode::OK
        );
    }
    let from = |last: u8, group: &str, pin: &str| {
        let client = reqwest::Client::builder().no_proxy().local_address(std::net::IpAddr::from([127, 0, 1, last]));
        let body = json!({ "username": "Eve", "groupId": group, "pin": pin });
        let request = client.build().expect("a client").post(control.url("/token")).json(&body);
        async move { partyline_testkit::read(request.send().await.expect("sent")).await }
    };
    // 4 addresses, 5 wrong guesses each: every one verified (and wrong).
    for last in 1..=4 {
        for _ in 0..5 {
            let (status, answer) = from(last, "backstage", "1111").await;
            assert_eq!((status, answer["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("wrong_pin")), "{answer}");
        }
    }
    let (status, answer) = from(5, "backstage", "4321").await;
    assert_eq!((status, answer["code"].as_str()), (StatusCode::TOO_MANY_REQUESTS, Some("pin_locked")), "{answer}");
    assert!(answer["error"].as_str().is_some_and(|e| e.contains("backstage")), "{answer}");
    let (status, answer) = from(5, "foh", "4321").await;
    assert_eq!(status, StatusCode::OK, "another group's PIN: {answer}");
    let (_, logs) = control.get_json("/admin/logs?level=warn&limit=1000").await;
    let spent = logs["logs"]
        .as_array()
        .expect("logs")
        .iter()
        .filter(|l| l["message"].as_str().is_some_and(|m| m.contains("wrong tries from the network are spent")))
        .count();
    assert_eq!(spent, 1, "the spent budget is logged once: {logs}");
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
/// open (from five addresses, each within its share), and the listener closes them after its
/// idle timeout.
#[tokio::test]
async fn idle_connections_do_not_starve_the_listener() {
    let control = Control::builder().open_files(unit_open_files()).start().await;
    let address = control.origin.trim_start_matches("http://").parse().expect("the listener's address");
    let mut idle = Vec::new();
    for n in 0..1100 {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        let source = std::net::SocketAddr::from(([127, 0, 2, 1 + (n % 5) as u8], 0));
        socket.bind(source).expect("bind");
        idle.push(socket.connect(address).await.expect("connect"));
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

/// The events listener (where Janus nodes post) faces the LAN as the main one does: a
/// connection from an address no node has is closed at once; a post's credentials are checked
/// before its body is read; at most 64 connections at once; an idle one closed after 10 s.
#[tokio::test]
async fn the_events_listener_admits_only_the_nodes_and_holds_no_idle_crowd() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    partyline_testkit::require_namespace();
    let ice = partyline_testkit::ICE_ADDRESS;
    let config = format!("server:\n  listen: 127.0.0.1:0\n  eventsListen: {ice}:0\n  tls: false\n");
    let control = Control::builder().config(Some(&config)).start().await;
    let events = control.events_url("").trim_start_matches("http://").to_owned();
    let events: std::net::SocketAddr = events.parse().expect("the events listener's address");
    let connect_from = |source: &str| {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(format!("{source}:0").parse().expect("an address")).expect("bind");
        socket.connect(events)
    };
    /// Whether the server closed `socket` within `within` (read gives 0 or an error).
    async fn closed_within(socket: &mut tokio::net::TcpStream, within: Duration) -> bool {
        let mut buf = [0; 64];
        matches!(tokio::time::timeout(within, socket.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
    }

    // A stranger (this namespace's LAN address, which no node has) is closed before a word.
    let mut stranger = connect_from(ice).await.expect("the kernel accepts");
    assert!(closed_within(&mut stranger, Duration::from_secs(1)).await, "a stranger's connection kept open");

    // 64 connections at once: of 65, one is closed at once (whichever is accepted last).
    let mut held = Vec::new();
    for _ in 0..65 {
        held.push(connect_from("127.0.0.1").await.expect("the kernel accepts"));
    }
    let closed =
        futures_util::future::join_all(held.iter_mut().map(|s| closed_within(s, Duration::from_secs(1)))).await;
    assert_eq!(closed.iter().filter(|c| **c).count(), 1, "closed at once of 65");
    held = held.into_iter().zip(closed).filter(|(_, closed)| !closed).map(|(s, _)| s).collect();
    // The main listener is not concerned.
    let (status, _) = control.get_json("/admin/stats").await;
    assert_eq!(status, StatusCode::OK);
    // And the idle ones go after the timeout (10 s), as on the main listener.
    let started = Instant::now();
    let closed =
        futures_util::future::join_all(held.iter_mut().map(|s| closed_within(s, Duration::from_secs(15)))).await;
    assert!(closed.iter().all(|c| *c), "{} of 64 still open after 15 s", closed.iter().filter(|c| !**c).count());
    assert!(started.elapsed() >= Duration::from_secs(8), "closed after {:?}, before the timeout", started.elapsed());
    // Credentials come before the body: a post announcing a megabyte it never sends is
    // answered 401 at once instead of being waited for. (Tried until a connection gets a place:
    // the idle ones' places come back once their closes are done.)
    let head = "POST /api/internal/janus-events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                Authorization: Basic amFudXM6d3Jvbmc=\r\nContent-Length: 1000000\r\n\r\n[";
    drop(held);
    let answer = crate::support::wait_for("a connection with a place", Duration::from_secs(5), async || {
        let mut post = connect_from("127.0.0.1").await.ok()?;
        post.write_all(head.as_bytes()).await.ok()?;
        let mut answer = [0; 12];
        match tokio::time::timeout(Duration::from_secs(1), post.read_exact(&mut answer)).await {
            Ok(Ok(_)) => Some(answer),
            Ok(Err(_)) => None,
            Err(_) => panic!("no answer within 1 s to a post without valid credentials"),
        }
    })
    .await;
    assert_eq!(&answer, b"HTTP/1.1 401", "{}", String::from_utf8_lossy(&answer));
}

/// A ban ends every session of that name or address, pending or connected (a token fetched
/// before it opens nothing after it); an admin's mute follows the person to a fresh token.
#[tokio::test]
async fn a_ban_ends_every_session_it_covers_and_a_mute_follows_the_person() {
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let ask = |name: &str| json!({ "username": name, "groupId": "foh" });
    let field =
        |answer: &Value, key: &str| answer[key].as_str().unwrap_or_else(|| panic!("{key}: {answer}")).to_owned();
    let stream_status = async |token: &str| {
        let url = control.url(&format!("/session/events?token={token}"));
        let response = partyline_testkit::http().get(url).send().await.expect("sent");
        response.status()
    };
    let (_, eve) = token(control, ask("Eve")).await;
    let (_, eve_again) = token(control, ask("éve")).await;
    assert_eq!(stream_status(&field(&eve_again, "token")).await, StatusCode::OK, "her second token opens its stream");

    let path = format!("/admin/users/{}?banName=true&banMinutes=5", field(&eve, "participantIdentity"));
    let (status, body) = control.delete(&path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("1 more session")), "{body}");
    assert_eq!(stream_status(&field(&eve_again, "token")).await, StatusCode::FORBIDDEN, "a token from before the ban");
    let (_, users) = control.get_json("/admin/users?state=all").await;
    assert_eq!(users["count"], 0, "both of Eve's sessions ended: {users}");

    // Muted on foh, Max asks for a fresh token (not a rejoin): muted there again.
    let (_, max) = token(control, ask("Max")).await;
    let mute = format!("/admin/users/{}/lines/foh/mute", field(&max, "participantIdentity"));
    let (status, body) = control.post_json(&mute, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, fresh) = token(control, ask("max")).await;
    let (_, users) = control.get_json("/admin/users?state=all").await;
    let fresh_id = field(&fresh, "participantIdentity");
    let shown = users["users"].as_array().and_then(|u| u.iter().find(|u| u["identity"] == fresh_id.as_str()).cloned());
    assert_eq!(shown.as_ref().map(|u| &u["lines"][0]["mutedByAdmin"]), Some(&json!(true)), "{users}");

    // An address ban ends everyone there (here: this test's every client).
    let (_, ann) = token(control, ask("Ann")).await;
    let path = format!("/admin/users/{}?banAddress=true", field(&ann, "participantIdentity"));
    let (status, body) = control.delete(&path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, users) = control.get_json("/admin/users?state=all").await;
    assert_eq!(users["count"], 0, "Max's two sessions ended with Ann's address: {users}");
}

/// One address cannot hold the listener: 16,000 idle connections and 500 event streams on one
/// token from it (as many as it gets: its share of the cap, 8 streams a session) while a second
/// address's `/api/health` and a panel's join answer within a second.
#[tokio::test]
async fn one_address_cannot_hold_the_listener_with_idle_connections_or_streams() {
    // The flood's sockets, and the other tests' running beside this one.
    partyline_testkit::raise_open_files(65_536);
    let stack = Stack::start(GROUPS).await;
    let control = &stack.control;
    let from = |last: u8| {
        let client = reqwest::Client::builder().no_proxy().local_address(std::net::IpAddr::from([127, 0, 0, last]));
        client.build().expect("a client")
    };
    let attacker = from(2);
    let ask = json!({ "username": "Mallory", "groupId": "foh" });
    let answer = attacker.post(control.url("/token")).json(&ask).send().await.expect("sent");
    let (status, mallory) = partyline_testkit::read(answer).await;
    assert_eq!(status, StatusCode::OK, "{mallory}");
    let stream_url = control.url(&format!("/session/events?token={}", mallory["token"].as_str().expect("token")));
    let streams: Vec<reqwest::Response> = futures_util::stream::iter(0..500)
        .map(|_| attacker.get(&stream_url).send())
        .buffer_unordered(50)
        .filter_map(async |sent| sent.ok())
        .collect()
        .await;
    let held = streams.iter().filter(|r| r.status() == StatusCode::OK).count();
    let refused = streams.iter().filter(|r| r.status() == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!((held, refused), (8, 492), "streams held and refused");

    let address = control.origin.trim_start_matches("http://").parse().expect("the listener's address");
    let idle: Vec<tokio::net::TcpStream> = futures_util::stream::iter(0..16_000)
        .map(|_| async move {
            let socket = tokio::net::TcpSocket::new_v4().expect("socket");
            socket.bind("127.0.0.2:0".parse().expect("an address")).expect("bind");
            socket.connect(address).await
        })
        .buffer_unordered(64)
        .filter_map(async |connected| connected.ok())
        .collect()
        .await;
    assert!(idle.len() > 15_000, "{} connections made", idle.len());

    let neighbour = from(3);
    let started = Instant::now();
    let health = neighbour.get(control.url("/health")).timeout(Duration::from_secs(1)).send().await;
    let health = health.unwrap_or_else(|e| panic!("/api/health from another address: {e}"));
    assert_eq!(health.status(), StatusCode::OK);
    let join = json!({ "username": "Ann", "groupId": "foh" });
    let joined = neighbour.post(control.url("/token")).json(&join).timeout(Duration::from_secs(1)).send().await;
    let joined = joined.unwrap_or_else(|e| panic!("a join from another address: {e}"));
    assert_eq!(joined.status(), StatusCode::OK);
    assert!(started.elapsed() < Duration::from_secs(2), "answered in {:?}", started.elapsed());
    let (_, stats) = control.get_json("/admin/stats").await;
    let open = stats["connections"]["open"].as_u64().expect("open connections");
    assert!(open < 300, "the listener holds {open} connections for the flood");
    drop((streams, idle));
}
