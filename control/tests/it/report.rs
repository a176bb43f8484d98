//! The show report (`GET /api/admin/report`) as a producer reads it after a show: who joined,
//! dropped out and came back, how long, who talked how much, what went down, the warnings; as
//! JSON and as CSV, from the journal in the state directory, which a restart of control keeps.
//! Only the admin may read it, and a bad window is refused naming the parameter.

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use reqwest::{Method, StatusCode, header};
use serde_json::{Value, json};

use crate::support::{Control, wait_for};

/// The journal's writer gathers lines for a second; a report asked for at once may lack them.
const SOON: Duration = Duration::from_secs(10);

fn report_path(query: &str) -> String {
    format!("/admin/report{query}")
}

/// The JSON report of the last 24 h, once `check` holds for it.
async fn report_when(control: &Control, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    wait_for(what, SOON, async || {
        let (status, report) = control.get_json(&report_path("")).await;
        assert_eq!(status, StatusCode::OK, "{report}");
        check(&report).then_some(report)
    })
    .await
}

/// The CSV report: its content type and its rows, split into fields (none of the fields these
/// tests read holds a comma).
async fn csv_report(request: reqwest::RequestBuilder) -> (String, Vec<Vec<String>>) {
    let response = request.send().await.expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()[header::CONTENT_TYPE].to_str().expect("ASCII").to_owned();
    let text = response.text().await.expect("a body");
    let rows = text.split_terminator("\r\n").map(|row| row.split(',').map(str::to_owned).collect()).collect();
    (content_type, rows)
}

fn warning_messages(report: &Value) -> Vec<String> {
    let warnings = report["warnings"].as_array().expect("warnings");
    warnings.iter().filter_map(|w| w["message"].as_str()).map(str::to_owned).collect()
}

#[tokio::test]
async fn only_the_admin_may_read_it_and_a_bad_window_is_refused_naming_the_parameter() {
    let control = Control::start().await;
    let response = crate::support::http().get(control.url(&report_path(""))).send().await.expect("sent");
    let (status, body) = crate::support::read(response).await;
    assert_eq!((status, &body["code"]), (StatusCode::UNAUTHORIZED, &json!("unauthorized")), "{body}");

    let cases = [
        ("?from=yesterday", "from: \"yesterday\" is not an RFC 3339 time"),
        ("?to=2026-02-30T10:00:00Z", "to: \"2026-02-30T10:00:00Z\" names no such date"),
        ("?from=2026-05-02T00:00:00Z&to=2026-05-01T00:00:00Z", "from (2026-05-02T00:00:00.000Z) is after to"),
        ("?format=xml", "format"),
        ("?since=2026-05-01T00:00:00Z", "since"),
    ];
    for (query, says) in cases {
        let (status, body) = control.get_json(&report_path(query)).await;
        assert_eq!((status, &body["code"]), (StatusCode::BAD_REQUEST, &json!("bad_request")), "{query}: {body}");
        assert!(body["error"].as_str().is_some_and(|e| e.contains(says)), "{query}: {body}");
    }
    // A `+` offset the client did not percent-encode arrives as a space, and is read as `+`.
    let (status, body) = control.get_json(&report_path("?from=2026-05-01T20:00:00+02:00")).await;
    assert_eq!((status, &body["from"]), (StatusCode::OK, &json!("2026-05-01T18:00:00.000Z")), "{body}");
}

/// What control itself sees without Janus nor bridged: bridged missing (an outage still going
/// on), warnings (a refused write's). In the JSON and the CSV, in a journal of mode 0600 that holds no
/// admin token, and still there after a restart, which is in the report too.
#[tokio::test]
async fn warnings_and_outages_are_reported_as_json_and_csv_and_outlive_a_restart() {
    let mut control = Control::start().await;
    let (status, _) = control.post_json("/admin/groups", json!({ "name": "Stage" })).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = control.post_json("/admin/groups", json!({ "name": "stage" })).await;
    assert_eq!(status, StatusCode::CONFLICT, "refused, which logs a warning");

    let report = report_when(&control, "the refused write's warning", |report| {
        warning_messages(report).iter().any(|m| m.contains("refused request"))
    })
    .await;
    // No partyline-bridged on the bus here (no bus, or none on it): an outage still going on.
    let outages = report["outages"].as_array().expect("outages");
    let bridged = outages.iter().find(|outage| outage["service"] == "bridged").expect("bridged's outage");
    assert!(["unreachable", "absent"].contains(&bridged["state"].as_str().unwrap_or_default()), "{report:#}");
    assert_eq!(bridged["end"], Value::Null, "{report:#}");
    assert_eq!(report["controlStarts"].as_array().map(Vec::len), Some(1), "{report:#}");
    assert_eq!((&report["lostEvents"], &report["unreadableLines"]), (&json!(0), &json!(0)));

    for request in [
        control.request(Method::GET, &report_path("?format=csv")),
        control.request(Method::GET, &report_path("")).header(header::ACCEPT, "text/csv"),
    ] {
        let (content_type, rows) = csv_report(request).await;
        assert_eq!(content_type, "text/csv; charset=utf-8");
        assert_eq!(rows[0], ["time", "kind", "member", "group", "detail", "duration_s"]);
        let kinds: Vec<&str> = rows[1..].iter().map(|row| row[1].as_str()).collect();
        assert_eq!(kinds[0], "control_started", "{rows:?}");
        assert!(kinds.contains(&"outage") && kinds.contains(&"warn"), "{rows:?}");
        let warning = rows.iter().find(|row| row[1] == "warn" && row[4].contains("refused request"));
        assert!(warning.is_some_and(|row| row.len() == 6 && row[5].is_empty()), "{rows:?}");
    }

    let journal = control.dir().join("journal.jsonl");
    assert_eq!(std::fs::metadata(&journal).expect("the journal").permissions().mode() & 0o777, 0o600);
    assert!(!std::fs::read_to_string(&journal).expect("the journal").contains(&control.token), "no token in it");

    // Stopped and started again: the journal goes on, the report shows both starts.
    control.signal("TERM");
    wait_for("control stopped", SOON, async || control.log_text().contains("partyline-control stopped").then_some(()))
        .await;
    control.respawn().await;
    let report = report_when(&control, "the second start", |report| {
        report["controlStarts"].as_array().is_some_and(|starts| starts.len() == 2)
    })
    .await;
    assert!(warning_messages(&report).iter().any(|m| m.contains("refused request")), "{report:#}");
}

/// A crew member on the real stack: joins, talks (Janus's voice activity events, as its event
/// handler posts them), her link drops and recovers, she leaves and comes back. The report says
/// so, with the durations, as JSON and CSV.
#[cfg(feature = "services")]
#[tokio::test]
async fn a_member_who_drops_out_and_comes_back_is_in_the_report() {
    use partyline_testkit::janus::Probe;

    use partyline_testkit::stack::{Stack, user_state};

    let stack = Stack::start("  - name: Stage\n").await;
    let control = &stack.control;
    let join = async || {
        let (status, ann) = control.post_json("/token", json!({ "username": "Ann", "groupId": "stage" })).await;
        assert_eq!(status, StatusCode::OK, "{ann}");
        let (token, identity) =
            (ann["token"].as_str().expect("token"), ann["participantIdentity"].as_str().expect("id"));
        let probe = Probe::open(&stack.janus, token).await.expect("a session");
        probe.join_result("stage", identity, "Ann").await.expect("joined");
        wait_for("Ann connected", SOON, async || {
            (user_state(control, identity).await.as_deref() == Some("connected")).then_some(())
        })
        .await;
        (token.to_owned(), identity.to_owned(), ann["panelKey"].as_str().expect("a panel key").to_owned(), probe)
    };
    let (token, identity, panel_key, probe) = join().await;

    // She talks for a second.
    let http = crate::support::http();
    let post_talk = async |event: &str| {
        let data = json!({ "audiobridge": event, "room": "stage", "id": identity });
        let body = json!([{ "type": 64, "event": { "plugin": "janus.plugin.audiobridge", "data": data } }]);
        let url = control.events_url("/api/internal/janus-events");
        let sent = http.post(url).basic_auth("janus", Some("test-event-secret")).json(&body).send().await;
        assert_eq!(sent.expect("posted").status(), StatusCode::NO_CONTENT);
    };
    post_talk("talking").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    post_talk("stopped-talking").await;

    // Her link goes poor, then good for two reports (a second apart at least).
    for loss in [15.0, 0.0, 0.0] {
        let report = json!({ "token": token, "lines": [{ "groupId": "stage", "lossPercent": loss, "jitterMs": 3.0 }] });
        let (status, judged) = control.post_json("/session/link", report).await;
        assert_eq!(status, StatusCode::OK, "{judged}");
        tokio::time::sleep(Duration::from_millis(1_100)).await;
    }

    // She leaves, and is back two seconds later (a new session: a new identity, her name).
    probe.destroy().await.expect("left");
    wait_for("Ann gone", SOON, async || user_state(control, &identity).await.is_none().then_some(())).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, identity_again, _, _probe_again) = join().await;

    let report = report_when(control, "Ann back", |report| {
        report["members"][0]["joins"].as_array().is_some_and(|joins| joins.len() == 2)
    })
    .await;
    let ann = &report["members"][0];
    assert_eq!((&ann["username"], &ann["identities"]), (&json!("Ann"), &json!([identity, identity_again])));
    assert_eq!(ann["leaves"][0]["why"], "left the room", "{report:#}");
    let talked = ann["talkSeconds"]["stage"].as_f64().expect("talk on stage");
    assert!((0.9..3.0).contains(&talked), "{report:#}");
    let drops = ann["drops"].as_array().expect("drops");
    assert_eq!(drops.len(), 2, "{report:#}");
    let (link, rejoin) = (&drops[0], &drops[1]);
    assert_eq!((&link["kind"], &link["group"]), (&json!("link"), &json!("stage")), "{report:#}");
    assert!(link["detail"].as_str().is_some_and(|d| d.starts_with("poor (loss 15.0 %")), "{report:#}");
    assert!(link["durationS"].as_f64().is_some_and(|s| (2.0..6.0).contains(&s)), "{report:#}");
    assert_eq!((&rejoin["kind"], &rejoin["detail"]), (&json!("rejoin"), &json!("left the room")), "{report:#}");
    assert!(rejoin["durationS"].as_f64().is_some_and(|s| (2.0..10.0).contains(&s)), "{report:#}");
    let stage = &report["groups"][0];
    assert_eq!(
        (&stage["group"], &stage["members"], &stage["peakMembers"]),
        (&json!("stage"), &json!(["Ann"]), &json!(1))
    );
    assert_eq!(stage["talkSeconds"], ann["talkSeconds"]["stage"]);

    let journal = std::fs::read_to_string(control.dir().join("journal.jsonl")).expect("the journal");
    assert!(!journal.contains(&token), "no crew token in the journal");
    assert!(!journal.contains(&panel_key), "no panel key in the journal");

    let (_, rows) = csv_report(control.request(Method::GET, &report_path("?format=csv"))).await;
    let of_ann: Vec<(&str, &str)> =
        rows.iter().filter(|row| row[2] == "Ann").map(|row| (row[1].as_str(), row[3].as_str())).collect();
    assert_eq!(
        of_ann,
        [
            ("join", "stage"),
            ("talk", "stage"),
            ("link_drop", "stage"),
            ("leave", "stage"),
            ("rejoin", "stage"),
            ("join", "stage")
        ],
        "{rows:?}"
    );
}
