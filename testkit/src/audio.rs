//! Sound on the test card: a sine played into one channel of a null sink, a recording of every
//! channel of a source, and what tests measure on it (level, frequency, longest dropout).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::sound_server::{CARD_MAP, SoundServer};

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

/// Channel `k` of interleaved 8-channel samples.
pub fn channel(samples: &[f32], k: usize) -> Vec<f32> {
    samples.iter().skip(k).step_by(CHANNELS).copied().collect()
}

/// RMS level in dBFS (-100 for silence or nothing).
pub fn rms_db(x: &[f32]) -> f64 {
    if x.is_empty() {
        return -100.0;
    }
    let power = x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len() as f64;
    (10.0 * power.log10()).max(-100.0)
}

/// The RMS level (dBFS) of the component of `x` at `freq` Hz alone, whatever else sounds beside
/// it: the median over 0.2 s windows (so that a glitch or two does not decide) of a Goertzel
/// filter over a Hann window. A sine of amplitude 0.5 reads −9 dBFS; tones 100 Hz apart do not
/// leak into each other's reading above −80 dB.
pub fn tone_db(x: &[f32], freq: f64) -> f64 {
    let window = RATE as usize / 5;
    if x.len() < window {
        return window_tone_db(x, freq);
    }
    let mut levels: Vec<f64> = x.chunks_exact(window).map(|w| window_tone_db(w, freq)).collect();
    levels.sort_by(f64::total_cmp);
    levels[levels.len() / 2]
}

fn window_tone_db(x: &[f32], freq: f64) -> f64 {
    if x.len() < 2 {
        return -100.0;
    }
    let n = x.len() as f64;
    let w = 2.0 * std::f64::consts::PI * freq / f64::from(RATE);
    let (mut s1, mut s2) = (0.0, 0.0);
    for (i, sample) in x.iter().enumerate() {
        let hann = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / (n - 1.0)).cos();
        let s0 = f64::from(*sample) * hann + 2.0 * w.cos() * s1 - s2;
        (s2, s1) = (s1, s0);
    }
    let power = s1 * s1 + s2 * s2 - 2.0 * w.cos() * s1 * s2;
    // The amplitude of the sine: |X| / (sum of the window / 2), the window's sum being n / 2.
    let amplitude = power.sqrt() / (n / 4.0);
    let rms = amplitude / std::f64::consts::SQRT_2;
    if rms > 1e-5 { 20.0 * rms.log10() } else { -100.0 }
}

/// Median over loud 20 ms windows of the zero-crossing frequency (a lost packet concealed by
/// the decoder does not bias it); 0 without a loud window.
pub fn frequency(x: &[f32]) -> f64 {
    let window = (RATE / 50) as usize;
    let mut estimates: Vec<f64> = x
        .chunks_exact(window)
        .filter(|w| rms_db(w) > LOUD_DB)
        .map(|w| w.windows(2).filter(|p| (p[0] < 0.0) != (p[1] < 0.0)).count() as f64 / 2.0 / 0.02)
        .collect();
    if estimates.is_empty() {
        return 0.0;
    }
    estimates.sort_by(f64::total_cmp);
    estimates[estimates.len() / 2]
}

/// Longest run (ms) of 5 ms windows under [`LOUD_DB`] between the first and the last loud window.
pub fn longest_dropout_ms(x: &[f32]) -> f64 {
    let window = (RATE / 200) as usize;
    let loud: Vec<bool> = x.chunks(window).map(|w| rms_db(w) > LOUD_DB).collect();
    let first = loud.iter().position(|l| *l).unwrap_or(loud.len());
    let last = loud.iter().rposition(|l| *l).unwrap_or(0);
    let (mut longest, mut run) = (0usize, 0usize);
    for l in loud.iter().take(last + 1).skip(first) {
        run = if *l { 0 } else { run + 1 };
        longest = longest.max(run);
    }
    longest as f64 * 5.0
}

/// The largest break in a pure tone of `freq` Hz: how far any sample is from what the two
/// before it make of a sine (x[n] = 2 cos ω x[n−1] − x[n−2]). A sample dropped or repeated
/// breaks a tone of amplitude A by up to about A × ω (0.018 for 1 kHz at −20 dBFS); a whole
/// tone, resampled or not, by no more than its noise.
pub fn worst_break(x: &[f32], freq: f64) -> f64 {
    let recurrence = 2.0 * (2.0 * std::f64::consts::PI * freq / f64::from(RATE)).cos();
    x.windows(3).map(|w| (f64::from(w[2]) - recurrence * f64::from(w[1]) + f64::from(w[0])).abs()).fold(0.0, f64::max)
}

/// Every run of 5 ms windows under [`LOUD_DB`] between the first and the last loud window: its
/// start (seconds) and length (ms).
pub fn dropouts(x: &[f32]) -> Vec<(f64, f64)> {
    let window = (RATE / 200) as usize;
    let loud: Vec<bool> = x.chunks(window).map(|w| rms_db(w) > LOUD_DB).collect();
    let first = loud.iter().position(|l| *l).unwrap_or(loud.len());
    let last = loud.iter().rposition(|l| *l).unwrap_or(0);
    let mut runs = Vec::new();
    let mut start = None;
    for (i, l) in loud.iter().enumerate().take(last + 1).skip(first) {
        match (l, start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                runs.push((s as f64 * 0.005, (i - s) as f64 * 5.0));
                start = None;
            }
            _ => {}
        }
    }
    runs
}

/// The time (s) of the first loud 5 ms window, if any.
pub fn first_loud_s(x: &[f32]) -> Option<f64> {
    let window = (RATE / 200) as usize;
    x.chunks(window).position(|w| rms_db(w) > LOUD_DB).map(|i| i as f64 * 0.005)
}

/// Where (seconds, a multiple of 20 ms, at or after `from`) channel `k` of interleaved samples
/// starts carrying `freq` (± 30) Hz over -30 dBFS in every 20 ms window of 200 ms on end.
pub fn tone_start(samples: &[f32], k: usize, freq: f64, from: f64) -> Option<f64> {
    const SPAN: usize = 10;
    let ch = channel(samples, k);
    let window = (RATE / 50) as usize;
    let loud: Vec<bool> = ch.chunks_exact(window).map(|w| rms_db(w) > -30.0).collect();
    let first = (from / 0.02).ceil() as usize;
    (first..loud.len().saturating_sub(SPAN - 1))
        .find(|&i| {
            loud[i..i + SPAN].iter().all(|l| *l)
                && (frequency(&ch[i * window..(i + SPAN) * window]) - freq).abs() < 30.0
        })
        .map(|i| i as f64 * 0.02)
}

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

/// Each tick's latency in ms from `input` to `output` (two aligned mono signals): its onset on
/// the output minus its onset on the input; None for a tick not heard within 250 ms.
pub fn tick_latencies(input: &[f32], output: &[f32]) -> Vec<Option<f64>> {
    let heard = tick_onsets(output);
    tick_onsets(input)
        .iter()
        .map(|t| heard.iter().find(|o| **o >= *t && **o < t + 0.25).map(|o| (o - t) * 1000.0))
        .collect()
}

/// Onsets (s) of ticks in a mono signal: a 1 ms window over -30 dBFS after ≥ 100 ms of quiet.
pub fn tick_onsets(x: &[f32]) -> Vec<f64> {
    onsets_after_quiet(x, 100)
}

/// Onsets (s) in a mono signal: a 1 ms window over -30 dBFS after ≥ `quiet_ms` of quiet.
pub fn onsets_after_quiet(x: &[f32], quiet_ms: usize) -> Vec<f64> {
    let window = (RATE / 1000) as usize;
    let mut result = Vec::new();
    let mut quiet = quiet_ms;
    for (i, w) in x.chunks_exact(window).enumerate() {
        if rms_db(w) > -30.0 {
            if quiet >= quiet_ms {
                result.push(i as f64 / 1000.0);
            }
            quiet = 0;
        } else {
            quiet += 1;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_of_one_tone_among_others() {
        let sine = |freq: f64, amplitude: f64, i: usize| {
            (amplitude * (2.0 * std::f64::consts::PI * freq * i as f64 / f64::from(RATE)).sin()) as f32
        };
        let mut x: Vec<f32> = (0..RATE as usize).map(|i| sine(440.0, 0.5, i) + sine(500.0, 0.25, i)).collect();
        // A glitch: 10 ms missing in one window.
        x[1_000..1_480].fill(0.0);
        let (at_440, at_500, at_600) = (tone_db(&x, 440.0), tone_db(&x, 500.0), tone_db(&x, 600.0));
        assert!((at_440 - (-9.03)).abs() < 0.2, "440 Hz at {at_440:.2} dBFS");
        assert!((at_500 - (-15.05)).abs() < 0.2, "500 Hz at {at_500:.2} dBFS");
        assert!(at_600 < -80.0, "nothing at 600 Hz, read {at_600:.1} dBFS");
    }

    #[test]
    fn dropouts_are_found_with_their_place_and_length() {
        let mut x = vec![0.5_f32; RATE as usize];
        x[4_800..5_280].fill(0.0); // 10 ms at 0.1 s
        x[24_000..25_440].fill(0.0); // 30 ms at 0.5 s
        assert_eq!(dropouts(&x), [(0.1, 10.0), (0.5, 30.0)]);
        assert_eq!(longest_dropout_ms(&x), 30.0);
    }
}
