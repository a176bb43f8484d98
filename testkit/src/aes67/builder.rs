//! How a [`Console`] is started: [`ConsoleBuilder`], the `aes67-console` options and their
//! defaults, and the start itself (the binary spawned, its events read).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use partyline_shared::aes67::Encoding;
use serde_json::Value;

use super::console::{Console, Events};
use super::{Aes67Net, CONSOLE_GROUP, CONSOLE_NAME, HOST_IFACE, PARTYLINE_IFACE, SEND_PRIORITY};

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

    /// Runs in the test's namespace on [`PARTYLINE_IFACE`] with
    /// [`PARTYLINE_ADDRESS`](super::PARTYLINE_ADDRESS), in partyline's place: to check the
    /// network and the console without partyline.
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
