//! The D-Bus contract: the real `partyline-bridged` on a private bus, every method, property and
//! signal of `org.partyline.Bridge1` called through `partyline_shared::bridge::BridgeProxy`, and
//! the checked-in introspection XML compared with the live service's.

use std::process::Command;
use std::time::Duration;

use futures_util::StreamExt as _;
use partyline_shared::bridge::{
    BUS_NAME, BranchState, BridgeError, BridgeProxy, BridgeState, INTERFACE, OBJECT_PATH, Plan, PlanGroup, PlanUser,
};
use partyline_shared::rooms_bus::{ROOMS_INTERFACE, ROOMS_PATH};
use partyline_testkit::SoundServer;
use partyline_testkit::dbus::{Bridged, Bus, wait_status};
use partyline_testkit::pulse::PulseServer;

const WAIT: Duration = Duration::from_secs(10);

fn user(name: &str) -> PlanUser {
    PlanUser { name: name.into(), room: "stage-left".into(), input_channel: 0, output_channel: Some(1), ifb: None }
}

fn group(room: &str) -> PlanGroup {
    PlanGroup {
        room: room.into(),
        identity: format!("card:{room}"),
        token: format!("{room}-token"),
        display: "A, B".into(),
        bitrate_kbps: 64,
        muted: false,
    }
}

fn empty_plan() -> Plan {
    Plan {
        device_sample_rate: 48_000,
        jitter_buffer_ms: 40,
        janus_url: "http://127.0.0.1:9/janus".into(),
        ..Plan::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_property_and_signal_through_the_shared_proxy() {
    let bus = Bus::start();
    let pulse = PulseServer::start();
    pulse.add_card("card", 48_000);
    let mut bridged = Bridged::on_card(&bus, &pulse, &[]);
    let connection = bus.connect().await;
    let proxy = BridgeProxy::builder(&connection)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
        .expect("proxy");
    let mut changes = proxy.receive_status_changed().await.expect("subscribe StatusChanged");
    let mut logs = proxy.receive_log_entry().await.expect("subscribe LogEntry");

    // Fresh: idle, generation 0.
    assert_eq!(proxy.state().await.expect("State"), BridgeState::Idle);
    assert_eq!(proxy.generation().await.expect("Generation"), 0);
    let status = proxy.status().await.expect("Status");
    assert_eq!((status.state, status.generation, status.branches.len()), (BridgeState::Idle, 0, 0));

    // An empty plan: generation 1, StatusChanged says so; the same plan again changes nothing.
    assert_eq!(proxy.apply(&empty_plan()).await.expect("Apply(empty)"), 1);
    let signal = tokio::time::timeout(WAIT, changes.next()).await.expect("StatusChanged in time").expect("stream");
    let args = signal.args().expect("args");
    assert_eq!((args.state, args.generation), (BridgeState::Idle, 1));
    assert_eq!(proxy.apply(&empty_plan()).await.expect("Apply(same)"), 1);
    assert_eq!(proxy.generation().await.expect("Generation"), 1);

    // Invalid plans: typed InvalidPlan naming the field; nothing applied.
    let in_stage = |users: Vec<PlanUser>| Plan { groups: vec![group("stage-left")], users, ..empty_plan() };
    let invalid: Vec<(Plan, &str)> = vec![
        (Plan { device_sample_rate: 0, ..empty_plan() }, "device_sample_rate"),
        (in_stage(vec![PlanUser { input_channel: 8, ..user("a") }]), "users[0].input_channel"),
        (in_stage(vec![PlanUser { output_channel: Some(9), ..user("a") }]), "users[0].output_channel"),
        (in_stage(vec![user("a"), user("a")]), "users[1].name"),
        (in_stage(vec![PlanUser { room: "elsewhere".into(), ..user("a") }]), "users[0].room"),
        (Plan { users: vec![user("a")], ..empty_plan() }, "users[0].room"),
        (
            Plan {
                groups: vec![PlanGroup { token: String::new(), ..group("stage-left") }],
                ..in_stage(vec![user("a")])
            },
            "groups[0].token",
        ),
        (
            Plan { groups: vec![PlanGroup { bitrate_kbps: 0, ..group("stage-left") }], ..in_stage(vec![user("a")]) },
            "groups[0].bitrate_kbps",
        ),
        (Plan { groups: vec![group("stage-left"), group("empty")], ..in_stage(vec![user("a")]) }, "groups[1].room"),
    ];
    for (plan, field) in invalid {
        match proxy.apply(&plan).await {
            Err(BridgeError::InvalidPlan(message)) => assert!(message.starts_with(field), "{message:?} names {field}"),
            other => panic!("{field}: expected InvalidPlan, got {other:?}"),
        }
    }
    // bridged's own log lines reach the bus.
    let entry = tokio::time::timeout(WAIT, async {
        loop {
            let entry = logs.next().await.expect("LogEntry stream");
            let args = entry.args().expect("args");
            if args.message.contains("plan refused") {
                return (args.level.to_owned(), args.source.to_owned());
            }
        }
    })
    .await
    .expect("a LogEntry for the refused plan");
    assert_eq!(entry.0, "warn");
    assert!(entry.1.starts_with("partyline_bridged"), "{entry:?}");

    // A device that does not exist: UnknownDevice, nothing applied.
    let with_users = Plan {
        input_device: "card.monitor".into(),
        output_device: "card".into(),
        janus_url: "http://127.0.0.1:9/janus".into(),
        groups: vec![group("stage-left")],
        users: vec![user("a"), PlanUser { output_channel: None, ..user("b") }],
        ..empty_plan()
    };
    for (plan, field) in [
        (Plan { input_device: "nope.monitor".into(), ..with_users.clone() }, "input_device"),
        (Plan { output_device: "nope".into(), ..with_users.clone() }, "output_device"),
    ] {
        match proxy.apply(&plan).await {
            Err(BridgeError::UnknownDevice(message)) => assert!(message.starts_with(field), "{message:?}"),
            other => panic!("{field}: expected UnknownDevice, got {other:?}"),
        }
    }
    assert_eq!(proxy.generation().await.expect("Generation"), 1);
    assert_eq!(proxy.state().await.expect("State"), BridgeState::Idle);

    // Real devices, Janus unreachable: applied; the group's one participant retries and says
    // why, and each user shows its state.
    assert_eq!(proxy.apply(&with_users).await.expect("Apply(users)"), 2);
    let status = wait_status(&proxy, WAIT, "the participant retrying", |s| {
        s.participants.len() == 1 && s.participants[0].state == BranchState::Retrying
    })
    .await;
    assert_eq!(status.state, BridgeState::Degraded);
    assert_eq!(status.generation, 2);
    let participant = &status.participants[0];
    assert!(participant.last_error.contains("Janus is unreachable"), "{participant:?}");
    assert_eq!((participant.room.as_str(), participant.display.as_str()), ("stage-left", "A, B"));
    assert_eq!(status.branches.len(), 2);
    for branch in &status.branches {
        assert_eq!((branch.state, branch.room.as_str()), (BranchState::Retrying, "stage-left"), "{branch:?}");
        assert!(branch.last_error.contains("Janus is unreachable"), "{branch:?}");
    }
    assert_eq!(proxy.state().await.expect("State"), BridgeState::Degraded);
    let signal = tokio::time::timeout(WAIT, async {
        loop {
            let signal = changes.next().await.expect("stream");
            if signal.args().expect("args").state == BridgeState::Degraded {
                return signal;
            }
        }
    })
    .await
    .expect("StatusChanged(degraded)");
    assert_eq!(signal.args().expect("args").generation, 2);

    // Back to no users: idle again, the card released.
    assert_eq!(proxy.apply(&empty_plan()).await.expect("Apply(empty)"), 3);
    wait_status(&proxy, WAIT, "idle", |s| {
        s.state == BridgeState::Idle && s.branches.is_empty() && s.participants.is_empty()
    })
    .await;

    // The typed interface, as busctl sees it.
    let output = Command::new("busctl")
        .arg(format!("--address={}", bus.address))
        .args(["introspect", BUS_NAME, OBJECT_PATH])
        .output()
        .expect("run busctl");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "busctl: {}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains(INTERFACE), "busctl introspect lacks {INTERFACE}:\n{text}");
    // Name, type, signature and result of each member (busctl's columns widen with the longest).
    let members: Vec<Vec<&str>> = text.lines().map(|line| line.split_whitespace().take(4).collect()).collect();
    for member in [
        [".Apply", "method", "(ssussasua(ssssub)a(ssyaya(ayssai))(syassusssqyy))", "t"],
        [".Status", "method", "-", "(stsa(ssssttdds)a(sssstts)((sysxx)sttttxa(ssu))(ttd))"],
        [".Generation", "property", "t", ""],
        [".State", "property", "s", ""],
        [".StatusChanged", "signal", "st", "-"],
        [".LogEntry", "signal", "sss", "-"],
        [".Talking", "signal", "sb", "-"],
    ] {
        let wanted: Vec<&str> = member.into_iter().filter(|field| !field.is_empty()).collect();
        assert!(
            members.iter().any(|fields| fields.starts_with(&wanted)),
            "busctl introspect lacks {wanted:?}:\n{text}"
        );
    }

    // SIGTERM: exit 0, the name is released.
    let status = bridged.terminate();
    assert!(status.success(), "exit status {status}:\n{}", bridged.log());
    let dbus = zbus::fdo::DBusProxy::new(&connection).await.expect("DBus proxy");
    let owned = dbus.name_has_owner(BUS_NAME.try_into().expect("name")).await.expect("NameHasOwner");
    assert!(!owned, "the name is still owned after exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checked_in_introspection_xml_is_current() {
    let bus = Bus::start();
    let _bridged = Bridged::start(&bus, &[]);
    let connection = bus.connect().await;
    let bridge = interface_xml(&connection, OBJECT_PATH, INTERFACE, "bridged/src/service.rs").await;
    expect_test::expect_file!["../../packaging/dbus/org.partyline.Bridge1.xml"].assert_eq(&bridge);
    let rooms = interface_xml(&connection, ROOMS_PATH, ROOMS_INTERFACE, "bridged/src/rooms_service.rs").await;
    expect_test::expect_file!["../../packaging/dbus/org.partyline.Rooms1.xml"].assert_eq(&rooms);
}

/// The introspection document of `interface` at `path`, as the checked-in files hold it.
async fn interface_xml(connection: &zbus::Connection, path: &str, interface: &str, source: &str) -> String {
    let introspectable = zbus::fdo::IntrospectableProxy::builder(connection)
        .destination(BUS_NAME)
        .expect("destination")
        .path(path)
        .expect("path")
        .build()
        .await
        .expect("proxy");
    let xml = introspectable.introspect().await.expect("Introspect");
    let start = xml.find(&format!("<interface name=\"{interface}\">")).expect("our interface in the XML");
    let end = start + xml[start..].find("</interface>").expect("end of our interface") + "</interface>".len();
    format!(
        "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n \
         \"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n\
         <!-- Generated from {source} by bridged/tests/contract.rs (UPDATE_EXPECT=1). -->\n\
         <node name=\"{path}\">\n {}\n</node>\n",
        &xml[start..end]
    )
}
