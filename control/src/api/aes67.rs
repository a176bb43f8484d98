//! `/api/admin/aes67` and `/api/admin/config/aes67`: AES67 network audio as the card. The
//! settings are `audio.aes67`; what bridged runs (PTP, the stream it sends, the streams SAP
//! announces on the media network) comes from its status. The admin picks the card's input
//! stream from the announced ones, or pastes an SDP: either way it is stored as `receiveSdp`,
//! checked first (a stream partyline cannot receive is a 400 naming why).

use axum::Json;
use axum::extract::State;
use partyline_shared::aes67::Aes67Stream;
use partyline_shared::bridge::PtpStatus;
use partyline_shared::config::Aes67Config;
use serde::Serialize;
use utoipa::ToSchema;

use super::{ApiError, ApiJson, AppState, ErrorBody};

/// AES67: the settings, and what bridged runs.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Aes67View {
    pub settings: Aes67Config,
    pub ptp: PtpStatus,
    /// The SDP partyline announces for its send; empty when it sends none.
    pub send_sdp: String,
    /// Packets of the received stream so far.
    pub receive_packets: u64,
    /// Of those, the jitter buffer's lost (never came) and late (came after their time: dropped).
    pub receive_lost: u64,
    pub receive_late: u64,
    /// Packets to the stream's group and port from another host than its SDP's origin, or with
    /// another SSRC than the stream's: dropped (anyone on the LAN can send to a multicast group).
    pub receive_foreign: u64,
    /// How far from its media time (+ the receive latency) each block reached the mix, 99th
    /// percentile over the last second, µs.
    pub receive_offset_p99_us: i64,
    /// The streams SAP announces on the media network (partyline's own aside), newest first.
    pub announced: Vec<AnnouncedView>,
}

/// A stream announced by SAP, read.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnnouncedView {
    /// The announcer's address.
    pub source: String,
    /// Seconds since its last announcement.
    pub age_s: u32,
    pub sdp: String,
    /// What partyline reads of it; `null` when it cannot receive it (`problem` says why).
    pub stream: Option<Aes67Stream>,
    pub problem: Option<String>,
}

/// AES67's settings and state.
#[utoipa::path(get, path = "/api/admin/aes67", tag = "audio", security(("admin_token" = [])),
    responses((status = 200, body = Aes67View), (status = 401, body = ErrorBody)))]
pub async fn get_aes67(State(state): State<AppState>) -> Json<Aes67View> {
    let settings = state.config.current().audio.aes67.clone();
    let aes67 = state.bridge.view().aes67;
    let announced = aes67
        .announced
        .into_iter()
        .map(|a| {
            let (stream, problem) = match Aes67Stream::parse(&a.sdp) {
                Ok(stream) => (Some(stream), None),
                Err(error) => (None, Some(error.message)),
            };
            AnnouncedView { source: a.source, age_s: a.age_s, sdp: a.sdp, stream, problem }
        })
        .collect();
    Json(Aes67View {
        settings,
        ptp: aes67.ptp,
        send_sdp: aes67.send_sdp,
        receive_packets: aes67.receive_packets,
        receive_lost: aes67.receive_lost,
        receive_late: aes67.receive_late,
        receive_foreign: aes67.receive_foreign,
        receive_offset_p99_us: aes67.receive_offset_p99_us,
        announced,
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Aes67Changed {
    pub message: String,
    pub settings: Aes67Config,
}

/// Replace AES67's settings (absent fields take their defaults). A `receiveSdp` that is not a
/// stream partyline can receive is refused with its reason's code (`unsupported_rate`,
/// `unsupported_encoding`, `bad_channels`, `not_multicast`, `no_ptp_clock`, `no_audio`,
/// `bad_sdp`).
#[utoipa::path(put, path = "/api/admin/config/aes67", tag = "audio", security(("admin_token" = [])), request_body = Aes67Config,
    responses((status = 200, body = Aes67Changed), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn set_aes67(
    State(state): State<AppState>,
    ApiJson(settings): ApiJson<Aes67Config>,
) -> Result<Json<Aes67Changed>, ApiError> {
    if let Some(sdp) = &settings.receive_sdp {
        Aes67Stream::parse(sdp).map_err(|e| {
            tracing::warn!("AES67: receive SDP refused: {e}");
            ApiError::BadInput { code: e.code, message: format!("receiveSdp: {e}") }
        })?;
    }
    let settings = state
        .config
        .update("update AES67 settings".into(), move |c| {
            c.audio.aes67 = settings;
            Ok(c.audio.aes67.clone())
        })
        .await?;
    Ok(Json(Aes67Changed { message: "AES67 settings updated".into(), settings }))
}
