//! The media tests themselves (the harness is media.rs): each runs the card, Janus and bridged
//! whole and measures tones crossing them, so `scripts/test` runs them one at a time.

use super::*;

/// A (input 0, output 0) and B (input 1, output 1) in group X, a 1000 Hz tone on input 0 and
/// 600 Hz on input 1: each output plays the other's input, never its own; a crew member in the
/// room (440 Hz) is heard on both outputs and hears both inputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_output_hears_its_group_minus_itself_and_the_remote_crew() {
    require_namespace();
    let pulse = test_card();
    for sink in ["card_in", "card_out", "crew_in", "crew_out"] {
        pulse.add_card(sink, RATE);
    }
    let (janus, _bus, bridged, proxy) = media_stack(&pulse, &["x"]).await;
    let _a_talks = Tone::play(&pulse, "card_in", 0, 1000);
    let _b_talks = Tone::play(&pulse, "card_in", 1, 600);
    let users = vec![user("a", "x", 0, Some(0)), user("b", "x", 1, Some(1))];
    let took = apply_and_wait(&proxy, &plan(&janus, &["x"], users), "the group's participant joined").await;
    println!("BENCH first plan (card side + 1 participant) Apply -> joined (media up): {} ms", took.as_millis());

    let samples = record_once(&pulse, "card_out", &bridged, "A's tone on output 1", |s| {
        tone_db(&channel(s, 1), 1000.0) > PRESENT_DB && tone_db(&channel(s, 0), 600.0) > PRESENT_DB
    })
    .await;
    assert_tones(&samples, 0, &[600], &[1000], "A's output");
    assert_tones(&samples, 1, &[1000], &[600], "B's output");
    assert_silent(&samples, 2..8, "no user plays there");
    let status = proxy.status().await.expect("Status");
    assert_eq!((status.participants.len(), status.branches.len()), (1, 2), "{status:#?}");
    for branch in &status.branches {
        assert!(branch.input_level_db > -20.0 && branch.output_level_db > -20.0, "{branch:?}");
    }
    let only_the_card = Probe::admin(&janus).await.participants("x").await.expect("room x");
    assert_eq!(only_the_card, ["card:x"], "one participant for the group's two users");

    // The remote crew: heard on both outputs, hearing both inputs, not itself.
    let _crew_talks = Tone::play(&pulse, "crew_in", 0, 440);
    let crew = Crew::join(&pulse, &janus, "x").await;
    // Waited for whole, not just present: the crew's first half second through Janus may still
    // be settling (its jitter buffer filling), and a lasting loss never passes this wait.
    let samples = record_once(&pulse, "card_out", &bridged, "the crew whole on both outputs", |s| {
        whole_through_janus(s, 0, 440) && whole_through_janus(s, 1, 440)
    })
    .await;
    assert_tones(&samples, 0, &[440, 600], &[1000], "A's output with the crew");
    assert_tones(&samples, 1, &[440, 1000], &[600], "B's output with the crew");
    assert_silent(&samples, 2..8, "no user plays there");
    let heard = record_once(&pulse, "crew_out", &bridged, "the card whole at the crew member", |s| {
        whole_through_janus(s, 0, 1000)
    })
    .await;
    assert_tones(&heard, 0, &[1000, 600], &[440], "what the crew member hears");
    // Whole, both ways: nothing of either direction lost in Janus.
    for (samples, k, freq, what) in [
        (&samples, 0, 440, "the crew on A's output"),
        (&samples, 1, 440, "the crew on B's output"),
        (&heard, 0, 1000, "A at the crew member"),
    ] {
        let db = tone_db(&channel(samples, k), f64::from(freq));
        let windows: Vec<String> = channel(samples, k)
            .chunks_exact(RATE as usize / 5)
            .map(|w| format!("{:.1}", tone_db(w, f64::from(freq))))
            .collect();
        assert!(
            whole_through_janus(samples, k, freq),
            "{what}: {freq} Hz at {db:.1} dBFS, sent at {TONE_DB} (per 200 ms: {})",
            windows.join(", ")
        );
    }
    drop(crew);
    drop(bridged);
}

/// The card's packets wait one packet less than its prebuffering in Janus's queue, in every
/// room it joins: its send is placed against Janus's mixing tick and, once Janus mixes it, one
/// frame is skipped (bridged/src/tick.rs). At a prebuffering of 2 (`bridge.jitterBufferMs` 40)
/// AudioBridge's queue for the card holds 1 packet after each tick and 2 between a packet's
/// arrival and the tick; unplaced it holds 2–3 (the join's start decides), 20 ms more on every
/// path through Janus. At the default 20 ms the card joins with a prebuffering of one packet, which
/// only a placed send can keep without losing frames: the queue is empty after each tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_s_packets_wait_one_packet_less_than_its_prebuffering_in_janus() {
    require_namespace();
    let card = test_card();
    card.add_card("card_in", RATE);
    card.add_card("card_out", RATE);
    let rooms = ["x", "y", "z"];
    let (janus, _bus, bridged, proxy) = media_stack(&card, &rooms).await;
    let users = |joined: usize| (0..joined).map(|k| user(&format!("u{k}"), rooms[k], k as u8, Some(k as u8))).collect();
    for joined in 1..=rooms.len() {
        apply_and_wait(&proxy, &plan(&janus, &rooms[..joined], users(joined)), "one more room joined").await;
        let room = rooms[joined - 1];
        let queue = placed_queue(&janus, &bridged, room, 1).await;
        // Placed, the queue never holds more than the prebuffering (an unplaced send reads 2–3)
        // and reads 1 after ticks. It may touch 0: a packet that came late (Janus's own tick
        // wanders: AudioBridge mixes at the first wake-up of its 5 ms sleeps 15 ms after the
        // last tick's schedule, a sawtooth of up to 5 ms), which at this prebuffering costs no
        // audio (each_output_hears… holds the levels).
        assert!(
            queue.iter().all(|&n| n <= 2) && queue.contains(&1),
            "card of {room}: Janus's queue {queue:?}: more than 1 after each tick and 2 before it"
        );
    }
    // The default buffering: every participant joins again, with one packet of prebuffering.
    let default = Plan { jitter_buffer_ms: 20, ..plan(&janus, &rooms, users(rooms.len())) };
    proxy.apply(&default).await.expect("Apply");
    for room in rooms {
        let queue = placed_queue(&janus, &bridged, room, 2).await;
        assert!(
            queue.iter().all(|&n| n <= 1) && queue.contains(&0),
            "card of {room}: Janus's queue {queue:?}, not empty after each tick"
        );
    }
    drop(bridged);
}

/// A → B flows in X while a third user comes and goes in X and the first user of group Z comes
/// and goes (its participant joining and leaving the room Z): B's output has no gap, the group's
/// participant never rejoins. Then a device change rebuilds everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_and_groups_come_and_go_without_a_gap() {
    require_namespace();
    let pulse = test_card();
    for sink in ["card_in", "card_in2", "card_out"] {
        pulse.add_card(sink, RATE);
    }
    let (janus, _bus, bridged, proxy) = media_stack(&pulse, &["x", "z"]).await;
    let _tone = Tone::play(&pulse, "card_in", 0, 1000);
    let _other_tone = Tone::play(&pulse, "card_in2", 0, 600);
    let (a, b) = (user("a", "x", 0, None), user("b", "x", 1, Some(1)));
    let base = plan(&janus, &["x"], vec![a.clone(), b.clone()]);
    apply_and_wait(&proxy, &base, "X's participant joined").await;
    let joined_as = proxy.status().await.expect("Status").participants[0].participant_id.clone();
    record_once(&pulse, "card_out", &bridged, "A on B's output", |s| tone_db(&channel(s, 1), 1000.0) > PRESENT_DB)
        .await;

    // The input is recorded too: a gap the player or the recorder makes on a busy machine
    // shows on both, one bridged makes only on the output.
    let input = Recording::start(&pulse, "card_in.monitor");
    let recording = Recording::start(&pulse, "card_out.monitor");
    recording.wait_until(0.5).await;
    // C joins X: A's tone on C's output at once, no Janus join; the participant's name in the
    // room follows its users.
    let mut with_c = plan(&janus, &["x"], vec![a.clone(), b.clone(), user("c", "x", 2, Some(2))]);
    with_c.groups[0].display = "A, B, C".into();
    let at_apply = recording.seconds();
    let started = Instant::now();
    apply_and_wait(&proxy, &with_c, "C added").await;
    let applied_ms = started.elapsed().as_secs_f64() * 1000.0;
    let heard_at = recording.wait_tone("A on C's output", 2, 1000.0, at_apply - 0.02, Duration::from_secs(5)).await;
    println!(
        "BENCH user added -> its output plays: {:.0} ms after Apply was sent (Apply answered in {applied_ms:.0} ms; 20 ms windows)",
        ((heard_at - at_apply) * 1000.0).max(0.0)
    );
    let probe = Probe::admin(&janus).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let listed = probe.audiobridge(serde_json::json!({"request": "listparticipants", "room": "x"})).await;
        let display = listed.as_ref().ok().and_then(|l| l["participants"][0]["display"].as_str().map(str::to_owned));
        if display.as_deref() == Some("A, B, C") {
            break;
        }
        assert!(Instant::now() < deadline, "Janus shows the card as {display:?}, not \"A, B, C\"");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(proxy.status().await.expect("Status").participants[0].display, "A, B, C");
    apply_and_wait(&proxy, &base, "C removed").await;
    // The first user of Z: Z's participant joins; then it leaves with its last user.
    let with_z = plan(&janus, &["x", "z"], vec![a.clone(), b.clone(), user("d", "z", 4, Some(4))]);
    let took = apply_and_wait(&proxy, &with_z, "Z's participant joined").await;
    println!("BENCH first user of a group Apply -> its participant joined (media up): {} ms", took.as_millis());
    apply_and_wait(&proxy, &base, "Z's participant left").await;
    let until = recording.seconds() + 0.5;
    let samples = recording.finish_after(until).await;
    let in0 = channel(&input.finish_after(0.0).await, 0);
    let out1 = channel(&samples, 1);
    assert!(rms_db(&out1) > PRESENT_DB, "no tone on B's output");
    println!(
        "B's output across C and Z coming and going ({until:.2} s): gaps (s, ms) on the output {:?}, on the input {:?}",
        dropouts(&out1),
        dropouts(&in0)
    );
    let gaps = bridged_gaps(&in0, &out1);
    let longest = gaps.iter().map(|(_, ms)| *ms).fold(0.0, f64::max);
    assert!(longest <= 10.0, "A -> B dropped out for {longest} ms while users and groups came and went: {gaps:?}");
    let status = proxy.status().await.expect("Status");
    assert_eq!(status.participants.len(), 1, "{status:#?}");
    assert_eq!(status.participants[0].participant_id, joined_as, "X's participant rejoined");
    let in_x = Probe::admin(&janus).await.participants("x").await.expect("room x");
    assert_eq!(in_x, ["card:x"]);

    // Another input device: everything is rebuilt, the 600 Hz of card_in2 comes out.
    let moved = Plan { input_device: "card_in2.monitor".into(), ..base.clone() };
    let took = apply_and_wait(&proxy, &moved, "rebuilt on card_in2").await;
    println!("BENCH device change (rebuild, 1 participant) Apply -> joined: {} ms", took.as_millis());
    let samples = record_once(&pulse, "card_out", &bridged, "600 Hz after the rebuild", |s| {
        tone_db(&channel(s, 1), 600.0) > PRESENT_DB
    })
    .await;
    assert!((frequency(&channel(&samples, 1)) - 600.0).abs() < 30.0, "{}", levels(&samples, 1, &[600, 1000]));
    drop(bridged);
}

/// Eight users in one group: each output plays the seven other inputs and not its own. Then
/// the same eight users in eight groups: eight participants, and each output plays only its own
/// room's remote crew (one crew member, in g3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_users_in_one_group_then_in_eight_groups() {
    require_namespace();
    let pulse = test_card();
    for sink in ["card_in", "card_out", "crew_in", "crew_out"] {
        pulse.add_card(sink, RATE);
    }
    let rooms: Vec<String> = (0..8).map(|k| format!("g{k}")).collect();
    let mut all_rooms: Vec<&str> = rooms.iter().map(String::as_str).collect();
    all_rooms.push("x");
    let (janus, _bus, bridged, proxy) = media_stack(&pulse, &all_rooms).await;
    // Quiet enough that seven of them summed stay under the limiter's ceiling.
    let freqs: Vec<u32> = (0..8).map(|k| 400 + 100 * k).collect();
    let _tones: Vec<Tone> = freqs.iter().enumerate().map(|(k, f)| Tone::at(&pulse, "card_in", &[k], *f, 0.1)).collect();

    let one_group = (0..8u8).map(|k| user(&format!("u{k}"), "x", k, Some(k))).collect();
    apply_and_wait(&proxy, &plan(&janus, &["x"], one_group), "one participant for eight users").await;
    let samples = record_once(&pulse, "card_out", &bridged, "every output playing", |s| {
        (0..8).all(|k| rms_db(&channel(s, k)) > PRESENT_DB)
    })
    .await;
    for (k, own) in freqs.iter().enumerate() {
        let others: Vec<u32> = freqs.iter().copied().filter(|f| f != own).collect();
        assert_tones(&samples, k, &others, &[*own], "eight users in one group");
    }

    let eight_groups = (0..8u8).map(|k| user(&format!("u{k}"), &rooms[usize::from(k)], k, Some(k))).collect();
    let eight_rooms: Vec<&str> = all_rooms[..8].to_vec();
    let took = apply_and_wait(&proxy, &plan(&janus, &eight_rooms, eight_groups), "eight participants").await;
    println!("BENCH eight groups' participants joined in {} ms", took.as_millis());
    // Far above the card's tones: nothing of it leaks into their readings.
    let _crew_talks = Tone::play(&pulse, "crew_in", 0, 1500);
    let crew = Crew::join(&pulse, &janus, "g3").await;
    let samples = record_once(&pulse, "card_out", &bridged, "the crew of g3 on output 3", |s| {
        tone_db(&channel(s, 3), 1500.0) > PRESENT_DB
    })
    .await;
    assert_tones(&samples, 3, &[1500], &freqs, "g3's output");
    assert_silent(&samples, (0..8).filter(|k| *k != 3), "a group alone with its own user");
    let heard = record_once(&pulse, "crew_out", &bridged, "u3 at the crew member", |s| {
        tone_db(&channel(s, 0), 700.0) > PRESENT_DB
    })
    .await;
    let others: Vec<u32> = freqs.iter().copied().filter(|f| *f != 700).collect();
    assert_tones(&heard, 0, &[700], &others, "what g3's crew member hears");
    drop(crew);
    drop(bridged);
}

/// An IFB: the presenter's output (2) plays the program (500 Hz on input 0). The director's
/// card input (3, 700 Hz) and then a crew member in the director's room (440 Hz, through Janus)
/// each interrupt it: heard whole on the IFB, the program 20 dB down under them, and back at
/// its level after the hold. Changing the IFB's dip three times leaves its output without a gap
/// (at most one 5 ms block, which the test card drops now and then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ifb_plays_its_program_and_dips_it_under_the_interrupt_group() {
    require_namespace();
    let pulse = test_card();
    for sink in ["card_in", "card_out", "crew_in", "crew_out"] {
        pulse.add_card(sink, RATE);
    }
    let (janus, _bus, bridged, proxy) = media_stack(&pulse, &["x", "d"]).await;
    let _program = Tone::play(&pulse, "card_in", 0, 500);
    let ifb_plan = |dim_db| {
        let ifb = PlanIfb { program_channel: Some(0), program_room: String::new(), interrupt_room: "d".into(), dim_db };
        let presenter = PlanUser { ifb: Some(ifb), ..user("presenter", "x", 1, Some(2)) };
        plan(&janus, &["x", "d"], vec![presenter, user("director", "d", 3, None)])
    };
    apply_and_wait(&proxy, &ifb_plan(Some(-20)), "both rooms joined").await;
    let level = |s: &[f32], freq: u32| tone_db(&channel(s, 2), f64::from(freq));
    let program_whole = |s: &[f32]| (level(s, 500) - TONE_DB).abs() < 1.0;
    let alone = record_once(&pulse, "card_out", &bridged, "the program on the IFB", program_whole).await;
    assert_tones(&alone, 2, &[500], &[700, 440], "the IFB, nobody talking");

    let dipped_under = |talk: u32| {
        move |s: &[f32]| (level(s, 500) - (TONE_DB - 20.0)).abs() < 1.5 && (level(s, talk) - TONE_DB).abs() < 3.0
    };
    let director = Tone::play(&pulse, "card_in", 3, 700);
    let heard =
        record_once(&pulse, "card_out", &bridged, "the director over the dipped program", dipped_under(700)).await;
    println!("IFB under the director's card input: {}", levels(&heard, 2, &[500, 700]));
    drop(director);
    record_once(&pulse, "card_out", &bridged, "the program back after the card input", program_whole).await;

    let _crew_talks = Tone::play(&pulse, "crew_in", 0, 440);
    let crew = Crew::join(&pulse, &janus, "d").await;
    let heard = record_once(&pulse, "card_out", &bridged, "the crew over the dipped program", dipped_under(440)).await;
    println!("IFB under a crew member in the interrupt room: {}", levels(&heard, 2, &[500, 440]));
    drop(crew);
    record_once(&pulse, "card_out", &bridged, "the program back after the crew", program_whole).await;

    // The IFB changed while it plays: cut, -30, -20. Nobody talks: the program plays on. As
    // users and groups coming and going (above): the input recorded too, and at most one gap of
    // bridged's, of one 5 ms block (the test card's null sinks drop one now and then, changes or
    // not; a change that cost a block would cost one at each of the three).
    let input = Recording::start(&pulse, "card_in.monitor");
    let recording = Recording::start(&pulse, "card_out.monitor");
    recording.wait_until(0.5).await;
    for dim_db in [None, Some(-30), Some(-20)] {
        apply_and_wait(&proxy, &ifb_plan(dim_db), "the IFB changed").await;
    }
    let until = recording.seconds() + 0.5;
    let out = channel(&recording.finish_after(until).await, 2);
    let gaps = bridged_gaps(&channel(&input.finish_after(0.0).await, 0), &out);
    let longest = gaps.iter().map(|(_, ms)| *ms).fold(0.0, f64::max);
    assert!(gaps.len() <= 1 && longest <= 5.0, "the IFB's output dropped out while the IFB changed: {gaps:?} (s, ms)");
    assert!((tone_db(&out, 500.0) - TONE_DB).abs() < 1.0, "the program moved: {:.1} dBFS", tone_db(&out, 500.0));
    drop(bridged);
}

/// Two full-scale inputs in phase summed onto one output (2.0): limited under full scale, not
/// wrapped and not clipped (no third harmonic). Local mixing needs no Janus: its URL is
/// unreachable and the group's participant keeps retrying meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_full_scale_inputs_are_limited_not_wrapped() {
    let pulse = test_card();
    for sink in ["card_in", "card_out"] {
        pulse.add_card(sink, RATE);
    }
    let bus = Bus::start();
    let bridged = Bridged::on_card(&bus, &pulse, &[]);
    let proxy = bus.bridge().await;
    let _loud = Tone::at(&pulse, "card_in", &[0, 1], 500, 1.0);
    let users = vec![user("a", "x", 0, None), user("b", "x", 1, None), user("c", "x", 2, Some(2))];
    let plan = without_janus(users);
    proxy.apply(&plan).await.expect("Apply");
    let samples = record_once(&pulse, "card_out", &bridged, "the sum on C's output", |s| {
        tone_db(&channel(s, 2), 500.0) > PRESENT_DB
    })
    .await;
    let out2 = channel(&samples, 2);
    let peak = out2.iter().fold(0.0_f32, |m, s| m.max(s.abs()));
    let (fundamental, third) = (tone_db(&out2, 500.0), tone_db(&out2, 1500.0));
    println!(
        "2 x full scale summed: peak {peak:.3}, 500 Hz {fundamental:.1} dBFS, 1500 Hz {third:.1} dBFS, all {:.1} dBFS, longest dropout {} ms",
        rms_db(&out2),
        longest_dropout_ms(&out2)
    );
    assert!(peak <= 0.9, "peak {peak}: not limited");
    assert!(fundamental > -6.0, "the limited tone should stay near full scale: {fundamental:.1} dBFS");
    assert!(third < fundamental - 40.0, "a third harmonic at {third:.1} dBFS: clipped or wrapped");
    let status = proxy.status().await.expect("Status");
    assert_eq!(status.participants[0].state, BranchState::Retrying, "{status:#?}");
    drop(bridged);
}

/// A playback device whose PulseAudio channel map is `aux0…aux7` (ALSA's multichannel and
/// pro-audio profiles): output channel 5 lands on the device's channel 5, not on silence
/// (PulseAudio matches positions by name, and the 7.1 positions bridged uses inside its
/// pipeline name none of the device's channels; README, "Channel order"). On PipeWire such a
/// node is played through pipewire-pulse, not natively (`card::CARD_POSITIONS`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_channel_is_the_device_channel_on_an_aux_card() {
    aux_card(CardKind::PipeWire).await;
}

/// The same on PulseAudio: the smoke test of the PulseAudio path (bridged opens PulseAudio's
/// sinks with pulsesink and PipeWire's nodes with a stream of its own, and each server maps
/// channels its own way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_channel_is_the_device_channel_on_an_aux_card_on_pulseaudio() {
    aux_card(CardKind::Pulse).await;
}

/// ALSA devices selected by `alsa:` ids are opened directly (alsasrc/alsasink), and card channel
/// k is device channel k both ways. The devices are ALSA `file` PCMs of the test's own: the
/// input plays a FIFO with a 1000 Hz tone on device channel 2 only, the output writes every
/// device channel to a file; each is paced by a PulseAudio null device behind it (the only
/// clock a machine without a card has), which sees none of the data. A (input 2) and B (output
/// 5) share room x: the tone must come out on device channel 5 alone. Without bridged's
/// reordering ALSA's 7.1 order would put it on card input 4 (A silent) and play card output 5
/// on device channel 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alsa_devices_open_directly_and_keep_every_channel_number() {
    require_namespace();
    let pulse = test_card();
    pulse.add_card("clock_in", RATE);
    pulse.add_card("clock_out", RATE);
    let server = pulse.server_address();
    let home = AlsaHome::new("");
    let fifo = home.tone_fifo("in.fifo", 2, 1000);
    let out = home.file("out.raw");
    let asoundrc = format!(
        "pcm.partyline_in {{\n    type file\n    slave.pcm {{ type pulse; server \"{server}\"; device \"clock_in.monitor\" }}\n    \
         file \"/dev/null\"\n    infile \"{}\"\n    format \"raw\"\n}}\n\
         pcm.partyline_out {{\n    type file\n    slave.pcm {{ type pulse; server \"{server}\"; device \"clock_out\" }}\n    \
         file \"{}\"\n    format \"raw\"\n}}\n",
        fifo.display(),
        out.display()
    );
    std::fs::write(home.home().join(".asoundrc"), asoundrc).expect("write .asoundrc");
    let janus = start_janus(&["x"]).await;
    let bus = Bus::start();
    let home_dir = home.home().to_str().expect("a UTF-8 path");
    // No PULSE_SERVER: two alsa: ids never ask a sound server.
    let bridged = Bridged::start(&bus, &[("HOME", home_dir), ("PULSE_SERVER", "unix:/nonexistent/none")]);
    let proxy = bus.bridge().await;
    let users = vec![user("a", "x", 2, None), user("b", "x", 1, Some(5))];
    let plan = Plan {
        input_device: "alsa:partyline_in".into(),
        output_device: "alsa:partyline_out".into(),
        ..plan(&janus, &["x"], users)
    };
    apply_and_wait(&proxy, &plan, "A and B joined on the ALSA devices").await;
    let status = proxy.status().await.expect("Status");
    assert_eq!(status.state, BridgeState::Running, "{status:#?}{}", bridged.log());
    wait_status(&proxy, JOIN_WAIT, "A hears device channel 2", |s| {
        s.branches.iter().any(|br| br.name == "a" && br.input_level_db > -20.0)
    })
    .await;
    // What the output device was given over the last second, once the tone arrived (bounded:
    // the assertions below say what it was otherwise).
    let deadline = Instant::now() + Duration::from_secs(10);
    let samples = loop {
        let samples = raw_tail(&out, 1.0);
        let out5 = channel(&samples, 5);
        let last_half_second = &out5[out5.len().saturating_sub(RATE as usize / 2)..];
        if rms_db(last_half_second) > -30.0 || Instant::now() > deadline {
            break samples;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let levels: Vec<String> = (0..8).map(|k| format!("{k}: {:.1}", rms_db(&channel(&samples, k)))).collect();
    println!("ALSA output device, dBFS per device channel: {}", levels.join(", "));
    let out5 = channel(&samples, 5);
    let (level, freq) = (rms_db(&out5), frequency(&out5));
    assert!(level > -30.0, "device channel 5 is {level:.1} dBFS: no tone ({}){}", levels.join(", "), bridged.log());
    assert!((freq - 1000.0).abs() < 30.0, "device channel 5 at {freq:.0} Hz, not 1000 Hz");
    for k in [0, 1, 2, 3, 4, 6, 7] {
        let level = rms_db(&channel(&samples, k));
        assert!(level < -60.0, "device channel {k} should be silent, is {level:.1} dBFS ({})", levels.join(", "));
    }
    drop(bridged);
}

/// On PipeWire bridged opens the card's nodes natively: PipeWire lists its capture and playback
/// as PipeWire streams, not pipewire-pulse's, and its log says so. Where PipeWire's own socket
/// does not answer (a service that only has `PULSE_SERVER`), it goes through pipewire-pulse
/// instead, and says why in a warning. No Janus: the local path needs none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipewire_card_opens_natively_and_a_fallback_is_never_silent() {
    let pulse = test_card();
    for sink in ["card_in", "card_out"] {
        pulse.add_card(sink, RATE);
    }
    let _tone = Tone::play(&pulse, "card_in", 0, 1000);
    let users = vec![user("a", "x", 0, None), user("b", "x", 1, Some(1))];
    let plan = without_janus(users);
    let bus = Bus::start();
    let bridged = Bridged::on_card(&bus, &pulse, &[]);
    let proxy = bus.bridge().await;
    proxy.apply(&plan).await.expect("Apply");
    record_once(&pulse, "card_out", &bridged, "A on B's output", |s| tone_db(&channel(s, 1), 1000.0) > PRESENT_DB)
        .await;
    let (input, output) = card_stream_apis(&pulse);
    assert_eq!((input, output), (vec!["native".to_owned()], vec!["native".to_owned()]), "{}", bridged.log());
    let said = "sound card: input card_in's monitor through pipewire, output node card_out through pipewire";
    assert!(bridged.log().contains(said), "bridged's log does not say {said:?}:{}", bridged.log());
    drop(bridged);

    // PipeWire's socket out of reach: pipewire-pulse, with a warning that says why.
    let nowhere = tempfile::tempdir().expect("an empty runtime directory");
    let nowhere = nowhere.path().to_str().expect("a UTF-8 path");
    let bridged = Bridged::on_card(
        &bus,
        &pulse,
        &[("PIPEWIRE_RUNTIME_DIR", nowhere), ("PIPEWIRE_REMOTE", "partyline-no-such-socket")],
    );
    let proxy = bus.bridge().await;
    proxy.apply(&plan).await.expect("Apply");
    record_once(&pulse, "card_out", &bridged, "A on B's output", |s| tone_db(&channel(s, 1), 1000.0) > PRESENT_DB)
        .await;
    let (input, output) = card_stream_apis(&pulse);
    assert_eq!((input, output), (vec!["pipewire-pulse".to_owned()], vec!["pipewire-pulse".to_owned()]));
    let log = bridged.log();
    assert!(log.contains("WARN") && log.contains("the card goes through pipewire-pulse"), "no warning:{log}");
    assert!(log.contains("input card_in.monitor through pulseaudio, output card_out through pulseaudio"), "{log}");
    drop(bridged);
}
