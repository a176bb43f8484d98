//! control and the real partyline-bridged on a private D-Bus: server audio users become a plan,
//! the plan follows the config, and comes back when bridged restarts.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use partyline_testkit::SoundServer;
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::pulse::PulseServer;

use partyline_testkit::stack::{Stack, branch, joined};

const SOON: Duration = Duration::from_secs(10);

fn branch_names(bridge: &Value) -> Vec<String> {
    let mut names: Vec<String> = bridge["branches"]
        .as_array()
        .map(|b| b.iter().map(|b| b["name"].as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

async fn stack_on(bus: &Bus) -> Stack {
    Stack::start_with_env("  - name: Stage Left\n  - name: FOH\n", &[("PARTYLINE_BUS", &bus.address)]).await
}

#[tokio::test]
async fn without_bridged_server_user_writes_are_refused_and_change_nothing() {
    let bus = Bus::start();
    let stack = stack_on(&bus).await;
    stack.bridge_becomes("bridge absent", SOON, |b| b["state"] == "absent").await;
    let before = stack.control.config_text();
    let user = json!({ "name": "Desk", "group": "stage-left", "inputChannel": 0, "outputChannel": 1 });
    let (status, body) = stack.control.post_json("/admin/server-users", user).await;
    assert_eq!((status, body["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{body}");
    assert!(body["error"].as_str().is_some_and(|e| e.contains("partyline-bridged")), "{body}");
    assert_eq!(stack.control.config_text(), before);
    let (status, body) = stack.control.get_json("/admin/server-users").await;
    assert_eq!((status, body), (StatusCode::OK, json!({ "serverUsers": [] })), "reads still work");
}

/// A private bus, a card (two 8-channel null sinks), Janus, control and bridged, with the card
/// selected.
struct Rig {
    bus: Bus,
    card: PulseServer,
    stack: Stack,
    bridged: Bridged,
}

impl Rig {
    async fn start() -> Rig {
        let bus = Bus::start();
        let card = PulseServer::start();
        card.load_module("module-null-sink", "sink_name=card_in channels=8 rate=48000");
        card.load_module("module-null-sink", "sink_name=card_out channels=8 rate=48000");
        let stack = stack_on(&bus).await;
        let bridged = Bridged::start(&bus, &[("PULSE_SERVER", &card.server_address())]);
        stack.bridge_becomes("bridged seen", SOON, |b| b["state"] != "absent" && b["state"] != "unknown").await;
        let card_devices = json!({ "inputDeviceId": "card_in.monitor", "outputDeviceId": "card_out" });
        assert_eq!(stack.control.post_json("/admin/audio/device", card_devices).await.0, StatusCode::OK);
        Rig { bus, card, stack, bridged }
    }

    fn restart_bridged(&mut self) {
        self.bridged.kill();
        self.bridged = Bridged::start(&self.bus, &[("PULSE_SERVER", &self.card.server_address())]);
    }
}

#[tokio::test]
async fn server_users_become_branches_and_survive_a_bridged_restart() {
    let mut rig = Rig::start().await;
    let stack = &rig.stack;
    let control = &stack.control;

    let desk = json!({ "name": "Desk", "group": "stage-left", "inputChannel": 0, "outputChannel": 1 });
    let (status, body) = control.post_json("/admin/server-users", desk).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["serverUser"],
        json!({ "id": "desk", "name": "Desk", "group": "stage-left", "inputChannel": 0, "outputChannel": 1, "ifb": null })
    );
    let foh = json!({ "name": "FOH mic", "group": "foh", "inputChannel": 2 });
    assert_eq!(control.post_json("/admin/server-users", foh).await.0, StatusCode::CREATED);

    for (bad, want) in [
        (json!({ "name": "Desk", "group": "foh", "inputChannel": 3 }), StatusCode::CONFLICT),
        (json!({ "name": "X", "group": "nowhere", "inputChannel": 3 }), StatusCode::BAD_REQUEST),
        (json!({ "name": "Y", "group": "foh", "inputChannel": 8 }), StatusCode::BAD_REQUEST),
        (json!({ "name": "Z", "group": "foh", "inputChannel": 1, "outputChannel": -1 }), StatusCode::BAD_REQUEST),
        (json!({ "name": "日本", "group": "foh", "inputChannel": 1 }), StatusCode::BAD_REQUEST),
    ] {
        let (status, body) = control.post_json("/admin/server-users", bad.clone()).await;
        assert_eq!(status, want, "{bad} → {body}");
    }
    let (status, body) = control.delete("/admin/groups/foh").await;
    assert_eq!(status, StatusCode::CONFLICT, "a used group cannot go: {body}");

    let bridge = stack.bridge_becomes("two branches", SOON, |b| branch_names(b) == ["Desk", "FOH mic"]).await;
    let generation = bridge["generation"].as_u64().expect("generation");
    // Their tokens were registered (and so they are listed) before bridged heard of them.
    let (_, users) = control.get_json("/admin/users?state=all").await;
    let kinds: Vec<&str> =
        users["users"].as_array().expect("users").iter().filter_map(|u| u["kind"].as_str()).collect();
    assert_eq!(kinds, ["server", "server"], "{users}");
    // …so their first request to Janus was not refused: no join was retried.
    let bridge = stack.bridge_becomes("both joined", SOON, |b| joined(b, &["Desk", "FOH mic"])).await;
    // The counters shown move while the media flows (bridged signals state changes only).
    let sent = |b: &Value| branch(b, "Desk").and_then(|d| d["packetsSent"].as_u64()).unwrap_or(0);
    let before = sent(&bridge);
    stack.bridge_becomes("Desk's packet counter moving", Duration::from_secs(2), |b| sent(b) > before).await;
    let (_, logs) = control.get_json("/admin/logs?level=warn&limit=1000").await;
    let retries: Vec<&Value> =
        logs["logs"].as_array().expect("logs").iter().filter(|e| e.to_string().contains("retrying in")).collect();
    assert!(retries.is_empty(), "a join was retried: {retries:?}");
    let (status, body) = control.delete("/admin/users/card:stage-left").await;
    assert_eq!(status, StatusCode::CONFLICT, "server audio users follow the config: {body}");

    let (status, body) = control.put_json("/admin/server-users/desk", json!({ "outputChannel": null })).await;
    assert_eq!((status, &body["serverUser"]["outputChannel"]), (StatusCode::OK, &Value::Null), "{body}");
    stack.bridge_becomes("a new generation", SOON, |b| b["generation"].as_u64() > Some(generation)).await;

    // A restarted bridged starts with nothing; control sends it the plan again.
    rig.restart_bridged();
    let (stack, control) = (&rig.stack, &rig.stack.control);
    stack.bridge_becomes("plan re-sent", SOON, |b| branch_names(b) == ["Desk", "FOH mic"]).await;
    stack.bridge_becomes("both joined", SOON, |b| joined(b, &["Desk", "FOH mic"])).await;

    assert_eq!(control.delete("/admin/server-users/foh-mic").await.0, StatusCode::OK);
    stack.bridge_becomes("one branch", SOON, |b| branch_names(b) == ["Desk"]).await;
    let on_disk = crate::support::parse_config(&control.config_text());
    assert_eq!(on_disk.server_audio_users.len(), 1);
    assert_eq!(on_disk.server_audio_users[0].output_channel, None);

    // Added again under the same name: the participant it was a moment ago must not block it
    // (Janus would keep one whose leave was refused until its session times out, 60 s).
    let foh = json!({ "name": "FOH mic", "group": "foh", "inputChannel": 2 });
    assert_eq!(control.post_json("/admin/server-users", foh).await.0, StatusCode::CREATED);
    stack.bridge_becomes("FOH mic joined again", SOON, |b| joined(b, &["Desk", "FOH mic"])).await;
}

/// The rooms the card's participants have joined, sorted.
fn rooms_joined(bridge: &Value) -> Vec<String> {
    let participants = bridge["participants"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut rooms: Vec<String> = participants
        .iter()
        .filter(|p| p["state"] == "joined")
        .filter_map(|p| p["room"].as_str().map(str::to_owned))
        .collect();
    rooms.sort();
    rooms
}

/// A presenter's IFB: program from input 1, interrupted by FOH, where no server user sends.
/// The card joins FOH's room to hear it; bad IFBs are refused with the key named and change
/// nothing; a group an IFB hears cannot be deleted, and its rename follows into the IFB; an
/// IFB removed, the card leaves the room it needed.
#[tokio::test]
async fn an_ifb_makes_the_card_hear_its_interrupt_group_and_bad_ones_are_refused() {
    let rig = Rig::start().await;
    let (stack, control) = (&rig.stack, &rig.stack.control);
    let ifb = json!({ "program": 1, "interrupt": "foh", "dimDb": -20 });
    let presenter =
        json!({ "name": "Presenter", "group": "stage-left", "inputChannel": 0, "outputChannel": 2, "ifb": ifb });
    let (status, body) = control.post_json("/admin/server-users", presenter).await;
    assert_eq!((status, &body["serverUser"]["ifb"]), (StatusCode::CREATED, &ifb), "{body}");
    stack.bridge_becomes("the card in both rooms", SOON, |b| rooms_joined(b) == ["foh", "stage-left"]).await;
    let text = control.config_text();
    assert!(text.contains("ifb:") && text.contains("interrupt: foh") && text.contains("dimDb: -20"), "{text}");

    let before = control.config_text();
    let with_ifb =
        |ifb: Value| json!({ "name": "Other", "group": "foh", "inputChannel": 4, "outputChannel": 5, "ifb": ifb });
    for (bad, field) in [
        (json!({ "name": "Other", "group": "foh", "inputChannel": 4, "ifb": ifb }), "ifb:"),
        (with_ifb(json!({ "program": 1, "interrupt": "nowhere" })), "ifb.interrupt:"),
        (with_ifb(json!({ "program": "foh", "interrupt": "foh" })), "ifb.program:"),
        (with_ifb(json!({ "program": 8, "interrupt": "foh" })), "input 8 is out of range"),
        (with_ifb(json!({ "program": 1, "interrupt": "foh", "dimDb": -61 })), "-61 dB"),
        (with_ifb(json!({ "program": 1, "interrupt": "foh", "dimDb": "mute" })), "\"mute\""),
        (
            json!({ "name": "Other", "group": "foh", "inputChannel": 4, "outputChannel": 2, "ifb": ifb }),
            "already plays the IFB",
        ),
    ] {
        let (status, body) = control.post_json("/admin/server-users", bad.clone()).await;
        let error = body["error"].as_str().unwrap_or_default();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad} → {body}");
        assert!(error.contains(field), "{bad}: {error:?} should name {field}");
    }
    let (status, body) = control.put_json("/admin/server-users/presenter", json!({ "outputChannel": null })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "an IFB without its output: {body}");
    let (status, body) = control.delete("/admin/groups/foh").await;
    assert_eq!(status, StatusCode::CONFLICT, "a group an IFB hears: {body}");
    assert_eq!(control.config_text(), before, "refused writes changed the file");

    let (status, body) = control.put_json("/admin/groups/foh", json!({ "name": "Front of House" })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, users) = control.get_json("/admin/server-users").await;
    assert_eq!(users["serverUsers"][0]["ifb"]["interrupt"], "front-of-house", "{users}");
    stack
        .bridge_becomes("the card in the renamed room", SOON, |b| rooms_joined(b) == ["front-of-house", "stage-left"])
        .await;

    let (status, body) = control.put_json("/admin/server-users/presenter", json!({ "ifb": null })).await;
    assert_eq!((status, &body["serverUser"]["ifb"]), (StatusCode::OK, &Value::Null), "{body}");
    stack.bridge_becomes("the card back in its own room only", SOON, |b| rooms_joined(b) == ["stage-left"]).await;
}

/// The Janus sessions there are now.
async fn sessions(stack: &Stack) -> usize {
    let answer = stack.janus.admin(json!({ "janus": "list_sessions" })).await;
    answer["sessions"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn a_removed_server_user_leaves_janus_at_once_and_quietly() {
    let rig = Rig::start().await;
    let (stack, control) = (&rig.stack, &rig.stack.control);
    for user in [
        json!({ "name": "Desk", "group": "stage-left", "inputChannel": 0, "outputChannel": 1 }),
        json!({ "name": "FOH mic", "group": "foh", "inputChannel": 2 }),
    ] {
        assert_eq!(control.post_json("/admin/server-users", user).await.0, StatusCode::CREATED);
    }
    stack.bridge_becomes("both joined", SOON, |b| joined(b, &["Desk", "FOH mic"])).await;
    let with_both = sessions(stack).await;
    let tokens = || async {
        let answer = stack.janus.admin(json!({ "janus": "list_tokens" })).await;
        answer["data"]["tokens"].as_array().map_or(0, Vec::len)
    };
    let tokens_before = tokens().await;
    let (_, logs) = control.get_json("/admin/logs?limit=1").await;
    let since = logs["logs"][0]["seq"].as_u64().unwrap_or(0);

    assert_eq!(control.delete("/admin/server-users/foh-mic").await.0, StatusCode::OK);
    stack.bridge_becomes("one branch", SOON, |b| branch_names(b) == ["Desk"]).await;
    // bridged ends the branch's session with the user's token, which is revoked only after a
    // grace: the session is gone in a moment, not at Janus's 60 s timeout.
    let started = std::time::Instant::now();
    crate::support::wait_for("the branch's Janus session ended", Duration::from_secs(5), async || {
        (sessions(stack).await < with_both).then_some(())
    })
    .await;
    println!("BRIDGE server user removed → its Janus session ended: {:?}", started.elapsed());
    // A normal action: no warning about it in the admin's log, from control or bridged.
    let (_, logs) = control.get_json(&format!("/admin/logs?level=warn&after={since}")).await;
    assert_eq!(logs["logs"], json!([]), "no warning for a removal");
    // And after the grace its token is gone from Janus.
    crate::support::wait_for("the removed user's token revoked", Duration::from_secs(8), async || {
        (tokens().await < tokens_before).then_some(())
    })
    .await;
}
