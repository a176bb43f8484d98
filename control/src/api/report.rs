//! `GET /api/admin/report`: the show report of a window of time, as JSON or CSV, from the
//! show's journal (`crate::journal`, `crate::report`).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use time::{Duration, OffsetDateTime};

use super::{ApiError, ApiQuery, AppState, ErrorBody};
use crate::report::{self, ShowReport, Window, rfc3339};

/// The window a report covers when the query names no start: the day before its end.
const DEFAULT_SPAN: Duration = Duration::hours(24);
const CSV: &str = "text/csv";

/// The window and the format of `GET /admin/report`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// The window's start, RFC 3339 (an offset's `+` written `%2B`). Default: 24 h before `to`.
    #[param(example = "2026-05-01T18:00:00Z")]
    #[serde(default)]
    pub from: Option<String>,
    /// The window's end, RFC 3339. Default: now.
    #[param(example = "2026-05-01T23:30:00Z")]
    #[serde(default)]
    pub to: Option<String>,
    /// `json` or `csv`. Default: CSV when `Accept` names `text/csv`, else JSON.
    #[param(inline)]
    #[serde(default)]
    pub format: Option<ReportFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    Json,
    Csv,
}

/// The show report of a window of time (default: the last 24 h), as JSON or CSV.
///
/// From the show's journal: per crew member its joins, leaves (with why), drops (a link judged
/// worse than good and back, or a leave and a rejoin of the same name) and talk time per line;
/// per group its talk time, members and most members at once; the outages of Janus, its nodes,
/// bridged and PTP; sessions moved, direct lines, warnings, and the events the journal lost. As
/// CSV: one row per occurrence (`time,kind,member,group,detail,duration_s`). Talk time counts
/// what falls inside the window; a drop or an outage is shown whole, from its real start.
#[utoipa::path(get, path = "/api/admin/report", tag = "system", security(("admin_token" = [])), params(ReportQuery),
    responses(
        (status = 200, description = "The report", content((ShowReport = "application/json"), (String = "text/csv"))),
        (status = 400, description = "A time that is not RFC 3339, or `from` after `to`", body = ErrorBody),
        (status = 401, body = ErrorBody)))]
pub async fn report(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<ReportQuery>,
) -> Result<Response, ApiError> {
    let window = window(&query, OffsetDateTime::now_utc())?;
    let format =
        query.format.unwrap_or_else(|| if accepts_csv(&headers) { ReportFormat::Csv } else { ReportFormat::Json });
    let journal = state.journal.clone();
    // A journal of some megabytes is read and worked through off the runtime.
    let built = tokio::task::spawn_blocking(move || journal.read().map(|text| report::build(&text, window)))
        .await
        .map_err(|e| ApiError::Internal(format!("the report stopped: {e}")))?
        .map_err(|e| ApiError::Internal(format!("cannot read the show journal: {e}")))?;
    Ok(match format {
        ReportFormat::Json => Json(built.report).into_response(),
        ReportFormat::Csv => csv_response(&built.report, report::to_csv(&built.timeline)),
    })
}

/// The window `query` names, its missing ends filled in from `now`.
fn window(query: &ReportQuery, now: OffsetDateTime) -> Result<Window, ApiError> {
    let to = query.to.as_deref().map_or(Ok(now), |text| time_of("to", text))?;
    let from = query.from.as_deref().map_or(Ok(to - DEFAULT_SPAN), |text| time_of("from", text))?;
    if from > to {
        return Err(ApiError::BadRequest(format!(
            "from ({}) is after to ({}): the window would be empty",
            rfc3339::format(from),
            rfc3339::format(to)
        )));
    }
    Ok(Window { from, to })
}

fn time_of(parameter: &str, text: &str) -> Result<OffsetDateTime, ApiError> {
    rfc3339::parse(text).map_err(|why| ApiError::BadRequest(format!("{parameter}: {text:?} {why}")))
}

fn accepts_csv(headers: &HeaderMap) -> bool {
    let accept = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok());
    accept.flat_map(|v| v.split(',')).any(|kind| kind.split(';').next().map(str::trim) == Some(CSV))
}

/// CSV in UTF-8, saved by a browser as `partyline-report-FROM.csv`.
fn csv_response(report: &ShowReport, csv: String) -> Response {
    let name = format!("attachment; filename=\"partyline-report-{}.csv\"", report.from.replace(':', "-"));
    let disposition = HeaderValue::from_str(&name).unwrap_or(HeaderValue::from_static("attachment"));
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")),
        (header::CONTENT_DISPOSITION, disposition),
    ];
    (headers, csv).into_response()
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn query(from: Option<&str>, to: Option<&str>) -> ReportQuery {
        ReportQuery { from: from.map(str::to_owned), to: to.map(str::to_owned), format: None }
    }

    /// Data-driven: the query's ends, and the window or the parameter the error names.
    #[test]
    fn the_window_defaults_to_the_day_before_its_end_and_bad_ends_are_named() {
        let now = datetime!(2026-05-02 12:00 UTC);
        let cases = [
            (None, None, Ok((datetime!(2026-05-01 12:00 UTC), now))),
            (Some("2026-05-02T10:00:00Z"), None, Ok((datetime!(2026-05-02 10:00 UTC), now))),
            (
                None,
                Some("2026-05-01T23:00:00+01:00"),
                Ok((datetime!(2026-04-30 22:00 UTC), datetime!(2026-05-01 22:00 UTC))),
            ),
            (
                Some("2026-05-01T18:00:00Z"),
                Some("2026-05-01T18:00:00Z"),
                Ok((datetime!(2026-05-01 18:00 UTC), datetime!(2026-05-01 18:00 UTC))),
            ),
            (Some("noon"), None, Err("from: \"noon\" is not an RFC 3339 time")),
            (None, Some("2026-02-30T00:00:00Z"), Err("to: \"2026-02-30T00:00:00Z\" names no such date")),
            (
                Some("2026-05-02T00:00:01Z"),
                Some("2026-05-02T00:00:00Z"),
                Err("from (2026-05-02T00:00:01.000Z) is after to"),
            ),
        ];
        for (from, to, want) in cases {
            let got = window(&query(from, to), now);
            match (got, want) {
                (Ok(window), Ok((from, to))) => assert_eq!(window, Window { from, to }),
                (Err(ApiError::BadRequest(message)), Err(start)) => assert!(message.starts_with(start), "{message}"),
                (got, want) => panic!("{from:?}..{to:?}: {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn accept_chooses_csv_only_when_it_names_it() {
        let with =
            |accept: &str| HeaderMap::from_iter([(header::ACCEPT, HeaderValue::from_str(accept).expect("a value"))]);
        assert!(accepts_csv(&with("text/csv")));
        assert!(accepts_csv(&with("application/json;q=0.5, text/csv; charset=utf-8")));
        assert!(!accepts_csv(&with("application/json")));
        assert!(!accepts_csv(&with("*/*")));
        assert!(!accepts_csv(&HeaderMap::new()));
    }
}
