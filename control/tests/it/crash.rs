//! Crash safety: a client writes without pause while the process is killed with SIGKILL at
//! random moments. After each crash the file parses and holds every acknowledged write; the
//! one write in flight may or may not be there, but never half of it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Control, http, parse_config};

const CYCLES: usize = 15;
/// Set to the seed a failed run printed to replay its choices (the timing still varies).
const SEED_VAR: &str = "PARTYLINE_CRASH_SEED";
const BITRATES: [u64; 5] = [32, 48, 64, 96, 128];

/// xorshift64*: enough randomness to pick kill moments and writes, and repeatable by seed.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn seeded() -> Self {
        let seed = std::env::var(SEED_VAR).ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
            now.as_nanos() as u64 | 1
        });
        println!("crash test seed: {seed} (rerun with {SEED_VAR}={seed})");
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the writes build, as the API and the file must show it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    group_names: Vec<String>,
    default_bitrate: u64,
}

impl State {
    fn from_config(config: &partyline_shared::Config) -> Self {
        let group_names = config.groups.iter().map(|g| g.name.clone()).collect();
        Self { group_names, default_bitrate: u64::from(config.audio.default_bitrate.get()) }
    }

    async fn from_api(control: &Control) -> Self {
        let (status, body) = control.get_json("/admin/groups").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let groups = body["groups"].as_array().expect("groups");
        let group_names: Vec<String> = groups.iter().map(|g| g["name"].as_str().expect("name").to_owned()).collect();
        for (group, name) in groups.iter().zip(&group_names) {
            assert_eq!(group["id"], id_of(name), "{group}");
        }
        let (status, config) = control.get_json("/admin/config").await;
        assert_eq!(status, StatusCode::OK, "{config}");
        Self { group_names, default_bitrate: config["audio"]["defaultBitrate"].as_u64().expect("defaultBitrate") }
    }

    fn after(&self, write: &Write) -> Self {
        let mut next = self.clone();
        match write {
            Write::Create(name) => next.group_names.push(name.clone()),
            Write::Rename { from, to } => {
                let slot = next.group_names.iter_mut().find(|n| *n == from).expect("renamed group exists");
                slot.clone_from(to);
            }
            Write::Audio(bitrate) => next.default_bitrate = *bitrate,
        }
        next
    }
}

/// The names this test uses ("Crash 7", "Renamed 12") have this simple slug.
fn id_of(name: &str) -> String {
    name.to_lowercase().replace(' ', "-")
}

#[derive(Debug, Clone)]
enum Write {
    Create(String),
    Rename { from: String, to: String },
    Audio(u64),
}

/// One client writing as fast as it can, one request at a time, until the server is gone.
#[derive(Debug)]
struct Writer {
    client: reqwest::Client,
    base: String,
    token: String,
    rng: Rng,
    /// Numbers new names; carried across cycles so names stay unique.
    next_name: u64,
    /// The state that every 2xx so far implies.
    acked: State,
    acked_writes: usize,
}

impl Writer {
    fn pick(&mut self) -> Write {
        self.next_name += 1;
        let n = self.next_name;
        match self.rng.below(10) {
            _ if self.acked.group_names.is_empty() => Write::Create(format!("Crash {n}")),
            0..=4 => Write::Create(format!("Crash {n}")),
            5..=7 => {
                let index = self.rng.below(self.acked.group_names.len() as u64) as usize;
                Write::Rename { from: self.acked.group_names[index].clone(), to: format!("Renamed {n}") }
            }
            _ => Write::Audio(BITRATES[self.rng.below(BITRATES.len() as u64) as usize]),
        }
    }

    fn request(&self, write: &Write) -> reqwest::RequestBuilder {
        let (method, path, body) = match write {
            Write::Create(name) => (Method::POST, "/admin/groups".to_owned(), json!({ "name": name })),
            Write::Rename { from, to } => {
                (Method::PUT, format!("/admin/groups/{}", id_of(from)), json!({ "name": to }))
            }
            Write::Audio(bitrate) => {
                (Method::PUT, "/admin/config/audio".to_owned(), json!({ "defaultBitrate": bitrate }))
            }
        };
        self.client.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token).json(&body)
    }

    /// Writes until a request fails (the process was killed); returns that write, whose
    /// response never arrived.
    async fn run(mut self) -> (Self, Write) {
        loop {
            let write = self.pick();
            let Ok(response) = self.request(&write).send().await else {
                return (self, write);
            };
            let status = response.status();
            // A status line means control wrote the file before answering: acknowledged.
            assert!(status.is_success(), "{write:?} refused with {status}: {:?}", response.text().await);
            self.acked = self.acked.after(&write);
            self.acked_writes += 1;
        }
    }
}

/// The temp files control's config writer left in the directory (a SIGKILL between creating
/// one and renaming it over the config leaves it), and whether each holds a whole config.
fn temp_files(control: &Control) -> Vec<(String, bool)> {
    let entries = std::fs::read_dir(control.dir()).expect("read dir");
    let mut found = Vec::new();
    for entry in entries {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        if name.starts_with(".partyline-") && name.ends_with(".tmp") {
            let text = std::fs::read_to_string(control.dir().join(&name)).unwrap_or_default();
            let whole = !text.is_empty() && partyline_shared::Config::from_yaml(&text).is_ok();
            found.push((name, whole));
        }
    }
    found
}

/// What the crash loop has seen so far.
#[derive(Debug, Default)]
struct Tally {
    next_name: u64,
    acked_writes: usize,
    in_flight_kept: usize,
    /// Every temp file seen after a crash, and whether it held a whole config.
    temp_files: BTreeMap<String, bool>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_writes_never_loses_an_acknowledged_write() {
    let mut rng = Rng::seeded();
    let mut control = Control::start().await;
    let mut state = State::from_api(&control).await;
    let mut tally = Tally::default();
    for cycle in 0..CYCLES {
        let (acked, in_flight) = write_then_crash(&mut control, &state, &mut rng, &mut tally).await;
        let on_disk = check_file_after_crash(cycle, &control, &acked, &in_flight, &mut tally);
        control = control.restart().await;
        let served = State::from_api(&control).await;
        assert_eq!(served, on_disk, "cycle {cycle}: the restarted control serves the config file, not a temp file");
        state = on_disk;
    }
    let complete = tally.temp_files.values().filter(|&&whole| whole).count();
    println!(
        "{CYCLES} crashes: {} acknowledged writes, the write in flight was on disk after {} of them; \
         {} temp files left behind ({complete} holding a whole config), {} still there",
        tally.acked_writes,
        tally.in_flight_kept,
        tally.temp_files.len(),
        temp_files(&control).len()
    );
    assert!(tally.acked_writes >= CYCLES, "too few writes between crashes to test anything: {tally:?}");
    check_still_writable(&control).await;
}

/// Writes from `state` on until a random moment, then SIGKILL. Returns the state the
/// acknowledged writes imply and the write whose response never arrived.
async fn write_then_crash(control: &mut Control, state: &State, rng: &mut Rng, tally: &mut Tally) -> (State, Write) {
    let writer = Writer {
        client: http(),
        base: control.url(""),
        token: control.token.clone(),
        rng: Rng(rng.next() | 1),
        next_name: tally.next_name,
        acked: state.clone(),
        acked_writes: 0,
    };
    let writing = tokio::spawn(writer.run());
    // The crash itself: a random moment into the writes.
    tokio::time::sleep(Duration::from_millis(5 + rng.below(76))).await;
    control.kill();
    let (writer, in_flight) = writing.await.expect("writer");
    tally.next_name = writer.next_name;
    tally.acked_writes += writer.acked_writes;
    (writer.acked, in_flight)
}

/// The file as the crash left it parses and holds the acknowledged writes, with or without
/// the one in flight. Returns its state.
fn check_file_after_crash(
    cycle: usize,
    control: &Control,
    acked: &State,
    in_flight: &Write,
    tally: &mut Tally,
) -> State {
    let text = control.config_text();
    let on_disk = State::from_config(&parse_config(&text));
    assert!(
        on_disk == *acked || on_disk == acked.after(in_flight),
        "cycle {cycle}: the file holds neither the acknowledged writes {acked:?} nor those plus {in_flight:?}:\n{text}"
    );
    tally.in_flight_kept += usize::from(on_disk != *acked);
    tally.temp_files.extend(temp_files(control));
    on_disk
}

/// After all the crashes the next write succeeds and leaves a valid file.
async fn check_still_writable(control: &Control) {
    let (status, body) = control.post_json("/admin/groups", json!({ "name": "After The Crashes" })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let on_disk = parse_config(&control.config_text());
    assert_eq!(on_disk.groups.last().map(|g| g.id()), Some("after-the-crashes".to_owned()));
}
