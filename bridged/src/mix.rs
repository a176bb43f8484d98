//! The card's local matrix, sample by sample: what each output channel plays and what each
//! group sends to its room, from one block of the card's input and the rooms' mixes. No
//! GStreamer here: the block callback (`card_mix.rs`) calls [`Routing::mix`] once per captured
//! block, and the tests call it on arrays.
//!
//! A server audio user's output plays its group minus itself: the room's mix (the remote crew:
//! AudioBridge leaves the card's own contribution out) plus the inputs of the group's other
//! server users. A group sends the sum of its users' inputs, and each of its outputs plays that
//! sum less the user's own input (N−1 mixing, as a hardware matrix does it): one sum per group and
//! a subtraction per user, not a sum per user. Every output and every send goes through a
//! [`Limiter`]: a sum that would clip is turned down, never wrapped.
//!
//! An IFB user's output plays its program (a card input, or a group's sound: the room's mix
//! and the group's inputs) instead, dipped by its [`Ducker`](crate::ifb::Ducker) while the
//! interrupt group talks, and that talk (the group's sound less the user's own input) over it.

use partyline_shared::bridge::{Plan, PlanIfb};

use crate::ifb::Duckers;

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
#[derive(Debug, Clone, PartialEq)]
struct Route {
    /// The output channel the user's mix plays on.
    output: Option<usize>,
    /// The user's group (an index into the plan's groups).
    group: usize,
    /// The user's own input channel: in its group's sum, and taken out of what it hears.
    input: usize,
    /// `Some`: the output is an IFB.
    ifb: Option<IfbRoute>,
}

/// An IFB output's sources (groups as indexes into the plan's groups).
#[derive(Debug, Clone, PartialEq)]
struct IfbRoute {
    program: Source,
    interrupt: usize,
    /// The program's gain while interrupted (0: cut).
    dim: f32,
}

/// Where an IFB's program comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Input(usize),
    Group(usize),
}

/// The matrix of one plan: built once per plan and swapped whole between two blocks, so a
/// block is mixed entirely by the old routing or entirely by the new one.
#[derive(Debug, Clone, Default, PartialEq)]
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
                    ifb: user.ifb.as_ref().and_then(|ifb| ifb_route(ifb, group_of)),
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
    pub fn mix(
        &self,
        input: &[f32],
        remote: &[Vec<f32>],
        output: &mut [f32],
        sends: &mut [Vec<f32>],
        duckers: &mut Duckers,
    ) {
        output.fill(0.0);
        for (group, channels) in self.sends.iter().enumerate() {
            let gains = gains(channels);
            let send = &mut sends[group];
            send.clear();
            send.extend(input.chunks_exact(CHANNELS).map(|frame| weighted_sum(frame, &gains)));
        }
        for route in &self.routes {
            let Some(out) = route.output else { continue };
            let sound = |group: usize, i: usize, frame: &[f32]| {
                let own = if group == route.group { frame[route.input] } else { 0.0 };
                remote[group][i] + (sends[group][i] - own)
            };
            let frames = input.chunks_exact(CHANNELS).zip(output.chunks_exact_mut(CHANNELS)).enumerate();
            match &route.ifb {
                None => {
                    for (i, (frame, played)) in frames {
                        played[out] += sound(route.group, i, frame);
                    }
                }
                Some(ifb) => {
                    let interrupt = input.chunks_exact(CHANNELS).enumerate().map(|(i, f)| sound(ifb.interrupt, i, f));
                    duckers.listen(out, interrupt);
                    for (i, (frame, played)) in frames {
                        let program = match ifb.program {
                            Source::Input(channel) => frame[channel],
                            Source::Group(group) => sound(group, i, frame),
                        };
                        played[out] += program * duckers.next_gain(out, ifb.dim) + sound(ifb.interrupt, i, frame);
                    }
                }
            }
        }
    }
}

/// An IFB's route, its groups looked up by `group_of` (`None` for a group not in the plan,
/// which a valid plan never has).
fn ifb_route(ifb: &PlanIfb, group_of: impl Fn(&str) -> Option<usize>) -> Option<IfbRoute> {
    let program = match ifb.program_channel {
        Some(channel) => Source::Input(usize::from(channel)),
        None => Source::Group(group_of(&ifb.program_room)?),
    };
    #[allow(clippy::cast_precision_loss, reason = "a dip of -60..0 dB")]
    let dim = ifb.dim_db.map_or(0.0, |db| 10f32.powf(db as f32 / 20.0));
    Some(IfbRoute { program, interrupt: group_of(&ifb.interrupt_room)?, dim })
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

#[cfg(test)]
mod tests {
    use partyline_shared::bridge::{PlanGroup, PlanUser};

    use super::*;

    fn user(name: &str, room: &str, input: u8, output: Option<u8>) -> PlanUser {
        PlanUser { name: name.into(), room: room.into(), input_channel: input, output_channel: output, ifb: None }
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
        routing.mix(&inputs, &remote, &mut output, &mut sends, &mut Duckers::new(48_000));
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

    /// The presenter P (input 0, output 2, group X) has an IFB interrupted by group D, whose
    /// server user speaks on input 3; S sends input 4 into the group Show. Each case holds its
    /// signals for 20 ms; what output 2 plays at the end (the dip has settled).
    #[test]
    fn an_ifb_plays_its_program_dipped_under_the_interrupt_s_talk() {
        let ifb = |program_channel: Option<u8>, program_room: &str, interrupt: &str, dim_db| {
            let ifb = PlanIfb {
                program_channel,
                program_room: program_room.into(),
                interrupt_room: interrupt.into(),
                dim_db,
            };
            let presenter = PlanUser { ifb: Some(ifb), ..user("p", "x", 0, Some(2)) };
            let users = vec![presenter, user("dir", "d", 3, Some(3)), user("s", "show", 4, None)];
            Routing::new(&plan(&["x", "d", "show"], users))
        };
        let from_input = ifb(Some(1), "", "d", Some(-20));
        let from_show = ifb(None, "show", "d", Some(-20));
        // (what, routing, inputs 0, 1, 3, 4, rooms X, D, Show, output 2)
        #[allow(clippy::type_complexity, reason = "a table of cases")]
        let cases: [(&str, &Routing, [f32; 4], [f32; 3], f32); 7] = [
            ("nobody talks on D: the program alone", &from_input, [0.3, 0.2, 0.0, 0.0], [0.0; 3], 0.2),
            ("D's card input talks: -20 dB under it", &from_input, [0.3, 0.2, 0.1, 0.0], [0.0; 3], 0.02 + 0.1),
            ("D's crew talks: the same", &from_input, [0.3, 0.2, 0.0, 0.0], [0.0, 0.1, 0.0], 0.02 + 0.1),
            ("X's own sound is never on an IFB", &from_input, [0.3, 0.2, 0.0, 0.0], [0.5, 0.0, 0.0], 0.2),
            ("the program from Show: its room and inputs", &from_show, [0.0, 0.0, 0.0, 0.2], [0.0, 0.0, 0.05], 0.25),
            ("Show dipped under D", &from_show, [0.0, 0.0, 0.1, 0.2], [0.0, 0.0, 0.05], 0.025 + 0.1),
            ("cut: D alone", &ifb(Some(1), "", "d", None), [0.3, 0.2, 0.1, 0.0], [0.0; 3], 0.1),
        ];
        let frames = 960;
        for (what, routing, [own, program, director, show], rooms, expected) in cases {
            let frame = [own, program, 0.0, director, show, 0.0, 0.0, 0.0];
            let input: Vec<f32> = frame.iter().copied().cycle().take(frames * CHANNELS).collect();
            let remote: Vec<Vec<f32>> = rooms.iter().map(|r| vec![*r; frames]).collect();
            let mut output = vec![0.0; frames * CHANNELS];
            let mut sends = vec![Vec::new(); 3];
            routing.mix(&input, &remote, &mut output, &mut sends, &mut Duckers::new(48_000));
            let played = output[(frames - 1) * CHANNELS + 2];
            assert!((played - expected).abs() < 1e-5, "{what}: {played}, not {expected}");
        }
        // The presenter whose own group interrupts: its own input stays out of what it hears.
        let own_group = ifb(Some(1), "", "x", Some(-20));
        let (outputs, _) = mix_one(&own_group, [0.3, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], &[0.0, 0.0, 0.0]);
        assert!((outputs[2] - 0.2).abs() < 1e-6, "its own voice interrupted it: {}", outputs[2]);
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
        routing.mix(&input, &[vec![0.0; frames]], &mut output, &mut sends, &mut Duckers::new(rate));
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
}
