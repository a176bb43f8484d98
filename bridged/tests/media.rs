//! Media end to end: a private PulseAudio as the sound card, a real Janus, the real bridged.
//! Needs root and must run inside a network namespace holding `pl0` (DESIGN §6: Janus offers
//! no loopback candidate), e.g.
//! `ip netns exec NS cargo test -p partyline-bridged --test media` after
//! `ip netns exec NS sh -c 'ip link set lo up; ip link add pl0 type ifb; ip addr add 10.77.0.1/24 dev pl0; ip link set pl0 up'`.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use partyline_shared::bridge::{BridgeProxy, NO_OUTPUT, Plan, PlanUser, Status};
use serde_json::{Value, json};
use support::pulse::PulseServer;
use support::{Bridged, Bus, Janus, wait_status};

const ICE_IFACE: &str = "pl0";
const ICE_ADDRESS: &str = "10.77.0.1";
const RATE: u32 = 48_000;
const CARD_MAP: &str = "front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right";
const JOIN_WAIT: Duration = Duration::from_secs(20);

fn require_namespace() {
    assert!(
        Path::new("/sys/class/net").join(ICE_IFACE).exists(),
        "interface {ICE_IFACE} is missing: run this test inside a network namespace holding {ICE_IFACE} \
         ({ICE_ADDRESS}/24), see the head of bridged/tests/media.rs (DESIGN §6)"
    );
}

async fn admin(http: &reqwest::Client, janus: &Janus, body: Value) -> Value {
    let mut body = body;
    body["transaction"] = json!("t");
    body["admin_secret"] = json!(janus.value("JANUS_ADMIN_SECRET"));
    http.post(janus.value("JANUS_ADMIN_URL")).json(&body).send().await.expect("admin API").json().await.expect("json")
}

/// Adds `tokens` and creates `room` (prebuffering 2, as control does for 40 ms).
async fn prepare_janus(janus: &Janus, tokens: &[&str], room: &str) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build().expect("client");
    for token in tokens.iter().chain(&["test-admin"]) {
        let answer =
            admin(&http, janus, json!({"janus": "add_token", "token": token, "plugins": ["janus.plugin.audiobridge"]}))
                .await;
        assert_eq!(answer["janus"], "success", "{answer}");
    }
    let url = janus.url();
    let post = |path: String, body: Value| {
        let http = http.clone();
        async move {
            let answer: Value =
                http.post(format!("{url}{path}")).json(&body).send().await.expect("janus").json().await.expect("json");
            answer
        }
    };
    let session = post(String::new(), json!({"janus": "create", "transaction": "c", "token": "test-admin"})).await;
    let session = session["data"]["id"].as_u64().expect("session");
    let handle = post(
        format!("/{session}"),
        json!({"janus": "attach", "transaction": "a", "token": "test-admin", "plugin": "janus.plugin.audiobridge"}),
    )
    .await;
    let handle = handle["data"]["id"].as_u64().expect("handle");
    let created = post(
        format!("/{session}/{handle}"),
        json!({"janus": "message", "transaction": "m", "token": "test-admin", "body": {
            "request": "create", "admin_key": janus.value("JANUS_ROOM_ADMIN_KEY"), "room": room,
            "sampling_rate": 48000, "default_prebuffering": 2, "secret": "room-secret", "permanent": false}}),
    )
    .await;
    assert_eq!(created["plugindata"]["data"]["audiobridge"], "created", "{created}");
    let _ = post(format!("/{session}"), json!({"janus": "destroy", "transaction": "d", "token": "test-admin"})).await;
}

/// A sine of `freq` Hz on channel `channel` of the null sink `device` (gst-launch, killed on drop).
struct Tone(Child);

impl Tone {
    fn play(pulse: &PulseServer, device: &str, channel: usize, freq: u32) -> Tone {
        let column: Vec<String> =
            (0..8).map(|c| format!("<(float){}>", if c == channel { "0.5" } else { "0.0" })).collect();
        let child = Command::new("gst-launch-1.0")
            .args(["-q", "audiotestsrc", &format!("freq={freq}"), "is-live=true", "!"])
            .args([&format!("audio/x-raw,format=F32LE,channels=1,rate={RATE}"), "!"])
            .args(["audioconvert", &format!("mix-matrix=<{}>", column.join(",")), "!"])
            .args([&format!("audio/x-raw,channels=8,channel-mask=(bitmask)0xc3f,rate={RATE}"), "!"])
            .args(["pulsesink", &format!("device={device}"), "buffer-time=20000", "latency-time=10000"])
            .env("PULSE_SERVER", pulse.server_address())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("gst-launch-1.0");
        Tone(child)
    }
}

impl Drop for Tone {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A recording of every channel of `source` (raw F32, 8 channels in the card's order).
struct Recording {
    child: Child,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Recording {
    fn start(pulse: &PulseServer, source: &str) -> Recording {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("rec.raw");
        let child = Command::new("parecord")
            .arg(format!("--server={}", pulse.server_address()))
            .arg(format!("--device={source}"))
            .args(["--raw", "--format=float32le", "--channels=8", &format!("--channel-map={CARD_MAP}")])
            .arg(format!("--rate={RATE}"))
            .args(["--latency-msec=10"])
            .arg(&path)
            .stdin(Stdio::null())
            .spawn()
            .expect("parecord");
        Recording { child, path, _dir: dir }
    }

    fn seconds(&self) -> f64 {
        let bytes = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        bytes as f64 / (f64::from(RATE) * 8.0 * 4.0)
    }

    /// Waits until `seconds` are recorded, stops, returns the samples.
    async fn finish_after(mut self, seconds: f64) -> Vec<f32> {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds + 10.0);
        while self.seconds() < seconds {
            assert!(Instant::now() < deadline, "parecord recorded only {} s", self.seconds());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let bytes = std::fs::read(&self.path).expect("recording");
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    }
}

async fn record(pulse: &PulseServer, seconds: f64) -> Vec<f32> {
    Recording::start(pulse, "card_out.monitor").finish_after(seconds).await
}

fn channel(samples: &[f32], k: usize) -> Vec<f32> {
    samples.iter().skip(k).step_by(8).copied().collect()
}

fn rms_db(x: &[f32]) -> f64 {
    if x.is_empty() {
        return -100.0;
    }
    let power = x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len() as f64;
    (10.0 * power.log10()).max(-100.0)
}

/// Median over loud 20 ms windows of the zero-crossing frequency (a lost packet concealed by
/// the decoder does not bias it).
fn frequency(x: &[f32]) -> f64 {
    let window = (RATE / 50) as usize;
    let mut estimates: Vec<f64> = x
        .chunks_exact(window)
        .filter(|w| rms_db(w) > -40.0)
        .map(|w| w.windows(2).filter(|p| (p[0] < 0.0) != (p[1] < 0.0)).count() as f64 / 2.0 / 0.02)
        .collect();
    if estimates.is_empty() {
        return 0.0;
    }
    estimates.sort_by(f64::total_cmp);
    estimates[estimates.len() / 2]
}

/// Longest run (ms) of 5 ms windows under -40 dBFS after the first loud window.
fn longest_dropout_ms(x: &[f32]) -> f64 {
    let window = (RATE / 200) as usize;
    let loud: Vec<bool> = x.chunks(window).map(|w| rms_db(w) > -40.0).collect();
    let first = loud.iter().position(|l| *l).unwrap_or(loud.len());
    let last = loud.iter().rposition(|l| *l).unwrap_or(0);
    let (mut longest, mut run) = (0usize, 0usize);
    for l in loud.iter().take(last + 1).skip(first) {
        run = if *l { 0 } else { run + 1 };
        longest = longest.max(run);
    }
    longest as f64 * 5.0
}

fn user(name: &str, input: u8, output: i32, token: &str) -> PlanUser {
    PlanUser {
        name: name.into(),
        identity: format!("srv-{name}"),
        room: "x".into(),
        token: token.into(),
        input_channel: input,
        output_channel: output,
        bitrate_kbps: 64,
    }
}

fn all_joined(status: &Status, n: usize) -> bool {
    status.branches.len() == n && status.branches.iter().all(|b| b.state == "joined")
}

async fn apply_and_wait(proxy: &BridgeProxy<'_>, plan: &Plan, what: &str) -> Duration {
    let started = Instant::now();
    let generation = proxy.apply(plan).await.unwrap_or_else(|e| panic!("Apply ({what}): {e:?}"));
    wait_status(proxy, JOIN_WAIT, what, |s| s.generation == generation && all_joined(s, plan.users.len())).await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tone_through_janus_onto_the_output_channel() {
    require_namespace();
    let pulse = PulseServer::start();
    for sink in ["card_in", "card_in2", "card_out"] {
        pulse.load_module(
            "module-null-sink",
            &format!("sink_name={sink} channels=8 rate={RATE} channel_map={CARD_MAP}"),
        );
    }
    let janus = Janus::start(ICE_IFACE);
    prepare_janus(&janus, &["tok-a", "tok-b", "tok-c"], "x").await;
    let bus = Bus::start();
    let bridged = Bridged::start(&bus, &[("PULSE_SERVER", pulse.server_address())]);
    let connection = bus.connect().await;
    let proxy = BridgeProxy::builder(&connection)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .expect("proxy");
    let _tone = Tone::play(&pulse, "card_in", 0, 1000);
    let _other_tone = Tone::play(&pulse, "card_in2", 0, 600);

    // A (input 0, no output) and B (input 1, silent; output 1) in room x: A's tone on output 1.
    let a = user("a", 0, NO_OUTPUT, "tok-a");
    let b = user("b", 1, 1, "tok-b");
    let plan = Plan {
        input_device: "card_in.monitor".into(),
        output_device: "card_out".into(),
        device_sample_rate: RATE,
        janus_url: janus.url().into(),
        ice_addresses: vec![ICE_ADDRESS.into()],
        latency_ms: 40,
        users: vec![a.clone(), b.clone()],
    };
    let took = apply_and_wait(&proxy, &plan, "A and B joined").await;
    println!("BENCH first plan (pipeline + 2 branches) Apply -> joined (media up): {} ms", took.as_millis());
    let status = wait_status(&proxy, JOIN_WAIT, "B receives", |s| {
        s.branches.iter().any(|br| br.name == "b" && br.packets_received > 50)
            && s.branches.iter().any(|br| br.name == "a" && br.input_level_db > -20.0)
    })
    .await;
    assert_eq!(status.state, "running", "{status:#?}");
    let samples = record(&pulse, 1.5).await;
    let out1 = channel(&samples, 1);
    let tail = &out1[out1.len() / 3..];
    let (level, freq) = (rms_db(tail), frequency(tail));
    println!("output channel 1: {level:.1} dBFS, {freq:.0} Hz, longest dropout {} ms", longest_dropout_ms(tail));
    assert!(level > -30.0, "output channel 1 is {level:.1} dBFS: no tone{}", bridged.log());
    assert!((freq - 1000.0).abs() < 30.0, "output channel 1 at {freq:.0} Hz, not 1000 Hz");
    for k in [0, 2, 7] {
        let level = rms_db(&channel(&samples, k));
        assert!(level < -60.0, "output channel {k} should be silent, is {level:.1} dBFS");
    }

    // B with no output: nothing comes out.
    let b_silent = PlanUser { output_channel: NO_OUTPUT, ..b.clone() };
    let silent_plan = Plan { users: vec![a.clone(), b_silent], ..plan.clone() };
    let took = apply_and_wait(&proxy, &silent_plan, "B rejoined without output").await;
    println!("BENCH one branch changed Apply -> joined: {} ms", took.as_millis());
    let samples = record(&pulse, 0.6).await;
    let level = rms_db(&channel(&samples, 1));
    assert!(level < -60.0, "B has no output, yet channel 1 is at {level:.1} dBFS");

    // B's output back, then C added while recording: A -> B keeps flowing without a gap.
    apply_and_wait(&proxy, &plan, "B with output again").await;
    wait_status(&proxy, JOIN_WAIT, "B receives again", |s| {
        s.branches.iter().any(|br| br.name == "b" && br.packets_received > 50)
    })
    .await;
    let recording = Recording::start(&pulse, "card_out.monitor");
    while recording.seconds() < 0.5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let c = user("c", 2, 2, "tok-c");
    let with_c = Plan { users: vec![a.clone(), b.clone(), c], ..plan.clone() };
    let took = apply_and_wait(&proxy, &with_c, "C joined").await;
    println!("BENCH branch added Apply -> joined (media up): {} ms", took.as_millis());
    let recorded_at_join = recording.seconds();
    let samples = recording.finish_after(recorded_at_join + 1.0).await;
    let out1 = channel(&samples, 1);
    let dropout = longest_dropout_ms(&out1);
    println!("output channel 1 across adding C: longest dropout {dropout} ms over {:.2} s", recorded_at_join + 1.0);
    assert!(rms_db(&out1) > -30.0, "no tone while C was added");
    assert!(dropout <= 40.0, "A -> B dropped out for {dropout} ms while C was added");

    // Another input device: everything is rebuilt, the 600 Hz of card_in2 comes out.
    let moved = Plan { input_device: "card_in2.monitor".into(), ..with_c.clone() };
    let took = apply_and_wait(&proxy, &moved, "rebuilt on card_in2").await;
    println!("BENCH device change (rebuild, 3 branches) Apply -> joined: {} ms", took.as_millis());
    wait_status(&proxy, JOIN_WAIT, "B receives after the rebuild", |s| {
        s.branches.iter().any(|br| br.name == "b" && br.packets_received > 50)
    })
    .await;
    // The room's mix may still carry a few frames of the old capture: wait (bounded) for 600 Hz.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let samples = record(&pulse, 0.5).await;
        let out1 = channel(&samples, 1);
        let (level, freq) = (rms_db(&out1), frequency(&out1));
        println!("after the device change: output channel 1 at {level:.1} dBFS, {freq:.0} Hz");
        if level > -30.0 && (freq - 600.0).abs() < 30.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the device change channel 1 is at {freq:.0} Hz, {level:.1} dBFS, not 600 Hz"
        );
    }
    drop(bridged);
}
