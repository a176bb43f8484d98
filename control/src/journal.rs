//! The show's journal: the live events a show report is made of (`crate::report`), one JSON line
//! each with its time (`{"at":"…Z","type":"userJoined",…}`, the event as the bus serialises it),
//! in `journal.jsonl` in the state directory (0600, like the other state files), appended to
//! across restarts of control (each start is a line, `controlStarted`).
//!
//! Kept: joins, leaves, talk, link judgements, sessions moved, the states of Janus, its nodes,
//! bridged and PTP, direct lines, and the log's warnings and errors. Not calls nor config
//! changes. The events carry identities and names, never a token or a panel key.
//!
//! A watcher of the bus writes it, never a publisher: publishing does not wait for the disk.
//! Lines are gathered in memory and written by a blocking task every [`FLUSH_EVERY`] (sooner
//! past [`FLUSH_AT_BYTES`]), and what is gathered when control stops is written as the runtime
//! drops the watcher. When the watcher falls behind the bus, or a write fails, a line says how
//! many events were lost (`eventsLost`), and the report shows the count. Past [`MAX_FILE_BYTES`]
//! the file becomes `journal.jsonl.1` (replacing the previous one) and a new one starts: the
//! journal takes at most twice that.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::mem;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use partyline_shared::sync::lock;
use time::OffsetDateTime;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;

use crate::events::Published;
use crate::report::rfc3339;

/// The journal's file in the state directory.
pub const FILE_NAME: &str = "journal.jsonl";
/// The journal's previous file, once the first one filled.
pub const OLD_FILE_NAME: &str = "journal.jsonl.1";
/// A file's size past which a new one starts: some 50,000 events, a long show's worth.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
const FILE_MODE: u32 = 0o600;
/// How long a line waits in memory at most.
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Gathered lines written at once, whatever the time (a burst of events).
const FLUSH_AT_BYTES: usize = 64 * 1024;

/// The events a show report is made of, by their names on the bus.
const KEPT: [&str; 13] = [
    "userJoined",
    "userLeft",
    "talking",
    "stoppedTalking",
    "linkChanged",
    "sessionMoved",
    "nodeState",
    "janusState",
    "bridgeState",
    "ptpState",
    "directOpened",
    "directClosed",
    // Warnings and errors only: the log publishes nothing else.
    "log",
];

/// Where the journal is; cheap to clone.
#[derive(Debug, Clone)]
pub struct Journal {
    path: PathBuf,
    old_path: PathBuf,
}

impl Journal {
    /// The journal in the state directory `dir`.
    pub fn in_dir(dir: &Path) -> Journal {
        Journal { path: dir.join(FILE_NAME), old_path: dir.join(OLD_FILE_NAME) }
    }

    /// Starts writing the events `events` receives (subscribe before anything is published that
    /// the journal should have), after a `controlStarted` line.
    pub fn start(&self, events: broadcast::Receiver<Published>) {
        let file = Arc::new(Mutex::new(JournalFile::new(self.clone())));
        let mut writer = Writer { file, gathered: Vec::new(), gathered_events: 0, due: None, unwritten: 0 };
        writer.gather(&format!("{{\"at\":\"{}\",\"type\":\"controlStarted\"}}", now()));
        tokio::spawn(writer.run(events));
    }

    /// Everything the journal holds, oldest first (blocking: call it off the runtime). Bytes
    /// that are not UTF-8 (a line a crash cut short) are replaced, and that line left out by
    /// the report.
    pub fn read(&self) -> io::Result<String> {
        let mut text = String::new();
        for path in [&self.old_path, &self.path] {
            match fs::read(path) {
                Ok(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(text)
    }
}

/// The time of a line: now, UTC, to the millisecond.
fn now() -> String {
    rfc3339::format(OffsetDateTime::now_utc())
}

/// The watcher: gathers lines, hands them to the file.
struct Writer {
    file: Arc<Mutex<JournalFile>>,
    gathered: Vec<u8>,
    /// The events the gathered lines stand for (an `eventsLost` line for its count).
    gathered_events: u64,
    /// When the oldest gathered line must be written.
    due: Option<Instant>,
    /// Events that reached neither the file nor a line saying so yet.
    unwritten: u64,
}

impl Writer {
    async fn run(mut self, mut events: broadcast::Receiver<Published>) {
        loop {
            tokio::select! {
                received = events.recv() => match received {
                    Ok(event) => self.keep(&event),
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "the show journal fell behind the events: the report lacks them");
                        self.unwritten += missed;
                    }
                    Err(RecvError::Closed) => break,
                },
                () = until(self.due) => {}
            }
            // Checked after every event too: under a steady stream of events the timer's branch
            // may never be the one taken.
            if self.gathered.len() >= FLUSH_AT_BYTES || self.due.is_some_and(|due| due <= Instant::now()) {
                self.write().await;
            }
        }
    }

    /// Gathers `event`'s line if the report uses it.
    fn keep(&mut self, event: &Published) {
        if !KEPT.contains(&event.name()) {
            return;
        }
        // The event's own JSON object, with the time put first.
        if let Some(fields) = event.data().strip_prefix('{') {
            self.gather(&format!("{{\"at\":\"{}\",{fields}", now()));
        }
    }

    fn gather(&mut self, line: &str) {
        if self.unwritten > 0 {
            let lost = format!("{{\"at\":\"{}\",\"type\":\"eventsLost\",\"count\":{}}}\n", now(), self.unwritten);
            self.gathered.extend_from_slice(lost.as_bytes());
            self.gathered_events += mem::take(&mut self.unwritten);
        }
        self.gathered.extend_from_slice(line.as_bytes());
        self.gathered.push(b'\n');
        self.gathered_events += 1;
        self.due.get_or_insert_with(|| Instant::now() + FLUSH_EVERY);
    }

    /// Writes what is gathered, on a blocking thread.
    async fn write(&mut self) {
        let (lines, events) = (mem::take(&mut self.gathered), mem::take(&mut self.gathered_events));
        self.due = None;
        let file = Arc::clone(&self.file);
        let written = tokio::task::spawn_blocking(move || lock(&file).append(&lines)).await;
        let written = written.unwrap_or_else(|e| {
            tracing::error!(error = %e, "the show journal's write stopped");
            false
        });
        if !written {
            // Said in the next line that is written.
            self.unwritten += events;
        }
    }
}

/// Sleeps until `due`, or for ever when nothing waits to be written.
async fn until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

impl Drop for Writer {
    /// The runtime drops the watcher when control stops: what is gathered is written now.
    fn drop(&mut self) {
        if !self.gathered.is_empty() {
            // Nothing is left to tell of a failure: control is stopping.
            lock(&self.file).append(&self.gathered);
        }
    }
}

/// The open file, its size, and whether writes fail.
#[derive(Debug)]
struct JournalFile {
    journal: Journal,
    open: Option<(File, u64)>,
    failing: bool,
    /// [`MAX_FILE_BYTES`], but in tests.
    max_bytes: u64,
}

impl JournalFile {
    fn new(journal: Journal) -> JournalFile {
        JournalFile { journal, open: None, failing: false, max_bytes: MAX_FILE_BYTES }
    }

    /// Appends `lines` (whole lines), starting a new file first if they would take this one past
    /// [`MAX_FILE_BYTES`]; false if they could not be written. A failure is logged once until
    /// writes work again.
    fn append(&mut self, lines: &[u8]) -> bool {
        match self.try_append(lines) {
            Ok(()) => {
                if mem::take(&mut self.failing) {
                    tracing::info!(file = %self.journal.path.display(), "the show journal is written again");
                }
                true
            }
            Err(e) => {
                self.open = None;
                if !mem::replace(&mut self.failing, true) {
                    tracing::warn!(file = %self.journal.path.display(), error = %e,
                        "cannot write the show journal: the report lacks what happens until it can");
                }
                false
            }
        }
    }

    fn try_append(&mut self, lines: &[u8]) -> io::Result<()> {
        let (file, size) = match &mut self.open {
            Some((file, size)) => (file, size),
            None => {
                let file = open(&self.journal.path)?;
                let size = file.metadata()?.len();
                let (file, size) = self.open.insert((file, size));
                (file, size)
            }
        };
        if *size > 0 && *size + lines.len() as u64 > self.max_bytes {
            fs::rename(&self.journal.path, &self.journal.old_path)?;
            *file = open(&self.journal.path)?;
            *size = 0;
        }
        file.write_all(lines)?;
        *size += lines.len() as u64;
        Ok(())
    }
}

/// Opens the journal's file for appending, made 0600 if it is new (or was made otherwise).
fn open(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().create(true).append(true).mode(FILE_MODE).open(path)?;
    file.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::events::{EventBus, LiveEvent};

    fn talking(n: usize) -> LiveEvent {
        LiveEvent::Talking { identity: format!("m-{n}"), username: format!("M{n}"), group_id: "stage".into() }
    }

    /// `event` as the bus hands it to a watcher.
    fn published(event: &LiveEvent) -> Published {
        let bus = EventBus::default();
        let mut watch = bus.watch();
        bus.publish(event);
        watch.try_recv().expect("published")
    }

    fn lines_of(path: &Path) -> Vec<serde_json::Value> {
        let text = fs::read_to_string(path).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect()
    }

    fn mode_of(path: &Path) -> u32 {
        fs::metadata(path).expect("the file").permissions().mode() & 0o777
    }

    /// Waits (at most 5 s) until the journal in `dir` has `count` lines.
    async fn lines_written(dir: &Path, count: usize) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let lines = lines_of(&dir.join(FILE_NAME));
            if lines.len() >= count || Instant::now() > deadline {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn the_report_s_events_are_kept_timed_and_the_ones_missed_counted() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let bus = EventBus::default();
        Journal::in_dir(dir.path()).start(bus.watch());
        // 76 more than the bus holds for a watcher, before the watcher runs: it lags by 76.
        let last = crate::events::RING + 75;
        for n in 0..last - 1 {
            bus.publish(&talking(n));
        }
        bus.publish(&LiveEvent::ConfigChanged { what: "not kept".into() });
        bus.publish(&talking(last));
        // The bus's last RING events, the config change left out, after two lines of the journal's.
        let lines = lines_written(dir.path(), 2 + crate::events::RING - 1).await;
        let types: Vec<&str> = lines.iter().filter_map(|line| line["type"].as_str()).collect();
        assert_eq!(types[0], "controlStarted");
        assert_eq!(lines[1], serde_json::json!({"at": lines[1]["at"], "type": "eventsLost", "count": 76}));
        assert!(types[2..].iter().all(|t| *t == "talking"), "{types:?}");
        assert_eq!(types.len(), 2 + crate::events::RING - 1);
        let newest = lines.last().expect("a line");
        assert_eq!(newest["identity"], format!("m-{last}"));
        assert!(rfc3339::parse(newest["at"].as_str().expect("at")).is_ok(), "{newest}");
        assert_eq!(mode_of(&dir.path().join(FILE_NAME)), 0o600);
    }

    #[test]
    fn what_is_gathered_when_control_stops_is_written() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let bus = EventBus::default();
        runtime.block_on(async {
            Journal::in_dir(dir.path()).start(bus.watch());
            bus.publish(&talking(1));
            // The watcher takes the event, well before its line is due.
            tokio::time::sleep(Duration::from_millis(100)).await;
        });
        assert!(lines_of(&dir.path().join(FILE_NAME)).is_empty(), "nothing written yet");
        drop(runtime);
        let types: Vec<String> = lines_of(&dir.path().join(FILE_NAME)).iter().map(|l| l["type"].to_string()).collect();
        assert_eq!(types, ["\"controlStarted\"", "\"talking\""]);
    }

    #[test]
    fn a_full_file_becomes_the_old_one_and_a_restart_appends() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let journal = Journal::in_dir(dir.path());
        let mut file = JournalFile { max_bytes: 30, ..JournalFile::new(journal.clone()) };
        for line in ["1 first line\n", "2 second\n", "3 third line\n", "4 fourth\n"] {
            assert!(file.append(line.as_bytes()), "written");
        }
        let read = |name: &str| fs::read_to_string(dir.path().join(name)).expect(name);
        assert_eq!(
            (read(OLD_FILE_NAME), read(FILE_NAME)),
            ("1 first line\n2 second\n".into(), "3 third line\n4 fourth\n".into())
        );
        assert_eq!(mode_of(&dir.path().join(FILE_NAME)), 0o600);
        // A new process appends; past the bound again, the old file is replaced.
        let mut again = JournalFile { max_bytes: 30, ..JournalFile::new(journal.clone()) };
        assert!(again.append(b"5 fifth\n"), "written");
        assert_eq!(read(FILE_NAME), "3 third line\n4 fourth\n5 fifth\n");
        assert!(again.append(b"6 sixth\n"), "written");
        // The report reads both files, oldest first.
        assert_eq!(journal.read().expect("read"), "3 third line\n4 fourth\n5 fifth\n6 sixth\n");
    }

    #[test]
    fn a_journal_found_readable_by_others_is_made_0600() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(FILE_NAME);
        fs::write(&path, "").expect("written");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("made 0644");
        assert!(JournalFile::new(Journal::in_dir(dir.path())).append(b"a\n"), "written");
        assert_eq!(mode_of(&path), 0o600);
    }

    #[tokio::test]
    async fn events_a_failed_write_held_are_counted_in_the_next_line_written() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let state_dir = dir.path().join("state");
        let file = Arc::new(Mutex::new(JournalFile::new(Journal::in_dir(&state_dir))));
        let mut writer = Writer { file, gathered: Vec::new(), gathered_events: 0, due: None, unwritten: 0 };
        // Two events, then a third with the line saying the two were lost: all three lost.
        for n in 0..2 {
            writer.keep(&published(&talking(n)));
        }
        writer.write().await;
        writer.keep(&published(&talking(2)));
        writer.write().await;
        fs::create_dir(&state_dir).expect("the state directory, at last");
        writer.keep(&published(&talking(3)));
        writer.write().await;
        let lines = lines_of(&state_dir.join(FILE_NAME));
        assert_eq!((&lines[0]["type"], &lines[0]["count"]), (&"eventsLost".into(), &3.into()), "{lines:?}");
        assert_eq!((lines.len(), &lines[1]["identity"]), (2, &"m-3".into()));
    }
}
