//! The crew's links as their panels measure them: per line, the loss of what it hears, the
//! jitter and the round trip, from the WebRTC statistics of the line's peer connection
//! (`POST /api/session/link`), judged good, degraded or poor. A change of judgement is an event
//! (`linkChanged`) and a log line; the admin's users list shows the figures.
//!
//! The thresholds follow `bench/lossy` (BENCHMARKS.md, "Lossy links"): with the rooms' FEC a
//! listener hears nothing of 2 % random loss, short concealed gaps from 5 %, and a talker's
//! queue in AudioBridge (60 ms while talking) absorbs some 30 ms of jitter.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use partyline_shared::sync::lock;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A panel reports at most this often (it reports every 5 s).
pub const MIN_REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// A better judgement holds only after this many reports in a row: a link that flickers
/// around a threshold is not an event every 5 s.
const REPORTS_TO_RECOVER: u8 = 2;

/// One line's link as its panel measured it over the last few seconds.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkFigures {
    /// Packets of the line's mix lost on the way to the panel, % (0 to 100).
    pub loss_percent: f32,
    /// Interarrival jitter of the mix, ms (0 to 10,000).
    pub jitter_ms: f32,
    /// Round trip to the media server, ms (0 to 10,000), when the panel knows it.
    #[serde(default)]
    pub rtt_ms: Option<f32>,
    /// How the panel's end of the connection reaches the media server (the local candidate of
    /// the selected ICE pair): `relay` when through the TURN relay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_type: Option<CandidateType>,
}

/// An ICE candidate's type (RFC 8445), as WebRTC's statistics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CandidateType {
    /// The device's own address: on the media server's network, or routed to it.
    Host,
    /// The device's address as a STUN server saw it (through a NAT).
    Srflx,
    /// Its address as the media server saw it (through a NAT).
    Prflx,
    /// Through the TURN relay.
    Relay,
}

impl LinkFigures {
    /// Why the figures cannot be a link's, if they cannot.
    pub fn invalid(&self) -> Option<String> {
        let in_range = |v: f32, max: f32| v.is_finite() && (0.0..=max).contains(&v);
        if !in_range(self.loss_percent, 100.0) {
            return Some(format!("lossPercent {} is out of range: expected 0 to 100", self.loss_percent));
        }
        if !in_range(self.jitter_ms, 10_000.0) {
            return Some(format!("jitterMs {} is out of range: expected 0 to 10000", self.jitter_ms));
        }
        match self.rtt_ms {
            Some(rtt) if !in_range(rtt, 10_000.0) => Some(format!("rttMs {rtt} is out of range: expected 0 to 10000")),
            _ => None,
        }
    }

    /// The judgement of these figures alone.
    pub fn quality(&self) -> LinkQuality {
        let rtt = self.rtt_ms.unwrap_or(0.0);
        if self.loss_percent >= 10.0 || self.jitter_ms >= 50.0 || rtt >= 600.0 {
            LinkQuality::Poor
        } else if self.loss_percent >= 3.0 || self.jitter_ms >= 20.0 || rtt >= 300.0 {
            LinkQuality::Degraded
        } else {
            LinkQuality::Good
        }
    }
}

/// How a line's link is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LinkQuality {
    /// Nothing a listener hears: FEC rebuilds what is lost.
    Good,
    /// Short gaps now and then (loss ≥ 3 %, jitter ≥ 20 ms or a round trip ≥ 300 ms).
    Degraded,
    /// Words lost (loss ≥ 10 %, jitter ≥ 50 ms or a round trip ≥ 600 ms).
    Poor,
}

/// A line's link as the admin sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkState {
    #[serde(flatten)]
    pub figures: LinkFigures,
    pub quality: LinkQuality,
}

/// A change of a line's judgement.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkChange {
    pub group_id: String,
    pub state: LinkState,
    pub was: Option<LinkQuality>,
}

#[derive(Debug)]
struct Measured {
    state: LinkState,
    /// Reports in a row better than `state.quality`.
    better: u8,
}

/// Every crew member's last link figures, per line.
#[derive(Debug, Default)]
pub struct Links {
    lines: Mutex<HashMap<(String, String), Measured>>,
    reported: Mutex<HashMap<String, Instant>>,
}

/// Why a report is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("a link report less than {:?} after the last", MIN_REPORT_INTERVAL)]
    TooSoon,
}

impl Links {
    /// Takes `identity`'s report (lines already checked to be its own); the judgements it
    /// changed.
    pub fn report(&self, identity: &str, lines: &[(String, LinkFigures)]) -> Result<Vec<LinkChange>, Refused> {
        let now = Instant::now();
        {
            let mut reported = lock(&self.reported);
            if reported.get(identity).is_some_and(|at| now.duration_since(*at) < MIN_REPORT_INTERVAL) {
                return Err(Refused::TooSoon);
            }
            reported.insert(identity.to_owned(), now);
        }
        let mut changes = Vec::new();
        let mut all = lock(&self.lines);
        for (group_id, figures) in lines {
            let quality = figures.quality();
            let key = (identity.to_owned(), group_id.clone());
            let measured = all.entry(key).or_insert_with(|| Measured {
                state: LinkState { figures: *figures, quality: LinkQuality::Good },
                better: 0,
            });
            let was = measured.state.quality;
            let judged = if quality >= was {
                measured.better = 0;
                quality
            } else {
                measured.better += 1;
                if measured.better >= REPORTS_TO_RECOVER { quality } else { was }
            };
            if judged < was {
                measured.better = 0;
            }
            measured.state = LinkState { figures: *figures, quality: judged };
            if judged != was {
                changes.push(LinkChange { group_id: group_id.clone(), state: measured.state, was: Some(was) });
            }
        }
        Ok(changes)
    }

    /// `identity`'s last figures on `group_id`.
    pub fn of(&self, identity: &str, group_id: &str) -> Option<LinkState> {
        lock(&self.lines).get(&(identity.to_owned(), group_id.to_owned())).map(|m| m.state)
    }

    /// Forgets the members `gone` names.
    pub fn prune(&self, gone: impl Fn(&str) -> bool) {
        lock(&self.lines).retain(|(identity, _), _| !gone(identity));
        lock(&self.reported).retain(|identity, _| !gone(identity));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(loss_percent: f32, jitter_ms: f32, rtt_ms: Option<f32>) -> LinkFigures {
        LinkFigures { loss_percent, jitter_ms, rtt_ms, candidate_type: None }
    }

    /// Data-driven: figures and their judgement.
    #[test]
    fn figures_are_judged_by_their_worst() {
        let cases = [
            (figures(0.0, 2.0, Some(20.0)), LinkQuality::Good),
            (figures(2.9, 19.0, Some(299.0)), LinkQuality::Good),
            (figures(3.0, 0.0, None), LinkQuality::Degraded),
            (figures(0.0, 25.0, None), LinkQuality::Degraded),
            (figures(0.0, 0.0, Some(350.0)), LinkQuality::Degraded),
            (figures(12.0, 0.0, None), LinkQuality::Poor),
            (figures(1.0, 60.0, Some(20.0)), LinkQuality::Poor),
            (figures(1.0, 1.0, Some(700.0)), LinkQuality::Poor),
        ];
        for (figures, quality) in cases {
            assert_eq!(figures.quality(), quality, "{figures:?}");
        }
    }

    #[test]
    fn figures_out_of_range_are_named() {
        assert!(figures(101.0, 0.0, None).invalid().is_some_and(|e| e.contains("lossPercent")));
        assert!(figures(0.0, f32::NAN, None).invalid().is_some_and(|e| e.contains("jitterMs")));
        assert!(figures(0.0, 0.0, Some(-1.0)).invalid().is_some_and(|e| e.contains("rttMs")));
        assert_eq!(figures(5.0, 30.0, Some(40.0)).invalid(), None);
    }

    /// A link degrades at once and recovers after two reports in a row; each change once.
    #[test]
    fn a_link_degrades_at_once_and_recovers_after_two_good_reports() {
        let links = Links::default();
        let report = |loss: f32| {
            lock(&links.reported).clear(); // the reports' own spacing is not what is tested here
            let changes = links.report("ann-1", &[("stage".to_owned(), figures(loss, 5.0, None))]).expect("taken");
            changes.iter().map(|c| (c.was, c.state.quality)).collect::<Vec<_>>()
        };
        assert_eq!(report(0.5), []);
        assert_eq!(report(12.0), [(Some(LinkQuality::Good), LinkQuality::Poor)]);
        assert_eq!(report(0.0), [], "one good report is not a recovery");
        assert_eq!(report(0.0), [(Some(LinkQuality::Poor), LinkQuality::Good)]);
        assert_eq!(links.of("ann-1", "stage").map(|s| s.quality), Some(LinkQuality::Good));
        links.prune(|identity| identity == "ann-1");
        assert_eq!(links.of("ann-1", "stage"), None);
    }

    #[test]
    fn a_second_report_within_a_second_is_refused() {
        let links = Links::default();
        let line = [("stage".to_owned(), figures(0.0, 0.0, None))];
        assert!(links.report("ann-1", &line).is_ok());
        assert_eq!(links.report("ann-1", &line), Err(Refused::TooSoon));
        assert!(links.report("ben-2", &line).is_ok(), "each member's own");
    }
}
