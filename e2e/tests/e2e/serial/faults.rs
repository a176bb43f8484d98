//! Faults with the whole stack attached (issue 7), all real: a private dbus-daemon, PulseAudio
//! null sinks as the sound card, Janus (ICE on `pl0`), partyline-control and partyline-bridged.
//! A sine on input channel 0 → server audio user A → group X's room → user B → output
//! channel 1, as in `audio_path.rs`; then
//! - control SIGKILLed in the middle of a stream of admin writes and restarted on the same
//!   config file and state dir: within 3 s the file and the API hold every acknowledged write,
//!   every group's room exists, bridged has its plan again and the tone is on output channel 1
//!   (which it never left: bridged plays its last plan while control is away);
//! - Janus SIGKILLed and started again on the same ports and secrets: rooms and registered
//!   tokens restored, bridged's participants rejoin, the tone is back, and a crew member who was
//!   connected is shown leaving, not left behind;
//! - bridged SIGKILLed and restarted while control is down: when control comes back, bridged
//!   gets its plan and the tone is back, although the dead bridged's participants were still in
//!   the rooms.
//!
//! Media tests: they need the network namespace of `scripts/netns-run` and run in
//! `scripts/test`'s isolated step, with `audio_path`. Figures are printed as `FAULT …` lines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use partyline_shared::bridge::{BranchState, BridgeProxy, BridgeState};
use partyline_testkit::SoundServer;
use partyline_testkit::audio::{RATE, Recording, Tone, channel, longest_dropout_ms, rms_db};
use partyline_testkit::dbus::{Bridged, Bus};
use partyline_testkit::janus::Probe;
use partyline_testkit::pulse::PulseServer;
use partyline_testkit::require_namespace;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use partyline_testkit::control::Control;
use partyline_testkit::stack::{Stack, becomes_revoked, joined, user_state};
use partyline_testkit::{http, wait_for};

/// A join takes well under a second with a release build; debug builds on a busy machine are
/// slower, and a rejoin after a fault waits for bridged's backoff (≤ 5 s).
const JOIN: Duration = Duration::from_secs(15);
/// What issue 7 asks of a restarted control: everything back within 3 s.
const RECOVERY: Duration = Duration::from_secs(3);
/// How long the checks after a fault wait before they fail (the figure is then reported).
const PATIENCE: Duration = Duration::from_secs(20);
const TONE_HZ: f64 = 1000.0;
/// The longest dropout of the tone allowed while control crashes and restarts, where nothing of
/// the media path restarts. A kick and rejoin of the branches cuts the tone for ≈ 700 ms
/// (measured): [`watch_branches`] catches that, whatever the load. Load alone gave ≤ 85 ms with
/// others' benchmarks running, up to 590 ms (once 1.5 s) with two busy loops on top, as often
/// while control was down as across its restart: this bound catches a path that stalls.
const MAX_GAP_MS: f64 = 1000.0;

/// bridged running with A and B (and no other branch) joined.
fn a_and_b_joined(bridge: &Value) -> bool {
    bridge["state"] == "running" && joined(bridge, &["A", "B"])
}

/// The tone stack: group X with A (input 0 → X) and B (X → output 1), the tone flowing.
/// Fields drop in order: bridged, then control and Janus, then the tone, the bus, PulseAudio.
#[derive(Debug)]
struct Rig {
    bridged: Bridged,
    stack: Stack,
    _tone: Tone,
    bus: Bus,
    pulse: PulseServer,
}

impl Rig {
    /// Starts everything with `groups` (YAML list items, X among them), plays the tone and
    /// waits until it comes out of output channel 1.
    async fn start(groups: &str) -> Rig {
        require_namespace();
        let pulse = PulseServer::start();
        for card in ["card_in", "card_out"] {
            pulse.add_card(card, RATE);
        }
        let tone = Tone::play(&pulse, "card_in", 0, TONE_HZ as u32);
        let bus = Bus::start();
        let stack = Stack::start_media(groups, &bus).await;
        let bridged = Bridged::start(&bus, &[("PULSE_SERVER", &pulse.server_address())]);
        stack.bridge_becomes("bridged seen by control", JOIN, |b| b["state"] == "idle").await;
        let control = &stack.control;
        let device = json!({ "inputDeviceId": "card_in.monitor", "outputDeviceId": "card_out", "sampleRate": RATE });
        for (path, body, want) in [
            ("/admin/audio/device", device, StatusCode::OK),
            (
                "/admin/server-users",
                json!({ "name": "A", "group": "x", "inputChannel": 0, "outputChannel": null }),
                StatusCode::CREATED,
            ),
            (
                "/admin/server-users",
                json!({ "name": "B", "group": "x", "inputChannel": 1, "outputChannel": 1 }),
                StatusCode::CREATED,
            ),
        ] {
            let (status, answer) = control.post_json(path, body.clone()).await;
            assert_eq!(status, want, "{path} {body} → {answer}");
        }
        stack.bridge_becomes("A and B joined", JOIN, a_and_b_joined).await;
        let rig = Rig { bridged, stack, _tone: tone, bus, pulse };
        let recording = rig.record();
        recording.wait_tone("the tone on output channel 1", 1, TONE_HZ, 0.0, JOIN).await;
        rig
    }

    /// A recording of the output card.
    fn record(&self) -> Recording {
        Recording::start(&self.pulse, "card_out.monitor")
    }

    fn control(&self) -> &Control {
        &self.stack.control
    }
}

/// What the acknowledged admin writes imply: the groups' names and the input channels' names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    groups: Vec<String>,
    inputs: Vec<String>,
}

#[derive(Debug, Clone)]
enum Write {
    Group(String),
    InputName(usize, String),
}

impl Written {
    fn from_config(config: &partyline_shared::Config) -> Written {
        Written {
            groups: config.groups.iter().map(|g| g.name.clone()).collect(),
            inputs: config.audio.channel_names.inputs.0.to_vec(),
        }
    }

    async fn from_api(control: &Control) -> Written {
        let (status, groups) = control.get_json("/admin/groups").await;
        assert_eq!(status, StatusCode::OK, "{groups}");
        let groups = groups["groups"].as_array().expect("groups").iter();
        let (status, names) = control.get_json("/admin/audio/channels/names").await;
        assert_eq!(status, StatusCode::OK, "{names}");
        let inputs = (0..8).map(|k| names["channelNames"]["inputs"][k.to_string()].as_str().expect("name"));
        Written {
            groups: groups.map(|g| g["name"].as_str().expect("name").to_owned()).collect(),
            inputs: inputs.map(str::to_owned).collect(),
        }
    }

    fn after(&self, write: &Write) -> Written {
        let mut next = self.clone();
        match write {
            Write::Group(name) => next.groups.push(name.clone()),
            Write::InputName(k, name) => next.inputs[*k].clone_from(name),
        }
        next
    }

    fn group_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.groups.iter().map(|n| partyline_shared::slugify(n)).collect();
        ids.sort();
        ids
    }
}

/// One admin client writing without pause, one request at a time, until control is gone;
/// returns what the acknowledged writes imply and the write whose answer never came.
async fn write_until_gone(base: String, token: String, start: Written, acked: Arc<AtomicUsize>) -> (Written, Write) {
    let client = http();
    let mut written = start;
    for n in 1.. {
        // Groups (a room each) and channel names (nothing for Janus or bridged) in turn; the
        // plan of bridged does not change, so the tone must not either.
        let write = if n % 2 == 1 {
            Write::Group(format!("Fault {n}"))
        } else {
            Write::InputName(2 + n % 6, format!("Mic {n}"))
        };
        let request = match &write {
            Write::Group(name) => {
                client.request(Method::POST, format!("{base}/admin/groups")).json(&json!({ "name": name }))
            }
            Write::InputName(k, name) => client
                .request(Method::PUT, format!("{base}/admin/audio/channels/names"))
                .json(&json!({ "inputs": { k.to_string(): name } })),
        };
        let Ok(response) = request.bearer_auth(&token).send().await else {
            return (written, write);
        };
        let status = response.status();
        // A status line means control wrote the file before answering: acknowledged.
        assert!(status.is_success(), "{write:?} refused with {status}: {:?}", response.text().await);
        written = written.after(&write);
        acked.fetch_add(1, Ordering::Relaxed);
    }
    unreachable!("the writes end when control is killed")
}

/// Watches bridged's own status over D-Bus (every 20 ms) until `stop`: returns every moment it
/// was not running with A and B joined. A branch kicked or rejoining shows here, whatever the
/// load does to the audio's timing.
fn watch_branches(proxy: BridgeProxy<'static>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<String>> {
    tokio::spawn(async move {
        let mut lapses = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let status = proxy.status().await.expect("Status()");
            let joined = status.branches.iter().filter(|b| b.state == BranchState::Joined).count();
            if status.state != BridgeState::Running || joined != 2 {
                lapses.push(format!("{status:?}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        lapses
    })
}

/// Polls `check` every 20 ms until it returns `Some` (at most [`PATIENCE`]); panics naming
/// `what`, with control's log, otherwise.
async fn until<T>(control: &Control, what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}; control's log:\n{}",
            control.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`until`], returning the time since `since`.
async fn recovered(control: &Control, what: &str, since: Instant, check: impl AsyncFnMut() -> Option<()>) -> Duration {
    until(control, what, check).await;
    since.elapsed()
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

async fn logs(control: &Control) -> Vec<Value> {
    let (status, body) = control.get_json("/admin/logs?level=debug&limit=1000").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["logs"].as_array().expect("logs").clone()
}

/// A and B, as control's users registry shows them: connected.
/// Whether the card's participant of group X (A's and B's) is connected in control's registry.
async fn server_users_connected(control: &Control) -> bool {
    user_state(control, "card:x").await.as_deref() == Some("connected")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_killed_mid_writes_recovers_the_whole_stack_within_3_s() {
    let mut rig = Rig::start("  - name: X\n").await;
    let control = rig.control();
    let generation = rig.stack.bridge().await["generation"].as_u64().expect("generation");
    let before = Written::from_api(control).await;
    let recording = rig.record();
    // The input too: a gap there is the tone player's (CPU starvation), not partyline's.
    let input = Recording::start(&rig.pulse, "card_in.monitor");
    recording.wait_tone("the tone before the crash", 1, TONE_HZ, 0.0, JOIN).await;

    let stop_watching = Arc::new(AtomicBool::new(false));
    let watching = watch_branches(rig.bus.bridge().await, Arc::clone(&stop_watching));

    // A stream of writes; SIGKILL once a few are acknowledged, with the next one in flight.
    let acked = Arc::new(AtomicUsize::new(0));
    let writing = tokio::spawn(write_until_gone(control.url(""), control.token.clone(), before, Arc::clone(&acked)));
    wait_for("writes acknowledged", PATIENCE, async || (acked.load(Ordering::Relaxed) >= 6).then_some(())).await;
    rig.stack.control.kill();
    let killed_at = recording.seconds();
    let (written, in_flight) = writing.await.expect("writer");
    let on_disk = Written::from_config(&parse_config(&rig.control().config_text()));
    assert!(
        on_disk == written || on_disk == written.after(&in_flight),
        "after the crash the file holds neither the {} acknowledged writes {written:?} nor those plus {in_flight:?}: {on_disk:?}",
        acked.load(Ordering::Relaxed)
    );
    // control is down for a second: bridged plays its last plan (watched throughout).
    recording.wait_until(killed_at + 1.0).await;

    let probe = Probe::admin(&rig.stack.janus).await;
    let ids = on_disk.group_ids();
    let restart_at = recording.seconds();
    let restarted = Instant::now();
    rig.stack.control.respawn().await;
    let listening = restarted.elapsed();
    let control = rig.control();
    let (served, rooms, plan, users, tone) = tokio::join!(
        recovered(control, "the acknowledged writes served", restarted, async || {
            (Written::from_api(control).await == on_disk).then_some(())
        }),
        recovered(control, "a room for every group", restarted, async || (probe.rooms().await == ids).then_some(())),
        recovered(control, "bridged's plan applied again, A and B joined", restarted, async || {
            let applied = logs(control)
                .await
                .iter()
                .any(|l| l["message"] == "bridge plan applied" && l["meta"]["generation"].as_u64() == Some(generation));
            (applied && a_and_b_joined(&rig.stack.bridge().await)).then_some(())
        }),
        recovered(control, "the card (A and B) connected in control's registry", restarted, async || {
            server_users_connected(control).await.then_some(())
        }),
        async {
            recording.wait_tone("the tone after control restarted", 1, TONE_HZ, restart_at, PATIENCE).await;
            restarted.elapsed()
        },
    );
    // Memory and disk, through the restarted control.
    assert_eq!(Written::from_api(control).await, on_disk, "the restarted control serves the file");
    assert_eq!(Written::from_config(&parse_config(&control.config_text())), on_disk);
    let recovery = [served, rooms, plan, users, tone].into_iter().max().expect("five");
    stop_watching.store(true, Ordering::Relaxed);
    let lapses = watching.await.expect("watcher");
    assert!(
        lapses.is_empty(),
        "A and B left their room across control's crash: bridged showed it {} times (every 20 ms), first:\n{}",
        lapses.len(),
        lapses[..lapses.len().min(3)].join("\n")
    );

    // The tone across the whole crash: from just before the kill to now.
    let samples = recording.finish_after(0.0).await;
    let out1 = channel(&samples, 1);
    let from = ((killed_at - 0.2).max(0.0) * f64::from(RATE)) as usize;
    let across = &out1[from.min(out1.len())..];
    let (level, gap) = (rms_db(across), longest_dropout_ms(across));
    let input_gap = longest_dropout_ms(&channel(&input.finish_after(0.0).await, 0));
    println!(
        "FAULT control SIGKILLed after {} acknowledged writes (in flight: {in_flight:?}, {}): restarted, listening after {}; \
         writes served {}, rooms {} ({} groups), plan re-applied and A, B joined {}, A, B connected {}, tone confirmed {}: recovered in {}; \
         output channel 1 across the crash: {level:.1} dBFS, longest dropout {gap} ms over {:.1} s (input card: {input_gap} ms)",
        acked.load(Ordering::Relaxed),
        if on_disk == written { "not on disk" } else { "on disk" },
        secs(listening),
        secs(served),
        secs(rooms),
        ids.len(),
        secs(plan),
        secs(users),
        secs(tone),
        secs(recovery),
        across.len() as f64 / f64::from(RATE),
    );
    assert!(level > -30.0, "output channel 1 at {level:.1} dBFS across control's crash: the tone stopped");
    assert!(gap <= MAX_GAP_MS, "the tone dropped out for {gap} ms while control crashed and restarted");
    assert!(recovery <= RECOVERY, "recovery took {} (goal: {})", secs(recovery), secs(RECOVERY));
}

async fn issue(control: &Control, username: &str, group: &str) -> (String, String) {
    let (status, body) = control.post_json("/token", json!({ "username": username, "groupId": group })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (body["token"].as_str().expect("token").to_owned(), body["participantIdentity"].as_str().expect("id").to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn janus_killed_and_restarted_restores_rooms_tokens_and_audio() {
    let mut rig = Rig::start("  - name: X\n  - name: Stage\n").await;
    let control = rig.control();
    // Carol holds a token she has not used yet; Dave is in the Stage room.
    let (carol_token, carol) = issue(control, "Carol", "stage").await;
    let (dave_token, dave) = issue(control, "Dave", "stage").await;
    let dave_session = Probe::open(&rig.stack.janus, &dave_token).await.expect("Dave's session");
    dave_session.join("stage", &dave, "Dave").await.expect("Dave joins");
    until(control, "Dave connected", async || {
        (user_state(control, &dave).await.as_deref() == Some("connected")).then_some(())
    })
    .await;
    let first_log = logs(control).await.first().and_then(|l| l["seq"].as_u64()).unwrap_or(0);

    rig.stack.janus.kill();
    until(control, "control reports Janus down", async || {
        (control.get_json("/admin/stats").await.1["janus"]["state"] == "down").then_some(())
    })
    .await;
    let recording = rig.record();
    let restarted = Instant::now();
    rig.stack.janus.restart();
    let janus = &rig.stack.janus;
    let control = rig.control();
    let probe = Probe::admin(janus).await;
    let (rooms, carol_admitted, joined, tone, dave_left) = tokio::join!(
        recovered(control, "the rooms of X and Stage", restarted, async || {
            (probe.rooms().await == ["stage", "x"]).then_some(())
        }),
        // Her token is stored again: it opens a session and she is tracked once she joins.
        async {
            let session =
                until(control, "Carol's token admitted again", async || Probe::open(janus, &carol_token).await.ok())
                    .await;
            let admitted = restarted.elapsed();
            // control stores the tokens again before it creates the rooms: a join in between
            // would find no room (as it would with the rooms first and the tokens after).
            until(control, "the room of Stage for Carol", async || {
                probe.rooms().await.contains(&"stage".to_owned()).then_some(())
            })
            .await;
            session.join("stage", &carol, "Carol").await.expect("Carol joins");
            until(control, "Carol connected", async || {
                (user_state(control, &carol).await.as_deref() == Some("connected")).then_some(())
            })
            .await;
            admitted
        },
        async {
            rig.stack.bridge_becomes("A and B joined again", PATIENCE, a_and_b_joined).await;
            restarted.elapsed()
        },
        async {
            recording.wait_tone("the tone after Janus restarted", 1, TONE_HZ, 0.0, PATIENCE).await;
            restarted.elapsed()
        },
        recovered(control, "Dave shown leaving", restarted, async || {
            let gone = user_state(control, &dave).await.is_none();
            let said = logs(control).await.into_iter().any(|l| {
                l["seq"].as_u64() > Some(first_log)
                    && l["message"] == "user left"
                    && (&l["meta"]["identity"], &l["meta"]["group"]) == (&json!(dave), &json!("stage"))
            });
            (said && gone).then_some(())
        }),
    );
    let line = logs(control).await.into_iter().find(|l| l["message"] == "user left" && l["meta"]["identity"] == dave);
    println!(
        "FAULT Janus SIGKILLed and restarted: rooms {}, a pending token admitted {}, A and B joined {}, tone back {}, \
         the connected crew member shown leaving {} ({})",
        secs(rooms),
        secs(carol_admitted),
        secs(joined),
        secs(tone),
        secs(dave_left),
        line.map_or_else(String::new, |l| l.to_string()),
    );
    until(control, "Carol and the card (A and B) connected, and only they", async || {
        let (_, stats) = control.get_json("/admin/stats").await;
        (stats["janus"]["state"] == "up" && stats["activeConnections"] == 2).then_some(())
    })
    .await;
    becomes_revoked(janus, "Dave's", &dave_token).await; // it died with his session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridged_restarted_while_control_is_down_gets_its_plan_when_control_is_back() {
    let mut rig = Rig::start("  - name: X\n").await;
    rig.stack.control.kill();
    // bridged crashes while control is down, and its service manager starts it again: a new
    // process with no plan, while the dead one's participants are still in the room (Janus
    // drops them when their sessions time out, 60 s later).
    rig.bridged.kill();
    rig.bridged.restart();
    let proxy = rig.bus.bridge().await;
    let status = proxy.status().await.expect("Status()");
    assert_eq!((status.state, status.generation), (BridgeState::Idle, 0), "a new bridged: {status:?}");
    let janus = Probe::admin(&rig.stack.janus).await;
    let ghosts = janus.participants("x").await.expect("room x");
    assert_eq!(ghosts, ["card:x"], "the dead bridged's participant (one for A and B)");

    let recording = rig.record();
    let restarted = Instant::now();
    rig.stack.control.respawn().await;
    rig.stack.bridge_becomes("A and B joined", PATIENCE, a_and_b_joined).await;
    let joined = restarted.elapsed();
    let kicked = logs(rig.control())
        .await
        .iter()
        .filter(|l| l["message"].as_str().is_some_and(|m| m.starts_with("kicked the participant")))
        .count();
    assert_eq!(kicked, 1, "control cleared the dead bridged's participant");
    recording.wait_tone("the tone with control and bridged back", 1, TONE_HZ, 0.0, PATIENCE).await;
    println!(
        "FAULT bridged restarted while control was down; control restarted → A and B joined {}, tone back {}",
        secs(joined),
        secs(restarted.elapsed())
    );
}

/// Parses a YAML config the way control writes it.
fn parse_config(text: &str) -> partyline_shared::Config {
    partyline_shared::Config::from_yaml(text).expect("config on disk parses")
}
