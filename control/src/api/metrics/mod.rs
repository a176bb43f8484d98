//! `GET /metrics`: the counters of `crate::metrics` and the state as it is now (`snapshot`:
//! groups, members and their links, media nodes, bridged, the card, the event stream, the
//! process), in the OpenMetrics text format or Prometheus's. Requests are counted by
//! `api::observe`.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use super::{AppState, ErrorBody};
use crate::metrics::{OPENMETRICS, PROMETHEUS_TEXT, to_prometheus_text};

mod snapshot;

/// partyline's figures for Prometheus: groups (members, talkers, talk time), members' links,
/// media nodes, bridged and the card (levels, faults, drift, PTP, AES67), the event stream, HTTP
/// requests by route and their latency, the process. In the OpenMetrics text format when the
/// client asks for it (Prometheus does), Prometheus's text format 0.0.4 otherwise. Needs the
/// admin token like the admin routes (Prometheus: `authorization: {credentials_file: …}`).
#[utoipa::path(get, path = "/metrics", tag = "system", security(("admin_token" = [])),
    responses((status = 200, description = "The metrics", content(
            (String = "application/openmetrics-text; version=1.0.0; charset=utf-8"),
            (String = "text/plain; version=0.0.4; charset=utf-8"))),
        (status = 401, body = ErrorBody)))]
pub async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> impl IntoResponse {
    let text = render(&state);
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if accept.contains("application/openmetrics-text") {
        ([(header::CONTENT_TYPE, OPENMETRICS)], text)
    } else {
        ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], to_prometheus_text(&text))
    }
}

/// The whole exposition, as of now, in the OpenMetrics text format.
fn render(state: &AppState) -> String {
    let mut registry = Registry::with_prefix("partyline");
    state.metrics.register(&mut registry);
    state.bridge.applies.register(&mut registry);
    snapshot::register(&mut registry, state);
    let mut text = String::new();
    // Writing into a String cannot fail; an encoder error would be a bug in a label.
    if let Err(error) = encode(&mut text, &registry) {
        tracing::error!(%error, "the metrics could not be encoded");
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use axum::http::Method;
    use partyline_shared::bridge::{BranchStatus, Status};

    use super::*;
    use crate::events::LiveEvent;
    use crate::links::{CandidateType, LinkFigures};
    use crate::secrets::SecretValue;
    use crate::users::Line;

    /// The series names (`partyline_…`) a file of the packaging uses.
    fn series_used_by(file: &str) -> Vec<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging").join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut names: Vec<String> = text
            .match_indices("partyline_")
            .map(|(at, _)| {
                let name = &text[at..];
                let end = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(name.len());
                name[..end].to_owned()
            })
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// A control with a group, a member on it who talks and reported a degraded link, a server
    /// audio user, a plan applied and a request answered: every family has a sample.
    async fn a_show() -> (tempfile::TempDir, AppState) {
        partyline_shared::crypto::install_provider();
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("config.yaml");
        std::fs::write(&config, "groups:\n  - name: Stage\n").expect("config written");
        let state = AppState::offline(&config, dir.path(), "admin-secret").expect("offline state");
        let lines = vec![Line::new("stage", true, true)];
        let key = SecretValue::new("panel-secret".into());
        state.users.register("u1".into(), "Kai".into(), lines, "token-secret".into(), key, None);
        assert!(state.users.joined("stage", "u1"));
        let figures = LinkFigures {
            loss_percent: 4.0,
            jitter_ms: 12.0,
            rtt_ms: Some(40.0),
            candidate_type: Some(CandidateType::Relay),
        };
        state.links.report("u1", &[("stage".to_owned(), figures)]).expect("link report taken");
        let talking = LiveEvent::Talking { identity: "u1".into(), username: "Kai".into(), group_id: "stage".into() };
        state.events.publish(&talking);
        state.bridge.applies.count(true, Duration::from_millis(3));
        state.metrics.http.observe("/api/admin/groups", &Method::GET, 200, 0.000_05);
        let branch = BranchStatus { name: "FOH".into(), room: "stage".into(), ..BranchStatus::default() };
        state.bridge.take_status(Status { branches: vec![branch], ..Status::default() });
        (dir, state)
    }

    #[tokio::test]
    async fn every_series_the_alert_rules_and_the_dashboard_read_is_exposed() {
        let (_dir, state) = a_show().await;
        let text = render(&state);
        let exposed = |name: &str| {
            text.lines().any(|line| line.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])))
        };
        for file in ["prometheus/partyline.rules.yml", "grafana/partyline-show.json"] {
            let used = series_used_by(file);
            assert!(used.len() >= 5, "{file}: {used:?}");
            for name in used {
                assert!(exposed(&name), "{file} reads {name}, which /metrics does not have:\n{text}");
            }
        }
    }

    #[tokio::test]
    async fn a_member_s_line_shows_with_its_talk_and_its_link_and_no_secret() {
        let (_dir, state) = a_show().await;
        let text = render(&state);
        for sample in [
            r#"partyline_group_members{group="stage"} 1"#,
            r#"partyline_group_talkers{group="stage"} 1"#,
            r#"partyline_member_lines{identity="u1",member="Kai"} 1"#,
            r#"partyline_member_link_quality{identity="u1",member="Kai",group="stage"} 1"#,
            r#"partyline_member_link_loss_ratio{identity="u1",member="Kai",group="stage"} 0.04"#,
            r#"partyline_member_link_relayed{identity="u1",member="Kai",group="stage"} 1"#,
            r#"partyline_bridged_plan_applies_total{outcome="applied"} 1"#,
        ] {
            assert!(text.lines().any(|line| line == sample), "no {sample}:\n{text}");
        }
        for secret in ["admin-secret", "panel-secret", "token-secret"] {
            assert!(!text.contains(secret), "{secret} in the metrics");
        }
    }
}
