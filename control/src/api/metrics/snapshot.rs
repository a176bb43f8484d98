//! The figures read from the state at each scrape: groups, members and their links, media nodes,
//! bridged and the card, the event stream, the process.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use partyline_shared::bridge::PtpState;
use partyline_shared::config::DIRECT_ROOM_PREFIX;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use crate::events::{BridgeViewState, JanusState};
use crate::links::{CandidateType, LinkQuality};
use crate::state::AppState;
use crate::stats::{Memory, cpu_seconds_of_this_process};

type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    group: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupInfo {
    group: String,
    name: String,
}

/// A member by its identity (opaque, unique) and its name (what the admin reads; two members may
/// share it).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabels {
    identity: String,
    member: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLineLabels {
    identity: String,
    member: String,
    group: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CardUserLabels {
    user: String,
    group: String,
}

/// Registers every figure of the state as it is now.
pub(super) fn register(registry: &mut Registry, state: &AppState) {
    groups(registry, state);
    members(registry, state);
    nodes(registry, state);
    bridged(registry, state);
    process(registry, state);
}

fn groups(registry: &mut Registry, state: &AppState) {
    let config = state.config.current();
    let (info, members, talkers) = (Family::<GroupInfo, Gauge>::default(), gauges(), gauges());
    let talk_seconds = Family::<GroupLabels, FloatCounter>::default();
    for group in &config.groups {
        let id = group.id();
        info.get_or_create(&GroupInfo { group: id.clone(), name: group.name.clone() }).set(1);
        members.get_or_create(&GroupLabels { group: id.clone() }).set(0);
        talkers.get_or_create(&GroupLabels { group: id.clone() }).set(0);
        talk_seconds.get_or_create(&GroupLabels { group: id }).inc_by(0.0);
    }
    for user in state.users.list() {
        for line in user.lines.iter().filter(|l| l.joined_at.is_some() && !l.group_id.starts_with(DIRECT_ROOM_PREFIX)) {
            members.get_or_create(&GroupLabels { group: line.group_id.clone() }).inc();
        }
    }
    for line in state.events.talk(Instant::now()) {
        talkers.get_or_create(&GroupLabels { group: line.line.clone() }).set(line.talkers as i64);
        talk_seconds.get_or_create(&GroupLabels { group: line.line }).inc_by(line.seconds);
    }
    registry.register("group_info", "A group's id and its name", info);
    registry.register("group_members", "Members joined to the group's room", members);
    registry.register("group_talkers", "Members talking on the group now (\"direct\": all direct lines)", talkers);
    registry.register_with_unit(
        "group_talk",
        "Seconds talked on the group since control started, summed over its talkers",
        Unit::Seconds,
        talk_seconds,
    );
}

fn members(registry: &mut Registry, state: &AppState) {
    let lines = Family::<MemberLabels, Gauge>::default();
    let (loss, jitter, rtt, quality) = (float_gauges(), float_gauges(), float_gauges(), line_gauges());
    let relayed = line_gauges();
    for user in state.users.list() {
        let member = MemberLabels { identity: user.identity.clone(), member: user.username.clone() };
        lines.get_or_create(&member).set(user.lines.len() as i64);
        for line in &user.lines {
            let Some(link) = state.links.of(&user.identity, &line.group_id) else { continue };
            let labels = MemberLineLabels {
                identity: user.identity.clone(),
                member: user.username.clone(),
                group: line.group_id.clone(),
            };
            loss.get_or_create(&labels).set(f64::from(link.figures.loss_percent) / 100.0);
            jitter.get_or_create(&labels).set(f64::from(link.figures.jitter_ms) / 1000.0);
            if let Some(rtt_ms) = link.figures.rtt_ms {
                rtt.get_or_create(&labels).set(f64::from(rtt_ms) / 1000.0);
            }
            quality.get_or_create(&labels).set(match link.quality {
                LinkQuality::Good => 0,
                LinkQuality::Degraded => 1,
                LinkQuality::Poor => 2,
            });
            if let Some(candidate) = link.figures.candidate_type {
                relayed.get_or_create(&labels).set(i64::from(candidate == CandidateType::Relay));
            }
        }
    }
    registry.register("member_lines", "Lines a member holds", lines);
    registry.register_with_unit(
        "member_link_loss",
        "Share of a line's mix lost on the way to the member's panel",
        Unit::Other("ratio".into()),
        loss,
    );
    registry.register_with_unit("member_link_jitter", "Interarrival jitter of a line's mix", Unit::Seconds, jitter);
    registry.register_with_unit("member_link_round_trip", "Round trip to the media server", Unit::Seconds, rtt);
    registry.register("member_link_quality", "A line's link as judged: 0 good, 1 degraded, 2 poor", quality);
    registry.register(
        "member_link_relayed",
        "1 when a line's link goes through the TURN relay (crew off-site)",
        relayed,
    );
}

fn nodes(registry: &mut Registry, state: &AppState) {
    let status = state.janus.status();
    let (up, sessions, participants, capacity) = (node_gauges(), node_gauges(), node_gauges(), node_gauges());
    for node in status.nodes {
        let labels = NodeLabels { node: node.name };
        up.get_or_create(&labels).set(i64::from(node.state == JanusState::Up));
        sessions.get_or_create(&labels).set(node.sessions as i64);
        participants.get_or_create(&labels).set(node.participants as i64);
        capacity.get_or_create(&labels).set(i64::from(node.capacity));
    }
    registry.register("node_up", "Whether the media node is up and in step with the config", up);
    registry.register("node_sessions", "Users (crew sessions, server audio users) placed on the node", sessions);
    registry.register("node_participants", "Participants on the node: its users' lines", participants);
    registry.register("node_capacity", "Participants the node is configured to take (0: no limit)", capacity);
}

fn bridged(registry: &mut Registry, state: &AppState) {
    let view = state.bridge.view();
    let states = Family::<StateLabels, Gauge>::default();
    states.get_or_create(&StateLabels { state: view.state.to_string() }).set(1);
    let up = matches!(view.state, BridgeViewState::Idle | BridgeViewState::Running | BridgeViewState::Degraded);
    let input = Family::<CardUserLabels, FloatGauge>::default();
    let output = Family::<CardUserLabels, FloatGauge>::default();
    for branch in &view.branches {
        let labels = CardUserLabels { user: branch.name.clone(), group: branch.room.clone() };
        input.get_or_create(&labels).set(branch.input_level_db);
        output.get_or_create(&labels).set(branch.output_level_db);
    }
    registry.register("bridged_up", "Whether partyline-bridged is on the bus and playing a plan", gauge(i64::from(up)));
    registry.register("bridged_state_info", "partyline-bridged's state as control sees it", states);
    registry.register("card_input_level_dbfs", "Peak level of a server audio user's input channel", input);
    registry.register("card_output_level_dbfs", "Peak level of the group's mix on the user's output channel", output);
    let server_users = state.config.current().server_audio_users.len() as i64;
    registry.register(
        "server_users",
        "Server audio users configured: the card's channels bridged into groups",
        gauge(server_users),
    );
    let card = view.card;
    registry.register(
        "card_underruns",
        "Times the card's playback ran dry and played silence",
        ConstCounter::new(card.underruns),
    );
    registry.register(
        "card_overflowed_samples",
        "Samples the card's playback dropped, over its queue's limit",
        ConstCounter::new(card.overflowed_samples),
    );
    registry.register(
        "card_drift_ppm",
        "How much faster the card's capture clock runs than its playback's",
        float_gauge(card.drift_ppm),
    );
    aes67(registry, &view.aes67);
}

fn aes67(registry: &mut Registry, aes67: &partyline_shared::bridge::Aes67Status) {
    let ptp = &aes67.ptp;
    let states = Family::<StateLabels, Gauge>::default();
    states.get_or_create(&StateLabels { state: format!("{:?}", ptp.state).to_lowercase() }).set(1);
    registry.register("ptp_state_info", "The AES67 card's PTP clock state (off without AES67)", states);
    registry.register(
        "ptp_locked",
        "Whether the AES67 card's clock is locked to an allowed grandmaster",
        gauge(i64::from(ptp.state == PtpState::Locked)),
    );
    registry.register_with_unit(
        "ptp_offset",
        "The PTP clock's offset from the grandmaster",
        Unit::Seconds,
        float_gauge(ptp.offset_ns as f64 / 1e9),
    );
    registry.register_with_unit(
        "ptp_path_delay",
        "The PTP path delay to the grandmaster",
        Unit::Seconds,
        float_gauge(ptp.path_delay_ns as f64 / 1e9),
    );
    registry.register("aes67_received_packets", "AES67 packets received", ConstCounter::new(aes67.receive_packets));
    registry.register("aes67_lost_packets", "AES67 packets lost on the way", ConstCounter::new(aes67.receive_lost));
    registry.register(
        "aes67_late_packets",
        "AES67 packets that came too late to play",
        ConstCounter::new(aes67.receive_late),
    );
}

fn process(registry: &mut Registry, state: &AppState) {
    let events = state.events.stats();
    registry.register("events_clients", "Clients of the live event stream", gauge(events.clients as i64));
    registry.register(
        "events_clients_cut",
        "Event clients cut for reading too slowly",
        ConstCounter::new(events.clients_cut),
    );
    registry.register(
        "connections_open",
        "Connections open on the public listener",
        gauge(state.connections.open() as i64),
    );
    registry.register("connections_max", "The public listener's connection cap", gauge(state.connections.max() as i64));
    registry.register_with_unit(
        "control_uptime",
        "Time since control started",
        Unit::Seconds,
        float_gauge(state.started.elapsed().as_secs_f64()),
    );
    registry.register_with_unit(
        "control_cpu",
        "CPU time control has used (user and system)",
        Unit::Seconds,
        ConstCounter::new(cpu_seconds_of_this_process()),
    );
    registry.register_with_unit(
        "control_resident_memory",
        "control's resident set size",
        Unit::Bytes,
        gauge(Memory::of_this_process().rss as i64),
    );
}

fn gauge(value: i64) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(value);
    gauge
}

fn float_gauge(value: f64) -> FloatGauge {
    let gauge = FloatGauge::default();
    gauge.set(value);
    gauge
}

fn gauges() -> Family<GroupLabels, Gauge> {
    Family::default()
}

fn float_gauges() -> Family<MemberLineLabels, FloatGauge> {
    Family::default()
}

fn line_gauges() -> Family<MemberLineLabels, Gauge> {
    Family::default()
}

fn node_gauges() -> Family<NodeLabels, Gauge> {
    Family::default()
}
