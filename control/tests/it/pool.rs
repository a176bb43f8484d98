//! A pool of Janus nodes behind one control: sessions placed by load, each panel's `/janus`
//! connection relayed to its own node, and a group with members on two nodes made one line by
//! trunk legs (each node's `local` mix forwarded to a trunk participant on the other).
//!
//! Needs root and the network namespace of `scripts/netns-run`; the nodes are two Janus
//! processes on loopback here, each posting its events to control.

use std::time::{Duration, Instant};

use partyline_crew::Crew;
use partyline_crew::control_api::Lines;
use partyline_testkit::janus::{Janus, Probe};
use partyline_testkit::{ICE_IFACE, free_port, require_namespace, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::crew::options;
use crate::proxy::{RawPanel, next};
use crate::support::Control;

const SLOW: Duration = Duration::from_secs(20);

/// Two Janus nodes, `a` and `b`, carrying the given participants, and a control with `groups`
/// (YAML list items).
struct Pool {
    a: Janus,
    b: Janus,
    control: Control,
}

impl Pool {
    async fn start((capacity_a, capacity_b): (u32, u32), groups: &str) -> Pool {
        let events_port = free_port();
        let event_pass = "test-event-secret";
        let events = format!("http://127.0.0.1:{events_port}/api/internal/janus-events");
        let a = Janus::builder().events(&events, event_pass).ice_iface(ICE_IFACE).start();
        let b = Janus::builder().events(&events, event_pass).ice_iface(ICE_IFACE).secrets_of(&a).start();
        let config = format!(
            "server:\n  listen: 127.0.0.1:0\n  eventsListen: 127.0.0.1:{events_port}\n  tls: false\njanus:\n  adminSecret: {}\n  roomAdminKey: {}\n  eventSecret: {event_pass}\n  nodes:\n{}{}audio:\n  jitterBufferMs: 40\ngroups:\n{groups}",
            a.admin_secret(),
            a.room_admin_key(),
            a.node_yaml("a", capacity_a),
            b.node_yaml("b", capacity_b),
        );
        let control = Control::builder().config(Some(&config)).start().await;
        wait_for("both nodes up", Duration::from_secs(10), async || {
            let nodes = nodes(&control).await;
            nodes.iter().all(|n| n["state"] == "up").then_some(())
        })
        .await;
        Pool { a, b, control }
    }
}

async fn nodes(control: &Control) -> Vec<Value> {
    let (_, stats) = control.get_json("/admin/stats").await;
    stats["janus"]["nodes"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_over_two_nodes_is_one_line_each_talker_heard_once_and_never_back() {
    require_namespace();
    let pool = Pool::start((2, 2), "  - name: Stage\n  - name: FOH\n").await;
    let control = &pool.control;
    let stage = Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] };
    let mut crew = Crew::new(options(control, stage)).expect("a crew");
    assert_eq!(crew.add(4, Duration::from_secs(1)).await, 4, "{:?}\n{}", crew.joins, control.log_text());

    // Placed by load: two on each node, Stage on both and joined by legs; FOH, with nobody,
    // only on the first, with none.
    let nodes = wait_for("two sessions on each node, Stage cascaded", SLOW, async || {
        let nodes = nodes(control).await;
        let even = nodes.iter().all(|n| n["sessions"] == 2 && n["cascaded"] == serde_json::json!(["stage"]));
        even.then_some(nodes)
    })
    .await;
    println!("POOL nodes: {nodes:?}");
    let (on_a, on_b) = (Probe::admin(&pool.a).await, Probe::admin(&pool.b).await);
    let in_room = participants;
    wait_for("a trunk from each node in the other's Stage", SLOW, async || {
        let (a, b) = (in_room(&on_a, "stage").await, in_room(&on_b, "stage").await);
        (a.len() == 3 && b.len() == 3 && a.contains(&"trunk:b".to_owned()) && b.contains(&"trunk:a".to_owned()))
            .then_some(())
    })
    .await;
    assert_eq!(in_room(&on_a, "foh").await, Vec::<String>::new(), "FOH on a, with no trunk");
    assert_eq!(on_b.participants("foh").await, Err(485), "no FOH room on b");

    // Four turns of 3 s: each member talks once and hears the three others, two of them from
    // the other node.
    crew.heard().await;
    crew.talk_for(Duration::from_secs(12)).await;
    let heard = crew.heard().await;
    crew.silence().await;
    for person in &heard {
        let (_, _, figures) = &person.lines[0];
        let (tone, other) = (figures.tone_db(), figures.other_db());
        println!(
            "POOL {}: {} bursts, tone {tone:.1?} dBFS, other {other:.1?} dBFS, own {} ms, mouth-to-ear {:.0?} ms, gaps {}",
            person.name, figures.bursts, figures.own_voice_ms, figures.mouth_to_ear_ms, figures.gaps
        );
        // Three turns of 3 s as a listener: about 18 bursts of 400 ms in every 500 ms.
        assert!(figures.bursts >= 12, "{} heard {} bursts: {figures:?}", person.name, figures.bursts);
        let (tone, other) = (tone.expect("judged"), other.expect("judged"));
        // The tone as sent (RMS −15 dBFS): two of the three talkers come from the other node,
        // so one heard twice would lift the median by 6 dB, and a lost leg would drop it.
        let sent = f64::from(partyline_crew::media::voice::TONE_LEVEL);
        assert!((tone - sent).abs() < 1.5, "{} hears the talkers at {tone:.1} dBFS, sent at {sent}", person.name);
        assert!(figures.own_voice_ms <= 60, "{} hears itself for {} ms", person.name, figures.own_voice_ms);
        assert!(other < tone - 15.0, "{} hears something else: {other:.1} dBFS against {tone:.1}", person.name);
    }
}

/// The node control placed crew member `identity` on, as `/admin/users` shows it.
async fn node_of(control: &Control, identity: &str) -> Option<String> {
    let (_, body) = control.get_json("/admin/users?state=all").await;
    let users = body["users"].as_array()?;
    let user = users.iter().find(|u| u["identity"] == identity)?;
    user["node"].as_str().map(str::to_owned)
}

async fn participants(probe: &Probe, room: &str) -> Vec<String> {
    let mut ids = probe.participants(room).await.unwrap_or_default();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_node_killed_under_a_panel_sends_it_back_to_a_live_node_with_its_panel_key() {
    require_namespace();
    // b has the room: Ann, the first session, goes there.
    let pool = Pool::start((1, 100), "  - name: Stage\n").await;
    let control = &pool.control;
    let (status, ann) = control.post_json("/token", json!({"username": "Ann", "groupId": "stage"})).await;
    assert_eq!(status, StatusCode::OK, "{ann}");
    let field =
        |answer: &Value, key: &str| answer[key].as_str().unwrap_or_else(|| panic!("{key}: {answer}")).to_owned();
    let (token, identity, key) = (field(&ann, "token"), field(&ann, "participantIdentity"), field(&ann, "panelKey"));
    assert_eq!(node_of(control, &identity).await.as_deref(), Some("b"));
    let mut panel = RawPanel::open(control, &token).await;
    let handle = panel.attach(&identity).await;
    panel.joined(handle, "stage", &identity, true).await;
    let (on_a, on_b) = (Probe::admin(&pool.a).await, Probe::admin(&pool.b).await);
    let mut expected_b = vec![identity.clone(), "trunk:a".to_owned()];
    expected_b.sort();
    wait_for("Ann on b, and the legs both ways", SLOW, async || {
        (participants(&on_b, "stage").await == expected_b && participants(&on_a, "stage").await == ["trunk:b"])
            .then_some(())
    })
    .await;

    // b dies. Ann's panel is told at once (its relayed connection ends), control marks b down
    // and moves her; her panel's next token, resuming, lands on a with the same key.
    let killed = Instant::now();
    pool.b.kill();
    let frame = loop {
        match next(&mut panel.socket).await {
            Message::Close(frame) => break frame,
            _ => continue,
        }
    };
    let told = killed.elapsed();
    let code = frame.as_ref().map(|f| u16::from(f.code));
    assert!(matches!(code, Some(1011 | 1012)), "a close the panel rejoins after: {frame:?}");
    let resume = json!({"username": "Ann", "groupId": "stage", "resume": {"token": token, "panelKey": key}});
    let again = wait_for("a token on a live node", SLOW, async || {
        let (status, again) = control.post_json("/token", resume.clone()).await;
        (status == StatusCode::OK).then_some(again)
    })
    .await;
    let (token, identity) = (field(&again, "token"), field(&again, "participantIdentity"));
    assert_eq!(field(&again, "panelKey"), key, "the panel key kept");
    assert_eq!(node_of(control, &identity).await.as_deref(), Some("a"));
    let mut panel = RawPanel::open(control, &token).await;
    let handle = panel.attach(&identity).await;
    panel.joined(handle, "stage", &identity, true).await;
    wait_for("Ann on a, and the trunk from the dead node gone", SLOW, async || {
        (participants(&on_a, "stage").await == std::slice::from_ref(&identity)).then_some(())
    })
    .await;
    println!("POOL node killed: panel told after {told:?}, back in its room on a after {:?}", killed.elapsed());
    let nodes = wait_for("b down in the stats", SLOW, async || {
        let nodes = nodes(control).await;
        (nodes[1]["state"] == "down").then_some(nodes)
    })
    .await;
    assert_eq!((nodes[0]["sessions"].as_u64(), nodes[1]["sessions"].as_u64()), (Some(1), Some(0)), "{nodes:?}");
    wait_for("the move logged", SLOW, async || {
        control.log_text().lines().any(|l| l.contains("WARN") && l.contains("Janus node down")).then_some(())
    })
    .await;
}
