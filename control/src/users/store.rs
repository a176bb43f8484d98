//! The crew part of the users registry on disk: `crew.json` in the state directory, so that a
//! restart of control (upgrade, crash, SIGKILL) keeps who holds a token and who is connected.
//! Server audio users are not stored: they are derived from the config.
//!
//! The file is rewritten whole after changes of crew members (one record per crew member),
//! atomically (`crate::files`), mode 0600 (it holds tokens). There is no fsync: the file only
//! matters while Janus, a process on the same machine, still holds the tokens in its memory, and
//! whatever loses the page cache (power loss, kernel crash) loses Janus's tokens too; a process
//! crash, the case this file is for, keeps the page cache.
//!
//! Writes are group commits: a change hands its snapshot over under the registry's lock
//! ([`CrewStore::enqueue`]), and after the lock is released waits until that snapshot, or a
//! newer one, is on disk ([`CrewStore::wait`]). Whoever waits while no write runs writes the
//! newest snapshot for everyone queued, so changes arriving together (a crowd joining, a
//! flood of token requests) share one write, and what the API answers is on disk.
//!
//! A file that cannot be read or parsed never stops start-up: the error is logged naming the
//! file (never its contents: it holds tokens), the file is renamed to `crew.json.bad` for
//! inspection, and control starts with no crew.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use partyline_shared::sync::lock;
use serde::{Deserialize, Serialize};

use crate::files::{self, Durability};
use crate::secrets::SecretValue;
use crate::users::UserState;

/// The file's name in the state directory.
pub const FILE_NAME: &str = "crew.json";
/// What an unreadable file is renamed to.
pub const BAD_FILE_NAME: &str = "crew.json.bad";
const FILE_MODE: u32 = 0o600;
const VERSION: u32 = 1;

/// One crew member as stored. Times are Unix time in nanoseconds (exact, and `time` needs no
/// parser for them). Its `Debug` leaves the token out (a [`SecretValue`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrewRecord {
    pub identity: String,
    pub username: String,
    /// The first line's group.
    pub group_id: String,
    /// Every line, when there is more than one, or one that is not listen-and-talk; absent,
    /// one line on `groupId` with listen and talk (how single-group members were always stored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<LineRecord>,
    pub token: SecretValue,
    /// The panel key of its remote control (absent in files written before panel keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panel_key: Option<SecretValue>,
    /// The client address it asked for its token from (absent in files written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<std::net::IpAddr>,
    /// The Janus node it is placed on (absent: the pool's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its panel has an announce key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub announce: bool,
    /// The position it joined as (absent: none, or a file written before positions were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<String>,
    /// A WHIP source or WHEP player (absent: a panel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<partyline_shared::config::StreamKind>,
    pub state: UserState,
    /// When the token was issued (wall clock): a pending token's lifetime counts from it.
    pub issued_at_unix_ns: i64,
    pub connected_at_unix_ns: Option<i64>,
    pub last_activity_unix_ns: i64,
}

/// One line of a crew member as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LineRecord {
    pub group_id: String,
    pub listen: bool,
    pub talk: bool,
    /// In the group's room.
    pub joined: bool,
    /// Muted on this line by the admin.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub muted_by_admin: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CrewFile {
    version: u32,
    crew: Vec<CrewRecord>,
}

/// Writes `crew.json`; see the module's documentation.
#[derive(Debug)]
pub struct CrewStore {
    path: PathBuf,
    /// The last write failed (logged once per failure streak, not once per change).
    failing: AtomicBool,
    queue: Mutex<Queue>,
    /// Signalled whenever a write ends.
    written: Condvar,
    /// Writes done (for the tests of the batching).
    writes: AtomicU64,
}

/// The snapshots waiting for a write.
#[derive(Debug, Default)]
struct Queue {
    /// The newest snapshot not written yet, with its number.
    newest: Option<(u64, Vec<CrewRecord>)>,
    /// The number of the last snapshot enqueued.
    enqueued: u64,
    /// The number of the last snapshot written (or given up on, when the write failed).
    written: u64,
    /// A waiter is writing.
    writing: bool,
}

/// A snapshot handed to the store; [`CrewStore::wait`] for it.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct Ticket(u64);

impl CrewStore {
    /// The store in `dir` and the crew it holds. Never fails: a missing file is an empty crew;
    /// an unreadable one is logged, moved aside, and an empty crew.
    pub fn open(dir: &Path) -> (CrewStore, Vec<CrewRecord>) {
        files::remove_stale_temp_files(dir);
        let store = CrewStore {
            path: dir.join(FILE_NAME),
            failing: AtomicBool::new(false),
            queue: Mutex::default(),
            written: Condvar::new(),
            writes: AtomicU64::new(0),
        };
        let crew = match store.read() {
            Ok(crew) => crew,
            Err(why) => {
                store.set_aside(&why);
                Vec::new()
            }
        };
        (store, crew)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<Vec<CrewRecord>, String> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot read it: {e}")),
        };
        // serde_json's messages may quote the file's contents (a token): say only where and
        // what kind of error it is.
        let file: CrewFile = serde_json::from_slice(&bytes).map_err(|e| {
            let kind = match e.classify() {
                serde_json::error::Category::Io => "an I/O error",
                serde_json::error::Category::Syntax => "not JSON",
                serde_json::error::Category::Data => "JSON of the wrong shape",
                serde_json::error::Category::Eof => "truncated JSON",
            };
            format!("{kind} at line {} column {}", e.line(), e.column())
        })?;
        if file.version != VERSION {
            return Err(format!("version {} (this control reads version {VERSION})", file.version));
        }
        Ok(file.crew)
    }

    fn set_aside(&self, why: &str) {
        let bad = self.path.with_file_name(BAD_FILE_NAME);
        match fs::rename(&self.path, &bad) {
            Ok(()) => tracing::error!(
                file = %self.path.display(),
                kept_as = %bad.display(),
                "the crew registry file is unreadable ({why}): starting with no crew members; \
                 the file is kept aside. Tokens it held stay valid in Janus until Janus restarts"
            ),
            Err(e) => tracing::error!(
                file = %self.path.display(),
                error = %e,
                "the crew registry file is unreadable ({why}) and cannot be moved aside: starting with \
                 no crew members; the next change of a crew member overwrites it"
            ),
        }
    }

    /// Hands over the crew as it is now; quick (no I/O), for the registry's lock.
    pub fn enqueue(&self, crew: Vec<CrewRecord>) -> Ticket {
        let mut queue = lock(&self.queue);
        queue.enqueued += 1;
        queue.newest = Some((queue.enqueued, crew));
        Ticket(queue.enqueued)
    }

    /// Returns once the snapshot of `ticket` or a newer one is written, writing the newest
    /// one itself when no write is running.
    pub fn wait(&self, ticket: Ticket) {
        let mut queue = lock(&self.queue);
        while queue.written < ticket.0 {
            if queue.writing {
                queue = self.written.wait(queue).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let Some((number, crew)) = queue.newest.take() else { break };
            queue.writing = true;
            drop(queue);
            self.save(&crew);
            queue = lock(&self.queue);
            queue.writing = false;
            queue.written = number;
            self.written.notify_all();
        }
    }

    /// Replaces the file with `crew`. A failure is logged (the registry in memory stays right;
    /// only a restart would lose it).
    pub fn save(&self, crew: &[CrewRecord]) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        match self.write(crew) {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(file = %self.path.display(), "the crew registry file is written again");
                }
            }
            Err(e) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        file = %self.path.display(),
                        error = %e,
                        "cannot write the crew registry file: a restart of control would forget crew members \
                         (logged once until a write succeeds)"
                    );
                }
            }
        }
    }

    fn write(&self, crew: &[CrewRecord]) -> io::Result<()> {
        let file = CrewFile { version: VERSION, crew: crew.to_vec() };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
        bytes.push(b'\n');
        files::replace(&self.path, &bytes, FILE_MODE, Durability::PageCache)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn record(identity: &str, state: UserState) -> CrewRecord {
        CrewRecord {
            identity: identity.into(),
            username: "Alice".into(),
            group_id: "stage".into(),
            lines: Vec::new(),
            token: SecretValue::new("secret-token".into()),
            panel_key: None,
            address: None,
            node: None,
            announce: false,
            position: None,
            stream: None,
            state,
            issued_at_unix_ns: 1_700_000_000_123_456_789,
            connected_at_unix_ns: (state == UserState::Connected).then_some(1_700_000_001_000_000_001),
            last_activity_unix_ns: 1_700_000_002_000_000_000,
        }
    }

    #[test]
    fn round_trip_with_mode_0600() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, crew) = CrewStore::open(dir.path());
        assert!(crew.is_empty(), "no file: no crew");
        store.save(&[record("a-1", UserState::Pending), record("b-2", UserState::Connected)]);
        let mode = fs::metadata(store.path()).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(fs::read_dir(dir.path()).expect("ls").count(), 1, "no temp file left");
        let (_, crew) = CrewStore::open(dir.path());
        let got: Vec<_> = crew.iter().map(|r| (r.identity.as_str(), r.state, r.connected_at_unix_ns)).collect();
        assert_eq!(
            got,
            [("a-1", UserState::Pending, None), ("b-2", UserState::Connected, Some(1_700_000_001_000_000_001))]
        );
        assert_eq!(crew[0].issued_at_unix_ns, 1_700_000_000_123_456_789);
    }

    /// The file as it was written before tokens became `SecretValue`s: a plain string each.
    #[test]
    fn the_file_format_is_unchanged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = CrewStore::open(dir.path());
        store.save(&[record("a-1", UserState::Pending), record("b-2", UserState::Connected)]);
        let text = fs::read_to_string(store.path()).expect("read");
        let expected = r#"{
  "version": 1,
  "crew": [
    {
      "identity": "a-1",
      "username": "Alice",
      "groupId": "stage",
      "token": "secret-token",
      "state": "pending",
      "issuedAtUnixNs": 1700000000123456789,
      "connectedAtUnixNs": null,
      "lastActivityUnixNs": 1700000002000000000
    },
    {
      "identity": "b-2",
      "username": "Alice",
      "groupId": "stage",
      "token": "secret-token",
      "state": "connected",
      "issuedAtUnixNs": 1700000000123456789,
      "connectedAtUnixNs": 1700000001000000001,
      "lastActivityUnixNs": 1700000002000000000
    }
  ]
}
"#;
        assert_eq!(text, expected);
        let (_, crew) = CrewStore::open(dir.path());
        assert_eq!(crew[1].token.expose(), "secret-token", "read back as the plain string");
    }

    /// Changes queued while no write runs share the next one: a flood of changes is not a
    /// flood of writes, and the newest snapshot is what lands.
    #[test]
    fn changes_queued_together_share_one_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = CrewStore::open(dir.path());
        let tickets: Vec<Ticket> = (0..100)
            .map(|n| store.enqueue((0..n).map(|i| record(&format!("u-{i}"), UserState::Pending)).collect()))
            .collect();
        for ticket in tickets.iter().rev() {
            store.wait(*ticket);
        }
        assert_eq!(store.writes.load(Ordering::Relaxed), 1, "one write for the hundred changes");
        assert_eq!(CrewStore::open(dir.path()).1.len(), 99, "the newest crew is on disk");

        // From several threads at once: every change is on disk when its wait returns.
        let store = std::sync::Arc::new(store);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = std::sync::Arc::clone(&store);
                std::thread::spawn(move || {
                    for n in 0..50 {
                        let ticket = store.enqueue(vec![record(&format!("t{t}-{n}"), UserState::Pending)]);
                        store.wait(ticket);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().expect("thread"));
        let writes = store.writes.load(Ordering::Relaxed) - 1;
        assert!((1..=400).contains(&writes), "{writes} writes for 400 changes");
        assert_eq!(CrewStore::open(dir.path()).1.len(), 1);
    }

    #[test]
    fn debug_output_leaves_the_token_out() {
        let shown = format!("{:?}", record("a-1", UserState::Pending));
        assert!(shown.contains("a-1") && !shown.contains("secret-token"), "{shown}");
    }

    #[test]
    fn an_unreadable_file_is_set_aside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases: [&[u8]; 4] = [
            b"\x00\xffgarbage",
            b"{\"version\":1,\"crew\":[",
            b"{\"version\":1,\"crew\":[{\"identity\":\"x\",\"state\":\"secret-token\"}]}",
            b"{\"version\":99,\"crew\":[]}",
        ];
        for bytes in cases {
            let path = dir.path().join(FILE_NAME);
            fs::write(&path, bytes).expect("write");
            let (store, crew) = CrewStore::open(dir.path());
            assert!(crew.is_empty());
            assert!(!path.exists(), "moved aside");
            assert_eq!(fs::read(dir.path().join(BAD_FILE_NAME)).expect("kept"), bytes);
            store.save(&[]);
            assert!(CrewStore::open(dir.path()).1.is_empty());
        }
    }

    #[test]
    fn a_failed_write_is_flagged_and_the_next_one_recovers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = CrewStore::open(dir.path());
        store.save(&[record("a-1", UserState::Pending)]);
        let kept = fs::read(store.path()).expect("read");
        // A directory where the file goes makes the rename fail.
        fs::remove_file(store.path()).expect("rm");
        fs::create_dir(store.path()).expect("mkdir");
        store.save(&[]);
        assert!(store.failing.load(Ordering::Relaxed));
        fs::remove_dir(store.path()).expect("rmdir");
        fs::write(store.path(), kept).expect("put the file back");
        assert_eq!(CrewStore::open(dir.path()).1.len(), 1);
        store.save(&[]);
        assert!(!store.failing.load(Ordering::Relaxed));
        assert!(CrewStore::open(dir.path()).1.is_empty());
    }
}
