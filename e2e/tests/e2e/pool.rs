//! A pool of Janus nodes behind one control: sessions placed by load, each panel's `/janus`
//! connection relayed to its own node, and a group with members on two nodes made one line by
//! trunk legs (each node's `local` mix forwarded to a trunk participant on the other).
//!
//! Needs root and the network namespace of `scripts/netns-run`. Each node is a Janus in a
//! network namespace of its own, as on a host of its own (`partyline_testkit::netns`), with
//! secrets of its own, linked to this namespace by a veth pair: control and the crew reach it
//! on its private address, it posts its events to control there, and its trunk legs to the
//! other nodes pass through this namespace.

use std::time::{Duration, Instant};

use partyline_crew::Crew;
use partyline_crew::control_api::Lines;
use partyline_testkit::control::Control;
use partyline_testkit::events::session_events;
use partyline_testkit::janus::{Janus, Probe};
use partyline_testkit::janus_proxy::{RawPanel, next};
use partyline_testkit::stack::crew_options as options;
use partyline_testkit::{ICE_ADDRESS, ReservedPort, require_namespace, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const SLOW: Duration = Duration::from_secs(20);

/// The nodes' names, in the config's order.
const NAMES: [&str; 3] = ["a", "b", "c"];

/// Janus nodes `a`, `b`… carrying the given participants, and a control with all of them and
/// `groups` (YAML list items).
struct Pool {
    nodes: Vec<Janus>,
    control: Control,
    /// The config's text with `{nodes}` where the `janus.nodes` items go.
    template: String,
    capacities: Vec<u32>,
    /// control's events port, which the nodes were told before control listened.
    _events_port: ReservedPort,
}

impl Pool {
    async fn start(capacities: &[u32], groups: &str) -> Pool {
        let events_reserved = ReservedPort::on(ICE_ADDRESS.parse().expect("an IP address"));
        let events_port = events_reserved.port();
        // control's events listener on this namespace's private address, which every node reaches.
        let events = format!("http://{ICE_ADDRESS}:{events_port}/api/internal/janus-events");
        // Each node in a namespace of its own, with secrets of its own (in its `janus.nodes`
        // entry), posting its events under its name; the pool's secrets are the first's.
        let janus: Vec<Janus> = NAMES[..capacities.len()]
            .iter()
            .map(|name| Janus::builder().node_events(&events, name, &node_event_secret(name)).own_namespace().start())
            .collect();
        let template = format!(
            "server:\n  listen: 127.0.0.1:0\n  eventsListen: {ICE_ADDRESS}:{events_port}\n  tls: false\njanus:\n  adminSecret: {}\n  roomAdminKey: {}\n  nodes:\n{{nodes}}audio:\n  jitterBufferMs: 40\ngroups:\n{groups}",
            janus[0].admin_secret(),
            janus[0].room_admin_key(),
        );
        let all: Vec<usize> = (0..capacities.len()).collect();
        let config = pool_config(&template, &janus, capacities, &all);
        let control = Control::builder().config(Some(&config)).start().await;
        wait_for("every node up", Duration::from_secs(10), async || {
            let nodes = nodes(&control).await;
            nodes.iter().all(|n| n["state"] == "up").then_some(())
        })
        .await;
        Pool { nodes: janus, control, template, capacities: capacities.to_vec(), _events_port: events_reserved }
    }

    /// The config with the nodes of `present` (indexes).
    fn config(&self, present: &[usize]) -> String {
        pool_config(&self.template, &self.nodes, &self.capacities, present)
    }
}

/// Node `name`'s event password.
fn node_event_secret(name: &str) -> String {
    format!("{name}-event-secret-of-its-own")
}

fn pool_config(template: &str, nodes: &[Janus], capacities: &[u32], present: &[usize]) -> String {
    let items: String = present.iter().map(|&i| nodes[i].node_yaml(NAMES[i], capacities[i])).collect();
    template.replace("{nodes}", &items)
}

async fn nodes(control: &Control) -> Vec<Value> {
    let (_, stats) = control.get_json("/admin/stats").await;
    stats["janus"]["nodes"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_over_three_nodes_is_one_line_each_talker_heard_once_and_never_back() {
    require_namespace();
    let pool = Pool::start(&[2, 2, 2], "  - name: Stage\n  - name: FOH\n").await;
    let control = &pool.control;
    let stage = Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] };
    let mut crew = Crew::new(options(control, stage)).expect("a crew");
    assert_eq!(crew.add(6, Duration::from_secs(1)).await, 6, "{:?}\n{}", crew.joins, control.log_text());

    // Placed by load: two on each node, Stage on all three and joined by a full mesh of legs
    // (two trunks in each); FOH, with nobody, only on the first, with none.
    let nodes = wait_for("two sessions on each node, Stage cascaded", SLOW, async || {
        let nodes = nodes(control).await;
        let even = nodes.iter().all(|n| n["sessions"] == 2 && n["cascaded"] == json!(["stage"]));
        even.then_some(nodes)
    })
    .await;
    println!("POOL nodes: {nodes:?}");
    let mut probes = Vec::new();
    for node in &pool.nodes {
        probes.push(Probe::admin(node).await);
    }
    wait_for("in each node's Stage, a trunk from each other node", SLOW, async || {
        for (i, probe) in probes.iter().enumerate() {
            let present = participants(probe, "stage").await;
            let trunks: Vec<String> = NAMES.iter().filter(|n| **n != NAMES[i]).map(|n| format!("trunk:{n}")).collect();
            if present.len() != 4 || !trunks.iter().all(|t| present.contains(t)) {
                return None;
            }
        }
        Some(())
    })
    .await;
    assert_eq!(participants(&probes[0], "foh").await, Vec::<String>::new(), "FOH on a, with no trunk");
    for probe in &probes[1..] {
        assert_eq!(probe.participants("foh").await, Err(485), "no FOH room but on the first node");
    }

    // Six turns of 3 s: each member talks once and hears the five others, four of them from
    // other nodes.
    crew.heard().await;
    crew.talk_for(Duration::from_secs(18)).await;
    let heard = crew.heard().await;
    crew.silence().await;
    for person in &heard {
        let (_, _, figures) = &person.lines[0];
        let (tone, other) = (figures.tone_db(), figures.other_db());
        println!(
            "POOL {}: {} bursts, tone {tone:.1?} dBFS, other {other:.1?} dBFS, own {} ms, mouth-to-ear {:.0?} ms, gaps {}",
            person.name, figures.bursts, figures.own_voice_ms, figures.mouth_to_ear_ms, figures.gaps
        );
        // Five turns of 3 s as a listener: about 30 bursts of 400 ms in every 500 ms.
        assert!(figures.bursts >= 20, "{} heard {} bursts: {figures:?}", person.name, figures.bursts);
        let (tone, other) = (tone.expect("judged"), other.expect("judged"));
        // The tone as sent (RMS −15 dBFS): four of the five talkers come from other nodes, so
        // one heard twice would lift the median by 6 dB, and a lost leg would drop it.
        let sent = f64::from(partyline_crew::media::voice::TONE_LEVEL);
        assert!((tone - sent).abs() < 1.0, "{} hears the talkers at {tone:.1} dBFS, sent at {sent}", person.name);
        assert!(other < tone - 15.0, "{} hears something else: {other:.1} dBFS against {tone:.1}", person.name);
        // What it hears while it talks: nothing of itself coming back (Janus's own mixer may
        // hand a talker 20 ms of itself now and then, see the crew's tests).
        assert!(figures.own_voice_ms <= 60, "{} hears itself for {} ms", person.name, figures.own_voice_ms);
    }
}

/// Sessions go where there is the most room: a hundred over three equal nodes land evenly.
#[tokio::test]
async fn a_hundred_sessions_land_evenly_on_three_equal_nodes() {
    require_namespace();
    // The hundred ask from one address and none joins: no per-address limit in the way.
    let pool = Pool::start(&[64, 64, 64], "  - name: Stage\ncrew:\n  maxPendingPerAddress: 1000\n").await;
    let control = &pool.control;
    for n in 0..100 {
        let (status, body) =
            control.post_json("/token", json!({"username": format!("crew {n}"), "groupId": "stage"})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let sessions: Vec<u64> = nodes(control).await.iter().map(|n| n["sessions"].as_u64().unwrap_or(0)).collect();
    println!("POOL 100 sessions over three nodes: {sessions:?}");
    assert!(sessions.iter().all(|&n| (30..=37).contains(&n)), "within ±10 % of even: {sessions:?}");
    assert_eq!(sessions.iter().sum::<u64>(), 100);
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
    let pool = Pool::start(&[1, 100], "  - name: Stage\n").await;
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
    let (on_a, on_b) = (Probe::admin(&pool.nodes[0]).await, Probe::admin(&pool.nodes[1]).await);
    let mut expected_b = vec![identity.clone(), "trunk:a".to_owned()];
    expected_b.sort();
    wait_for("Ann on b, and the legs both ways", SLOW, async || {
        (participants(&on_b, "stage").await == expected_b && participants(&on_a, "stage").await == ["trunk:b"])
            .then_some(())
    })
    .await;

    // b dies. Ann's panel is told at once (its relayed connection ends; its session stream says
    // `moved`), control marks b down and moves her; her panel's next token, resuming, lands on a
    // with the same key.
    let mut moved = session_events(control, &token, "moved").await;
    let killed = Instant::now();
    pool.nodes[1].kill();
    let frame = loop {
        match next(&mut panel.socket).await {
            Message::Close(frame) => break frame,
            _ => continue,
        }
    };
    let told = killed.elapsed();
    let code = frame.as_ref().map(|f| u16::from(f.code));
    assert!(matches!(code, Some(1011 | 1012)), "a close the panel rejoins after: {frame:?}");
    let event = tokio::time::timeout(SLOW, moved.recv()).await.expect("`moved` within 20 s");
    assert_eq!(event, Some(json!({"from": "b"})), "the session stream names the node lost");
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
    // Audio still flows (200), degraded by the lost node.
    let (status, health) = control.get_json("/health").await;
    assert_eq!(
        (status, &health["status"], &health["nodes"][1]),
        (StatusCode::OK, &json!("degraded"), &json!({"name": "b", "state": "down"}))
    );
    assert!(health["problems"][0].as_str().is_some_and(|p| p.contains("Janus node b is down")), "{health}");
    wait_for("the move logged", SLOW, async || {
        control.log_text().lines().any(|l| l.contains("WARN") && l.contains("Janus node down")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_node_removed_from_the_config_is_drained_and_one_added_takes_the_next_sessions() {
    require_namespace();
    let pool = Pool::start(&[1, 100], "  - name: Stage\n").await;
    let control = &pool.control;
    let (status, ann) = control.post_json("/token", json!({"username": "Ann", "groupId": "stage"})).await;
    assert_eq!(status, StatusCode::OK, "{ann}");
    let (token, identity) = (ann["token"].as_str().expect("token"), ann["participantIdentity"].as_str().expect("id"));
    assert_eq!(node_of(control, identity).await.as_deref(), Some("b"));
    let mut panel = RawPanel::open(control, token).await;
    let handle = panel.attach(identity).await;
    panel.joined(handle, "stage", identity, true).await;
    let (on_a, on_b) = (Probe::admin(&pool.nodes[0]).await, Probe::admin(&pool.nodes[1]).await);
    wait_for("the legs both ways", SLOW, async || (participants(&on_a, "stage").await == ["trunk:b"]).then_some(()))
        .await;

    // b taken out of the config: Ann's panel is told to join again (1012), b is drained (no
    // room left there), and a no longer has b's trunk.
    std::fs::write(control.config_path(), pool.config(&[0])).expect("config written");
    let frame = loop {
        if let Message::Close(frame) = next(&mut panel.socket).await {
            break frame;
        }
    };
    assert_eq!(frame.as_ref().map(|f| u16::from(f.code)), Some(1012), "{frame:?}");
    wait_for("b drained, a without b's trunk", SLOW, async || {
        let drained = on_b.participants("stage").await == Err(485);
        (drained && participants(&on_a, "stage").await.is_empty()).then_some(())
    })
    .await;
    assert_eq!(nodes(control).await.len(), 1);

    // b back in the config: with a full (Ann's rejoin), the next session lands on b.
    let (status, again) = control.post_json("/token", json!({"username": "Ann", "groupId": "stage"})).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(node_of(control, again["participantIdentity"].as_str().expect("id")).await.as_deref(), Some("a"));
    std::fs::write(control.config_path(), pool.config(&[0, 1])).expect("config written");
    wait_for("b up again", SLOW, async || {
        let nodes = nodes(control).await;
        (nodes.len() == 2 && nodes[1]["state"] == "up").then_some(())
    })
    .await;
    let (status, bo) = control.post_json("/token", json!({"username": "Bo", "groupId": "stage"})).await;
    assert_eq!(status, StatusCode::OK, "{bo}");
    assert_eq!(node_of(control, bo["participantIdentity"].as_str().expect("id")).await.as_deref(), Some("b"));
}

/// A position's site places its sessions on that site's nodes while one is up and has room; a
/// join cannot name a site. A node's capacity is a limit for new sessions, not for a panel
/// rejoining.
#[tokio::test]
async fn a_position_s_site_places_its_sessions_there_and_capacity_is_a_limit() {
    require_namespace();
    let pool = Pool::start(&[100, 1], "  - name: Stage\n").await;
    let control = &pool.control;
    // b at the site "truck", and a position there (a's room to spare would win otherwise).
    let with_site = pool.config(&[0, 1]).replace("      capacity: 1\n", "      capacity: 1\n      site: truck\n");
    let positions = "positions:\n  - name: Truck Desk\n    listen: [stage]\n    talk: [stage]\n    site: truck\n";
    std::fs::write(control.config_path(), format!("{with_site}{positions}")).expect("config written");
    wait_for("b at the site truck", SLOW, async || (nodes(control).await[1]["site"] == "truck").then_some(())).await;

    let join = async |body: Value| {
        let (status, answer) = control.post_json("/token", body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let node = node_of(control, answer["participantIdentity"].as_str().expect("id")).await;
        (node, answer)
    };
    assert_eq!(join(json!({"username": "Ann", "groupId": "stage"})).await.0.as_deref(), Some("a"), "by load");
    let (status, refused) =
        control.post_json("/token", json!({"username": "Bo", "groupId": "stage", "site": "truck"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a join naming a site: {refused}");
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("site") && !e.contains("truck")), "{refused}");
    let desk = |name: &str| json!({"username": name, "position": "truck-desk"});
    assert_eq!(join(desk("Cy")).await.0.as_deref(), Some("b"), "the position's site");
    assert_eq!(join(desk("Di")).await.0.as_deref(), Some("a"), "b is full: where there is room");

    // The site's node down: the session goes where one is up rather than nowhere.
    pool.nodes[1].kill();
    let (node, ed) = join(desk("Ed")).await;
    assert_eq!(node.as_deref(), Some("a"));

    // a made 3 participants big, and holding 3 (Ann, Di, Ed): a new session is refused, a
    // panel rejoining is not.
    let small = with_site.replace("      capacity: 100\n", "      capacity: 3\n");
    std::fs::write(control.config_path(), format!("{small}{positions}")).expect("config written");
    wait_for("a of capacity 3", SLOW, async || (nodes(control).await[0]["capacity"] == 3).then_some(())).await;
    let (status, refused) = control.post_json("/token", json!({"username": "Fy", "groupId": "stage"})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert!(refused["error"].as_str().is_some_and(|e| e.contains("at its capacity")), "{refused}");
    let resume = json!({"token": ed["token"], "panelKey": ed["panelKey"]});
    let (node, _) = join(json!({"username": "Ed", "position": "truck-desk", "resume": resume})).await;
    assert_eq!(node.as_deref(), Some("a"), "a rejoin goes over the capacity");
}

/// A node killed while its members talk: they join again by themselves on the live node (as
/// the page does), with their panel keys, and everyone hears everyone again; the members on
/// the live node hear no gap meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_while_its_members_talk_they_are_back_on_the_live_node_with_audio_both_ways() {
    require_namespace();
    let pool = Pool::start(&[2, 2], "  - name: Stage\n").await;
    let control = &pool.control;
    let stage = Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] };
    let mut crew = Crew::new(options(control, stage)).expect("a crew");
    assert_eq!(crew.add(4, Duration::from_secs(1)).await, 4, "{:?}\n{}", crew.joins, control.log_text());
    let mut on_b = Vec::new();
    for person in &crew.people {
        if node_of(control, person.identity()).await.as_deref() == Some("b") {
            on_b.push((person.name.clone(), person.credentials.panel_key.clone()));
        }
    }
    assert_eq!(on_b.len(), 2, "two of the four on b");
    crew.talk_for(Duration::from_secs(6)).await;
    crew.heard().await;

    // b dies mid-turn; its members notice (their connections close) and join again.
    let killed = Instant::now();
    pool.nodes[1].kill();
    wait_for("b's members told", SLOW, async || {
        (crew.people.iter().filter(|p| p.lost().is_some()).count() == 2).then_some(())
    })
    .await;
    let during = crew.heard().await;
    let back = crew.rejoin_lost().await;
    println!("POOL node killed while talking: back after {:?} (kill → media connected {:?})", killed.elapsed(), back);
    for (name, result) in &back {
        assert!(result.is_ok(), "{name} could not join again: {result:?}\n{}", control.log_text());
    }
    for person in during.iter().filter(|p| !on_b.iter().any(|(name, _)| *name == p.name)) {
        let (_, _, figures) = &person.lines[0];
        assert_eq!(figures.gaps, 0, "{} (on a) heard a gap while b died: {figures:?}", person.name);
    }
    for person in &crew.people {
        assert_eq!(node_of(control, person.identity()).await.as_deref(), Some("a"), "{} on a", person.name);
        if let Some((_, key)) = on_b.iter().find(|(name, _)| *name == person.name) {
            assert_eq!(&person.credentials.panel_key, key, "{} kept its panel key", person.name);
        }
    }

    // Everyone hears everyone again: four turns, each member a listener three times.
    crew.heard().await;
    crew.talk_for(Duration::from_secs(12)).await;
    let heard = crew.heard().await;
    crew.silence().await;
    let sent = f64::from(partyline_crew::media::voice::TONE_LEVEL);
    for person in &heard {
        let (_, _, figures) = &person.lines[0];
        println!(
            "POOL after the move, {}: {} bursts, tone {:.1?} dBFS",
            person.name,
            figures.bursts,
            figures.tone_db()
        );
        assert!(figures.bursts >= 12, "{} heard {} bursts after the move: {figures:?}", person.name, figures.bursts);
        let tone = figures.tone_db().expect("judged");
        assert!((tone - sent).abs() < 1.0, "{} hears the talkers at {tone:.1} dBFS", person.name);
    }
}

/// Mouth-to-ear of two members talking in turns, both on one node, then one on each of two
/// nodes, in the same run: a cascade adds the receiving node's mix and the trunk's prebuffer
/// (2 to 3 packets, and up to a tick: BENCHMARKS.md, "Pool"), never more than 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mouth_to_ear_across_two_nodes_against_one_node_in_the_same_run() {
    require_namespace();
    let mut medians = Vec::new();
    for (case, capacities) in [("one node", &[64][..]), ("two nodes", &[1, 1][..])] {
        let pool = Pool::start(capacities, "  - name: Stage\n").await;
        let control = &pool.control;
        let stage = Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] };
        let mut crew = Crew::new(options(control, stage)).expect("a crew");
        assert_eq!(crew.add(2, Duration::from_secs(1)).await, 2, "{:?}\n{}", crew.joins, control.log_text());
        let mut placed = Vec::new();
        for person in &crew.people {
            placed.push(node_of(control, person.identity()).await.unwrap_or_default());
        }
        assert_eq!(placed.len() - usize::from(placed[0] == placed[1]), capacities.len(), "{case}: {placed:?}");
        crew.talk_for(Duration::from_secs(2)).await;
        crew.heard().await;
        crew.talk_for(Duration::from_secs(8)).await;
        let heard = crew.heard().await;
        let report = partyline_crew::Report::new(&crew, &heard, Duration::from_secs(8), Vec::new());
        println!("POOL mouth-to-ear, {case}:\n{}", report.table());
        let line = &report.per_line[0];
        assert!(line.bursts >= 6, "{case}: {} bursts heard", line.bursts);
        medians.push(line.mouth_to_ear_ms.as_ref().expect("mouth-to-ear measured").median);
    }
    let added = medians[1] - medians[0];
    println!("POOL a cascade adds {added:.0} ms to the median mouth-to-ear ({medians:?})");
    assert!(added <= 100.0, "a cascade adds {added:.0} ms: {medians:?}");
}

/// A direct line between panels placed on two nodes: its room on each node, joined by legs both
/// ways as a group's would be, and gone from both when it closes.
#[tokio::test]
async fn a_direct_line_between_two_nodes_is_a_room_on_each_joined_by_legs() {
    require_namespace();
    let pool = Pool::start(&[1, 1], "  - name: Stage\n").await;
    let control = &pool.control;
    let positions = "crew:\n  directCalls: positions\npositions:\n  - name: Director\n    listen: [stage]\n    talk: [stage]\n    talkTo: [camera-1]\n  - name: Camera 1\n    listen: [stage]\n    talk: [stage]\n";
    std::fs::write(control.config_path(), format!("{}{positions}", pool.config(&[0, 1]))).expect("config written");
    wait_for("the positions loaded", SLOW, async || {
        let (_, body) = control.get_json("/admin/positions").await;
        (body["positions"].as_array()?.len() == 2).then_some(())
    })
    .await;

    // Ann on a, Ben on b (placed by load), each joined to Stage on its node.
    let mut ends = Vec::new();
    for (name, position, node) in [("Ann", "director", 0), ("Ben", "camera-1", 1)] {
        let (status, answer) = control.post_json("/token", json!({"username": name, "position": position})).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let (token, identity) =
            (answer["token"].as_str().expect("token"), answer["participantIdentity"].as_str().expect("id"));
        assert_eq!(node_of(control, identity).await.as_deref(), Some(NAMES[node]), "{name} placed by load");
        let probe = Probe::open(&pool.nodes[node], token).await.expect("a session on its node");
        probe.join_result("stage", identity, name).await.expect("joined Stage");
        ends.push((token.to_owned(), identity.to_owned(), probe));
    }
    wait_for("both connected", SLOW, async || {
        let (_, users) = control.get_json("/admin/users").await;
        (users["users"].as_array()?.len() == 2).then_some(())
    })
    .await;

    let (status, line) =
        control.post_json("/session/direct", json!({"token": ends[0].0, "position": "camera-1"})).await;
    assert_eq!(status, StatusCode::CREATED, "{line}");
    let room = line["groupId"].as_str().expect("its room").to_owned();
    let mut probes = Vec::new();
    for node in &pool.nodes {
        probes.push(Probe::admin(node).await);
    }
    wait_for("the direct room on each node with a trunk from the other", SLOW, async || {
        for (i, probe) in probes.iter().enumerate() {
            let other = format!("trunk:{}", NAMES[1 - i]);
            if !participants(probe, &room).await.contains(&other) {
                return None;
            }
        }
        Some(())
    })
    .await;
    for (i, (_, identity, _)) in ends.iter().enumerate() {
        let end = Probe::open(&pool.nodes[i], &ends[i].0).await.expect("a second handle");
        end.join_result(&room, identity, "end").await.expect("each end joins the room on its own node");
    }

    let (status, _) = control.delete(&format!("/admin/direct/{room}")).await;
    assert_eq!(status, StatusCode::OK);
    wait_for("the direct room gone from both nodes", SLOW, async || {
        for probe in &probes {
            if probe.rooms().await.contains(&room) {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// A node's event password speaks only for the participants placed on that node: node b's
/// `left` and `joined` about members on node a change nothing, where a's own act; a wrong
/// password, or b's under a's name, is refused.
#[tokio::test]
async fn a_node_s_events_speak_only_for_its_own_participants() {
    require_namespace();
    // a has the room to spare: Ann goes there, and joins as her panel does.
    let pool = Pool::start(&[100, 1], "  - name: Stage\n").await;
    let control = &pool.control;
    let (status, ann) = control.post_json("/token", json!({"username": "Ann", "groupId": "stage"})).await;
    assert_eq!(status, StatusCode::OK, "{ann}");
    let (token, identity) = (ann["token"].as_str().expect("token"), ann["participantIdentity"].as_str().expect("id"));
    assert_eq!(node_of(control, identity).await.as_deref(), Some("a"));
    let probe = Probe::open(&pool.nodes[0], token).await.expect("a session on a");
    probe.join_result("stage", identity, "Ann").await.expect("joined on a");
    let state = async || partyline_testkit::stack::user_state(control, identity).await;
    wait_for("Ann connected", SLOW, async || (state().await.as_deref() == Some("connected")).then_some(())).await;

    // Posted from loopback (the listener admits it and the nodes' addresses only).
    let http = reqwest::Client::builder().local_address(Some("127.0.0.1".parse().expect("an address"))).build();
    let http = http.expect("a client");
    let url = control.events_url("/api/internal/janus-events");
    let post = async |user: &str, password: &str, event: &str, id: &str| {
        let data = json!({"event": event, "room": "stage", "id": id});
        let body = json!([{"type": 64, "event": {"plugin": "janus.plugin.audiobridge", "data": data}}]);
        let sent = http.post(&url).basic_auth(user, Some(password)).json(&body).send().await;
        sent.expect("posted").status()
    };
    let (a, b) = (node_event_secret("a"), node_event_secret("b"));
    assert_eq!(post("b", "wrong", "left", identity).await, StatusCode::UNAUTHORIZED);
    assert_eq!(post("a", &b, "left", identity).await, StatusCode::UNAUTHORIZED, "b's password under a's name");
    // Bo, on a too, holds a token he has not used yet.
    let (_, bo) = control.post_json("/token", json!({"username": "Bo", "groupId": "stage"})).await;
    let bo = bo["participantIdentity"].as_str().expect("Bo's identity");
    assert_eq!(node_of(control, bo).await.as_deref(), Some("a"));
    assert_eq!(post("b", &b, "left", identity).await, StatusCode::NO_CONTENT);
    assert_eq!(post("b", &b, "joined", bo).await, StatusCode::NO_CONTENT);
    assert_eq!(state().await.as_deref(), Some("connected"), "b's `left` removed Ann");
    let bo_state = partyline_testkit::stack::user_state(control, bo).await;
    assert_eq!(bo_state.as_deref(), Some("pending"), "b's `joined` marked Bo connected");
    assert!(probe.participants("stage").await.is_ok(), "Ann's token still opens her session");

    // a's own `left` is Ann's: she is gone and her token revoked.
    assert_eq!(post("a", &a, "left", identity).await, StatusCode::NO_CONTENT);
    wait_for("Ann gone", SLOW, async || state().await.is_none().then_some(())).await;
}
