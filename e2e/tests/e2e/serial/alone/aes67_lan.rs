//! AES67 on a hostile LAN, from an attacker's host (`testkit::intruder`: another namespace on the
//! tests' AES67 network, sending multicast as anyone on a venue's LAN can): SAP spoofed in the
//! console's name and flooded, RTP sprayed at the console's stream's group. What is held is what
//! the admin and the crew see: the console's stream stays listed as the console announces it,
//! the list stays within its caps, and the card's inputs carry the console's audio only, the
//! intruder's packets counted as dropped. Needs root and `scripts/netns-run`'s namespace.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use partyline_shared::aes67::sap::SapPacket;
use partyline_testkit::aes67::{CONSOLE_GROUP, CONSOLE_NAME, Console, Grandmaster};
use partyline_testkit::intruder::{Intruder, RtpStream};
use partyline_testkit::wait_for;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::serial::alone::aes67_media::{aes67, settings};
use crate::serial::alone::aes67_rig::{Rig, on_the_network};
use partyline_testkit::stack::joined;

const SLOW: Duration = Duration::from_secs(30);
/// bridged's caps on the SAP list (`bridged/src/aes67/heard.rs`).
const MAX_PER_SENDER: usize = 32;

/// The network with a grandmaster and the console `console`, partyline on it listing SAP, and
/// an intruder on it.
async fn rig(console: partyline_testkit::aes67::ConsoleBuilder) -> (Rig, Intruder) {
    let rig = on_the_network(|net| Grandmaster::start(net, 1, 128), console, "  - name: Stage\n", &[]).await;
    let intruder = Intruder::on(&rig.net.intruder);
    (rig, intruder)
}

fn announced(view: &Value) -> Vec<Value> {
    view["announced"].as_array().cloned().unwrap_or_default()
}

/// The console's stream as the admin's list has it, if listed.
fn console_listed(view: &Value) -> Option<Value> {
    announced(view).into_iter().find(|a| a["stream"]["name"] == CONSOLE_NAME)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_can_neither_replace_nor_withdraw_the_console_s_stream_nor_swamp_the_list() {
    let (rig, intruder) = rig(Console::builder().sap_interval(Duration::from_secs(2))).await;
    let console_address: Ipv4Addr = rig.net.console.address.parse().expect("an address");
    wait_for("the console's stream listed", SLOW, async || console_listed(&aes67(&rig.stack).await)).await;

    // The attacker overhears the console's announcement and speaks in its name: a version of
    // its session on another group, and the deletion of its announcement, ten times a second.
    let heard = intruder.overhear_sap(console_address, SLOW);
    let fake =
        SapPacket { hash: heard.hash ^ 0x5a5a, sdp: heard.sdp.replace(CONSOLE_GROUP, "239.69.66.6"), ..heard.clone() };
    assert_ne!(fake.sdp, heard.sdp, "the fake names another group");
    let deletion = SapPacket { deletion: true, ..heard.clone() };
    let (mut polls, mut wrong) = (0, Vec::new());
    let until = Instant::now() + Duration::from_secs(8);
    let mut next_poll = Instant::now();
    while Instant::now() < until {
        intruder.send_sap(&fake);
        intruder.send_sap(&deletion);
        if Instant::now() >= next_poll {
            let listed = console_listed(&aes67(&rig.stack).await);
            let right = listed
                .as_ref()
                .is_some_and(|c| c["source"] == rig.net.console.address && c["stream"]["group"] == CONSOLE_GROUP);
            if !right {
                wrong.push(listed);
            }
            polls += 1;
            next_poll += Duration::from_millis(250);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("AES67 SAP spoofed in the console's name for 8 s: {} of {polls} looks at the list wrong", wrong.len());
    assert!(
        wrong.is_empty(),
        "{} of {polls} looks at the admin's list did not show the console's stream as it announces it: {:?}",
        wrong.len(),
        wrong.first()
    );

    // A flood of announcements from the intruder's own address: its share of the list, no more.
    for session in 0..2000_u32 {
        let sdp = format!(
            "v=0\r\no=- {session} 1 IN IP4 {}\r\ns=flood {session}\r\nc=IN IP4 239.69.99.1/32\r\nt=0 0\r\n",
            intruder.address()
        );
        intruder.send_sap(&SapPacket { deletion: false, origin: intruder.address(), hash: session as u16, sdp });
    }
    let from_intruder =
        |view: &Value| announced(view).iter().filter(|a| a["source"] == intruder.address().to_string()).count();
    let view = wait_for("the flood listed", SLOW, async || {
        let view = aes67(&rig.stack).await;
        (from_intruder(&view) > 0).then_some(view)
    })
    .await;
    let mut most = announced(&view).len();
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let view = aes67(&rig.stack).await;
        most = most.max(announced(&view).len());
        assert!(console_listed(&view).is_some(), "the console's stream is still listed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let count = from_intruder(&aes67(&rig.stack).await);
    println!("AES67 SAP flood of 2000 announcements: the intruder has {count} streams listed, the list at most {most}");
    assert_eq!(count, MAX_PER_SENDER, "the intruder's share of the list");
    assert_eq!(most, MAX_PER_SENDER + 1, "the intruder's share and the console's stream");
    let log = rig.bridged.log();
    assert!(log.contains("SAP: refused"), "bridged warns of what it refused:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rtp_sprayed_at_the_console_s_group_reaches_neither_the_card_nor_the_console_s_return() {
    const TONE_HZ: f64 = 1000.0;
    const TONE_DBFS: f64 = -20.0;
    let console = Console::builder().tone(3, TONE_HZ, TONE_DBFS).listen_sap("partyline");
    let (rig, intruder) = rig(console).await;
    let control = &rig.stack.control;
    let sdp = wait_for("the console's stream listed", SLOW, async || {
        console_listed(&aes67(&rig.stack).await).and_then(|c| c["sdp"].as_str().map(str::to_owned))
    })
    .await;
    assert_eq!(control.put_json("/admin/config/aes67", settings(Some(&sdp))).await.0, StatusCode::OK);
    let device = json!({ "inputDeviceId": "aes67", "outputDeviceId": "aes67", "sampleRate": 48_000 });
    assert_eq!(control.post_json("/admin/audio/device", device).await.0, StatusCode::OK);
    // The console's channel 3 → input 3 → Stage → Desk's output 3 → the console's channel 3.
    for (name, input, output) in [("Console", 2, None), ("Desk", 5, Some(2))] {
        let user = json!({ "name": name, "group": "stage", "inputChannel": input, "outputChannel": output });
        assert_eq!(control.post_json("/admin/server-users", user).await.0, StatusCode::CREATED);
    }
    rig.stack.bridge_becomes("Console and Desk joined", SLOW, |b| joined(b, &["Console", "Desk"])).await;
    rig.console.wait_receiving(SLOW).await;
    let near = |db: f64| (db - TONE_DBFS).abs() <= 1.0;
    rig.console.wait_levels("its tone back on channel 3", SLOW, |l| near(l.tone(3)) && near(l.rms(3))).await;

    // The intruder sends a stream of its own to the console's group and port, 14 dB louder, at
    // its RTP time on PTP time (as one that follows the grandmaster would).
    let group: Ipv4Addr = CONSOLE_GROUP.parse().expect("the group");
    let rtp = RtpStream { ssrc: 0x0bad_cafe, payload_type: 96, channels: 8, channel: 3, hz: 2500.0, dbfs: -6.0 };
    let spray = intruder.spray_rtp(SocketAddrV4::new(group, 5004), rtp);
    let before = aes67(&rig.stack).await;
    let mark = rig.console.mark();
    tokio::time::sleep(Duration::from_secs(5)).await;
    drop(spray);
    let windows = rig.console.levels_since(mark);
    let after = aes67(&rig.stack).await;
    let foreign = after["receiveForeign"].as_u64().unwrap_or(0);
    let packets =
        after["receivePackets"].as_u64().unwrap_or(0).saturating_sub(before["receivePackets"].as_u64().unwrap_or(0));
    let loudest = windows.iter().map(|l| l.rms(3)).fold(f64::MIN, f64::max);
    let faintest = windows.iter().map(|l| l.tone(3)).fold(f64::MAX, f64::min);
    println!(
        "AES67 RTP sprayed 5 s at the console's group: {} windows, channel 3 at most {loudest:.2} dBFS RMS, its tone at least {faintest:.2} dBFS; {packets} of the console's packets taken, {foreign} dropped",
        windows.len()
    );
    assert!(windows.len() >= 15, "the console's reports: {}", windows.len());
    // The console's tone alone comes back at its level to a hundredth of a dB; the intruder's
    // packets let through (its tone 14 dB louder) raise the RMS by a dB or more.
    assert!(
        loudest - TONE_DBFS <= 0.5 && near(faintest),
        "the console's channel 3 came back with the intruder's audio in it (RMS up to {loudest:.2}, its tone down to {faintest:.2} dBFS)"
    );
    assert!(foreign >= 3000, "the intruder's packets counted as dropped: {foreign}");
    assert!(packets >= 3000, "the console's packets went on: {packets}");
}
