//! What tests measure on recorded sound: levels (RMS, one tone's), frequency, dropouts and
//! breaks, where a tone starts, and the onsets and latencies of ticks.

use super::{CHANNELS, LOUD_DB, RATE};

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
