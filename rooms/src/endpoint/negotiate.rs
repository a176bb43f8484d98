//! An offer (first or renegotiated) applied to a session's `Rtc`: checked and rewritten
//! ([`offer`](super::offer)), accepted by str0m, its answer given the configured ptime.

use str0m::Rtc;
use str0m::change::SdpOffer;
use str0m::media::{Direction, Mid};

use super::error::EndpointError;
use super::offer::{self, LineRights, OfferError};

/// An m-line of a session: its mid and the server's direction on it.
#[derive(Debug)]
pub(super) struct Line {
    pub(super) mid: Mid,
    pub(super) direction: Direction,
}

/// Applies `offer` with `rights` (one per m-line) to `rtc`; the session's lines and the answer.
pub(super) fn negotiate(
    rtc: &mut Rtc,
    offer: &str,
    rights: &[LineRights],
    ptime: Option<u16>,
) -> Result<(Vec<Line>, String), EndpointError> {
    let checked = offer::check(offer, rights)?;
    let parsed = SdpOffer::from_sdp_string(&checked.sdp).map_err(|error| OfferError::NotSdp(error.to_string()))?;
    let answer = rtc.sdp_api().accept_offer(parsed)?.to_sdp_string();
    let mut lines = Vec::with_capacity(checked.lines.len());
    for (index, granted) in checked.lines.iter().enumerate() {
        let mid = Mid::from(granted.mid.as_str());
        rtc.media(mid).ok_or(OfferError::NoMid { index })?;
        lines.push(Line { mid, direction: granted.direction });
    }
    let answer = match ptime {
        Some(ptime) => offer::with_ptime(&answer, ptime),
        None => answer,
    };
    Ok((lines, answer))
}
