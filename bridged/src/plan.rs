//! Rules of a plan and the difference between two plans.

use std::collections::{BTreeMap, HashSet};

use partyline_rooms::jitter::SAMPLE_RATE as ROOMS_RATE;
use partyline_shared::aes67::{Aes67Stream, MAX_CHANNELS, parse_eui64};
use partyline_shared::bridge::{Plan, PlanGroup, PlanIfb, Transport};
use partyline_shared::card::AES67_DEVICE;
use partyline_shared::config::{Bitrate, Channel, DeviceSampleRate, MAX_RECEIVE_LATENCY_MS, MulticastRange};

/// Checks every rule of `plan`; the error names the field (`users[1].input_channel: …`). The
/// ranges are the config's own ([`Channel`], [`Bitrate`], [`DeviceSampleRate`]): one set of
/// rules for what control may write and what bridged accepts.
pub fn validate(plan: &Plan) -> Result<(), String> {
    DeviceSampleRate::try_from(plan.device_sample_rate).map_err(|e| format!("device_sample_rate: {e}"))?;
    if plan.jitter_buffer_ms > 5_000 {
        return Err(format!("jitter_buffer_ms: {} is over 5000", plan.jitter_buffer_ms));
    }
    // The rooms mix at 48 kHz and take the card's send as it is.
    if plan.transport == Transport::Rooms && !plan.groups.is_empty() && plan.device_sample_rate != ROOMS_RATE {
        return Err(format!(
            "device_sample_rate: partyline's rooms take the card at {ROOMS_RATE} Hz, not {}",
            plan.device_sample_rate
        ));
    }
    if plan.transport != Transport::Rooms && !plan.groups.is_empty() && plan.janus_url.trim().is_empty() {
        return Err("janus_url: empty, but the plan has groups".to_owned());
    }
    let http = plan.janus_url.starts_with("http://") || plan.janus_url.starts_with("https://");
    if !plan.janus_url.is_empty() && !http {
        return Err(format!("janus_url: {:?} is not an http(s) URL", plan.janus_url));
    }
    for (i, address) in plan.ice_addresses.iter().enumerate() {
        if address.parse::<std::net::IpAddr>().is_err() {
            return Err(format!("ice_addresses[{i}]: {address:?} is not an IP address"));
        }
    }
    let mut rooms = HashSet::new();
    for (i, group) in plan.groups.iter().enumerate() {
        let field = |name: &str| format!("groups[{i}].{name}");
        for (name, value) in [("room", &group.room), ("identity", &group.identity), ("token", &group.token)] {
            if value.trim().is_empty() {
                return Err(format!("{}: empty", field(name)));
            }
        }
        Bitrate::try_from(group.bitrate_kbps).map_err(|e| format!("{}: {e}", field("bitrate_kbps")))?;
        if !rooms.insert(group.room.as_str()) {
            return Err(format!("{}: {:?} is used twice", field("room"), group.room));
        }
    }
    let mut names = HashSet::new();
    let mut with_users = HashSet::new();
    // An IFB's dip belongs to its output (`ifb.rs`): one IFB per output channel.
    let mut ifb_outputs = HashSet::new();
    for (i, user) in plan.users.iter().enumerate() {
        let field = |name: &str| format!("users[{i}].{name}");
        if user.name.trim().is_empty() {
            return Err(format!("{}: empty", field("name")));
        }
        if !rooms.contains(user.room.as_str()) {
            return Err(format!("{}: {:?} is none of the plan's groups", field("room"), user.room));
        }
        Channel::try_from(user.input_channel).map_err(|e| format!("{}: {e}", field("input_channel")))?;
        if let Some(channel) = user.output_channel {
            Channel::try_from(channel).map_err(|e| format!("{}: {e}", field("output_channel")))?;
        }
        if !names.insert(user.name.as_str()) {
            return Err(format!("{}: {:?} is used twice", field("name"), user.name));
        }
        with_users.insert(user.room.as_str());
        if let Some(ifb) = &user.ifb {
            validate_ifb(ifb, user.output_channel.is_some(), &rooms).map_err(|e| format!("{}{e}", field("ifb")))?;
            if user.output_channel.is_some_and(|output| !ifb_outputs.insert(output)) {
                return Err(format!("{}: another IFB plays on output channel {:?}", field("ifb"), user.output_channel));
            }
            with_users.extend(heard_rooms(ifb));
        }
    }
    if let Some((i, group)) = plan.groups.iter().enumerate().find(|(_, g)| !with_users.contains(g.room.as_str())) {
        return Err(format!("groups[{i}].room: {:?} has no server audio user and no IFB hears it", group.room));
    }
    validate_aes67(plan).map_err(|e| format!("aes67.{e}"))
}

/// AES67's rules, the config's own where they exist (`partyline_shared::aes67`,
/// `partyline_shared::config::MulticastRange`); the error starts with the field.
fn validate_aes67(plan: &Plan) -> Result<(), String> {
    let aes67 = &plan.aes67;
    let uses_it = [&plan.input_device, &plan.output_device].iter().any(|id| id.as_str() == AES67_DEVICE);
    if aes67.interface.is_empty() {
        return if uses_it { Err("interface: empty, but a device of the plan is aes67".into()) } else { Ok(()) };
    }
    if aes67.ptp_domain > 127 {
        return Err(format!("ptp_domain: {} is over 127", aes67.ptp_domain));
    }
    if let Some(id) = aes67.ptp_grandmasters.iter().find(|id| parse_eui64(id).is_none()) {
        return Err(format!("ptp_grandmasters: {id:?} is not a clock identity (an EUI-64)"));
    }
    if !aes67.receive_sdp.is_empty() {
        Aes67Stream::parse(&aes67.receive_sdp).map_err(|e| format!("receive_sdp: {e}"))?;
    }
    if !(1..=MAX_RECEIVE_LATENCY_MS).contains(&aes67.receive_latency_ms) {
        return Err(format!("receive_latency_ms: {} is not 1..={MAX_RECEIVE_LATENCY_MS}", aes67.receive_latency_ms));
    }
    if !(1..=MAX_CHANNELS).contains(&aes67.send_channels) {
        return Err(format!("send_channels: {} is not 1..={MAX_CHANNELS}", aes67.send_channels));
    }
    if aes67.send_address.is_empty() {
        MulticastRange::parse(&aes67.send_range).map_err(|e| format!("send_range: {e}"))?;
    } else if !aes67.send_address.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_multicast()) {
        return Err(format!("send_address: {:?} is not an IPv4 multicast address", aes67.send_address));
    }
    Ok(())
}

/// An IFB's rules; the error starts with the key under `ifb` it is about.
fn validate_ifb(ifb: &PlanIfb, has_output: bool, rooms: &HashSet<&str>) -> Result<(), String> {
    if !has_output {
        return Err(": an IFB needs the user's output channel".to_owned());
    }
    match (ifb.program_channel, ifb.program_room.as_str()) {
        (Some(channel), "") => {
            Channel::try_from(channel).map_err(|e| format!(".program_channel: {e}"))?;
        }
        (None, room) if rooms.contains(room) && room != ifb.interrupt_room => {}
        (None, room) => {
            return Err(format!(".program_room: {room:?} is none of the plan's groups but the interrupt's"));
        }
        (Some(_), _) => return Err(".program_room: set beside program_channel".to_owned()),
    }
    if !rooms.contains(ifb.interrupt_room.as_str()) {
        return Err(format!(".interrupt_room: {:?} is none of the plan's groups", ifb.interrupt_room));
    }
    match ifb.dim_db {
        Some(db) if !(-60..=0).contains(&db) => Err(format!(".dim_db: {db} is not -60..=0")),
        _ => Ok(()),
    }
}

/// The rooms an IFB hears: its interrupt's and its program's, if a group.
pub fn heard_rooms(ifb: &PlanIfb) -> impl Iterator<Item = &str> {
    let program = Some(ifb.program_room.as_str()).filter(|room| !room.is_empty());
    std::iter::once(ifb.interrupt_room.as_str()).chain(program)
}

/// What applying `new` over `old` must do.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// Same plan.
    Nothing,
    /// Device or sampling rate changed (or there was no pipeline): everything is rebuilt.
    Rebuild,
    /// The card side stays: the matrix is swapped (always: it is cheap) and only these groups'
    /// participants are touched.
    Participants { added: Vec<PlanGroup>, changed: Vec<PlanGroup>, removed: Vec<String> },
}

/// The difference between the plan in force (`None`: none) and `new`.
pub fn diff(old: Option<&Plan>, new: &Plan) -> Change {
    let Some(old) = old else { return Change::Rebuild };
    if old == new {
        return Change::Nothing;
    }
    // AES67's settings are the card's when a direction is AES67, and restart the media network
    // otherwise (the player keeps the network apart from the card: `player.rs`).
    let card = |p: &Plan| (p.input_device.clone(), p.output_device.clone(), p.device_sample_rate, p.aes67.clone());
    // A pipeline exists only while there are users.
    if card(old) != card(new) || old.users.is_empty() != new.users.is_empty() {
        return Change::Rebuild;
    }
    // Settings every participant uses: every participant joins again, the card is kept.
    let every_participant = |p: &Plan| (p.janus_url.clone(), p.transport, p.ice_addresses.clone(), p.jitter_buffer_ms);
    let all_changed = every_participant(old) != every_participant(new);
    // The display name follows the group's users: it alone is no reason to leave the room.
    let joined_as = |g: &PlanGroup| (g.identity.clone(), g.token.clone(), g.bitrate_kbps);
    let before: BTreeMap<&str, &PlanGroup> = old.groups.iter().map(|g| (g.room.as_str(), g)).collect();
    let after: BTreeMap<&str, &PlanGroup> = new.groups.iter().map(|g| (g.room.as_str(), g)).collect();
    let mut added = Vec::new();
    let mut changed = Vec::new();
    for (room, group) in &after {
        match before.get(room) {
            None => added.push((*group).clone()),
            Some(old_group) if all_changed || joined_as(old_group) != joined_as(group) => {
                changed.push((*group).clone());
            }
            Some(_) => {}
        }
    }
    let removed = before.keys().filter(|room| !after.contains_key(*room)).map(|room| (*room).to_owned()).collect();
    Change::Participants { added, changed, removed }
}

#[cfg(test)]
mod tests {
    use partyline_shared::bridge::{PlanAes67, PlanUser};

    use super::*;

    fn user(name: &str, room: &str, input: u8, output: Option<u8>) -> PlanUser {
        PlanUser { name: name.into(), room: room.into(), input_channel: input, output_channel: output, ifb: None }
    }

    fn group(room: &str) -> PlanGroup {
        PlanGroup {
            room: room.into(),
            identity: format!("card-{room}"),
            token: format!("tok-{room}"),
            display: room.to_uppercase(),
            bitrate_kbps: 64,
            muted: false,
        }
    }

    fn plan(groups: &[&str], users: Vec<PlanUser>) -> Plan {
        Plan {
            input_device: "in".into(),
            output_device: "out".into(),
            device_sample_rate: 48_000,
            janus_url: "http://127.0.0.1:8088/janus".into(),
            transport: partyline_shared::bridge::Transport::Rtp,
            ice_addresses: vec!["10.77.0.1".into()],
            jitter_buffer_ms: 40,
            groups: groups.iter().map(|room| group(room)).collect(),
            users,
            aes67: Default::default(),
        }
    }

    #[test]
    fn rules_name_the_field() {
        let one = || plan(&["x"], vec![user("a", "x", 0, Some(0))]);
        let with_group = |g: PlanGroup| Plan { groups: vec![g], ..one() };
        let mut cases: Vec<(Plan, &str)> = vec![
            (Plan { device_sample_rate: 0, ..one() }, "device_sample_rate"),
            (Plan { device_sample_rate: 44_100, transport: Transport::Rooms, ..one() }, "device_sample_rate"),
            (plan(&["x"], vec![user("a", "x", 8, Some(0))]), "users[0].input_channel"),
            (plan(&["x"], vec![user("a", "x", 0, Some(8))]), "users[0].output_channel"),
            (plan(&["x"], vec![user("a", "x", 0, Some(0)), user("a", "x", 1, Some(1))]), "users[1].name"),
            (plan(&["x"], vec![user("a", "x", 0, Some(0)), user("b", "z", 1, Some(1))]), "users[1].room"),
            (plan(&["x", "z"], vec![user("a", "x", 0, Some(0))]), "groups[1].room"),
            (plan(&["x", "x"], vec![user("a", "x", 0, Some(0))]), "groups[1].room"),
            (with_group(PlanGroup { room: String::new(), ..group("x") }), "groups[0].room"),
            (with_group(PlanGroup { identity: " ".into(), ..group("x") }), "groups[0].identity"),
            (with_group(PlanGroup { token: String::new(), ..group("x") }), "groups[0].token"),
            (with_group(PlanGroup { bitrate_kbps: 0, ..group("x") }), "groups[0].bitrate_kbps"),
            (Plan { janus_url: String::new(), ..one() }, "janus_url"),
            (Plan { ice_addresses: vec!["nope".into()], ..one() }, "ice_addresses[0]"),
        ];
        let ifb = |output, ifb: PlanIfb| {
            let presenter = PlanUser { ifb: Some(ifb), ..user("p", "x", 0, output) };
            plan(&["x", "show", "d"], vec![presenter])
        };
        let from_input = || PlanIfb { program_channel: Some(1), interrupt_room: "d".into(), ..PlanIfb::default() };
        let from_show = || PlanIfb { program_room: "show".into(), interrupt_room: "d".into(), ..PlanIfb::default() };
        cases.extend([
            (ifb(None, from_input()), "users[0].ifb:"),
            (ifb(Some(2), PlanIfb { program_channel: Some(8), ..from_input() }), "users[0].ifb.program_channel"),
            (ifb(Some(2), PlanIfb { program_room: "show".into(), ..from_input() }), "users[0].ifb.program_room"),
            (ifb(Some(2), PlanIfb { program_room: "nowhere".into(), ..from_show() }), "users[0].ifb.program_room"),
            (ifb(Some(2), PlanIfb { interrupt_room: "show".into(), ..from_show() }), "users[0].ifb.program_room"),
            (ifb(Some(2), PlanIfb { interrupt_room: "nowhere".into(), ..from_input() }), "users[0].ifb.interrupt_room"),
            (ifb(Some(2), PlanIfb { dim_db: Some(-61), ..from_input() }), "users[0].ifb.dim_db"),
            // Two IFBs on one output.
            (
                Plan {
                    users: vec![
                        PlanUser { ifb: Some(from_input()), ..user("p", "x", 0, Some(2)) },
                        PlanUser { ifb: Some(from_show()), ..user("q", "x", 3, Some(2)) },
                    ],
                    ..ifb(Some(2), from_show())
                },
                "users[1].ifb",
            ),
            // A group nobody sends into and no IFB hears.
            (ifb(Some(2), PlanIfb { dim_db: Some(-20), ..from_input() }), "groups[1].room"),
        ]);
        let aes67 = |change: fn(&mut PlanAes67)| {
            let mut section = PlanAes67 {
                interface: "eth1".into(),
                receive_latency_ms: 2,
                send_range: "239.69.0.0/16".into(),
                send_channels: 8,
                ..PlanAes67::default()
            };
            change(&mut section);
            Plan { input_device: AES67_DEVICE.into(), aes67: section, ..one() }
        };
        validate(&aes67(|_| {})).expect("a valid AES67 section");
        cases.extend([
            (aes67(|a| a.interface.clear()), "aes67.interface"),
            (aes67(|a| a.ptp_domain = 128), "aes67.ptp_domain"),
            (aes67(|a| a.ptp_grandmasters = vec!["00-1D".into()]), "aes67.ptp_grandmasters"),
            (aes67(|a| a.receive_sdp = "v=0".into()), "aes67.receive_sdp"),
            (aes67(|a| a.receive_latency_ms = 0), "aes67.receive_latency_ms"),
            (aes67(|a| a.send_channels = 9), "aes67.send_channels"),
            (aes67(|a| a.send_range = "224.0.0.0/4".into()), "aes67.send_range"),
            (aes67(|a| a.send_address = "10.0.0.1".into()), "aes67.send_address"),
        ]);
        for (plan, field) in cases {
            let error = validate(&plan).expect_err(field);
            assert!(error.starts_with(field), "{error:?} should name {field}");
        }
        validate(&ifb(Some(2), from_show())).expect("an IFB hearing the groups it needs");
        validate(&plan(&["x"], vec![user("a", "x", 7, None), user("b", "x", 0, Some(7))])).expect("valid");
        validate(&Plan { device_sample_rate: 48_000, ..Plan::default() }).expect("an empty plan is valid");
        let rooms = Plan { transport: Transport::Rooms, janus_url: String::new(), ..one() };
        validate(&rooms).expect("on the rooms, no Janus to name");
    }

    #[test]
    fn users_change_the_matrix_only_and_groups_their_participants() {
        let (a, b, c) = (user("a", "x", 0, None), user("b", "x", 1, Some(1)), user("c", "x", 2, Some(2)));
        let one = plan(&["x"], vec![a.clone(), b.clone()]);
        assert_eq!(diff(None, &one), Change::Rebuild);
        assert_eq!(diff(Some(&one), &one.clone()), Change::Nothing);
        let nothing_to_join = Change::Participants { added: vec![], changed: vec![], removed: vec![] };
        // A user added, changed or removed in a group that stays, and the display name that
        // follows: no participant is touched.
        let renamed = |mut p: Plan| {
            p.groups[0].display = "A, B, C".into();
            p
        };
        assert_eq!(diff(Some(&one), &renamed(plan(&["x"], vec![a.clone(), b.clone(), c]))), nothing_to_join);
        let b_silent = PlanUser { output_channel: None, ..b.clone() };
        assert_eq!(diff(Some(&one), &plan(&["x"], vec![a.clone(), b_silent])), nothing_to_join);
        assert_eq!(diff(Some(&one), &plan(&["x"], vec![a.clone()])), nothing_to_join);
        // The first user of another group: its participant joins; its last: it leaves.
        let with_z = plan(&["x", "z"], vec![a, b, user("d", "z", 4, Some(4))]);
        assert_eq!(
            diff(Some(&one), &with_z),
            Change::Participants { added: vec![group("z")], changed: vec![], removed: vec![] }
        );
        assert_eq!(
            diff(Some(&with_z), &one),
            Change::Participants { added: vec![], changed: vec![], removed: vec!["z".into()] }
        );
        // What a participant joins with, or settings all participants use: they join again.
        let other_token = Plan { groups: vec![PlanGroup { token: "new".into(), ..group("x") }], ..one.clone() };
        assert_eq!(
            diff(Some(&one), &other_token),
            Change::Participants { added: vec![], changed: other_token.groups.clone(), removed: vec![] }
        );
        for changed in [
            Plan { janus_url: "http://127.0.0.1:1/janus".into(), ..one.clone() },
            Plan { jitter_buffer_ms: 60, ..one.clone() },
            Plan { transport: partyline_shared::bridge::Transport::Webrtc, ..one.clone() },
        ] {
            assert_eq!(
                diff(Some(&one), &changed),
                Change::Participants { added: vec![], changed: vec![group("x")], removed: vec![] }
            );
        }
        // The card: everything is rebuilt.
        assert_eq!(diff(Some(&one), &Plan { input_device: "other".into(), ..one.clone() }), Change::Rebuild);
        assert_eq!(diff(Some(&one), &Plan { device_sample_rate: 44_100, ..one.clone() }), Change::Rebuild);
        assert_eq!(diff(Some(&one), &plan(&[], vec![])), Change::Rebuild);
    }
}
