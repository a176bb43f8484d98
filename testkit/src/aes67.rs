//! An AES67 network of the tests' own around partyline: a Linux bridge [`PARTYLINE_IFACE`] in the
//! test's namespace (`scripts/netns-run`'s), where partyline runs, and hosts in namespaces of
//! their own on it, as devices on a LAN: two PTP grandmasters (linuxptp's `ptp4l`, or the
//! `ptp-grandmaster` binary of this crate for a clock off the host's: [`Grandmaster`]) and a
//! console ([`Console`], the `aes67-console` binary of this crate, which
//! sends a tone, announces it by SAP, and reports the levels, timing and SAP packets it hears).
//!
//! Why it is built so (measured on the 2-core test VMs):
//! - GStreamer's PTP clock never syncs in `ptp4l`'s own namespace (`ptp4l` turns multicast
//!   loopback off), so each grandmaster has a namespace of its own, and partyline follows them
//!   over the bridge.
//! - The bridge has multicast snooping off, so it floods every group (PTP's, SAP's, the
//!   streams') to every port as a plain switch does, whatever IGMP says; every namespace routes
//!   `224.0.0.0/4` to its link.
//! - The grandmasters are `masterOnly` and `free_running` with software timestamps: they never
//!   steer the host's clock (a `ptp4l` follower would), so PTP time here is the host's
//!   `CLOCK_REALTIME` within microseconds, in every namespace. Being `masterOnly`, a grandmaster
//!   ignores the other's announcements: both send, and followers choose by BMCA (the lower
//!   `priority1` wins). A follower may sync to the worse one first, before it has heard the
//!   better one's announcements twice ([`Console::wait_grandmaster`] waits for a given one); it
//!   turns to the other about 6 s after the one it follows falls silent (three announce
//!   intervals), with no gap in the console's stream.
//! - GStreamer's PTP clock follows the grandmaster to within 20 to 400 µs here (software
//!   timestamps, taken after its helper process relayed the packets), so the console reports
//!   lateness both on its PTP clock and on `CLOCK_REALTIME` ([`Lateness::host`]): the latter is
//!   the sender's timing as it is, the console's own clock error aside.
//! - The namespaces are named `<test's namespace>-node-aes-…`, so that `scripts/netns-run`'s end
//!   removes them (with what still runs in them) after a crash, as it does [`crate::netns`]'s.
//!
//! One [`Aes67Net`] exists at a time in a test process (their bridge and addresses are fixed):
//! [`Aes67Net::create`] waits for an earlier one's drop.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use partyline_shared::aes67::Encoding;
use serde_json::Value;

/// The bridge in the test's namespace: partyline's AES67 interface.
pub const PARTYLINE_IFACE: &str = "aes0";
/// partyline's address on it (/24).
pub const PARTYLINE_ADDRESS: &str = "10.79.0.1";
/// Each host's side of its link, in its namespace.
pub const HOST_IFACE: &str = "eth0";
/// The multicast group of the console's stream unless told otherwise.
pub const CONSOLE_GROUP: &str = "239.69.20.1";
/// The stream name the console announces unless told otherwise.
pub const CONSOLE_NAME: &str = "console";
/// The SCHED_FIFO priority of a sending console (below bridged's real-time threads, 10).
const SEND_PRIORITY: &str = "5";

/// A host of the AES67 network: a namespace of its own, linked to the bridge.
#[derive(Debug)]
pub struct Host {
    /// The namespace's name (`ip netns`).
    pub namespace: String,
    /// Its address on [`HOST_IFACE`] (/24).
    pub address: String,
    /// Its link's other end, a port of the bridge in the test's namespace.
    pub port: String,
}

/// The bridge and its hosts; removed on drop.
#[derive(Debug)]
pub struct Aes67Net {
    /// [`PARTYLINE_IFACE`].
    pub bridge: String,
    /// [`PARTYLINE_ADDRESS`].
    pub address: String,
    /// Grandmaster 1 (`10.79.0.11`) and 2 (`10.79.0.12`): see [`Grandmaster::start`].
    pub grandmasters: [Host; 2],
    /// The console (`10.79.0.20`).
    pub console: Host,
    /// A host that sends what it likes (`10.79.0.66`: [`crate::intruder::Intruder`]).
    pub intruder: Host,
    _turn: Turn,
}

impl Aes67Net {
    /// The bridge, partyline's address and route on it, and the hosts' namespaces and links.
    /// Needs root inside `scripts/netns-run`'s namespace ([`crate::require_namespace`]).
    pub fn create() -> Aes67Net {
        crate::require_namespace();
        let turn = Turn::take();
        let identify = Command::new("ip").args(["netns", "identify"]).output().expect("ip netns identify");
        let parent = String::from_utf8_lossy(&identify.stdout).trim().to_owned();
        assert!(!parent.is_empty(), "the test's namespace has no name: run it with `scripts/netns-run`");
        let host = |name: &str, address: &str| Host {
            namespace: format!("{parent}-node-aes-{name}"),
            address: address.to_owned(),
            port: format!("aes-{name}"),
        };
        let net = Aes67Net {
            bridge: PARTYLINE_IFACE.to_owned(),
            address: PARTYLINE_ADDRESS.to_owned(),
            grandmasters: [host("gm1", "10.79.0.11"), host("gm2", "10.79.0.12")],
            console: host("console", "10.79.0.20"),
            intruder: host("intruder", "10.79.0.66"),
            _turn: turn,
        };
        // What a test process killed before its drop left in this namespace.
        net.remove();
        let bridge = net.bridge.as_str();
        run(&["ip", "link", "add", bridge, "type", "bridge", "mcast_snooping", "0"]);
        run(&["ip", "addr", "add", &format!("{}/24", net.address), "dev", bridge]);
        run(&["ip", "link", "set", bridge, "up"]);
        run(&["ip", "route", "add", "224.0.0.0/4", "dev", bridge]);
        for host in net.hosts() {
            let ns = host.namespace.as_str();
            run(&["ip", "netns", "add", ns]);
            run(&["ip", "link", "add", &host.port, "type", "veth", "peer", "name", HOST_IFACE, "netns", ns]);
            run(&["ip", "link", "set", &host.port, "master", bridge, "up"]);
            let inside = |args: &[&str]| run(&[&["ip", "netns", "exec", ns], args].concat());
            inside(&["ip", "link", "set", "lo", "up"]);
            inside(&["ip", "addr", "add", &format!("{}/24", host.address), "dev", HOST_IFACE]);
            inside(&["ip", "link", "set", HOST_IFACE, "up"]);
            inside(&["ip", "route", "add", "224.0.0.0/4", "dev", HOST_IFACE]);
        }
        net
    }

    /// Grandmaster `which` (1 or 2).
    pub fn grandmaster(&self, which: u8) -> &Host {
        assert!(matches!(which, 1 | 2), "grandmaster {which}: there are 1 and 2");
        &self.grandmasters[usize::from(which - 1)]
    }

    /// Plugs `host`'s cable in or pulls it out (its bridge port up or down).
    pub fn set_link(&self, host: &Host, up: bool) {
        run(&["ip", "link", "set", &host.port, if up { "up" } else { "down" }]);
    }

    fn hosts(&self) -> impl Iterator<Item = &Host> {
        self.grandmasters.iter().chain([&self.console, &self.intruder])
    }

    /// The namespaces (with their links, and what still runs in them) and the bridge.
    fn remove(&self) {
        for host in self.hosts() {
            if let Ok(output) = Command::new("ip").args(["netns", "pids", &host.namespace]).output() {
                let pids: Vec<String> =
                    String::from_utf8_lossy(&output.stdout).split_whitespace().map(str::to_owned).collect();
                if !pids.is_empty() {
                    let _ = Command::new("kill").arg("-KILL").args(&pids).status();
                }
            }
            // Deleting the port takes its peer with it at once; a namespace's own links go only
            // when its last process has exited, which a KILL does not wait for, and the next
            // test's `ip link add` of the same name would find it still there.
            let _ = Command::new("ip").args(["link", "del", &host.port]).output();
            let _ = Command::new("ip").args(["netns", "del", &host.namespace]).output();
        }
        let _ = Command::new("ip").args(["link", "del", &self.bridge]).output();
    }
}

impl Drop for Aes67Net {
    fn drop(&mut self) {
        // The turn goes after (fields drop after `drop`).
        self.remove();
    }
}

/// The process's one [`Aes67Net`] at a time.
#[derive(Debug)]
struct Turn;

static BUSY: Mutex<bool> = Mutex::new(false);
static FREED: Condvar = Condvar::new();

impl Turn {
    fn take() -> Turn {
        let mut busy = BUSY.lock().unwrap_or_else(PoisonError::into_inner);
        while *busy {
            busy = FREED.wait(busy).unwrap_or_else(PoisonError::into_inner);
        }
        *busy = true;
        Turn
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        *BUSY.lock().unwrap_or_else(PoisonError::into_inner) = false;
        FREED.notify_one();
    }
}

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

/// How a [`Console`] is started: the `aes67-console` options, with its defaults.
#[derive(Debug, Clone)]
pub struct ConsoleBuilder {
    name: String,
    channels: u8,
    encoding: Encoding,
    tone: (u8, f64, f64),
    bursts: bool,
    send: Option<(String, u16)>,
    payload_type: u8,
    send_delay: Duration,
    media_clock_offset: u32,
    sap_interval: Duration,
    receive_sdp: Option<String>,
    listen_sap: Option<String>,
    report: Duration,
    domain: u8,
    in_test_namespace: bool,
}

impl Default for ConsoleBuilder {
    fn default() -> ConsoleBuilder {
        ConsoleBuilder {
            name: CONSOLE_NAME.to_owned(),
            channels: 8,
            encoding: Encoding::L24,
            tone: (3, 1000.0, -20.0),
            bursts: false,
            send: Some((CONSOLE_GROUP.to_owned(), 5004)),
            payload_type: 96,
            send_delay: Duration::from_millis(1),
            media_clock_offset: 0,
            sap_interval: Duration::from_secs(2),
            receive_sdp: None,
            listen_sap: None,
            report: Duration::from_millis(250),
            domain: 0,
            in_test_namespace: false,
        }
    }
}

impl ConsoleBuilder {
    /// The name its stream is announced under (SDP `s=`; default [`CONSOLE_NAME`]).
    pub fn name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.name);
        self
    }

    /// Its stream's channels (1 to 8; default 8).
    pub fn channels(mut self, channels: u8) -> Self {
        self.channels = channels;
        self
    }

    /// Its stream's encoding (default L24).
    pub fn encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// A sine of `hz` at `dbfs` (RMS, as [`crate::audio::tone_db`] reads it) on `channel`
    /// (from 1; 0: silence on all) of its stream; `hz` is also the tone whose level it reports
    /// on what it receives. Default: channel 3, 1000 Hz, −20 dBFS.
    pub fn tone(mut self, channel: u8, hz: f64, dbfs: f64) -> Self {
        self.tone = (channel, hz, dbfs);
        self
    }

    /// Its tone in bursts of 400 ms every 500 ms, as a crew member talks (default: steady), so
    /// that a crew member's ear judges every burst for gaps.
    pub fn bursts(mut self) -> Self {
        self.bursts = true;
        self
    }

    /// Sends its stream to `group`:`port` (default [`CONSOLE_GROUP`]:5004).
    pub fn send_to(mut self, group: &str, port: u16) -> Self {
        self.send = Some((group.to_owned(), port));
        self
    }

    /// Neither sends nor announces a stream: it only listens.
    pub fn no_send(mut self) -> Self {
        self.send = None;
        self
    }

    /// Its stream's RTP payload type (default 96).
    pub fn payload_type(mut self, payload_type: u8) -> Self {
        self.payload_type = payload_type;
        self
    }

    /// How long after its RTP time a packet leaves (default 1 ms, a packet time: as a console
    /// whose packet holds what it sampled during that millisecond).
    pub fn send_delay(mut self, delay: Duration) -> Self {
        self.send_delay = delay;
        self
    }

    /// Its stream's media clock offset (`mediaclk:direct=`, default 0; Dante's are random).
    pub fn media_clock_offset(mut self, offset: u32) -> Self {
        self.media_clock_offset = offset;
        self
    }

    /// How often it announces its stream (default 2 s).
    pub fn sap_interval(mut self, interval: Duration) -> Self {
        self.sap_interval = interval;
        self
    }

    /// Receives the stream this SDP describes from the start.
    pub fn receive_sdp(mut self, sdp: &str) -> Self {
        self.receive_sdp = Some(sdp.to_owned());
        self
    }

    /// Receives the stream SAP announces as `name` (SDP `s=`), once announced, until withdrawn.
    pub fn listen_sap(mut self, name: &str) -> Self {
        self.listen_sap = Some(name.to_owned());
        self
    }

    /// The window of its `levels` and `lateness` reports (default 250 ms).
    pub fn report_every(mut self, window: Duration) -> Self {
        self.report = window;
        self
    }

    /// The PTP domain it follows and names in its SDP (default 0, the grandmasters').
    pub fn domain(mut self, domain: u8) -> Self {
        self.domain = domain;
        self
    }

    /// Runs in the test's namespace on [`PARTYLINE_IFACE`] with [`PARTYLINE_ADDRESS`], in
    /// partyline's place: to check the network and the console without partyline.
    pub fn in_test_namespace(mut self) -> Self {
        self.in_test_namespace = true;
        self
    }

    /// Starts it (not waiting for anything: see [`Console::wait_synced`]); a sending console
    /// under SCHED_FIFO, below bridged's real-time threads.
    pub fn start(self, net: &Aes67Net) -> Console {
        let dir = tempfile::tempdir().expect("dir");
        let binary = crate::binary("aes67-console");
        let (iface, address) = if self.in_test_namespace {
            (PARTYLINE_IFACE, net.address.as_str())
        } else {
            (HOST_IFACE, net.console.address.as_str())
        };
        // A sending console runs under SCHED_FIFO (util-linux's chrt), below bridged's threads
        // (10) and ahead of ordinary ones: on the 2-core test VMs its packets otherwise leave a
        // few ms late in one 250 ms window of three (measured: p99 1.36 ms, 90th percentile of
        // the windows' p99 2.2 ms; under SCHED_FIFO 1.12 and 1.20 ms, with 1 ms of send delay),
        // and what partyline's receiver is given should be a console's timing, not the VM's.
        let mut line: Vec<std::ffi::OsString> = Vec::new();
        if self.send.is_some() {
            line.extend(["chrt", "--fifo", SEND_PRIORITY].map(Into::into));
        }
        if !self.in_test_namespace {
            line.extend(["ip", "netns", "exec", &net.console.namespace].map(Into::into));
        }
        line.push(binary.clone().into());
        let mut command = Command::new(&line[0]);
        command.args(&line[1..]);
        let (tone_channel, tone_hz, tone_dbfs) = self.tone;
        command
            .args(["--iface", iface, "--address", address, "--domain", &self.domain.to_string()])
            .args(["--name", &self.name, "--channels", &self.channels.to_string()])
            .args(["--encoding", self.encoding.name(), "--payload-type", &self.payload_type.to_string()])
            .args(["--tone-channel", &tone_channel.to_string()])
            .args(["--tone-hz", &tone_hz.to_string(), &format!("--tone-dbfs={tone_dbfs}")])
            .args(self.bursts.then_some("--bursts"))
            .args(["--send-delay-us", &self.send_delay.as_micros().to_string()])
            .args(["--media-clock-offset", &self.media_clock_offset.to_string()])
            .args(["--sap-interval-ms", &self.sap_interval.as_millis().to_string()])
            .args(["--report-ms", &self.report.as_millis().to_string()]);
        match &self.send {
            Some((group, port)) => command.args(["--send-group", group, "--send-port", &port.to_string()]),
            None => command.arg("--no-send"),
        };
        if let Some(sdp) = &self.receive_sdp {
            let path = dir.path().join("receive.sdp");
            std::fs::write(&path, sdp).expect("write the SDP");
            command.arg("--receive-sdp").arg(path);
        }
        if let Some(name) = &self.listen_sap {
            command.args(["--listen-sap", name]);
        }
        let log = std::fs::File::create(dir.path().join("console.log")).expect("console.log");
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let events = Arc::new(Mutex::new(Events::default()));
        let into = Arc::clone(&events);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).unwrap_or_else(|_| {
                    eprintln!("aes67-console printed a line that is no event: {line}");
                    Value::Null
                });
                into.lock().unwrap_or_else(PoisonError::into_inner).list.push(value);
            }
            into.lock().unwrap_or_else(PoisonError::into_inner).ended = true;
        });
        Console { child, stdin, events, dir }
    }
}

/// The events a console printed.
#[derive(Debug, Default)]
struct Events {
    list: Vec<Value>,
    /// Its stdout closed: it exited.
    ended: bool,
}

/// The AES67 console: the `aes67-console` binary in the console's namespace (or the test's:
/// [`ConsoleBuilder::in_test_namespace`]), and what it reports. Stopped on drop (its
/// announcement withdrawn).
#[derive(Debug)]
pub struct Console {
    child: Child,
    stdin: Option<ChildStdin>,
    events: Arc<Mutex<Events>>,
    dir: tempfile::TempDir,
}

/// A `levels` report of what a console received over one window.
#[derive(Debug, Clone, PartialEq)]
pub struct Levels {
    /// Frames received in the window (48 a millisecond when nothing is lost).
    pub frames: u64,
    /// Each channel's RMS level (dBFS, −100 for silence or nothing), from channel 1.
    pub dbfs: Vec<f64>,
    /// Each channel's level of the console's tone frequency alone (as [`crate::audio::tone_db`]).
    pub tone_dbfs: Vec<f64>,
}

impl Levels {
    /// The tone's level on `channel` (from 1).
    pub fn tone(&self, channel: usize) -> f64 {
        self.tone_dbfs[channel - 1]
    }

    /// The RMS level of `channel` (from 1).
    pub fn rms(&self, channel: usize) -> f64 {
        self.dbfs[channel - 1]
    }
}

/// A `lateness` report: how late the received stream's packets arrived over one window, their
/// arrival minus their RTP time.
#[derive(Debug, Clone, PartialEq)]
pub struct Lateness {
    pub packets: u64,
    /// Packets missing from the sequence.
    pub lost: u64,
    /// Arrival on the console's PTP clock (a follower's estimate of the grandmaster's time, as
    /// partyline's is); None without packets.
    pub ptp: Option<Spread>,
    /// Arrival on the host's `CLOCK_REALTIME`, which is the grandmasters' time here within
    /// microseconds: the sender's timing as it is, the console's clock error aside.
    pub host: Option<Spread>,
    /// The console's PTP time minus the host's `CLOCK_REALTIME` at the report (µs).
    pub clock_offset_us: f64,
}

/// The least, median, 99th percentile and greatest of a window's values (µs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// A SAP packet a console heard.
#[derive(Debug, Clone, PartialEq)]
pub struct Sap {
    pub deletion: bool,
    /// The announcer's address (SAP's origin field).
    pub origin: String,
    /// The message id hash.
    pub hash: u16,
    /// The SDP's session name (`s=`), if it has one.
    pub name: Option<String>,
    pub sdp: String,
    /// Why partyline's own SDP check refuses this SDP, if it does.
    pub sdp_error: Option<String>,
}

impl Console {
    pub fn builder() -> ConsoleBuilder {
        ConsoleBuilder::default()
    }

    /// A console with the defaults: a −20 dBFS 1 kHz tone on channel 3 of 8 (L24), sent to
    /// [`CONSOLE_GROUP`] and announced as [`CONSOLE_NAME`].
    pub fn start(net: &Aes67Net) -> Console {
        Console::builder().start(net)
    }

    /// Every event it printed so far (JSON objects with their `event`).
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).list.clone()
    }

    /// What it wrote on stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("console.log")).unwrap_or_default()
    }

    /// Polls `check` over its events from the `from`th on until it gives a value; panics naming
    /// `what` with its log after `within`, or once it exited.
    async fn wait<T>(&self, what: &str, within: Duration, from: usize, check: impl Fn(&[Value]) -> Option<T>) -> T {
        let deadline = Instant::now() + within;
        loop {
            let ended = {
                let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(value) = check(events.list.get(from..).unwrap_or_default()) {
                    return value;
                }
                events.ended
            };
            let failure = if ended {
                "aes67-console exited"
            } else if Instant::now() >= deadline {
                "timed out"
            } else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let events = self.events();
            let tail: Vec<String> = events[events.len().saturating_sub(8)..].iter().map(Value::to_string).collect();
            panic!(
                "{failure} waiting {within:?} for the console's {what}; its last events:\n{}\nits log:\n{}",
                tail.join("\n"),
                self.log()
            );
        }
    }

    fn count(&self) -> usize {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).list.len()
    }

    /// Waits until its PTP clock syncs; returns the grandmaster it follows first (as
    /// [`Grandmaster::identity`]), which may be the worse of two until it has heard both:
    /// [`Console::wait_grandmaster`] waits for a given one.
    pub async fn wait_synced(&self, within: Duration) -> String {
        self.wait("PTP sync", within, 0, |events| {
            events.iter().find(|e| e["event"] == "synced").map(|e| text(&e["grandmaster"]))
        })
        .await
    }

    /// The grandmaster its clock follows now, once synced.
    pub fn grandmaster(&self) -> Option<String> {
        self.events()
            .iter()
            .rev()
            .find(|e| e["event"] == "synced" || e["event"] == "grandmaster")
            .map(|e| text(&e["grandmaster"]))
    }

    /// Waits until its clock follows the grandmaster `identity`.
    pub async fn wait_grandmaster(&self, identity: &str, within: Duration) {
        self.wait(&format!("grandmaster {identity}"), within, 0, |events| {
            let last = events.iter().rev().find(|e| e["event"] == "synced" || e["event"] == "grandmaster")?;
            (last["grandmaster"] == identity).then_some(())
        })
        .await;
    }

    /// Waits until its stream is on the wire; returns the stream's SDP.
    pub async fn wait_sending(&self, within: Duration) -> String {
        self.wait("stream", within, 0, |events| {
            events.iter().find(|e| e["event"] == "sending").map(|e| text(&e["sdp"]))
        })
        .await
    }

    /// Waits until it receives a stream (from its SDP, or SAP's announcement); returns the
    /// `receiving` event (the stream's `name`, `group`, `port`, `encoding`, `channels`, …).
    pub async fn wait_receiving(&self, within: Duration) -> Value {
        self.wait("receiving", within, 0, |events| events.iter().rev().find(|e| e["event"] == "receiving").cloned())
            .await
    }

    /// Its last `levels` report.
    pub fn latest_levels(&self) -> Option<Levels> {
        self.events().iter().rev().find_map(levels)
    }

    /// A mark in its events, for [`Console::levels_since`].
    pub fn mark(&self) -> usize {
        self.count()
    }

    /// Its `levels` reports made after `mark`.
    pub fn levels_since(&self, mark: usize) -> Vec<Levels> {
        self.events().get(mark..).unwrap_or_default().iter().filter_map(levels).collect()
    }

    /// Waits for a `levels` report made after this call that satisfies `check`.
    pub async fn wait_levels(&self, what: &str, within: Duration, check: impl Fn(&Levels) -> bool) -> Levels {
        let from = self.count();
        self.wait(what, within, from, |events| events.iter().filter_map(levels).find(|l| check(l))).await
    }

    /// Waits for a `levels` report, made after this call, whose tone level on `channel` (from
    /// 1) satisfies `check`; returns that level.
    pub async fn wait_tone(&self, channel: usize, check: impl Fn(f64) -> bool, within: Duration) -> f64 {
        let what = format!("tone level on channel {channel}");
        self.wait_levels(&what, within, |l| l.tone_dbfs.get(channel - 1).is_some_and(|db| check(*db)))
            .await
            .tone(channel)
    }

    /// Every `lateness` report so far.
    pub fn lateness_reports(&self) -> Vec<Lateness> {
        self.events().iter().filter_map(lateness).collect()
    }

    /// The next `reports` `lateness` reports after this call (a window of `--report-ms` each).
    pub async fn next_lateness(&self, reports: usize, within: Duration) -> Vec<Lateness> {
        let from = self.count();
        self.wait(&format!("{reports} lateness reports"), within, from, |events| {
            let all: Vec<Lateness> = events.iter().filter_map(lateness).collect();
            (all.len() >= reports).then(|| all[..reports].to_vec())
        })
        .await
    }

    /// The latencies (ms) of the onsets it heard so far on `channel` (from 1): with its tone in
    /// bursts ([`ConsoleBuilder::bursts`]), how long each burst took to come back to it.
    pub fn onsets(&self, channel: usize) -> Vec<f64> {
        self.onset_events(channel).iter().filter_map(|e| e["latency_ms"].as_f64()).collect()
    }

    /// The PTP time (ns) of every onset heard on `channel` (from 1) so far.
    pub fn onset_times(&self, channel: usize) -> Vec<i64> {
        self.onset_events(channel).iter().filter_map(|e| e["ptp_ns"].as_i64()).collect()
    }

    fn onset_events(&self, channel: usize) -> Vec<Value> {
        let heard_on = |e: &Value| e["event"] == "onset" && e["channel"].as_u64() == Some(channel as u64);
        self.events().into_iter().filter(heard_on).collect()
    }

    /// Every SAP packet it heard so far.
    pub fn sap(&self) -> Vec<Sap> {
        self.events().iter().filter_map(sap).collect()
    }

    /// Whether it heard an announcement of `name`.
    pub fn sap_seen(&self, name: &str) -> bool {
        self.sap().iter().any(|s| !s.deletion && s.name.as_deref() == Some(name))
    }

    /// Waits until it hears an announcement of `name` (or had heard one); returns the latest.
    pub async fn wait_sap(&self, name: &str, within: Duration) -> Sap {
        self.wait(&format!("SAP announcement of {name:?}"), within, 0, |events| {
            events.iter().rev().filter_map(sap).find(|s| !s.deletion && s.name.as_deref() == Some(name))
        })
        .await
    }

    /// Waits until it hears the deletion of `name`'s announcement (named, or with the origin
    /// and hash of an announcement of `name`: RFC 2974 lets a deletion carry only the `o=`
    /// line); returns it.
    pub async fn wait_sap_deletion(&self, name: &str, within: Duration) -> Sap {
        self.wait(&format!("SAP deletion of {name:?}"), within, 0, |events| {
            let heard: Vec<Sap> = events.iter().filter_map(sap).collect();
            let announced: Vec<(&str, u16)> = heard
                .iter()
                .filter(|s| !s.deletion && s.name.as_deref() == Some(name))
                .map(|s| (s.origin.as_str(), s.hash))
                .collect();
            heard
                .iter()
                .find(|s| {
                    s.deletion && (s.name.as_deref() == Some(name) || announced.contains(&(s.origin.as_str(), s.hash)))
                })
                .cloned()
        })
        .await
    }

    /// Its `error` events (a pipeline that failed).
    pub fn errors(&self) -> Vec<Value> {
        self.events().into_iter().filter(|e| e["event"] == "error").collect()
    }

    /// Stops it as a console is switched off cleanly: its stdin closed, it withdraws its
    /// announcement and exits (killed if it has not within 2 s).
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// Kills it with SIGKILL (a console that loses power): no withdrawal.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The folder of its log and SDP file.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.stop();
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn numbers(value: &Value) -> Vec<f64> {
    value.as_array().map(|a| a.iter().map(|v| v.as_f64().unwrap_or(f64::NAN)).collect()).unwrap_or_default()
}

fn levels(event: &Value) -> Option<Levels> {
    (event["event"] == "levels").then(|| Levels {
        frames: event["frames"].as_u64().unwrap_or(0),
        dbfs: numbers(&event["dbfs"]),
        tone_dbfs: numbers(&event["tone_dbfs"]),
    })
}

fn lateness(event: &Value) -> Option<Lateness> {
    (event["event"] == "lateness").then(|| Lateness {
        packets: event["packets"].as_u64().unwrap_or(0),
        lost: event["lost"].as_u64().unwrap_or(0),
        ptp: spread(event),
        host: spread(&event["host"]),
        clock_offset_us: event["clock_offset_us"].as_f64().unwrap_or(f64::NAN),
    })
}

fn spread(value: &Value) -> Option<Spread> {
    Some(Spread {
        min_us: value["min_us"].as_f64()?,
        p50_us: value["p50_us"].as_f64()?,
        p99_us: value["p99_us"].as_f64()?,
        max_us: value["max_us"].as_f64()?,
    })
}

fn sap(event: &Value) -> Option<Sap> {
    (event["event"] == "sap").then(|| Sap {
        deletion: event["deletion"].as_bool().unwrap_or(false),
        origin: text(&event["origin"]),
        hash: event["hash"].as_u64().and_then(|h| u16::try_from(h).ok()).unwrap_or(0),
        name: event["name"].as_str().map(str::to_owned),
        sdp: text(&event["sdp"]),
        sdp_error: event["sdp_error"].as_str().map(str::to_owned),
    })
}

fn run(args: &[&str]) {
    let output = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(output.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}
