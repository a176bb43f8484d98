//! Sound on the test card: a sine played into one channel of a null sink, a recording of every
//! channel of a source, and what tests measure on it (level, frequency, longest dropout).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::sound_server::{CARD_MAP, SoundServer};

mod measure;

pub use measure::{
    channel, dropouts, first_loud_s, frequency, longest_dropout_ms, onsets_after_quiet, rms_db, tick_latencies,
    tick_onsets, tone_db, tone_start, worst_break,
};

/// The card's rate in every test.
pub const RATE: u32 = 48_000;
/// Channels of the card.
pub const CHANNELS: usize = 8;
/// A window over -40 dBFS counts as sound in [`frequency`] and [`longest_dropout_ms`].
pub const LOUD_DB: f64 = -40.0;

/// A sine of `freq` Hz (amplitude 0.5) on one channel of a null sink (gst-launch, killed on drop).
#[derive(Debug)]
pub struct Tone(Child);

impl Tone {
    /// Plays into channel `channel` of the null sink `device`: its monitor `DEVICE.monitor`
    /// carries the tone on that channel, silence on the others.
    pub fn play(pulse: &dyn SoundServer, device: &str, channel: usize, freq: u32) -> Tone {
        Tone::source(pulse, device, &[channel], &format!("audiotestsrc freq={freq} is-live=true"))
    }

    /// Plays what the GStreamer element `source` (a live mono source with its properties,
    /// e.g. `audiotestsrc wave=ticks is-live=true`) makes, at half its amplitude, into each of
    /// `channels` of the null sink `device`.
    pub fn source(pulse: &dyn SoundServer, device: &str, channels: &[usize], source: &str) -> Tone {
        Tone::scaled(pulse, device, channels, source, 0.5)
    }

    /// A sine of `freq` Hz and `amplitude` (1.0: full scale), the same in phase on each of
    /// `channels` of the null sink `device`.
    pub fn at(pulse: &dyn SoundServer, device: &str, channels: &[usize], freq: u32, amplitude: f32) -> Tone {
        Tone::scaled(pulse, device, channels, &format!("audiotestsrc freq={freq} is-live=true volume=1.0"), amplitude)
    }

    fn scaled(pulse: &dyn SoundServer, device: &str, channels: &[usize], source: &str, gain: f32) -> Tone {
        let column: Vec<String> =
            (0..CHANNELS).map(|c| format!("<(float){}>", if channels.contains(&c) { gain } else { 0.0 })).collect();
        let matrix = format!("mix-matrix=<{}>", column.join(","));
        // 100 ms of buffer: what is measured starts at the card (the sink's monitor), so the
        // player's own latency does not count, and a starved player (a busy machine) would put
        // gaps into the input that a test would then blame on the bridge.
        let child = gst_launch(
            pulse,
            &format!(
                "{source} ! audio/x-raw,format=F32LE,channels=1,rate={RATE} ! audioconvert {matrix} \
                 ! audio/x-raw,channels=8,channel-mask=(bitmask)0xc3f,rate={RATE} \
                 ! pulsesink device={device} buffer-time=100000 latency-time=20000"
            ),
        );
        Tone(child)
    }
}

impl Drop for Tone {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A recording (parecord, 10 ms latency) of every channel of `source`: raw F32, 8 channels in
/// the card's order.
#[derive(Debug)]
pub struct Recording {
    child: Child,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Recording {
    pub fn start(pulse: &dyn SoundServer, source: &str) -> Recording {
        Recording::start_with_map(pulse, source, CARD_MAP)
    }

    /// [`Recording::start`] with the source's own channel map `map` (PulseAudio then copies
    /// channels by index), for a device whose map is not the test card's.
    pub fn start_with_map(pulse: &dyn SoundServer, source: &str, map: &str) -> Recording {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("rec.raw");
        let child = Command::new("parecord")
            .arg(format!("--server={}", pulse.server_address()))
            .arg(format!("--device={source}"))
            .args(["--raw", "--format=float32le", "--channels=8", &format!("--channel-map={map}")])
            .arg(format!("--rate={RATE}"))
            .args(["--latency-msec=10"])
            .arg(&path)
            .stdin(Stdio::null())
            .spawn()
            .expect("parecord (pulseaudio-utils)");
        Recording { child, path, _dir: dir }
    }

    /// Seconds recorded so far.
    pub fn seconds(&self) -> f64 {
        let bytes = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        bytes as f64 / (f64::from(RATE) * CHANNELS as f64 * 4.0)
    }

    /// The interleaved samples recorded so far (whole frames), while it keeps recording.
    pub fn samples(&self) -> Vec<f32> {
        let bytes = std::fs::read(&self.path).unwrap_or_default();
        let frames = bytes.len() / (CHANNELS * 4);
        bytes[..frames * CHANNELS * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    }

    /// Waits (polling every 50 ms, at most `within`) until channel `k` carries a tone of `freq`
    /// Hz ([`tone_start`]) at or after `from` seconds of the recording; returns when it started
    /// (seconds of the recording). Panics naming `what` with the channel's last level and
    /// frequency otherwise.
    pub async fn wait_tone(&self, what: &str, k: usize, freq: f64, from: f64, within: Duration) -> f64 {
        let deadline = Instant::now() + within;
        loop {
            let samples = self.samples();
            if let Some(at) = tone_start(&samples, k, freq, from) {
                return at;
            }
            if Instant::now() >= deadline {
                let ch = channel(&samples, k);
                let tail = &ch[ch.len().saturating_sub(RATE as usize / 2)..];
                panic!(
                    "waited {within:?} for {what}: channel {k} never carried {freq} Hz; its last 0.5 s: {:.1} dBFS, {:.0} Hz",
                    rms_db(tail),
                    frequency(tail)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether anything is recorded within `within` (polling).
    pub async fn records_within(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while self.seconds() == 0.0 {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Waits (polling, bounded) until at least `seconds` are recorded.
    pub async fn wait_until(&self, seconds: f64) {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds + 10.0);
        while self.seconds() < seconds {
            assert!(Instant::now() < deadline, "parecord recorded only {:.2} s of {seconds} s", self.seconds());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until `seconds` are recorded, stops, returns the interleaved samples.
    pub async fn finish_after(mut self, seconds: f64) -> Vec<f32> {
        self.wait_until(seconds).await;
        let _ = self.child.kill();
        let _ = self.child.wait();
        let bytes = std::fs::read(&self.path).expect("recording");
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `seconds` of every channel of `source`.
pub async fn record(pulse: &dyn SoundServer, source: &str, seconds: f64) -> Vec<f32> {
    // Now and then a new parecord gets no data at all from pipewire-pulse (twice in about forty
    // runs of the media test that rebuilds the card's pipeline, the same with an older bridged):
    // a recorder silent for RECORDER_START is started again once, and says so; a sound server
    // that stays silent still fails the test.
    let recording = Recording::start(pulse, source);
    if recording.records_within(RECORDER_START).await {
        return recording.finish_after(seconds).await;
    }
    eprintln!("parecord of {source} recorded nothing in {RECORDER_START:?}: starting it again");
    drop(recording);
    Recording::start(pulse, source).finish_after(seconds).await
}

/// How long a recorder may take to deliver its first samples.
const RECORDER_START: Duration = Duration::from_secs(3);

/// `gst-launch-1.0 -q PIPELINE` (elements separated by whitespace, none with a space inside) on
/// `pulse`'s sound server (PipeWire's own socket too, for pipewiresrc/pipewiresink); kill the
/// child to stop it.
pub fn gst_launch(pulse: &dyn SoundServer, pipeline: &str) -> Child {
    Command::new("gst-launch-1.0")
        .arg("-q")
        .args(pipeline.split_whitespace())
        .envs(pulse.client_env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("gst-launch-1.0 (gstreamer1.0-tools)")
}

/// A tick of 20 ms (1 kHz) every 300 ms, as a live GStreamer source for [`Tone::source`].
pub const TICKS: &str =
    "audiotestsrc wave=ticks freq=1000 sine-periods-per-tick=20 tick-interval=300000000 is-live=true";

/// `CLOCK_REALTIME` now, ns since the epoch.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128)
}

/// Channel `in_channel` of `card_in.monitor` and `out_channel` of `card_out.monitor` recorded
/// side by side (2 channels, F32LE) in ONE GStreamer pipeline: one clock, so the two are aligned
/// by timestamp and a tick's latency is its onset on the output minus its onset on the input.
/// Start it before what it measures: a new reader of a null sink's monitor re-times that sink.
#[derive(Debug)]
pub struct TickRecorder {
    child: Child,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TickRecorder {
    pub fn start(pulse: &dyn SoundServer, in_channel: usize, out_channel: usize) -> TickRecorder {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("both.raw");
        let pick = |k: usize| {
            let row: Vec<String> =
                (0..CHANNELS).map(|c| format!("(float){}", if c == k { "1.0" } else { "0.0" })).collect();
            format!("mix-matrix=<<{}>>", row.join(","))
        };
        let card = format!("audio/x-raw,format=F32LE,channels=8,rate={RATE},channel-mask=(bitmask)0xc3f");
        let mono = format!("audio/x-raw,format=F32LE,channels=1,rate={RATE},channel-mask=(bitmask)0x0");
        let branch = |source: &str, k: usize| {
            format!(
                "pulsesrc device={source} buffer-time=20000 latency-time=10000 provide-clock=false ! {card} ! audioconvert {} ! {mono} ! queue ! mix.",
                pick(k)
            )
        };
        let pipeline = format!(
            "audiointerleave name=mix latency=50000000 ! audio/x-raw,format=F32LE,channels=2 ! filesink location={} {} {}",
            path.display(),
            branch("card_in.monitor", in_channel),
            branch("card_out.monitor", out_channel)
        );
        TickRecorder { child: gst_launch(pulse, &pipeline), path, _dir: dir }
    }

    /// Plays [`TICKS`] into channel 0 of `card_in` for `length`, lets the last ones through,
    /// stops the recording and returns each input tick's latency in ms (None: not heard within
    /// 250 ms on the output).
    pub async fn ticks_through(mut self, pulse: &dyn SoundServer, length: Duration) -> Vec<Option<f64>> {
        let ticks = Tone::source(pulse, "card_in", &[0], TICKS);
        tokio::time::sleep(length).await; // the measurement's length
        drop(ticks);
        tokio::time::sleep(Duration::from_millis(500)).await; // the last ticks through
        let _ = self.child.kill();
        let _ = self.child.wait();
        let bytes = std::fs::read(&self.path).expect("recording");
        let samples: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        let input: Vec<f32> = samples.iter().step_by(2).copied().collect();
        let output: Vec<f32> = samples.iter().skip(1).step_by(2).copied().collect();
        tick_latencies(&input, &output)
    }
}

impl Drop for TickRecorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
