//! Rules of a plan and the difference between two plans.

use std::collections::{BTreeMap, HashSet};

use partyline_shared::bridge::{Plan, PlanUser};
use partyline_shared::config::{Bitrate, Channel, DeviceSampleRate};

/// Channels of the sound card (inputs and outputs): 0..=7.
pub const CHANNELS: u8 = partyline_shared::config::CHANNELS as u8;

/// Checks every rule of `plan`; the error names the field (`users[1].input_channel: …`). The
/// ranges are the config's own ([`Channel`], [`Bitrate`], [`DeviceSampleRate`]): one set of
/// rules for what control may write and what bridged accepts.
pub fn validate(plan: &Plan) -> Result<(), String> {
    DeviceSampleRate::try_from(plan.device_sample_rate).map_err(|e| format!("device_sample_rate: {e}"))?;
    if plan.latency_ms > 5_000 {
        return Err(format!("latency_ms: {} is over 5000", plan.latency_ms));
    }
    if !plan.users.is_empty() && plan.janus_url.trim().is_empty() {
        return Err("janus_url: empty, but the plan has users".to_owned());
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
    let mut names = HashSet::new();
    let mut identities = HashSet::new();
    for (i, user) in plan.users.iter().enumerate() {
        let field = |name: &str| format!("users[{i}].{name}");
        for (name, value) in
            [("name", &user.name), ("identity", &user.identity), ("room", &user.room), ("token", &user.token)]
        {
            if value.trim().is_empty() {
                return Err(format!("{}: empty", field(name)));
            }
        }
        Channel::try_from(user.input_channel).map_err(|e| format!("{}: {e}", field("input_channel")))?;
        if let Some(channel) = user.output_channel {
            Channel::try_from(channel).map_err(|e| format!("{}: {e}", field("output_channel")))?;
        }
        Bitrate::try_from(user.bitrate_kbps).map_err(|e| format!("{}: {e}", field("bitrate_kbps")))?;
        if !names.insert(user.name.as_str()) {
            return Err(format!("{}: {:?} is used twice", field("name"), user.name));
        }
        if !identities.insert((user.room.as_str(), user.identity.as_str())) {
            return Err(format!("{}: {:?} is used twice in room {:?}", field("identity"), user.identity, user.room));
        }
    }
    Ok(())
}

/// What applying `new` over `old` must do.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// Same plan.
    Nothing,
    /// Device or sampling rate changed (or there was no pipeline): everything is rebuilt.
    Rebuild,
    /// Only these users' branches are touched.
    Branches { added: Vec<PlanUser>, changed: Vec<PlanUser>, removed: Vec<String> },
}

/// The difference between the plan in force (`None`: none) and `new`.
pub fn diff(old: Option<&Plan>, new: &Plan) -> Change {
    let Some(old) = old else { return Change::Rebuild };
    if old == new {
        return Change::Nothing;
    }
    // The mixer's latency follows `latency_ms`: a change of it rebuilds the card side too.
    let card = |p: &Plan| (p.input_device.clone(), p.output_device.clone(), p.device_sample_rate, p.latency_ms);
    // A pipeline exists only while there are users.
    if card(old) != card(new) || old.users.is_empty() != new.users.is_empty() {
        return Change::Rebuild;
    }
    // Settings every branch uses: every branch is rebuilt, the card is kept.
    let every_branch = |p: &Plan| (p.janus_url.clone(), p.ice_addresses.clone());
    let all_changed = every_branch(old) != every_branch(new);
    let before: BTreeMap<&str, &PlanUser> = old.users.iter().map(|u| (u.name.as_str(), u)).collect();
    let after: BTreeMap<&str, &PlanUser> = new.users.iter().map(|u| (u.name.as_str(), u)).collect();
    let mut added = Vec::new();
    let mut changed = Vec::new();
    for (name, user) in &after {
        match before.get(name) {
            None => added.push((*user).clone()),
            Some(old_user) if all_changed || old_user != user => changed.push((*user).clone()),
            Some(_) => {}
        }
    }
    let removed = before.keys().filter(|name| !after.contains_key(*name)).map(|name| (*name).to_owned()).collect();
    Change::Branches { added, changed, removed }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, input: u8, output: Option<u8>) -> PlanUser {
        PlanUser {
            name: name.into(),
            identity: format!("id-{name}"),
            room: "room".into(),
            token: "tok".into(),
            input_channel: input,
            output_channel: output,
            bitrate_kbps: 64,
        }
    }

    fn plan(users: Vec<PlanUser>) -> Plan {
        Plan {
            input_device: "in".into(),
            output_device: "out".into(),
            device_sample_rate: 48_000,
            janus_url: "http://127.0.0.1:8088/janus".into(),
            ice_addresses: vec!["10.77.0.1".into()],
            latency_ms: 40,
            users,
        }
    }

    #[test]
    fn rules_name_the_field() {
        let cases: Vec<(Plan, &str)> = vec![
            (Plan { device_sample_rate: 0, ..plan(vec![]) }, "device_sample_rate"),
            (plan(vec![user("a", 8, Some(0))]), "users[0].input_channel"),
            (plan(vec![user("a", 0, Some(8))]), "users[0].output_channel"),
            (plan(vec![user("a", 0, Some(0)), user("a", 1, Some(1))]), "users[1].name"),
            (
                plan(vec![user("a", 0, Some(0)), PlanUser { identity: "id-a".into(), ..user("b", 1, Some(1)) }]),
                "users[1].identity",
            ),
            (plan(vec![PlanUser { room: String::new(), ..user("a", 0, Some(0)) }]), "users[0].room"),
            (plan(vec![PlanUser { token: " ".into(), ..user("a", 0, Some(0)) }]), "users[0].token"),
            (plan(vec![PlanUser { bitrate_kbps: 0, ..user("a", 0, Some(0)) }]), "users[0].bitrate_kbps"),
            (Plan { janus_url: String::new(), ..plan(vec![user("a", 0, Some(0))]) }, "janus_url"),
            (Plan { ice_addresses: vec!["nope".into()], ..plan(vec![]) }, "ice_addresses[0]"),
        ];
        for (plan, field) in cases {
            let error = validate(&plan).expect_err(field);
            assert!(error.starts_with(field), "{error:?} should name {field}");
        }
        validate(&plan(vec![user("a", 7, None), user("b", 0, Some(7))])).expect("valid");
        validate(&Plan { device_sample_rate: 48_000, ..Plan::default() }).expect("an empty plan is valid");
    }

    #[test]
    fn differences() {
        let a = user("a", 0, None);
        let b = user("b", 1, Some(1));
        let one = plan(vec![a.clone(), b.clone()]);
        assert_eq!(diff(None, &one), Change::Rebuild);
        assert_eq!(diff(Some(&one), &one.clone()), Change::Nothing);
        let c = user("c", 2, Some(2));
        let two = plan(vec![a.clone(), b.clone(), c.clone()]);
        assert_eq!(diff(Some(&one), &two), Change::Branches { added: vec![c], changed: vec![], removed: vec![] });
        let b2 = PlanUser { output_channel: None, ..b.clone() };
        let three = plan(vec![a.clone(), b2.clone()]);
        assert_eq!(diff(Some(&one), &three), Change::Branches { added: vec![], changed: vec![b2], removed: vec![] });
        assert_eq!(
            diff(Some(&one), &plan(vec![a.clone()])),
            Change::Branches { added: vec![], changed: vec![], removed: vec!["b".into()] }
        );
        assert_eq!(diff(Some(&one), &Plan { input_device: "other".into(), ..one.clone() }), Change::Rebuild);
        assert_eq!(diff(Some(&one), &Plan { device_sample_rate: 44_100, ..one.clone() }), Change::Rebuild);
        assert_eq!(diff(Some(&one), &Plan { latency_ms: 60, ..one.clone() }), Change::Rebuild);
        assert_eq!(
            diff(Some(&one), &Plan { janus_url: "http://127.0.0.1:1/janus".into(), ..one.clone() }),
            Change::Branches { added: vec![], changed: vec![a, b], removed: vec![] }
        );
        assert_eq!(diff(Some(&one), &plan(vec![])), Change::Rebuild);
    }
}
