//! control restarted (SIGKILL, then a new process on the same state dir) with crew members
//! registered: they are listed again as they were, the admin can still disconnect them, Janus's
//! reconciliation settles who left meanwhile and which tokens expired, and the crew file
//! (`crew.json`, which holds tokens) is private, never logged, and set aside when corrupt.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use partyline_testkit::janus::Probe;

use crate::support::{Control, wait_for};
use partyline_testkit::stack::{Stack, becomes_revoked};

/// Janus events arrive in milliseconds; the poll catches up within 2 s.
const SOON: Duration = Duration::from_secs(5);
const GROUPS: &str = "  - name: Stage Left\n";

/// A token for `username` in Stage Left: (token, identity).
async fn issue(control: &Control, username: &str) -> (String, String) {
    let (status, body) = control.post_json("/token", json!({ "username": username, "groupId": "stage-left" })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let field = |key: &str| body[key].as_str().unwrap_or_else(|| panic!("{key} in {body}")).to_owned();
    (field("token"), field("participantIdentity"))
}

/// The crew members `GET /admin/users` lists, whole.
async fn crew(control: &Control) -> Vec<Value> {
    let (status, body) = control.get_json("/admin/users?state=all").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let users = body["users"].as_array().unwrap_or_else(|| panic!("users in {body}"));
    users.iter().filter(|u| u["kind"] == "crew").cloned().collect()
}

async fn state(control: &Control, identity: &str) -> Option<String> {
    crew(control).await.iter().find(|u| u["identity"] == identity).map(|u| u["state"].as_str().unwrap_or("").to_owned())
}

async fn becomes_connected(control: &Control, identity: &str) {
    wait_for(&format!("{identity} connected"), SOON, async || {
        (state(control, identity).await.as_deref() == Some("connected")).then_some(())
    })
    .await;
}

/// Waits until control has been through a reconciliation with Janus.
async fn in_step(control: &Control) {
    wait_for("control in step with Janus", SOON, async || {
        let (_, stats) = control.get_json("/admin/stats").await;
        (stats["janus"]["state"] == "up").then_some(())
    })
    .await;
}

async fn room_empties(observer: &Probe) {
    wait_for("Stage Left empty in Janus", SOON, async || {
        observer.participants("stage-left").await.expect("room").is_empty().then_some(())
    })
    .await;
}

/// The log lines (at `level` or above) whose message contains `message`.
async fn log_lines(control: &Control, level: &str, message: &str) -> Vec<Value> {
    let (_, logs) = control.get_json(&format!("/admin/logs?level={level}&limit=1000")).await;
    let lines = logs["logs"].as_array().unwrap_or_else(|| panic!("logs in {logs}"));
    lines.iter().filter(|l| l["message"].as_str().is_some_and(|m| m.contains(message))).cloned().collect()
}

fn crew_file(control: &Control) -> PathBuf {
    control.dir().join("crew.json")
}

fn assert_tokens_not_logged(control: &Control, tokens: &[&str]) {
    let log = control.log_text();
    for token in tokens {
        assert!(!log.contains(token), "a token is in the log:\n{log}");
    }
}

#[tokio::test]
async fn crew_members_are_listed_again_after_control_is_killed_and_can_be_disconnected() {
    let mut stack = Stack::start(GROUPS).await;
    let (alice_token, alice) = issue(&stack.control, "Alice").await;
    let (bob_token, bob) = issue(&stack.control, "Bob").await;
    let alice_probe = Probe::open(&stack.janus, &alice_token).await.expect("Alice's session");
    alice_probe.join("stage-left", &alice, "Alice").await.expect("join");
    becomes_connected(&stack.control, &alice).await;
    let before = crew(&stack.control).await;
    let states: Vec<_> = before.iter().map(|u| (u["username"].as_str(), u["state"].as_str())).collect();
    assert_eq!(states, [(Some("Alice"), Some("connected")), (Some("Bob"), Some("pending"))]);

    stack.control.respawn().await;
    // Listed at once, as they were (connection and activity times included)…
    assert_eq!(crew(&stack.control).await, before, "the crew after the restart");
    // …and Janus's reconciliation confirms it: Alice is still in the room.
    in_step(&stack.control).await;
    assert_eq!(crew(&stack.control).await, before, "the crew once reconciled with Janus");

    // The admin can disconnect Alice: kicked, her token revoked.
    let observer = Probe::admin(&stack.janus).await;
    let (status, body) = stack.control.delete(&format!("/admin/users/{alice}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["identity"], alice.as_str());
    room_empties(&observer).await;
    assert_eq!(alice_probe.join("stage-left", &alice, "Alice").await.err(), Some(403), "the token is revoked");
    assert_eq!(Probe::open(&stack.janus, &alice_token).await.err(), Some(403));
    assert_eq!(state(&stack.control, &alice).await, None);

    // Bob's pending token still admits him, and he is tracked.
    let bob_probe = Probe::open(&stack.janus, &bob_token).await.expect("Bob's token still opens a session");
    bob_probe.join("stage-left", &bob, "Bob").await.expect("join");
    becomes_connected(&stack.control, &bob).await;
    assert_tokens_not_logged(&stack.control, &[&alice_token, &bob_token]);
}

#[tokio::test]
async fn the_crew_file_is_private_and_a_corrupt_one_is_set_aside() {
    let mut stack = Stack::start(GROUPS).await;
    let (token, identity) = issue(&stack.control, "Alice").await;
    let path = crew_file(&stack.control);
    let mode = |path: &PathBuf| std::fs::metadata(path).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600, "the file holds tokens");
    assert!(std::fs::read_to_string(&path).expect("read").contains(&token), "the token is stored");
    stack.control.respawn().await;
    assert_eq!(state(&stack.control, &identity).await.as_deref(), Some("pending"));
    assert_tokens_not_logged(&stack.control, &[&token]);

    // Garbage, and JSON of the wrong shape holding a secret where a state goes: control starts
    // with no crew, names the file in an error, keeps the file aside and never logs its contents.
    let bad_path = stack.control.dir().join("crew.json.bad");
    let wrong_shape = json!({"version": 1, "crew": [{"identity": "x", "state": "s3cret-in-a-corrupt-file"}]});
    for corrupt in [b"\x00\xff{\"crew\": [ garbage".to_vec(), wrong_shape.to_string().into_bytes()] {
        stack.control.kill();
        std::fs::write(&path, &corrupt).expect("corrupt the file");
        stack.control.respawn().await;
        assert_eq!(crew(&stack.control).await, Vec::<Value>::new(), "no crew");
        let errors = log_lines(&stack.control, "error", "crew registry file is unreadable").await;
        let names_the_file = |l: &&Value| l["meta"]["file"] == path.display().to_string();
        assert_eq!(errors.iter().filter(names_the_file).count(), 1, "one error naming the file: {errors:?}");
        assert_eq!(std::fs::read(&bad_path).expect("the bad file is kept"), corrupt);
        assert!(!path.exists(), "moved aside, not overwritten");
        assert!(!stack.control.log_text().contains("s3cret-in-a-corrupt-file"), "the file's contents are not logged");
    }

    // The registry works on: the next crew member is stored in a new private file.
    let (carol_token, carol) = issue(&stack.control, "Carol").await;
    assert_eq!(mode(&path), 0o600);
    stack.control.respawn().await;
    let identities: Vec<Value> = crew(&stack.control).await.iter().map(|u| u["identity"].clone()).collect();
    assert_eq!(identities, [json!(carol)]);
    assert_tokens_not_logged(&stack.control, &[&token, &carol_token]);
}

#[tokio::test]
async fn a_user_who_left_while_control_was_down_is_gone_after_the_restart_and_its_token_revoked() {
    let mut stack = Stack::start(GROUPS).await;
    let (token, alice) = issue(&stack.control, "Alice").await;
    let probe = Probe::open(&stack.janus, &token).await.expect("session");
    probe.join("stage-left", &alice, "Alice").await.expect("join");
    becomes_connected(&stack.control, &alice).await;
    let observer = Probe::admin(&stack.janus).await;

    stack.control.kill();
    probe.destroy().await.expect("leave");
    room_empties(&observer).await;
    stack.control.respawn().await;

    wait_for("Alice gone", SOON, async || state(&stack.control, &alice).await.is_none().then_some(())).await;
    let left = log_lines(&stack.control, "info", "user left").await;
    assert!(left.iter().any(|l| l["meta"]["identity"] == alice.as_str()), "Alice's departure is logged: {left:?}");
    becomes_revoked(&stack.janus, "Alice's", &token).await;
}

#[tokio::test]
async fn a_pending_token_past_its_lifetime_is_revoked_after_the_restart() {
    let mut stack = Stack::start(GROUPS).await;
    let (token, dan) = issue(&stack.control, "Dan").await;
    stack.control.kill();
    // Eleven minutes pass while control is down: the stored issue time, moved back.
    let path = crew_file(&stack.control);
    let mut file: Value = serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
    let issued = &mut file["crew"][0]["issuedAtUnixNs"];
    *issued = json!(issued.as_i64().expect("issuedAtUnixNs") - 11 * 60 * 1_000_000_000);
    std::fs::write(&path, file.to_string()).expect("write");

    stack.control.respawn().await;
    wait_for("Dan's token expired", SOON, async || state(&stack.control, &dan).await.is_none().then_some(())).await;
    becomes_revoked(&stack.janus, "Dan's", &token).await;
    let expired = log_lines(&stack.control, "info", "token never used: revoked").await;
    assert_eq!(expired.iter().filter(|l| l["meta"]["identity"] == dan.as_str()).count(), 1, "{expired:?}");
}

#[tokio::test]
async fn tokens_come_back_to_a_janus_that_restarted_while_control_was_down() {
    let mut stack = Stack::start(GROUPS).await;
    let (alice_token, alice) = issue(&stack.control, "Alice").await;
    let (bob_token, bob) = issue(&stack.control, "Bob").await;
    let probe = Probe::open(&stack.janus, &alice_token).await.expect("session");
    probe.join("stage-left", &alice, "Alice").await.expect("join");
    becomes_connected(&stack.control, &alice).await;

    stack.control.kill();
    stack.janus.restart();
    stack.control.respawn().await;
    in_step(&stack.control).await;
    // Alice's session died with Janus: she is gone and her token revoked; Bob's pending token
    // was added again.
    wait_for("Alice gone", SOON, async || state(&stack.control, &alice).await.is_none().then_some(())).await;
    becomes_revoked(&stack.janus, "Alice's", &alice_token).await;
    let bob_probe = Probe::open(&stack.janus, &bob_token).await.expect("Bob's token admits him");
    bob_probe.join("stage-left", &bob, "Bob").await.expect("join");
    becomes_connected(&stack.control, &bob).await;
}
