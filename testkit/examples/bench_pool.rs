//! The pool benchmark (`bench/pool`, BENCHMARKS.md "Pool"): RELEASE partyline-control and
//! partyline-crew against Janus nodes on this host, each in a network namespace of its own
//! linked by a veth pair to the namespace of `scripts/netns-run` (where control and the crew
//! are), posting its events to control.
//!
//! - Mouth-to-ear, one node against a cascade: two crew members on one group, talking in
//!   turns, first with both on one node, then one on each of two nodes (every burst crosses
//!   a trunk leg); the same crew, stack and settings but the pool.
//! - Placement: a hundred sessions (tokens) over three nodes of equal capacity.
//! - A node lost: a member placed on the second node, its panel's `/janus` connection open;
//!   the node is killed; the time until its connection is closed (the panel told) and until a
//!   rejoining token, resuming with its panel key, is answered on the live node. Then with
//!   media: four crew members talking on two nodes, one node killed, the time from the kill
//!   to each moved member's media connected on the live node (it rejoins as the page does).
//!
//! Prints a markdown section on stdout (progress on stderr); exits 1 when a goal was missed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use partyline_testkit::bench::{crew_output, machine_line, median};
use partyline_testkit::control::Control;
use partyline_testkit::janus::Janus;
use partyline_testkit::{ICE_ADDRESS, ReservedPort, require_namespace, wait_for};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// What a cascade may add to mouth-to-ear, median (one more mixing tick and a two-packet
/// prebuffer): the goal.
const CASCADE_GOAL_MS: f64 = 40.0;
/// Placement: each node within ±10 % of an even share.
const EVEN_WITHIN: f64 = 0.10;
const EVENT_SECRET: &str = "bench-event-secret";
/// A node lost: every moved panel back with media within this (the p95 goal; with a
/// handful of panels, every one).
const BACK_GOAL: Duration = Duration::from_secs(3);

struct Options {
    control: PathBuf,
    crew: PathBuf,
    seconds: u64,
    runs: u64,
}

fn options() -> Options {
    let mut args = std::env::args().skip(1);
    let mut o = Options { control: PathBuf::new(), crew: PathBuf::new(), seconds: 30, runs: 3 };
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--control" => o.control = value.into(),
            "--crew" => o.crew = value.into(),
            "--seconds" => o.seconds = value.parse().expect("--seconds N"),
            "--runs" => o.runs = value.parse().expect("--runs N"),
            other => panic!("unknown argument {other}"),
        }
    }
    o
}

/// Janus nodes with one set of secrets, and a control (release) with all of them.
struct Pool {
    control: Control,
    nodes: Vec<Janus>,
    _events_port: ReservedPort,
}

impl Pool {
    async fn start(o: &Options, capacities: &[u32]) -> Pool {
        let events_reserved = ReservedPort::on(ICE_ADDRESS.parse().expect("an IP address"));
        let events_port = events_reserved.port();
        // Each node in a namespace of its own, as on a host of its own, posting its events to
        // control's events listener on this namespace's private address, each under its name and
        // a password of its own.
        let events = format!("http://{ICE_ADDRESS}:{events_port}/api/internal/janus-events");
        let names: Vec<String> = (0..capacities.len()).map(|i| format!("n{i}")).collect();
        let nodes: Vec<Janus> = names
            .iter()
            .map(|name| {
                let secret = format!("{name}-{EVENT_SECRET}");
                Janus::builder().node_events(&events, name, &secret).own_namespace().start()
            })
            .collect();
        let items: String =
            nodes.iter().zip(&names).zip(capacities).map(|((n, name), &c)| n.node_yaml(name, c)).collect();
        let config = format!(
            "server:\n  listen: 127.0.0.1:0\n  eventsListen: {ICE_ADDRESS}:{events_port}\n  tls: false\njanus:\n  adminSecret: {}\n  roomAdminKey: {}\n  nodes:\n{items}logging:\n  level: warn\naudio:\n  jitterBufferMs: 40\ngroups:\n  - name: Stage\ncrew:\n  tokensPerMinute: 100000\n  maxPendingTokens: 5000\n  maxPendingPerAddress: 5000\n",
            nodes[0].admin_secret(),
            nodes[0].room_admin_key(),
        );
        let control = Control::builder().binary(&o.control).config(Some(&config)).start().await;
        wait_for("every node up", Duration::from_secs(30), async || {
            let nodes = stats_nodes(&control).await;
            (!nodes.is_empty() && nodes.iter().all(|n| n["state"] == "up")).then_some(())
        })
        .await;
        Pool { control, nodes, _events_port: events_reserved }
    }
}

async fn stats_nodes(control: &Control) -> Vec<Value> {
    control.get_json("/admin/stats").await.1["janus"]["nodes"].as_array().cloned().unwrap_or_default()
}

/// Two members on Stage for `o.seconds`, talking in turns: the crew's report.
async fn two_members(o: &Options, pool: &Pool) -> Option<Value> {
    let mut command = tokio::process::Command::new(&o.crew);
    command
        .args(["--server", &pool.control.origin, "--users", "2", "--listen", "stage", "--talk", "stage"])
        .args(["--duration", &o.seconds.to_string(), "--ramp", "1", "--turn", "3", "--insecure"])
        .args(["--media-address", ICE_ADDRESS, "--json"]);
    let output = crew_output(&mut command).await;
    serde_json::from_slice(&output.stdout).ok()
}

/// The median and p95 of a report's mouth-to-ear, and its gaps.
fn latency(report: &Value) -> Option<(f64, f64, u64)> {
    let m2e = &report["mouth_to_ear_ms"];
    Some((m2e["median"].as_f64()?, m2e["p95"].as_f64()?, report["gaps"].as_u64().unwrap_or(0)))
}

async fn placement(o: &Options) -> Vec<u64> {
    let pool = Pool::start(o, &[64, 64, 64]).await;
    for n in 0..100 {
        let body = json!({"username": format!("crew {n}"), "groupId": "stage"});
        let (status, answer) = pool.control.post_json("/token", body).await;
        assert!(status.is_success(), "token {n}: {answer}");
    }
    stats_nodes(&pool.control).await.iter().map(|n| n["sessions"].as_u64().unwrap_or(0)).collect()
}

/// A node killed under an open panel connection: (until the panel is told, until its
/// rejoining token is answered on the live node).
async fn node_loss(o: &Options) -> (Duration, Duration) {
    let pool = Pool::start(o, &[1, 100]).await;
    let control = &pool.control;
    let (_, ann) = control.post_json("/token", json!({"username": "Ann", "groupId": "stage"})).await;
    let field = |key: &str| ann[key].as_str().unwrap_or_else(|| panic!("{key}: {ann}")).to_owned();
    let (token, key) = (field("token"), field("panelKey"));
    let url = format!("{}/janus", control.origin.replacen("http", "ws", 1));
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static("janus-protocol"));
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.expect("/janus");
    let create = json!({"janus": "create", "transaction": "c", "token": token}).to_string();
    futures_util::SinkExt::send(&mut socket, create.into()).await.expect("create");
    let created = socket.next().await.expect("an answer").expect("a message");
    assert!(created.to_text().unwrap_or_default().contains("success"), "{created:?}");
    let killed = Instant::now();
    pool.nodes[1].kill();
    while let Some(Ok(message)) = socket.next().await {
        if message.is_close() {
            break;
        }
    }
    let told = killed.elapsed();
    let resume = json!({"username": "Ann", "groupId": "stage", "resume": {"token": token, "panelKey": key}});
    wait_for("a token on the live node", Duration::from_secs(20), async || {
        control.post_json("/token", resume.clone()).await.0.is_success().then_some(())
    })
    .await;
    (told, killed.elapsed())
}

/// Four members on two nodes talking; the second node killed: each moved member's time from
/// the kill to its media connected on the live node.
async fn node_loss_with_media(o: &Options) -> Vec<Duration> {
    use partyline_crew::control_api::Lines;
    let pool = Pool::start(o, &[2, 2]).await;
    let options = partyline_crew::Options {
        server: pool.control.origin.clone(),
        tls: partyline_crew::TlsCheck::Insecure,
        lines: Lines::Groups { listen: vec!["stage".into()], talk: vec!["stage".into()] },
        pin: None,
        name_prefix: "crew".into(),
        media_address: ICE_ADDRESS.parse().expect("an address"),
        jitter_buffer: Duration::from_millis(60),
        turn: Duration::from_secs(3),
        link: partyline_crew::Link::default(),
        fec_percent: 0,
        relay: None,
    };
    let mut crew = partyline_crew::Crew::new(options).expect("a crew");
    assert_eq!(crew.add(4, Duration::from_secs(1)).await, 4, "the crew joined");
    crew.talk_for(Duration::from_secs(4)).await;
    let killed = Instant::now();
    pool.nodes[1].kill();
    wait_for("the moved members told", Duration::from_secs(20), async || {
        (crew.people.iter().filter(|p| p.lost().is_some()).count() == 2).then_some(())
    })
    .await;
    let told = killed.elapsed();
    let back = crew.rejoin_lost().await;
    back.into_iter().map(|(name, result)| told + result.unwrap_or_else(|e| panic!("{name}: {e}"))).collect()
}

#[tokio::main]
async fn main() {
    require_namespace();
    partyline_shared::crypto::install_provider();
    let o = options();
    let machine = machine_line();
    let mut rows = Vec::new();
    for run in 1..=o.runs {
        for (case, capacities) in [("one node", vec![64]), ("two nodes, one member each", vec![1, 1])] {
            eprintln!("bench_pool: run {run}: {case}");
            let pool = Pool::start(&o, &capacities).await;
            let report = two_members(&o, &pool).await;
            rows.push((run, case, report.as_ref().and_then(latency)));
        }
    }
    let sessions = placement(&o).await;
    let mut losses = Vec::new();
    let mut back_with_media = Vec::new();
    for _ in 0..o.runs {
        losses.push(node_loss(&o).await);
        back_with_media.extend(node_loss_with_media(&o).await);
    }

    println!("## Pool (`bench/pool`): Janus nodes behind one control\n");
    println!("{machine}\n");
    println!(
        "Janus nodes as processes on this host, each in a network namespace of its own linked by a veth pair \
         to control's, each posting its events to control; \
         two crew members on one group talking in turns for {} s per case, {} run(s), each a fresh stack.\n",
        o.seconds, o.runs
    );
    println!("### Mouth-to-ear: one node against a cascade\n");
    println!("| run | members | m2e median ms | m2e p95 ms | gaps |\n|---|---|---:|---:|---:|");
    for (run, case, figures) in &rows {
        match figures {
            Some((median, p95, gaps)) => println!("| {run} | {case} | {median:.0} | {p95:.0} | {gaps} |"),
            None => println!("| {run} | {case} | - | - | no report |"),
        }
    }
    let of =
        |case: &str| median(&rows.iter().filter(|r| r.1 == case).filter_map(|r| r.2.map(|f| f.0)).collect::<Vec<_>>());
    let (one, two) = (of("one node"), of("two nodes, one member each"));
    let added = one.zip(two).map(|(one, two)| two - one);
    println!(
        "\nA cascade adds {} ms to the median mouth-to-ear (the median of the runs; goal ≤ {CASCADE_GOAL_MS:.0} ms).\n",
        added.map_or_else(|| "-".to_owned(), |a| format!("{a:.0}"))
    );
    println!("### Placement: 100 sessions over three nodes of capacity 64\n");
    let even = 100.0 / sessions.len().max(1) as f64;
    let within = sessions.iter().all(|&s| (s as f64 - even).abs() <= even * EVEN_WITHIN);
    println!(
        "Sessions per node: {sessions:?} (goal: each within ±10 % of {even:.1}: {}).\n",
        if within { "met" } else { "missed" }
    );
    println!("### A node lost (signalling: a panel's connection, no media)\n");
    println!("| run | kill → panel told ms | kill → token on the live node ms |\n|---|---:|---:|");
    for (k, (told, back)) in (1..).zip(&losses) {
        println!("| {k} | {:.0} | {:.0} |", told.as_secs_f64() * 1000.0, back.as_secs_f64() * 1000.0);
    }
    let ms: Vec<f64> = back_with_media.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    let worst = ms.iter().copied().fold(0.0, f64::max);
    println!(
        "\nWith media (four members talking on two nodes, one node killed, {} moved members over the runs): \
         kill → media connected on the live node, median {:.0} ms, max {worst:.0} ms (goal: p95 ≤ {:.0} ms).\n",
        ms.len(),
        median(&ms).unwrap_or(f64::NAN),
        BACK_GOAL.as_secs_f64() * 1000.0
    );
    let ok = added.is_some_and(|a| a <= CASCADE_GOAL_MS)
        && within
        && rows.iter().all(|r| r.2.is_some())
        && back_with_media.iter().all(|d| *d <= BACK_GOAL);
    std::process::exit(i32::from(!ok));
}
