//! `GET /metrics`: admin-only, in the OpenMetrics text format, the groups from the config and
//! the requests by route template, never a secret. (Prometheus itself scrapes it in
//! `prometheus.rs`, with the services.)

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{Control, http, read};

/// `/metrics` in the OpenMetrics format, as Prometheus asks for it.
async fn scrape(control: &Control) -> String {
    let response = http()
        .get(format!("{}/metrics", control.origin))
        .header("accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
        .bearer_auth(&control.token)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()["content-type"].to_str().expect("ASCII").to_owned();
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    response.text().await.expect("body")
}

/// The value of the sample `series` (its name and labels exactly as written), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_need_the_admin_token() {
    let control = Control::start().await;
    for auth in [None, Some("Bearer wrong")] {
        let mut request = http().get(format!("{}/metrics", control.origin));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let (status, body) = read(request.send().await.expect("sent")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(body["code"], "unauthorized", "{body}");
    }
}

#[tokio::test]
async fn metrics_show_the_groups_and_the_requests_by_route_and_no_secret() {
    let control = Control::start().await;
    for name in ["Stage", "Lighting \"LX\""] {
        assert_eq!(control.post_json("/admin/groups", json!({ "name": name })).await.0, StatusCode::CREATED);
    }
    // A panel key in a path is a secret: it must not become a label.
    let key = "k3y-that-must-not-show";
    let status = http().get(control.url(&format!("/panel/{key}"))).send().await.expect("sent").status();
    assert_eq!(status, StatusCode::NOT_FOUND);
    let status = http().get(control.url("/no/such/route")).send().await.expect("sent").status();
    assert_eq!(status, StatusCode::NOT_FOUND);

    let cpu_before = cpu_seconds_of(control.pid());
    let text = scrape(&control).await;
    let cpu_after = cpu_seconds_of(control.pid());
    assert!(text.ends_with("# EOF\n"), "an OpenMetrics exposition ends with # EOF:\n{text}");
    assert_eq!(sample(&text, r#"partyline_group_info{group="stage",name="Stage"}"#), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, r#"partyline_group_info{group="lighting-lx",name="Lighting \"LX\""}"#),
        Some(1.0),
        "a name's quotes are escaped:\n{text}"
    );
    assert_eq!(sample(&text, r#"partyline_group_members{group="stage"}"#), Some(0.0), "{text}");
    assert_eq!(sample(&text, r#"partyline_group_talkers{group="stage"}"#), Some(0.0), "{text}");
    let created = r#"partyline_http_requests_total{route="/api/admin/groups",method="POST",status="201"}"#;
    assert_eq!(sample(&text, created), Some(2.0), "{text}");
    let panel = r#"partyline_http_requests_total{route="/api/panel/{key}",method="GET",status="404"}"#;
    assert_eq!(sample(&text, panel), Some(1.0), "{text}");
    let unmatched = r#"partyline_http_requests_total{route="unmatched",method="GET",status="404"}"#;
    assert_eq!(sample(&text, unmatched), Some(1.0), "{text}");
    assert!(text.contains(r#"partyline_http_request_duration_seconds_count{route="/api/admin/groups"} 2"#), "{text}");
    assert_eq!(sample(&text, "partyline_admin_token_new_addresses_total"), Some(1.0), "{text}");
    // The kernel counts CPU time in ticks: a control that has just started may have none yet.
    let cpu = sample(&text, "partyline_control_cpu_seconds_total").expect("control's CPU time");
    assert!((cpu_before..=cpu_after).contains(&cpu), "{cpu_before} ≤ {cpu} ≤ {cpu_after}:\n{text}");
    assert_eq!(sample(&text, r#"partyline_group_talk_seconds_total{group="stage"}"#), Some(0.0), "{text}");
    for secret in [key, control.token.as_str()] {
        assert!(!text.contains(secret), "a secret in the metrics:\n{text}");
    }
}

/// A process's CPU time (user and system) as the kernel reports it in `/proc/PID/stat`.
fn cpu_seconds_of(pid: u32) -> f64 {
    let pid = i32::try_from(pid).expect("a pid");
    let stat = procfs::process::Process::new(pid).and_then(|p| p.stat()).expect("the process's stat");
    (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64
}
