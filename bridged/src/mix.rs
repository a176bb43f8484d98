//! The card's local matrix, sample by sample: what each output channel plays and what each
//! group sends to its room, from one block of the card's input and the rooms' mixes. No
//! GStreamer here: the card side (`pipeline.rs`) calls [`Routing::mix`] once per captured
//! block, and the tests call it on arrays.
//!
//! A server audio user's output plays its group minus itself: the room's mix (the remote crew:
//! AudioBridge leaves the card's own contribution out) plus the inputs of the group's other
//! server users. A group sends the sum of its users' inputs, and each of its outputs plays that
//! sum less the user's own input (N−1 mixing, as a hardware matrix does it): one sum per group and
//! a subtraction per user, not a sum per user. Every output and every send goes through a
//! [`Limiter`]: a sum that would clip is turned down, never wrapped.

use std::collections::VecDeque;

use partyline_shared::bridge::Plan;

/// The card's channels, each way.
pub const CHANNELS: usize = partyline_shared::config::CHANNELS;

/// The limiters' ceiling: −1 dBFS, the headroom a lossy encoder's overshoot needs.
pub const CEILING: f32 = 0.891;

/// How fast a limiter lets the gain back up after a peak (time constant).
const RELEASE_SECONDS: f32 = 0.05;
/// The sign bit of an `f32`.
const SIGN: u32 = 1 << 31;
/// A limiter's gain above this is unity (−0.0009 dB): [`limit`].
const UNITY: f32 = 0.9999;

/// One server audio user's place in the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    /// The output channel the user's mix plays on.
    output: Option<usize>,
    /// The user's group (an index into the plan's groups).
    group: usize,
    /// The user's own input channel: in its group's sum, and taken out of what it hears.
    input: usize,
}

/// The matrix of one plan: built once per plan and swapped whole between two blocks, so a
/// block is mixed entirely by the old routing or entirely by the new one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routing {
    routes: Vec<Route>,
    /// Per group (the plan's order): the input channels of its server users.
    sends: Vec<Vec<usize>>,
}

impl Routing {
    /// The routing of a valid plan (every user's room is one of its groups; users of a room
    /// missing from the groups are left out).
    pub fn new(plan: &Plan) -> Routing {
        let group_of = |room: &str| plan.groups.iter().position(|g| g.room == room);
        let mut sends = vec![Vec::new(); plan.groups.len()];
        for user in &plan.users {
            if let Some(group) = group_of(&user.room) {
                sends[group].push(usize::from(user.input_channel));
            }
        }
        let routes = plan
            .users
            .iter()
            .filter_map(|user| {
                Some(Route {
                    output: user.output_channel.map(usize::from),
                    group: group_of(&user.room)?,
                    input: usize::from(user.input_channel),
                })
            })
            .collect();
        Routing { routes, sends }
    }

    /// How many groups send and receive.
    #[cfg(test)]
    pub fn groups(&self) -> usize {
        self.sends.len()
    }

    /// Mixes one block of `frames` frames. `input` and `output` are the card's interleaved
    /// channels; `remote[g]` is group g's room mix and `sends[g]` gets group g's send (both mono,
    /// `frames` long). Nothing is limited here: see [`Limiter`].
    ///
    /// An output's own input is taken back out of its group's sum: in floating point that
    /// leaves at most a rounding of the sum, some 140 dB under the loudest input, where a
    /// 24-bit card's own noise is.
    pub fn mix(&self, input: &[f32], remote: &[Vec<f32>], output: &mut [f32], sends: &mut [Vec<f32>]) {
        output.fill(0.0);
        for (group, channels) in self.sends.iter().enumerate() {
            let gains = gains(channels);
            let send = &mut sends[group];
            send.clear();
            send.extend(input.chunks_exact(CHANNELS).map(|frame| weighted_sum(frame, &gains)));
        }
        for route in &self.routes {
            let Some(out) = route.output else { continue };
            let frames = input.chunks_exact(CHANNELS).zip(output.chunks_exact_mut(CHANNELS));
            let group = remote[route.group].iter().zip(&sends[route.group]);
            for ((frame, played), (remote, sum)) in frames.zip(group) {
                played[out] += remote + (sum - frame[route.input]);
            }
        }
    }
}

/// `channels` as a gain per input channel (how many times each is in it): a sum over
/// `channels` is then a sum of fixed length without indexing, which the compiler vectorises
/// (the mix runs in the card's real-time thread).
fn gains(channels: &[usize]) -> [f32; CHANNELS] {
    let mut gains = [0.0; CHANNELS];
    for &channel in channels {
        gains[channel] += 1.0;
    }
    gains
}

fn weighted_sum(frame: &[f32], gains: &[f32; CHANNELS]) -> f32 {
    frame.iter().zip(gains).map(|(sample, gain)| sample * gain).sum()
}

/// Peak limiters for the `N` channels of an interleaved signal, a gain per channel: instant
/// attack (no sample ever leaves above [`CEILING`]), smooth release. Below the ceiling each
/// leaves its channel untouched once its gain has recovered.
#[derive(Debug, Clone)]
pub struct Limiter<const N: usize> {
    gains: [f32; N],
    release: f32,
}

impl<const N: usize> Limiter<N> {
    pub fn new(rate: u32) -> Limiter<N> {
        #[allow(clippy::cast_precision_loss, reason = "a sampling rate is far below 2^24")]
        let release = 1.0 - (-1.0 / (RELEASE_SECONDS * rate as f32)).exp();
        Limiter { gains: [1.0; N], release }
    }

    /// Limits a block of interleaved frames in place.
    pub fn run(&mut self, block: &mut [f32]) {
        // At unity, a block under the ceiling passes unchanged and leaves every gain at unity:
        // the usual case, checked in one pass that needs no gain. (A float's magnitude orders
        // as its bits without the sign: a maximum of integers, which the compiler takes many
        // at a time.)
        let loudest = block.iter().fold(0, |loudest, s| loudest.max(s.to_bits() & !SIGN));
        if self.gains.iter().all(|gain| *gain == 1.0) && loudest <= CEILING.to_bits() {
            return;
        }
        // A frame at a time: the channels' gains are independent, so their steps run side by
        // side rather than one channel's whole block after another.
        for frame in block.chunks_exact_mut(N) {
            for (sample, gain) in frame.iter_mut().zip(&mut self.gains) {
                *sample = limit(*sample, gain, self.release);
            }
        }
    }
}

/// One sample through a limiter whose gain is `gain`.
fn limit(sample: f32, gain: &mut f32, release: f32) -> f32 {
    let peak = sample.abs();
    let needed = if peak > CEILING { CEILING / peak } else { 1.0 };
    let recovered = *gain + (1.0 - *gain) * release;
    // The release's steps shrink with the distance to unity until they round to nothing, some
    // 7e-5 short of it: close enough is unity, or every sample after the first peak would be
    // scaled by 0.99993 for good.
    *gain = if recovered > UNITY { 1.0 } else { recovered }.min(needed);
    // The clamp only catches the last bit of rounding of `CEILING / peak * sample`.
    (sample * *gain).clamp(-CEILING, CEILING)
}

/// A queue between two paces: the room's mix on its way to the card (written in the decoder's
/// 20 ms frames at the network's pace, read in the card's blocks), and the mix on its way to the
/// playback (written as the capture hands over its blocks, sometimes in bursts, read as the
/// playback has room).
///
/// It starts playing once `start` samples are queued, plays silence and starts over on an
/// underrun. It keeps what bursts need and a margin more: when the lowest level seen over a
/// window of `window` reads stayed above the margin, the excess is dropped, so the latency
/// settles at the largest burst plus the margin whatever level the start left, and follows
/// drifting clocks. The margin adapts: each underrun adds `margin` to it (up to
/// [`MARGIN_GROWTH_LIMIT`] times), and every [`CALM_WINDOWS`] windows without one take that back
/// off. So a quiet machine keeps the latency low, and a busy one pays a little latency instead of
/// a glitch after every hiccup. Above `limit` it is cut back to its start level at once.
#[derive(Debug)]
pub struct Jitter {
    queued: VecDeque<f32>,
    playing: bool,
    shape: JitterShape,
    /// The margin in force: `shape.margin` times 1..=[`MARGIN_GROWTH_LIMIT`].
    margin: usize,
    reads: usize,
    lowest: usize,
    calm_windows: usize,
    /// What it did to its stream so far.
    pub glitches: Glitches,
    /// `glitches` when [`Jitter::glitches_since_last_asked`] last answered.
    reported: Glitches,
}

/// What a [`Jitter`] did to its stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Glitches {
    /// Times it ran dry (and played silence).
    pub underruns: u64,
    /// Samples dropped because the queue went over its limit.
    pub overflowed: u64,
    /// Samples dropped to bring the level back to the margin: the start's excess, and what a
    /// faster writer adds. Not a fault, but audible if it falls in speech.
    pub trimmed: u64,
}

/// How many times its base margin a [`Jitter`]'s margin may grow to.
pub const MARGIN_GROWTH_LIMIT: usize = 6;
/// Windows without an underrun after which a grown margin shrinks by one step.
pub const CALM_WINDOWS: usize = 10;

/// A [`Jitter`]'s levels, in samples, and its window, in reads.
#[derive(Debug, Clone, Copy)]
pub struct JitterShape {
    pub start: usize,
    pub margin: usize,
    pub limit: usize,
    pub window: usize,
}

impl Jitter {
    pub fn new(shape: JitterShape) -> Jitter {
        Jitter {
            queued: VecDeque::with_capacity(shape.limit),
            playing: false,
            shape,
            margin: shape.margin,
            reads: 0,
            lowest: usize::MAX,
            calm_windows: 0,
            glitches: Glitches::default(),
            reported: Glitches::default(),
        }
    }

    /// What happened since the last call.
    pub fn glitches_since_last_asked(&mut self) -> Glitches {
        let (now, before) = (self.glitches, self.reported);
        self.reported = now;
        Glitches {
            underruns: now.underruns - before.underruns,
            overflowed: now.overflowed - before.overflowed,
            trimmed: now.trimmed - before.trimmed,
        }
    }

    /// The level it starts playing at: its start, plus what the margin has grown by.
    fn start_level(&self) -> usize {
        self.shape.start + self.margin - self.shape.margin
    }

    pub fn push(&mut self, samples: &[f32]) {
        self.queued.extend(samples);
        if self.queued.len() > self.shape.limit {
            let excess = self.queued.len() - self.start_level().min(self.shape.limit);
            self.queued.drain(..excess);
            self.glitches.overflowed += excess as u64;
        }
    }

    /// Fills `out` (silence for what is missing).
    pub fn pull(&mut self, out: &mut [f32]) {
        if !self.playing && self.queued.len() >= self.start_level() {
            self.playing = true;
        }
        let take = if self.playing { out.len().min(self.queued.len()) } else { 0 };
        let (front, back) = self.queued.as_slices();
        let from_front = take.min(front.len());
        out[..from_front].copy_from_slice(&front[..from_front]);
        out[from_front..take].copy_from_slice(&back[..take - from_front]);
        self.queued.drain(..take);
        out[take..].fill(0.0);
        if !self.playing {
            return;
        }
        if take < out.len() {
            self.playing = false;
            self.glitches.underruns += 1;
            self.margin = (self.margin + self.shape.margin).min(self.shape.margin * MARGIN_GROWTH_LIMIT);
            (self.reads, self.lowest, self.calm_windows) = (0, usize::MAX, 0);
            return;
        }
        self.lowest = self.lowest.min(self.queued.len());
        self.reads += 1;
        if self.reads >= self.shape.window {
            self.calm_windows += 1;
            if self.calm_windows >= CALM_WINDOWS && self.margin > self.shape.margin {
                self.margin -= self.shape.margin;
                self.calm_windows = 0;
            }
            let excess = self.lowest.saturating_sub(self.margin);
            if excess > 0 {
                self.queued.drain(..excess);
                self.glitches.trimmed += excess as u64;
            }
            (self.reads, self.lowest) = (0, usize::MAX);
        }
    }

    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.queued.len()
    }
}

/// Levels of the card's channels over a period: RMS in dBFS, −100 for silence.
#[derive(Debug)]
pub struct Meter {
    squares: [f64; CHANNELS],
    frames: usize,
    period: usize,
}

impl Meter {
    /// A level every `period` frames.
    pub fn new(period: usize) -> Meter {
        Meter { squares: [0.0; CHANNELS], frames: 0, period: period.max(1) }
    }

    /// Adds an interleaved block; the levels when a period is complete.
    pub fn add(&mut self, block: &[f32]) -> Option<[f64; CHANNELS]> {
        for frame in block.chunks_exact(CHANNELS) {
            for (square, sample) in self.squares.iter_mut().zip(frame) {
                *square += f64::from(*sample) * f64::from(*sample);
            }
        }
        self.frames += block.len() / CHANNELS;
        if self.frames < self.period {
            return None;
        }
        #[allow(clippy::cast_precision_loss, reason = "a period is a few thousand frames")]
        let frames = self.frames as f64;
        let levels = self.squares.map(|square| {
            let rms = (square / frames).sqrt();
            if rms > 1e-5 { 20.0 * rms.log10() } else { -100.0 }
        });
        (self.squares, self.frames) = ([0.0; CHANNELS], 0);
        Some(levels)
    }
}

/// Voice activity of one mono signal, decided as AudioBridge decides it from a participant's
/// RFC 6464 levels: the level of each 20 ms packet in dBov (0 loudest, 127 silence), averaged
/// over `window` packets; talking while that average is under `threshold`.
#[derive(Debug)]
pub struct VoiceActivity {
    packet: usize,
    squares: f64,
    frames: usize,
    window: u32,
    threshold: u32,
    levels: u32,
    packets: u32,
    talking: bool,
}

impl VoiceActivity {
    pub fn new(rate: u32, window: u32, threshold: u32) -> VoiceActivity {
        VoiceActivity {
            packet: rate as usize / 50,
            squares: 0.0,
            frames: 0,
            window: window.max(1),
            threshold,
            levels: 0,
            packets: 0,
            talking: false,
        }
    }

    /// Adds samples; the new state when it changed.
    pub fn add(&mut self, samples: &[f32]) -> Option<bool> {
        let mut changed = None;
        for &sample in samples {
            self.squares += f64::from(sample) * f64::from(sample);
            self.frames += 1;
            if self.frames == self.packet {
                changed = self.packet_done().or(changed);
            }
        }
        changed
    }

    fn packet_done(&mut self) -> Option<bool> {
        #[allow(clippy::cast_precision_loss, reason = "a packet is a few hundred frames")]
        let rms = (self.squares / self.frames as f64).sqrt();
        (self.squares, self.frames) = (0.0, 0);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to 0..=127")]
        let dbov = if rms > 0.0 { (-20.0 * rms.log10()).round().clamp(0.0, 127.0) as u32 } else { 127 };
        self.levels += dbov;
        self.packets += 1;
        if self.packets < self.window {
            return None;
        }
        let talking = self.levels / self.packets < self.threshold;
        (self.levels, self.packets) = (0, 0);
        (talking != self.talking).then(|| {
            self.talking = talking;
            talking
        })
    }
}

#[cfg(test)]
mod tests {
    use partyline_shared::bridge::{PlanGroup, PlanUser};

    use super::*;

    fn user(name: &str, room: &str, input: u8, output: Option<u8>) -> PlanUser {
        PlanUser { name: name.into(), room: room.into(), input_channel: input, output_channel: output }
    }

    fn plan(rooms: &[&str], users: Vec<PlanUser>) -> Plan {
        let groups = rooms.iter().map(|room| PlanGroup { room: (*room).into(), ..PlanGroup::default() }).collect();
        Plan { groups, users, ..Plan::default() }
    }

    /// One frame per test case: input channel k carries `inputs[k]`.
    fn mix_one(routing: &Routing, inputs: [f32; CHANNELS], remote: &[f32]) -> ([f32; CHANNELS], Vec<f32>) {
        let remote: Vec<Vec<f32>> = remote.iter().map(|r| vec![*r]).collect();
        let mut output = [0.0; CHANNELS];
        let mut sends = vec![Vec::new(); routing.groups()];
        routing.mix(&inputs, &remote, &mut output, &mut sends);
        (output, sends.into_iter().map(|s| s[0]).collect())
    }

    /// Each case: the plan, the inputs (distinct powers of two, so every sum says who is in
    /// it), the rooms' mixes, and the outputs and sends expected.
    #[test]
    fn each_output_hears_its_group_minus_itself() {
        let inputs = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];
        #[allow(clippy::type_complexity, reason = "a table of cases")]
        let cases: Vec<(&str, Plan, Vec<f32>, [f32; CHANNELS], Vec<f32>)> = vec![
            (
                "A (0→0) and B (1→1) in X: each hears the other and the room, never itself",
                plan(&["x"], vec![user("a", "x", 0, Some(0)), user("b", "x", 1, Some(1))]),
                vec![1000.0],
                [1002.0, 1001.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                vec![3.0],
            ),
            (
                "a user alone in its group hears only the room",
                plan(&["x"], vec![user("a", "x", 3, Some(5))]),
                vec![1000.0],
                [0.0, 0.0, 0.0, 0.0, 0.0, 1000.0, 0.0, 0.0],
                vec![8.0],
            ),
            (
                "two groups never hear each other; each room reaches only its own users",
                plan(
                    &["x", "z"],
                    vec![user("a", "x", 0, Some(0)), user("b", "x", 1, Some(1)), user("d", "z", 4, Some(4))],
                ),
                vec![1000.0, 2000.0],
                [1002.0, 1001.0, 0.0, 0.0, 2000.0, 0.0, 0.0, 0.0],
                vec![3.0, 16.0],
            ),
            (
                "a user without output still talks into its group",
                plan(&["x"], vec![user("a", "x", 0, None), user("b", "x", 1, Some(7))]),
                vec![0.0],
                [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
                vec![3.0],
            ),
            (
                "eight users in one group: each output is the seven others",
                plan(&["x"], (0..8).map(|k| user(&format!("u{k}"), "x", k, Some(k))).collect()),
                vec![0.0],
                inputs.map(|own| 255.0 - own),
                vec![255.0],
            ),
            (
                "two users on one output channel: their two mixes add up",
                plan(&["x"], vec![user("a", "x", 0, Some(2)), user("b", "x", 1, Some(2))]),
                vec![0.0],
                [0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                vec![3.0],
            ),
        ];
        for (what, plan, remote, outputs, sends) in cases {
            let (got_outputs, got_sends) = mix_one(&Routing::new(&plan), inputs, &remote);
            assert_eq!(got_outputs, outputs, "{what}: outputs");
            assert_eq!(got_sends, sends, "{what}: sends");
        }
    }

    #[test]
    fn eight_groups_of_one_each_hear_their_own_room_only() {
        let rooms: Vec<String> = (0..8).map(|k| format!("g{k}")).collect();
        let rooms: Vec<&str> = rooms.iter().map(String::as_str).collect();
        let users = (0..8).map(|k| user(&format!("u{k}"), rooms[usize::from(k)], k, Some(7 - k))).collect();
        let routing = Routing::new(&plan(&rooms, users));
        let remote: Vec<f32> = (0..8u8).map(|k| 100.0 * f32::from(k + 1)).collect();
        let inputs = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];
        let (outputs, sends) = mix_one(&routing, inputs, &remote);
        assert_eq!(outputs, [800.0, 700.0, 600.0, 500.0, 400.0, 300.0, 200.0, 100.0]);
        assert_eq!(sends, inputs.to_vec());
    }

    /// Two full-scale inputs summed: 2.0 unlimited, which as 16-bit would wrap to the other
    /// rail; limited, no sample above the ceiling and the waveform's shape kept.
    #[test]
    fn a_sum_that_would_clip_is_limited_not_wrapped() {
        let rate = 48_000;
        let routing = Routing::new(&plan(
            &["x"],
            vec![user("a", "x", 0, None), user("b", "x", 1, None), user("c", "x", 2, Some(2))],
        ));
        let frames = 4_800;
        let mut input = vec![0.0; frames * CHANNELS];
        for i in 0..frames {
            #[allow(clippy::cast_precision_loss, reason = "small sample indexes")]
            let tone = (2.0 * std::f32::consts::PI * 440.0 * i as f32 / rate as f32).sin();
            input[i * CHANNELS] = tone;
            input[i * CHANNELS + 1] = tone;
        }
        let mut output = vec![0.0; frames * CHANNELS];
        let mut sends = vec![Vec::new()];
        routing.mix(&input, &[vec![0.0; frames]], &mut output, &mut sends);
        let wrapped = output.iter().skip(2).step_by(CHANNELS).filter(|s| **s > 1.0).count();
        assert!(wrapped > 1_000, "the test must sum above full scale ({wrapped} samples)");
        Limiter::<CHANNELS>::new(rate).run(&mut output);
        Limiter::<1>::new(rate).run(&mut sends[0]);
        for (what, samples) in
            [("output", output.iter().skip(2).step_by(CHANNELS).copied().collect()), ("send", sends[0].clone())]
        {
            let samples: Vec<f32> = samples;
            let peak = samples.iter().fold(0.0_f32, |m, s| m.max(s.abs()));
            assert!(peak <= CEILING, "{what}: peak {peak}");
            // Still a 440 Hz tone near the ceiling, its sign never flipped by a wrap.
            let last: Vec<f32> = samples[frames / 2..].to_vec();
            let flipped = last
                .iter()
                .enumerate()
                .filter(|(i, s)| {
                    let original = input[(frames / 2 + i) * CHANNELS];
                    original.abs() > 0.1 && s.signum() != original.signum()
                })
                .count();
            assert_eq!(flipped, 0, "{what}: samples of the wrong sign");
            let loud = last.iter().filter(|s| s.abs() > 0.7).count();
            assert!(loud > last.len() / 4, "{what}: the limited tone should stay loud ({loud} loud samples)");
        }
    }

    #[test]
    fn a_quiet_signal_passes_the_limiter_untouched() {
        let mut limiter = Limiter::<1>::new(48_000);
        for k in 0..1_000 {
            let sample = if k % 2 == 0 { 0.5 } else { -0.5 };
            let mut block = [sample];
            limiter.run(&mut block);
            assert!((block[0] - sample).abs() < f32::EPSILON);
        }
    }

    #[test]
    fn after_a_peak_the_gain_returns_to_unity_and_a_quiet_signal_passes_bit_for_bit() {
        let mut limiter = Limiter::<1>::new(48_000);
        let mut peak = [4.0];
        limiter.run(&mut peak);
        assert!(peak[0] <= CEILING, "a peak 12 dB over full scale is limited");
        let quiet: Vec<f32> = (0..48_000).map(|k| if k % 2 == 0 { 0.5 } else { -0.5 }).collect();
        let mut limited = quiet.clone();
        limiter.run(&mut limited);
        assert!(limited[0].abs() < 0.5, "right after the peak the gain is still down");
        // Half a second on (ten release time constants), the samples are the input's own.
        let pairs = limited.iter().zip(&quiet).skip(24_000);
        let changed: Vec<(f32, f32)> =
            pairs.filter(|(out, in_)| out.to_bits() != in_.to_bits()).map(|(o, i)| (*o, *i)).collect();
        assert!(changed.is_empty(), "{} samples changed, the first {:?} (out, in)", changed.len(), changed.first());
    }

    /// 20 ms frames in, 10 ms blocks out, at 48 kHz; a window of a second.
    fn network_to_card() -> (Jitter, usize, usize) {
        let (frame, block) = (960, 480);
        let shape = JitterShape { start: frame + block, margin: block, limit: 10 * frame, window: 100 };
        (Jitter::new(shape), frame, block)
    }

    #[test]
    fn a_queue_starts_once_a_frame_and_a_block_are_in_and_survives_both_paces() {
        let (mut jitter, frame, block) = network_to_card();
        let mut out = vec![0.0; block];
        jitter.push(&vec![0.5; frame]);
        jitter.pull(&mut out);
        assert!(out.iter().all(|s| *s == 0.0), "not started before a frame and a block are queued");
        jitter.push(&vec![0.5; frame]);
        // Steady: a frame every two blocks, never an underrun.
        for n in 0..1_000 {
            jitter.pull(&mut out);
            assert!(out.iter().all(|s| *s == 0.5), "block {n}");
            if n % 2 == 1 {
                jitter.push(&vec![0.5; frame]);
            }
        }
        assert_eq!(jitter.glitches.underruns, 0);
        // The network stalls: silence, one underrun, then it starts over.
        let queued = jitter.queued();
        for _ in 0..=queued / block {
            jitter.pull(&mut out);
        }
        assert_eq!(jitter.glitches.underruns, 1);
        // A burst far past the limit: the oldest go at once, down to its start level (which
        // the underrun raised by a step).
        jitter.push(&vec![0.25; 20 * frame]);
        assert_eq!(jitter.queued(), frame + block + block);
    }

    /// Whatever level a start or a burst left, the queue settles at what the pace needs: the
    /// lowest level over a window is trimmed to the margin.
    #[test]
    fn a_queue_keeps_what_bursts_need_and_no_more() {
        let (mut jitter, frame, block) = network_to_card();
        let mut out = vec![0.0; block];
        // 100 ms arrive at once, then the steady pace.
        jitter.push(&vec![0.5; 5 * frame]);
        let mut highest_after_settling = 0;
        for n in 0..600 {
            jitter.pull(&mut out);
            if n % 2 == 1 {
                jitter.push(&vec![0.5; frame]);
            }
            if n > 300 {
                highest_after_settling = highest_after_settling.max(jitter.queued());
            }
        }
        assert_eq!(jitter.glitches.underruns, 0);
        assert!(jitter.glitches.trimmed > 0, "the excess of the burst is dropped");
        // A frame comes every two reads: the level swings by a frame above the margin.
        assert!(highest_after_settling <= block + frame, "settled at {highest_after_settling} samples");
    }

    /// Each underrun grows the margin one step (a hiccup of a busy machine is not met twice with
    /// the same margin); calm windows shrink it back.
    #[test]
    fn the_margin_grows_with_underruns_and_shrinks_when_calm() {
        let (mut jitter, frame, block) = network_to_card();
        let mut out = vec![0.0; block];
        let steady = |jitter: &mut Jitter, out: &mut Vec<f32>, reads: usize| {
            for n in 0..reads {
                jitter.pull(out);
                if n % 2 == 1 {
                    jitter.push(&vec![0.5; frame]);
                }
            }
        };
        jitter.push(&vec![0.5; 2 * frame]);
        steady(&mut jitter, &mut out, 400);
        let settled = jitter.queued();
        // Two stalls of the network: two underruns, each restarting a step higher.
        for _ in 0..2 {
            while jitter.queued() > 0 {
                jitter.pull(&mut out);
            }
            jitter.pull(&mut out);
            jitter.push(&vec![0.5; 4 * frame]);
            steady(&mut jitter, &mut out, 400);
        }
        assert_eq!(jitter.glitches.underruns, 2);
        assert_eq!(jitter.margin, 3 * block, "two steps up");
        assert!(jitter.queued() > settled, "it keeps more now: {} > {settled}", jitter.queued());
        // Calm: back down, a step per CALM_WINDOWS windows.
        steady(&mut jitter, &mut out, 2 * CALM_WINDOWS * 100 + 10);
        assert_eq!(jitter.margin, block, "back to its base");
    }

    #[test]
    fn levels_per_channel() {
        let mut meter = Meter::new(480);
        let mut block = vec![0.0; 480 * CHANNELS];
        for frame in block.chunks_exact_mut(CHANNELS) {
            frame[3] = 0.5;
        }
        let levels = meter.add(&block).expect("a period");
        assert!((levels[3] - 20.0 * 0.5_f64.log10()).abs() < 0.01, "{levels:?}");
        assert_eq!(levels[0], -100.0);
        assert!(meter.add(&block[..CHANNELS * 100]).is_none(), "a period is not complete");
    }

    fn tone(amplitude: f32, frames: usize) -> Vec<f32> {
        (0..frames).map(|i| amplitude * (i as f32 * 0.0654).sin()).collect()
    }

    /// AudioBridge's rule: the average of 10 packet levels under 40 dBov. A −20 dBFS tone talks
    /// after one window (200 ms), silence stops it a window later, a −50 dBFS tone never talks,
    /// and only changes are reported, whatever the block size.
    #[test]
    fn talks_over_a_window_of_loud_packets_and_stops_after_a_quiet_one() {
        let mut voice = VoiceActivity::new(48_000, 10, 40);
        let changes = |voice: &mut VoiceActivity, samples: &[f32]| -> Vec<bool> {
            samples.chunks(256).filter_map(|block| voice.add(block)).collect()
        };
        assert_eq!(changes(&mut voice, &tone(0.1, 9 * 960)), Vec::<bool>::new(), "not before a whole window");
        assert_eq!(changes(&mut voice, &tone(0.1, 960)), [true]);
        assert_eq!(changes(&mut voice, &tone(0.1, 20 * 960)), Vec::<bool>::new(), "still talking: no news");
        assert_eq!(changes(&mut voice, &vec![0.0; 10 * 960]), [false]);
        assert_eq!(changes(&mut voice, &tone(0.003, 30 * 960)), Vec::<bool>::new(), "−50 dBFS is not talk");
    }
}
