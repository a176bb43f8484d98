//! control and a real Janus: rooms follow groups, tokens admit users, connections are tracked
//! from Janus itself, disconnects stick.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use partyline_shared::janus::codes;
use partyline_testkit::janus::{Janus, Probe};

use crate::support::{Control, wait_for};
use partyline_testkit::stack::{Stack, becomes_revoked, user_state};

/// Janus events arrive in milliseconds; the poll catches up within 2 s.
const SOON: Duration = Duration::from_secs(3);

async fn rooms_become(probe: &Probe, want: &[&str]) {
    let mut want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    wait_for(&format!("Janus rooms {want:?}"), SOON, async || (probe.rooms().await == want).then_some(())).await;
}

async fn issue(control: &Control, username: &str, group: &str) -> (StatusCode, Value) {
    control.post_json("/token", json!({ "username": username, "groupId": group })).await
}

#[tokio::test]
async fn rooms_follow_groups_also_after_janus_restarts() {
    let mut stack = Stack::start("  - name: Stage Left\n").await;
    let probe = Probe::admin(&stack.janus).await;
    rooms_become(&probe, &["stage-left"]).await;

    let control = &stack.control;
    assert_eq!(control.post_json("/admin/groups", json!({ "name": "FOH" })).await.0, StatusCode::CREATED);
    rooms_become(&probe, &["foh", "stage-left"]).await;
    assert_eq!(control.put_json("/admin/groups/foh", json!({ "name": "Front of House" })).await.0, StatusCode::OK);
    rooms_become(&probe, &["front-of-house", "stage-left"]).await;
    assert_eq!(control.delete("/admin/groups/stage-left").await.0, StatusCode::OK);
    rooms_become(&probe, &["front-of-house"]).await;

    // Janus keeps rooms in memory only: after a restart control creates them again.
    stack.janus.restart();
    let probe = Probe::admin(&stack.janus).await;
    rooms_become(&probe, &["front-of-house"]).await;
    // The pass that recreated the room marks Janus up when it ends: after the room appears, and
    // after a first attempt on the restarted Janus may have said "down" (its session was gone).
    let janus = wait_for("Janus up again", SOON, async || {
        let (_, stats) = stack.control.get_json("/admin/stats").await;
        (stats["janus"]["state"] == "up").then(|| stats["janus"].clone())
    })
    .await;
    assert_eq!(janus["version"], "1.1.2");
    assert_eq!(janus["rooms"], 1);
}

#[tokio::test]
async fn a_token_admits_one_user_who_is_tracked_until_it_leaves() {
    let stack = Stack::start("  - name: Stage Left\n").await;
    let control = &stack.control;
    let (status, body) = issue(control, "Alice", "stage-left").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (token, identity) = (body["token"].as_str().expect("token"), body["participantIdentity"].as_str().expect("id"));
    assert!(token.len() >= 32, "at least 128 bits: {token}");
    assert_eq!(body["roomName"], "stage-left");
    assert_eq!(body["url"].as_str().map(|u| u.starts_with("ws://") && u.ends_with("/janus")), Some(true), "{body}");
    assert_eq!(user_state(control, identity).await.as_deref(), Some("pending"));
    assert!(!control.log_text().contains(token), "tokens are never logged");

    // A made-up token is refused by Janus itself.
    assert_eq!(Probe::open(&stack.janus, "made-up-token").await.err(), Some(403));

    let alice = Probe::open(&stack.janus, token).await.expect("the issued token opens a session");
    alice.join("stage-left", identity, "Alice").await.expect("join");
    wait_for("Alice connected", SOON, async || {
        (user_state(control, identity).await.as_deref() == Some("connected")).then_some(())
    })
    .await;
    let (_, stats) = control.get_json("/admin/stats").await;
    assert_eq!(
        (stats["activeConnections"].as_u64(), stats["totalConnections"].as_u64()),
        (Some(1), Some(1)),
        "{stats}"
    );

    alice.destroy().await.expect("leave");
    wait_for("Alice gone", SOON, async || user_state(control, identity).await.is_none().then_some(())).await;
    let (_, stats) = control.get_json("/admin/stats").await;
    assert_eq!(stats["activeConnections"], 0);
    becomes_revoked(&stack.janus, "Alice's used", token).await; // a used token dies with its session
}

/// Bob, in Stage Left's room under the token issued to him, and connected in control's view.
struct Bob {
    token: String,
    identity: String,
    /// His Janus session.
    probe: Probe,
}

async fn bob_connected(stack: &Stack) -> Bob {
    let (_, body) = issue(&stack.control, "Bob", "stage-left").await;
    let text = |key: &str| body[key].as_str().unwrap_or_else(|| panic!("{key} in {body}")).to_owned();
    let (token, identity) = (text("token"), text("participantIdentity"));
    let probe = Probe::open(&stack.janus, &token).await.expect("session");
    probe.join("stage-left", &identity, "Bob").await.expect("join");
    wait_for("Bob connected", SOON, async || {
        (user_state(&stack.control, &identity).await.as_deref() == Some("connected")).then_some(())
    })
    .await;
    Bob { token, identity, probe }
}

#[tokio::test]
async fn a_disconnect_kicks_and_the_token_cannot_rejoin() {
    let stack = Stack::start("  - name: Stage Left\n").await;
    let control = &stack.control;
    let Bob { token, identity, probe: bob } = bob_connected(&stack).await;
    let (token, identity) = (token.as_str(), identity.as_str());
    let observer = Probe::admin(&stack.janus).await;

    let (status, body) = control.delete(&format!("/admin/users/{identity}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["identity"], identity);
    // Janus removes a kicked participant as it hangs up its handle, a moment after the kick.
    wait_for("Bob kicked from the room", SOON, async || {
        observer.participants("stage-left").await.expect("room").is_empty().then_some(())
    })
    .await;
    assert!(user_state(control, identity).await.is_none(), "gone from the list");
    assert_eq!(bob.join("stage-left", identity, "Bob").await.err(), Some(403), "the token is revoked");
    assert_eq!(Probe::open(&stack.janus, token).await.err(), Some(403));
    let (_, logs) = control.get_json("/admin/logs?level=warn").await;
    let line = logs["logs"].as_array().expect("logs").iter().find(|l| l["message"] == "user disconnected").cloned();
    let line = line.unwrap_or_else(|| panic!("a warn line: {logs}"));
    assert_eq!((&line["meta"]["identity"], &line["meta"]["by"]), (&json!(identity), &json!("admin")), "{line}");

    let (status, body) = control.delete(&format!("/admin/users/{identity}")).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
}

/// The admin can clear a user while Janus cannot be reached (hung): the user is gone from the
/// list at once, and once Janus answers again it is kicked and its token revoked.
#[tokio::test]
async fn a_disconnect_while_janus_is_unreachable_holds_once_it_is_back() {
    let stack = Stack::start("  - name: Stage Left\n").await;
    let control = &stack.control;
    let Bob { token, identity, .. } = bob_connected(&stack).await;
    let (token, identity) = (token.as_str(), identity.as_str());
    let observer = Probe::admin(&stack.janus).await;

    stack.janus.signal("STOP");
    let (status, body) = control.delete(&format!("/admin/users/{identity}")).await;
    stack.janus.signal("CONT");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("revoked once it is back")), "says so: {body}");
    assert!(user_state(control, identity).await.is_none(), "gone from the list at once");
    wait_for("Bob kicked once Janus answers", Duration::from_secs(15), async || {
        observer.participants("stage-left").await.ok()?.is_empty().then_some(())
    })
    .await;
    becomes_revoked(&stack.janus, "Bob's", token).await;
}

#[tokio::test]
async fn deleting_a_group_disconnects_its_users() {
    let stack = Stack::start("  - name: Doomed\n  - name: Other\n").await;
    let control = &stack.control;
    let (_, body) = issue(control, "Carol", "doomed").await;
    let (token, identity) = (body["token"].as_str().expect("token"), body["participantIdentity"].as_str().expect("id"));
    let carol = Probe::open(&stack.janus, token).await.expect("session");
    carol.join("doomed", identity, "Carol").await.expect("join");
    wait_for("Carol connected", SOON, async || user_state(control, identity).await.map(drop)).await;

    assert_eq!(control.delete("/admin/groups/doomed").await.0, StatusCode::OK);
    wait_for("Carol gone", SOON, async || user_state(control, identity).await.is_none().then_some(())).await;
    becomes_revoked(&stack.janus, "Carol's", token).await;
    assert!(control.log_text().contains("group deleted or renamed"));
}

#[tokio::test]
async fn bad_token_requests_are_refused_and_register_nothing() {
    let stack = Stack::start("  - name: Stage Left\n").await;
    let control = &stack.control;
    let cases = [
        (json!({ "username": "Dan", "groupId": "nowhere" }), StatusCode::NOT_FOUND, "nowhere"),
        (json!({ "username": "   ", "groupId": "stage-left" }), StatusCode::BAD_REQUEST, "username"),
        (json!({ "username": "x".repeat(65), "groupId": "stage-left" }), StatusCode::BAD_REQUEST, "username"),
        (json!({ "username": "bell\u{7}", "groupId": "stage-left" }), StatusCode::BAD_REQUEST, "username"),
        (json!({ "username": "Dan" }), StatusCode::BAD_REQUEST, "groupId"),
    ];
    for (body, want, mentions) in cases {
        let (status, answer) = control.post_json("/token", body.clone()).await;
        assert_eq!(status, want, "{body} → {answer}");
        assert!(answer["error"].as_str().is_some_and(|e| e.contains(mentions)), "{answer}");
    }

    stack.janus.stop();
    let (status, answer) = issue(control, "Eve", "stage-left").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert!(answer["error"].as_str().is_some_and(|e| e.contains("media server")), "{answer}");
    let (_, users) = control.get_json("/admin/users?state=all").await;
    assert_eq!(users["count"], 0, "nothing registered: {users}");
    wait_for("Janus reported down", SOON, async || {
        let (_, stats) = control.get_json("/admin/stats").await;
        (stats["janus"]["state"] == "down").then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_event_endpoint_needs_the_secret() {
    let stack = Stack::start("  - name: Stage Left\n").await;
    let url = stack.control.events_url("/api/internal/janus-events");
    let http = crate::support::http();
    let event = json!([{"type": 64, "event": {"plugin": "janus.plugin.audiobridge", "data": {"event": "joined", "room": "stage-left", "id": "x"}}}]);
    for auth in [None, Some(("janus", "wrong")), Some(("other", "test-event-secret"))] {
        let mut request = http.post(&url).json(&event);
        if let Some((user, pass)) = auth {
            request = request.basic_auth(user, Some(pass));
        }
        let (status, body) = crate::support::read(request.send().await.expect("sent")).await;
        assert_eq!((status, body["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("unauthorized")), "{auth:?}");
    }
    let response =
        http.post(&url).basic_auth("janus", Some("test-event-secret")).json(&event).send().await.expect("sent");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
}

/// The AudioBridge error codes control acts on are the ones Janus sends. (A wrong one, 487 for
/// "no such user", made the kick of a participant already gone an error: a disconnect failed,
/// and clearing a dead bridged's leftovers stopped at the first absent one.)
#[tokio::test]
async fn the_error_codes_control_acts_on_are_janus_s() {
    let janus = Janus::start();
    janus.create_room("coded", 1).await;
    let probe = Probe::admin(&janus).await;
    let cases = [
        (json!({"request": "kick", "room": "coded", "secret": "room-secret", "id": "nobody"}), codes::NO_SUCH_USER),
        (json!({"request": "listparticipants", "room": "nowhere"}), codes::NO_SUCH_ROOM),
        (json!({"request": "create", "admin_key": janus.room_admin_key(), "room": "coded"}), codes::ROOM_EXISTS),
    ];
    for (request, code) in cases {
        assert_eq!(probe.audiobridge(request.clone()).await.err(), Some(code), "{request}");
    }
}

/// The token and participant identity of a crew member issued for `group`.
async fn credentials(control: &Control, username: &str, group: &str) -> (String, String) {
    let (status, body) = issue(control, username, group).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let field = |key: &str| body[key].as_str().expect(key).to_owned();
    (field("token"), field("participantIdentity"))
}

#[tokio::test]
async fn a_room_admits_only_the_tokens_issued_for_it_also_after_janus_restarts() {
    let mut stack = Stack::start("  - name: Stage Left\n  - name: Backstage\n").await;
    let (alice_token, alice) = credentials(&stack.control, "Alice", "stage-left").await;

    // Alice's token opens a Janus session, but another group's room refuses it, under any id.
    let probe = Probe::open(&stack.janus, &alice_token).await.expect("session");
    assert_eq!(probe.join_result("backstage", &alice, "Alice").await.err(), Some(codes::NOT_ALLOWED));
    assert_eq!(probe.join_result("backstage", "made-up", "Alice").await.err(), Some(codes::NOT_ALLOWED));
    assert_eq!(user_state(&stack.control, &alice).await.as_deref(), Some("pending"), "not taken for joined");
    // So does a token Janus knows that control never issued for the room.
    let stranger = Probe::admin(&stack.janus).await;
    assert_eq!(stranger.join_result("stage-left", "stranger", "X").await.err(), Some(codes::NOT_ALLOWED));

    // In her own room, under an identity that is not hers: kicked, and the attempt logged.
    probe.join_result("stage-left", "someone-else", "Bob").await.expect("admitted by the room");
    let observer = Probe::admin(&stack.janus).await;
    wait_for("the impostor kicked", SOON, async || {
        let present = observer.participants("stage-left").await.unwrap_or_default();
        (!present.iter().any(|id| id == "someone-else")).then_some(())
    })
    .await;
    // Control may log the attempt after Janus has dropped the participant: waited for, not read once.
    wait_for("the attempt logged", SOON, async || {
        let (_, logs) = stack.control.get_json("/admin/logs?level=warn").await;
        logs["logs"]
            .as_array()
            .expect("logs")
            .iter()
            .any(|l| {
                l["meta"]["identity"] == "someone-else"
                    && l["message"].as_str().is_some_and(|m| m.contains("not issued"))
            })
            .then_some(())
    })
    .await;

    // Rooms come back from a restarted Janus admitting the same tokens, and only those.
    stack.janus.restart();
    let (bob_token, bob) = credentials(&stack.control, "Bob", "backstage").await;
    wait_for("rooms recreated", SOON, async || {
        let probe = Probe::admin(&stack.janus).await;
        (probe.rooms().await == ["backstage", "stage-left"]).then_some(())
    })
    .await;
    let alice_again = Probe::open(&stack.janus, &alice_token).await.expect("Alice's token restored");
    assert_eq!(alice_again.join_result("backstage", &alice, "Alice").await.err(), Some(codes::NOT_ALLOWED));
    alice_again.join_result("stage-left", &alice, "Alice").await.expect("her own room admits her");
    let bob_probe = Probe::open(&stack.janus, &bob_token).await.expect("session");
    assert_eq!(bob_probe.join_result("stage-left", &bob, "Bob").await.err(), Some(codes::NOT_ALLOWED));
    bob_probe.join_result("backstage", &bob, "Bob").await.expect("his own room admits him");
    for (who, identity) in [("Alice", &alice), ("Bob", &bob)] {
        wait_for(&format!("{who} connected"), SOON, async || {
            (user_state(&stack.control, identity).await.as_deref() == Some("connected")).then_some(())
        })
        .await;
    }
}
