//! A panel's link reports (`POST /api/session/link`): its lines' loss, jitter and round trip as
//! the browser measures them, judged by control (`links`), answered, published when a judgement
//! changes and shown in the admin's users list.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{ApiError, ApiJson, AppState, ErrorBody};
use crate::events::LiveEvent;
use crate::links::{LinkChange, LinkFigures, LinkQuality};
use crate::users::User;

/// One line's link, as the panel measures it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LineLink {
    pub group_id: String,
    #[serde(flatten)]
    pub figures: LinkFigures,
}

/// A panel's measure of its lines' links (every 5 s while connected).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkReport {
    /// The session's token.
    pub token: String,
    /// At most one per line of the session.
    pub lines: Vec<LineLink>,
}

/// One line's link as control judges it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineLinkJudged {
    pub group_id: String,
    pub quality: LinkQuality,
}

/// The judgement of each line reported.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkJudged {
    pub lines: Vec<LineLinkJudged>,
}

/// The panel reports its lines' links (loss of what it hears, jitter, round trip, from WebRTC
/// statistics); control judges each good, degraded or poor, answers the judgement for the
/// panel to show, publishes a `linkChanged` event when one changes, and the admin's users list
/// shows the figures. At most one report a second per session.
#[utoipa::path(post, path = "/api/session/link", tag = "users", request_body = LinkReport,
    responses((status = 200, body = LinkJudged), (status = 400, body = ErrorBody),
        (status = 403, description = "Unknown or ended session", body = ErrorBody),
        (status = 429, description = "A report less than a second after the last", body = ErrorBody)))]
pub async fn session_link(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<LinkReport>,
) -> Result<Json<LinkJudged>, ApiError> {
    let user = state.users.by_token(&body.token).ok_or(ApiError::Forbidden)?;
    let mut lines = Vec::with_capacity(body.lines.len());
    for line in body.lines {
        if !user.has_line(&line.group_id) {
            return Err(ApiError::BadRequest(format!("lines: the session has no line {:?}", line.group_id)));
        }
        if lines.iter().any(|(group, _)| *group == line.group_id) {
            return Err(ApiError::BadRequest(format!("lines: {:?} reported twice", line.group_id)));
        }
        if let Some(why) = line.figures.invalid() {
            return Err(ApiError::BadRequest(format!("lines: {:?}: {why}", line.group_id)));
        }
        lines.push((line.group_id, line.figures));
    }
    state.links.prune(|identity| state.users.get(identity).is_none());
    let changes = state
        .links
        .report(&user.identity, &lines)
        .map_err(|e| ApiError::Limited { code: "too_many_reports", message: e.to_string() })?;
    for change in changes {
        link_changed(&state, &user, change);
    }
    let judged = lines
        .iter()
        .filter_map(|(group_id, _)| {
            let quality = state.links.of(&user.identity, group_id)?.quality;
            Some(LineLinkJudged { group_id: group_id.clone(), quality })
        })
        .collect();
    Ok(Json(LinkJudged { lines: judged }))
}

/// A line's link judged anew: an event, and a log line (a warning when it got worse).
fn link_changed(state: &AppState, user: &User, change: LinkChange) {
    let LinkChange { group_id, state: link, was } = change;
    let figures = link.figures;
    if was.is_some_and(|was| link.quality > was) {
        tracing::warn!(identity = user.identity, username = user.username, group = group_id, quality = ?link.quality,
            loss_percent = figures.loss_percent, jitter_ms = figures.jitter_ms, rtt_ms = ?figures.rtt_ms,
            "a crew member's link degraded");
    } else {
        tracing::info!(identity = user.identity, username = user.username, group = group_id, quality = ?link.quality,
            "a crew member's link recovered");
    }
    state.events.publish(&LiveEvent::LinkChanged {
        identity: user.identity.clone(),
        username: user.username.clone(),
        group_id,
        quality: link.quality,
        loss_percent: figures.loss_percent,
        jitter_ms: figures.jitter_ms,
        rtt_ms: figures.rtt_ms,
    });
}
