//! Media end to end: a private PipeWire's null sinks as the sound card (a fixed quantum: the
//! same timing in every run; bridged opens them natively; one test also on PulseAudio), a real Janus, the real bridged
//! (harnesses: `partyline-testkit`), and a second bridged on a card of its own as the remote
//! crew member (a WebRTC peer in the room like any browser; the card itself joins as a plain-RTP
//! participant). Needs root and must run inside a
//! network namespace holding `pl0` (Janus offers no loopback ICE candidate):
//! `scripts/netns-run cargo test -p partyline-bridged --features services --test media`.

use std::time::{Duration, Instant};

use partyline_shared::bridge::{BranchState, BridgeProxy, BridgeState, Plan, PlanIfb, PlanUser, Status, Transport};
use partyline_testkit::SoundServer;
use partyline_testkit::alsa::{AlsaHome, raw_tail};
use partyline_testkit::audio::{Recording, Tone, channel, dropouts, frequency, longest_dropout_ms, rms_db, tone_db};
use partyline_testkit::card::{CardKind, CardServer};
use partyline_testkit::dbus::{Bridged, Bus, wait_status};
use partyline_testkit::janus::{Janus, Probe};
use partyline_testkit::plan::{crew_member, group, user};
use partyline_testkit::sound_server::AUX_MAP;
use partyline_testkit::{ICE_ADDRESS, ICE_IFACE, require_namespace};

// The tests, all timing-sensitive: `scripts/test` runs every test under `serial::` after the
// rest, one at a time (a starved pipeline loses frames, a few dB).
#[path = "media/serial.rs"]
mod serial;

const RATE: u32 = partyline_testkit::audio::RATE;
const JOIN_WAIT: Duration = Duration::from_secs(20);
/// A tone "is there" above this level, "is not" below [`ABSENT_DB`]. The tones play at about
/// −11 dBFS: a wrong route would put one there; a glitch of a busy machine (a dropout, a
/// concealed packet) splatters a tone's energy across the spectrum, measured up to −48 dBFS
/// 400 Hz away with both cores busy.
const PRESENT_DB: f64 = -30.0;
const ABSENT_DB: f64 = -45.0;
/// The tones' level, and how far a tone that crossed Janus may be from it: Opus at 64 kb/s keeps
/// a tone's level within a few tenths of a dB; a path that loses part of the audio does not
/// (10 ms Opus frames, which AudioBridge 1.1.2 mixes one per 20 ms tick: −27 dBFS).
const TONE_DB: f64 = -11.0;
const THROUGH_JANUS_TOLERANCE_DB: f64 = 3.0;

/// The sound server holding a test's card: PipeWire at a fixed quantum, whose nodes bridged
/// opens natively (streams of its own: bridged/src/pipewire_card.rs).
fn test_card() -> CardServer {
    CardServer::start(CardKind::PipeWire)
}

/// How PipeWire's PulseAudio server lists bridged's streams on the card (`partyline-bridged`
/// capturing `card_in.monitor`, playing into `card_out`): for each, the API of its client,
/// `pipewire-pulse` for a PulseAudio client, `native` for a PipeWire one.
fn card_stream_apis(pulse: &dyn SoundServer) -> (Vec<String>, Vec<String>) {
    let list = |what: &str| -> Vec<serde_json::Value> {
        let output = pulse.pactl(&["--format=json", "list", what]);
        assert!(output.status.success(), "pactl list {what}: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("pactl list {what}: {e}"))
    };
    let index_of = |what: &str, name: &str| {
        list(what).iter().find(|d| d["name"] == name).map(|d| d["index"].clone()).unwrap_or_else(|| panic!("no {name}"))
    };
    let apis = |what: &str, field: &str, device: serde_json::Value| -> Vec<String> {
        list(what)
            .iter()
            .filter(|s| s[field] == device && s["properties"]["node.name"] == "partyline-bridged")
            .map(|s| s["properties"]["client.api"].as_str().unwrap_or("native").to_owned())
            .collect()
    };
    let input = apis("source-outputs", "source", index_of("sources", "card_in.monitor"));
    let output = apis("sink-inputs", "sink", index_of("sinks", "card_out"));
    (input, output)
}

async fn record(pulse: &dyn SoundServer, device: &str, seconds: f64) -> Vec<f32> {
    partyline_testkit::audio::record(pulse, &format!("{device}.monitor"), seconds).await
}

fn all_joined(status: &Status, groups: usize) -> bool {
    status.participants.len() == groups && status.participants.iter().all(|p| p.state == BranchState::Joined)
}

async fn apply_and_wait(proxy: &BridgeProxy<'_>, plan: &Plan, what: &str) -> Duration {
    let started = Instant::now();
    let generation = proxy.apply(plan).await.unwrap_or_else(|e| panic!("Apply ({what}): {e:?}"));
    wait_status(proxy, JOIN_WAIT, what, |s| s.generation == generation && all_joined(s, plan.groups.len())).await;
    started.elapsed()
}

/// Janus with `rooms` (prebuffering 2, as control makes of jitterBufferMs 40), each with the
/// tokens of its card participant and of a crew member (`tok-ROOM`, `crew-ROOM`).
async fn start_janus(rooms: &[&str]) -> Janus {
    let janus = Janus::builder().ice_iface(ICE_IFACE).start();
    for room in rooms {
        janus.add_token(&format!("tok-{room}")).await;
        janus.add_token(&format!("crew-{room}")).await;
        janus.create_room(room, 2).await;
    }
    janus
}

/// Janus with `rooms`, a private bus, and bridged on it using `pulse`.
async fn media_stack(pulse: &dyn SoundServer, rooms: &[&str]) -> (Janus, Bus, Bridged, BridgeProxy<'static>) {
    let janus = start_janus(rooms).await;
    let bus = Bus::start();
    let bridged = Bridged::on_card(&bus, pulse, &[]);
    let proxy = bus.bridge().await;
    (janus, bus, bridged, proxy)
}

/// The plan: capture `card_in.monitor`, play `card_out`, at `janus`, one participant per room.
fn plan(janus: &Janus, rooms: &[&str], users: Vec<PlanUser>) -> Plan {
    Plan {
        input_device: "card_in.monitor".into(),
        output_device: "card_out".into(),
        device_sample_rate: RATE,
        janus_url: janus.url().into(),
        transport: Transport::Rtp,
        ice_addresses: vec![ICE_ADDRESS.into()],
        jitter_buffer_ms: 40,
        groups: rooms.iter().map(|room| group(room)).collect(),
        users,
        aes67: Default::default(),
    }
}

/// The plan of group `x` with `users` on `card_in`/`card_out`, at a Janus nobody listens on:
/// the local matrix needs no Janus (its participant retries meanwhile).
fn without_janus(users: Vec<PlanUser>) -> Plan {
    Plan {
        input_device: "card_in.monitor".into(),
        output_device: "card_out".into(),
        device_sample_rate: RATE,
        janus_url: "http://127.0.0.1:9/janus".into(),
        jitter_buffer_ms: 40,
        groups: vec![group("x")],
        users,
        ..Plan::default()
    }
}

/// A crew member in `room`: another bridged, on a bus of its own, whose card is the null sinks
/// `crew_in`/`crew_out` (its microphone on input 0, its ears on output 0), joined over WebRTC
/// as a browser is (ICE, DTLS-SRTP, a jitter buffer).
struct Crew {
    // Stopped before its bus.
    _bridged: Bridged,
    _bus: Bus,
}

impl Crew {
    async fn join(pulse: &dyn SoundServer, janus: &Janus, room: &str) -> Crew {
        let bus = Bus::start();
        let bridged = Bridged::on_card(&bus, pulse, &[]);
        let proxy = bus.bridge().await;
        let plan = crew_member(room, plan(janus, &[], vec![]));
        apply_and_wait(&proxy, &plan, "the crew member joined").await;
        Crew { _bridged: bridged, _bus: bus }
    }
}

/// Records `device` until `done` holds for the last 0.5 s (bounded), then returns 2 s more: the
/// levels judged on it are medians of 200 ms windows ([`tone_db`]), so a lasting change fails them
/// and a moment's does not (a PulseAudio null sink renders in whole timer periods, and a stream
/// that keeps about that much queued runs short now and then).
/// On failure the message shows every channel's level and `bridged`'s log.
async fn record_once(
    pulse: &dyn SoundServer,
    device: &str,
    bridged: &Bridged,
    what: &str,
    done: impl Fn(&[f32]) -> bool,
) -> Vec<f32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let samples = record(pulse, device, 0.5).await;
        if done(&samples) {
            return record(pulse, device, 2.0).await;
        }
        if Instant::now() > deadline {
            let levels: Vec<String> = (0..8).map(|k| format!("{k}: {:.1}", rms_db(&channel(&samples, k)))).collect();
            let streams: String = ["sources", "sinks", "source-outputs", "sink-inputs"]
                .iter()
                .map(|what| String::from_utf8_lossy(&pulse.pactl(&["list", "short", what]).stdout).into_owned())
                .collect();
            panic!(
                "waited 10 s for {what}; {device} in dBFS per channel: {}\n{streams}{}",
                levels.join(", "),
                bridged.log()
            );
        }
    }
}

/// The dropouts (s, ms) of `output` that are bridged's: an output gap is not, when the input
/// had one as long within the path's latency and the two recorders' start offset (a quarter
/// second covers both many times over).
fn bridged_gaps(input: &[f32], output: &[f32]) -> Vec<(f64, f64)> {
    let gaps_in = dropouts(input);
    dropouts(output)
        .into_iter()
        .filter(|(at, ms)| !gaps_in.iter().any(|(at_in, ms_in)| (at - at_in).abs() < 0.25 && ms_in + 10.0 >= *ms))
        .collect()
}

/// The level of each of `freqs` on channel `k`, for messages.
fn levels(samples: &[f32], k: usize, freqs: &[u32]) -> String {
    let ch = channel(samples, k);
    let each: Vec<String> = freqs.iter().map(|f| format!("{f} Hz {:.1}", tone_db(&ch, f64::from(*f)))).collect();
    format!("channel {k}: {} (all {:.1} dBFS)", each.join(", "), rms_db(&ch))
}

fn assert_tones(samples: &[f32], k: usize, present: &[u32], absent: &[u32], what: &str) {
    let ch = channel(samples, k);
    let all: Vec<u32> = present.iter().chain(absent).copied().collect();
    for freq in present {
        let db = tone_db(&ch, f64::from(*freq));
        assert!(db > PRESENT_DB, "{what}: {freq} Hz missing on output {k}; {}", levels(samples, k, &all));
    }
    for freq in absent {
        let db = tone_db(&ch, f64::from(*freq));
        assert!(db < ABSENT_DB, "{what}: {freq} Hz should not be on output {k}; {}", levels(samples, k, &all));
    }
}

/// `freq` on channel `k` at the level it was sent at, within what crossing Janus may cost.
fn whole_through_janus(samples: &[f32], k: usize, freq: u32) -> bool {
    (tone_db(&channel(samples, k), f64::from(freq)) - TONE_DB).abs() < THROUGH_JANUS_TOLERANCE_DB
}

fn assert_silent(samples: &[f32], outputs: impl IntoIterator<Item = usize>, what: &str) {
    for k in outputs {
        let level = rms_db(&channel(samples, k));
        assert!(level < ABSENT_DB, "{what}: output {k} should be silent, is {level:.1} dBFS");
    }
}

/// Janus's queue for the card in `room` once its send was placed for the `nth` time.
async fn placed_queue(janus: &Janus, bridged: &Bridged, room: &str, nth: usize) -> Vec<u64> {
    let in_step = format!("room {room}: the card's send is in step with Janus's mixing tick");
    let deadline = Instant::now() + Duration::from_secs(10);
    while bridged.log().matches(&in_step).count() < nth {
        assert!(Instant::now() < deadline, "room {room}: the send never placed; log:\n{}", bridged.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A tick and a packet later, the queue is where it stays.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let display = format!("card of {room}");
    let mut queues = janus.incoming_queues(40, Duration::from_millis(25)).await;
    queues.remove(&display).unwrap_or_else(|| panic!("no {display} in Janus: {queues:?}"))
}

async fn aux_card(kind: CardKind) {
    require_namespace();
    let pulse = CardServer::start(kind);
    pulse.add_card("card_in", RATE);
    pulse.add_card_with_map("card_out", RATE, AUX_MAP);
    let (janus, _bus, bridged, proxy) = media_stack(&pulse, &["x"]).await;
    let _tone = Tone::play(&pulse, "card_in", 0, 1000);
    let users = vec![user("a", "x", 0, None), user("b", "x", 1, Some(5))];
    apply_and_wait(&proxy, &plan(&janus, &["x"], users), "A and B joined").await;
    // Recorded with the device's own map, so PulseAudio copies by index.
    let samples = Recording::start_with_map(&pulse, "card_out.monitor", AUX_MAP).finish_after(1.5).await;
    let levels: Vec<String> = (0..8).map(|k| format!("{k}: {:.1}", rms_db(&channel(&samples, k)))).collect();
    println!("aux card, dBFS per device channel: {}", levels.join(", "));
    // On PipeWire the input (the card's map) natively, the aux output through pipewire-pulse
    // (a native stream would be remixed by position names); on PulseAudio both through it.
    let said = match kind {
        CardKind::PipeWire => "input card_in's monitor through pipewire, output card_out through pulseaudio",
        CardKind::Pulse => "input card_in.monitor through pulseaudio, output card_out through pulseaudio",
    };
    assert!(bridged.log().contains(said), "bridged's log does not say {said:?}:{}", bridged.log());
    let out5 = channel(&samples, 5);
    let tail = &out5[out5.len() / 3..];
    let (level, freq) = (rms_db(tail), frequency(tail));
    assert!(level > -30.0, "device channel 5 is {level:.1} dBFS: no tone ({}){}", levels.join(", "), bridged.log());
    assert!((freq - 1000.0).abs() < 30.0, "device channel 5 at {freq:.0} Hz, not 1000 Hz");
    for k in [0, 1, 2, 3, 4, 6, 7] {
        let level = rms_db(&channel(&samples, k));
        assert!(level < -60.0, "device channel {k} should be silent, is {level:.1} dBFS");
    }
    drop(bridged);
}
