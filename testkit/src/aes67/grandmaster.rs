//! The network's PTP grandmasters: linuxptp's `ptp4l` on the host's clock, or this crate's
//! `ptp-grandmaster` on a clock of its own.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Aes67Net, HOST_IFACE, Host, SEND_PRIORITY};

/// A PTP grandmaster in a grandmaster's namespace: linuxptp's `ptp4l`, `masterOnly` and
/// `free_running` with software timestamps on domain 0 (announce every 2 s, sync every 125 ms,
/// as AES67's media profile has it), master about 6 s after its start (its announce receipt
/// timeout); or this crate's `ptp-grandmaster`, on a clock off the host's
/// ([`Grandmaster::start_off_the_host`]). Killed on drop.
#[derive(Debug)]
pub struct Grandmaster {
    child: Child,
    namespace: String,
    /// The program and its arguments, run in `namespace`.
    command: Vec<String>,
    /// Its clock identity as SDP's `ts-refclk` and the console's events write it.
    pub identity: String,
    dir: tempfile::TempDir,
}

impl Grandmaster {
    /// Starts grandmaster `which` (1 or 2) of `net` with `priority1` (BMCA: lower wins; 128 is
    /// the default).
    pub fn start(net: &Aes67Net, which: u8, priority1: u8) -> Grandmaster {
        let host = net.grandmaster(which);
        let dir = tempfile::tempdir().expect("dir");
        let identity = Grandmaster::identity_of(which);
        // ptp4l writes its clock identity as "020000.fffe.790011".
        let digits = identity.replace('-', "").to_lowercase();
        let config = format!(
            "[global]\n\
             domainNumber 0\n\
             priority1 {priority1}\n\
             clockIdentity {}.{}.{}\n\
             logAnnounceInterval 1\n\
             logSyncInterval -3\n\
             logMinDelayReqInterval 0\n\
             time_stamping software\n\
             masterOnly 1\n\
             free_running 1\n\
             uds_address {}\n",
            &digits[..6],
            &digits[6..10],
            &digits[10..],
            // Not the default /var/run/ptp4l, which the other grandmaster (and the machine's
            // own ptp4l, if any) would take.
            dir.path().join("ptp4l.socket").display()
        );
        std::fs::write(dir.path().join("ptp4l.conf"), config).expect("write ptp4l.conf");
        let conf = dir.path().join("ptp4l.conf").display().to_string();
        let command = ["ptp4l", "-f", &conf, "-i", HOST_IFACE, "-m", "-q"].map(str::to_owned).to_vec();
        let child = Grandmaster::spawn(&host.namespace, &dir, &command);
        Grandmaster { child, namespace: host.namespace.clone(), command, identity, dir }
    }

    /// Grandmaster `which` on a clock of its own, `ppm` off the host's (this crate's
    /// `ptp-grandmaster`: `ptp4l`'s time is the host's), master from its start.
    pub fn start_off_the_host(net: &Aes67Net, which: u8, priority1: u8, ppm: f64) -> Grandmaster {
        Grandmaster::start_own(net.grandmaster(which), OwnClock { priority1, ppm, ..OwnClock::of(which) })
    }

    /// A grandmaster of this crate's (`ptp-grandmaster`) on `host` (a grandmaster's, or the
    /// intruder's: a rogue), master from its start, with `clock`'s identity, priority and time.
    pub fn start_own(host: &Host, clock: OwnClock) -> Grandmaster {
        let dir = tempfile::tempdir().expect("dir");
        let program = crate::binary("ptp-grandmaster").display().to_string();
        let (priority1, ppm, offset) =
            (clock.priority1.to_string(), clock.ppm.to_string(), clock.offset_ms.to_string());
        // Under SCHED_FIFO as a sending console is: a Follow_Up that leaves long after its Sync
        // is a measurement GStreamer's follower drops.
        let command: Vec<String> = ["chrt", "--fifo", SEND_PRIORITY, &program, "--address", &host.address]
            .into_iter()
            .chain(["--identity", &clock.identity, "--priority1", &priority1, "--ppm", &ppm, "--offset-ms", &offset])
            .map(str::to_owned)
            .collect();
        let child = Grandmaster::spawn(&host.namespace, &dir, &command);
        Grandmaster { child, namespace: host.namespace.clone(), command, identity: clock.identity, dir }
    }

    /// The clock identity grandmaster `which` has (an EUI-64, `02-00-00-FF-FE-79-00-1N`).
    pub fn identity_of(which: u8) -> String {
        format!("02-00-00-FF-FE-79-00-1{which}")
    }

    fn spawn(namespace: &str, dir: &tempfile::TempDir, command: &[String]) -> Child {
        let log = std::fs::File::create(dir.path().join("ptp4l.log")).expect("ptp4l.log");
        Command::new("ip")
            .args(["netns", "exec", namespace])
            .args(command)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", command[0]))
    }

    /// What it printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ptp4l.log")).unwrap_or_default()
    }

    /// Its port's state as it last printed it (`LISTENING`, `MASTER`, `FAULTY`…).
    pub fn state(&self) -> Option<String> {
        self.log().lines().rev().find_map(|line| {
            let (_, change) = line.split_once("port 1: ")?;
            let (_, to) = change.split_once(" to ")?;
            Some(to.split_whitespace().next()?.to_owned())
        })
    }

    /// Waits until its port is `MASTER`, or panics with its log.
    pub async fn wait_master(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while self.state().as_deref() != Some("MASTER") {
            assert!(
                Instant::now() < deadline,
                "grandmaster {} not master after {within:?}:\n{}",
                self.identity,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills it with SIGKILL (a grandmaster that fails): its followers hear nothing more from
    /// it. [`Grandmaster::restart`] may follow.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills it (a no-op after [`Grandmaster::kill`]) and starts it again, with a new log.
    pub fn restart(&mut self) {
        self.kill();
        self.child = Grandmaster::spawn(&self.namespace, &self.dir, &self.command);
    }
}

impl Drop for Grandmaster {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The clock of a grandmaster of this crate's ([`Grandmaster::start_own`]).
#[derive(Debug, Clone)]
pub struct OwnClock {
    /// Its clock identity (an EUI-64).
    pub identity: String,
    /// BMCA's priority1: lower wins.
    pub priority1: u8,
    /// How fast it runs against the host's clock.
    pub ppm: f64,
    /// How far its time is from the host's at its start, ms.
    pub offset_ms: i64,
}

impl OwnClock {
    /// Grandmaster host `which`'s identity, priority1 128, on the host's time.
    pub fn of(which: u8) -> OwnClock {
        OwnClock { identity: Grandmaster::identity_of(which), priority1: 128, ppm: 0.0, offset_ms: 0 }
    }
}
