//! Debian's Prometheus scrapes a running control with the admin token and answers queries on
//! its series; promtool passes the exposition, the alert rules and their unit tests
//! (`packaging/prometheus/`). Needs `prometheus` (scripts/deps installs it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use partyline_testkit::ReservedPort;

use crate::support::{Control, http, wait_for};

const WAIT: Duration = Duration::from_secs(30);

fn packaging(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/prometheus").join(file)
}

/// A Prometheus scraping `control` every second with the rules of the package; killed on drop.
struct Prometheus {
    child: Child,
    origin: String,
    _dir: tempfile::TempDir,
    _port: ReservedPort,
}

impl Prometheus {
    fn scraping(control: &Control) -> Prometheus {
        let dir = tempfile::tempdir().expect("temp dir");
        let token = dir.path().join("admin-token");
        std::fs::write(&token, &control.token).expect("token file");
        let target = control.origin.trim_start_matches("http://");
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: [{rules}]\n\
             scrape_configs:\n  - job_name: partyline\n    authorization: {{credentials_file: {token}}}\n    \
             static_configs: [{{targets: ['{target}']}}]\n",
            rules = packaging("partyline.rules.yml").display(),
            token = token.display(),
        );
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).expect("prometheus.yml");
        let port = ReservedPort::loopback();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{}", port.port()))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus runs (scripts/deps installs it)");
        Prometheus { child, origin: format!("http://127.0.0.1:{}", port.port()), _dir: dir, _port: port }
    }

    /// The instant vector of `query`, once Prometheus answers it with at least one sample.
    async fn samples(&self, query: &str) -> Vec<Value> {
        wait_for(&format!("Prometheus to answer {query}"), WAIT, async || {
            let response = http().get(format!("{}/api/v1/query", self.origin)).query(&[("query", query)]).send().await;
            let body: Value = response.ok()?.json().await.ok()?;
            let result = body["data"]["result"].as_array()?.clone();
            (!result.is_empty()).then_some(result)
        })
        .await
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn prometheus_scrapes_control_with_the_admin_token_and_answers_on_its_series() {
    let control = Control::start().await;
    assert_eq!(control.post_json("/admin/groups", json!({ "name": "Stage" })).await.0, StatusCode::CREATED);
    let prometheus = Prometheus::scraping(&control);

    let up = prometheus.samples(r#"up{job="partyline"} == 1"#).await;
    assert_eq!(up.len(), 1, "{up:?}");
    let groups = prometheus.samples(r#"partyline_group_info{name="Stage"}"#).await;
    assert_eq!(groups[0]["metric"]["group"], "stage", "{groups:?}");
    let members = prometheus.samples(r#"partyline_group_members{group="stage"}"#).await;
    assert_eq!(members[0]["value"][1], "0", "{members:?}");
    // Its own scrapes are counted by route, with their status.
    let scrapes = prometheus.samples(r#"partyline_http_requests_total{route="/metrics",status="200"} > 1"#).await;
    assert_eq!(scrapes.len(), 1, "{scrapes:?}");

    // The package's rules load and evaluate on the series.
    let rules = wait_for("the rules evaluated", WAIT, async || {
        let body: Value =
            http().get(format!("{}/api/v1/rules", prometheus.origin)).send().await.ok()?.json().await.ok()?;
        let rules = body["data"]["groups"][0]["rules"].as_array()?.clone();
        rules.iter().all(|r| r["lastEvaluation"].as_str().is_some_and(|t| !t.starts_with("0001"))).then_some(rules)
    })
    .await;
    assert_eq!(rules.len(), 7, "{rules:?}");
    for rule in &rules {
        assert_eq!(rule["health"], "ok", "{rule}");
    }
    // Janus is not configured here: its node is down, and the rule takes it up (pending for its
    // first 15 s, then firing).
    let pending = prometheus.samples(r#"ALERTS{alertname="PartylineMediaNodeDown"}"#).await;
    assert_eq!(pending[0]["metric"]["node"], "local", "{pending:?}");
}

fn promtool(args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (scripts/deps installs prometheus)");
    if let Some(text) = stdin {
        use std::io::Write as _;
        child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("written");
    }
    let output = child.wait_with_output().expect("promtool ends");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "promtool {args:?}: {said}");
    said
}

#[tokio::test]
async fn promtool_passes_the_exposition_the_alert_rules_and_their_tests() {
    let control = Control::start().await;
    assert_eq!(control.post_json("/admin/groups", json!({ "name": "Stage" })).await.0, StatusCode::CREATED);
    let text = http()
        .get(format!("{}/metrics", control.origin))
        .bearer_auth(&control.token)
        .send()
        .await
        .expect("scraped")
        .text()
        .await
        .expect("body");
    // Asked without an Accept header, /metrics answers in Prometheus's text format, the one
    // `check metrics` reads; it lints names, units and help, and prints nothing when all is well.
    let lint = promtool(&["check", "metrics"], Some(&text));
    assert!(lint.trim().is_empty(), "promtool check metrics: {lint}");
    let rules = packaging("partyline.rules.yml");
    assert!(promtool(&["check", "rules", rules.to_str().expect("UTF-8")], None).contains("SUCCESS: 7 rules found"));
    let tests = packaging("partyline.rules.test.yml");
    assert!(promtool(&["test", "rules", tests.to_str().expect("UTF-8")], None).contains("SUCCESS"));
}
