//! A panel's offer checked against the lines the server gives it, and rewritten so that str0m's
//! answer carries the server's directions.
//!
//! str0m answers each m-line with the offer's direction reversed; it has no call to answer with
//! another one. So the offer str0m sees says, for each m-line, the reverse of the direction the
//! server grants: the answer then says exactly that, and str0m's own state (which drops RTP on a
//! media that does not receive and refuses to write on one that does not send) enforces it. The
//! grant is the line's rights intersected with what the panel offered (RFC 3264: an answer may
//! narrow an offer's direction, never widen it), so a listen-only line never receives, whatever
//! the panel asks.
//!
//! The offer is read and rewritten with `partyline_shared::sdp` (str0m's parsed SDP is private
//! to it): the checks name what a browser's offer lacks before str0m sees it.

use partyline_shared::sdp::{self, Attributes, Media, Session};
use str0m::media::Direction;

/// What the server gives one offered audio m-line, in the offer's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRights {
    /// The group (party line) the m-line carries.
    pub line: String,
    /// The panel may talk on it: the server receives.
    pub talk: bool,
    /// The panel hears it: the server sends.
    pub listen: bool,
}

/// Why an offer is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    #[error("the offer is not SDP: {0}")]
    NotSdp(String),
    #[error("the offer has no audio m-line")]
    NoAudio,
    #[error("m-line {index} is {kind}, only audio is served")]
    NotAudio { index: usize, kind: String },
    #[error("the offer has {offered} audio m-lines for {expected} lines")]
    LineCount { offered: usize, expected: usize },
    #[error("m-line {index} has no a=mid")]
    NoMid { index: usize },
    #[error("m-line {index} repeats the a=mid of another")]
    SameMid { index: usize },
    #[error("m-line {index} is not on UDP/TLS/RTP/SAVPF (it is {proto:?})")]
    NotSrtp { index: usize, proto: String },
    #[error("m-line {index} does not offer Opus at 48 kHz, 2 channels")]
    NoOpus { index: usize },
    #[error("m-line {index} does not multiplex RTCP (a=rtcp-mux)")]
    NoRtcpMux { index: usize },
    #[error("the offer does not bundle every m-line in one a=group:BUNDLE")]
    NotBundled,
}

/// An offer that passed the checks: the text str0m is given, and each line's granted direction
/// (from the server's side) and mid.
#[derive(Debug)]
pub(super) struct CheckedOffer {
    pub(super) sdp: String,
    pub(super) lines: Vec<GrantedLine>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GrantedLine {
    pub(super) mid: String,
    /// The server's direction on it: receives if the line may talk (and the panel sends), sends
    /// if it listens (and the panel receives).
    pub(super) direction: Direction,
    /// The panel stopped it: inactive, outside the bundle.
    pub(super) stopped: bool,
}

/// Port 0 outside the bundle: a transceiver the panel stopped (JSEP keeps its m-line).
fn is_stopped(media: &Media) -> bool {
    media.port == 0 && !media.flag("bundle-only")
}

fn mid(media: &Media) -> Option<&str> {
    media.value("mid").map(str::trim).filter(|mid| !mid.is_empty())
}

/// Opus at 48 kHz in stereo, among the payload types of the m-line.
fn offers_opus(media: &Media) -> bool {
    let formats: Vec<&str> = sdp::formats(media).collect();
    sdp::rtpmaps(media).any(|map| {
        formats.contains(&map.payload_type.to_string().as_str())
            && map.encoding_name.eq_ignore_ascii_case("opus")
            && map.clock_rate == 48_000
            && map.encoding_params.as_deref() == Some("2")
    })
}

/// str0m's name for a direction SDP writes.
fn direction(direction: sdp::Direction) -> Direction {
    match direction {
        sdp::Direction::SendRecv => Direction::SendRecv,
        sdp::Direction::SendOnly => Direction::SendOnly,
        sdp::Direction::RecvOnly => Direction::RecvOnly,
        sdp::Direction::Inactive => Direction::Inactive,
    }
}

/// Checks `offer` against `rights` (one per audio m-line, in order) and rewrites its directions.
pub(super) fn check(offer: &str, rights: &[LineRights]) -> Result<CheckedOffer, OfferError> {
    let mut session = sdp::parse(offer).map_err(|error| OfferError::NotSdp(error.to_string()))?;
    if session.medias.is_empty() {
        return Err(OfferError::NoAudio);
    }
    let session_direction = session.direction().map_or(Direction::SendRecv, direction);
    let lines = grant(&session.medias, rights, session_direction)?;
    check_bundle(&session, &lines)?;
    rewrite(&mut session, &lines);
    Ok(CheckedOffer { sdp: session.to_string(), lines })
}

fn grant(medias: &[Media], rights: &[LineRights], session: Direction) -> Result<Vec<GrantedLine>, OfferError> {
    if let Some((index, media)) = medias.iter().enumerate().find(|(_, media)| media.media != "audio") {
        return Err(OfferError::NotAudio { index, kind: media.media.clone() });
    }
    if medias.len() != rights.len() {
        return Err(OfferError::LineCount { offered: medias.len(), expected: rights.len() });
    }
    let mut granted: Vec<GrantedLine> = Vec::with_capacity(medias.len());
    for (index, (media, rights)) in medias.iter().zip(rights).enumerate() {
        let mid = mid(media).ok_or(OfferError::NoMid { index })?;
        // One line per m-line: str0m would answer two m-lines of one mid, or one on another
        // transport, with fewer m-lines than the lines granted.
        if granted.iter().any(|line| line.mid == mid) {
            return Err(OfferError::SameMid { index });
        }
        if media.proto != "UDP/TLS/RTP/SAVPF" {
            return Err(OfferError::NotSrtp { index, proto: media.proto.clone() });
        }
        if is_stopped(media) {
            granted.push(GrantedLine { mid: mid.to_owned(), direction: Direction::Inactive, stopped: true });
            continue;
        }
        if !offers_opus(media) {
            return Err(OfferError::NoOpus { index });
        }
        if !media.flag("rtcp-mux") {
            return Err(OfferError::NoRtcpMux { index });
        }
        let offered = media.direction().map_or(session, direction);
        let direction = server_direction(rights, offered);
        granted.push(GrantedLine { mid: mid.to_owned(), direction, stopped: false });
    }
    Ok(granted)
}

/// The server's direction: what the rights allow and the panel's offered direction permits.
pub(super) fn server_direction(rights: &LineRights, offered: Direction) -> Direction {
    let panel_sends = matches!(offered, Direction::SendRecv | Direction::SendOnly);
    let panel_receives = matches!(offered, Direction::SendRecv | Direction::RecvOnly);
    match (rights.talk && panel_sends, rights.listen && panel_receives) {
        (true, true) => Direction::SendRecv,
        (true, false) => Direction::RecvOnly,
        (false, true) => Direction::SendOnly,
        (false, false) => Direction::Inactive,
    }
}

fn check_bundle(session: &Session, lines: &[GrantedLine]) -> Result<(), OfferError> {
    let bundled = session
        .values("group")
        .filter_map(|group| group.strip_prefix("BUNDLE"))
        .map(|mids| mids.split_whitespace().collect::<Vec<_>>())
        .any(|mids| lines.iter().filter(|line| !line.stopped).all(|line| mids.contains(&line.mid.as_str())));
    if bundled { Ok(()) } else { Err(OfferError::NotBundled) }
}

/// The offer as str0m is to see it: each m-line's direction the reverse of the server's grant,
/// written after its other attributes, the session-level direction (if any) dropped.
fn rewrite(session: &mut Session, lines: &[GrantedLine]) {
    session.set_direction(None);
    for (media, granted) in session.medias.iter_mut().zip(lines) {
        media.set_direction(Some(panel_direction(granted.direction)));
    }
}

/// The direction the panel's side would write for the server's `direction`.
fn panel_direction(direction: Direction) -> sdp::Direction {
    match direction {
        Direction::SendRecv => sdp::Direction::SendRecv,
        Direction::RecvOnly => sdp::Direction::SendOnly,
        Direction::SendOnly => sdp::Direction::RecvOnly,
        Direction::Inactive => sdp::Direction::Inactive,
    }
}

/// `answer` with `a=ptime` and `a=maxptime` of `ptime` ms in every audio m-section (str0m writes
/// neither), after its other attributes: the frame length the server asks the panel to send. An
/// answer that does not read as SDP (str0m's always does) is left as it is.
pub(super) fn with_ptime(answer: &str, ptime: u16) -> String {
    let Ok(mut session) = sdp::parse(answer) else {
        return answer.to_owned();
    };
    for media in session.medias.iter_mut().filter(|media| media.media == "audio") {
        for name in ["ptime", "maxptime"] {
            media.remove_attribute(name);
            media.push_attribute(name, ptime);
        }
    }
    session.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rights(talk: bool, listen: bool) -> LineRights {
        LineRights { line: "stage".into(), talk, listen }
    }

    const OFFER: &str = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n\
        m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=sendrecv\r\na=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\n\
        m=audio 9 UDP/TLS/RTP/SAVPF 109\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=recvonly\r\na=rtcp-mux\r\na=rtpmap:109 OPUS/48000/2\r\n";

    #[test]
    fn grants_rights_within_the_offered_directions() {
        let checked = check(OFFER, &[rights(true, false), rights(true, true)]).expect("a good offer");
        assert_eq!(checked.lines[0], GrantedLine { mid: "0".into(), direction: Direction::RecvOnly, stopped: false });
        // The panel offered recvonly: it will not send, so a talk right grants nothing more.
        assert_eq!(checked.lines[1].direction, Direction::SendOnly);
        assert!(checked.sdp.contains("a=mid:0\r\n") && checked.sdp.contains("a=sendonly\r\n"));
        assert_eq!(checked.sdp.matches("a=recvonly").count(), 1);
    }

    #[test]
    fn names_what_an_offer_lacks() {
        let two = [rights(true, true), rights(true, true)];
        assert_eq!(check(OFFER, &two[..1]).err(), Some(OfferError::LineCount { offered: 2, expected: 1 }));
        assert_eq!(check(&OFFER.replace("BUNDLE 0 1", "BUNDLE 0"), &two).err(), Some(OfferError::NotBundled));
        assert_eq!(check(&OFFER.replace("109 OPUS", "109 PCMU"), &two).err(), Some(OfferError::NoOpus { index: 1 }));
        assert_eq!(
            check(&OFFER.replacen("a=rtcp-mux\r\n", "", 1), &two).err(),
            Some(OfferError::NoRtcpMux { index: 0 })
        );
        assert_eq!(
            check(&OFFER.replacen("m=audio", "m=video", 1), &two).err(),
            Some(OfferError::NotAudio { index: 0, kind: "video".into() })
        );
        // What the fuzzer found (rooms/fuzz, `offers`): a second m-line with the first's mid, or
        // on another transport, which str0m left out of its answer.
        assert_eq!(
            check(&OFFER.replace("a=mid:1", "a=mid:0").replace("BUNDLE 0 1", "BUNDLE 0 0"), &two).err(),
            Some(OfferError::SameMid { index: 1 })
        );
        assert_eq!(
            check(&OFFER.replace("SAVPF 109", "SA.PF 109"), &two).err(),
            Some(OfferError::NotSrtp { index: 1, proto: "UDP/TLS/RTP/SA.PF".into() })
        );
        assert!(matches!(check("hello", &two), Err(OfferError::NotSdp(_))));
        assert_eq!(check("v=0\r\ns=-\r\n", &two).err(), Some(OfferError::NoAudio));
    }

    #[test]
    fn a_stopped_m_line_is_inactive_and_outside_the_bundle() {
        let stopped = OFFER
            .replace("BUNDLE 0 1", "BUNDLE 0")
            .replace("m=audio 9 UDP/TLS/RTP/SAVPF 109", "m=audio 0 UDP/TLS/RTP/SAVPF 109");
        let checked = check(&stopped, &[rights(true, true), rights(true, true)]).expect("a stopped line is fine");
        assert_eq!(checked.lines[1], GrantedLine { mid: "1".into(), direction: Direction::Inactive, stopped: true });
        let bundle_only = stopped.replace("BUNDLE 0", "BUNDLE 0 1").replace("a=mid:1", "a=bundle-only\r\na=mid:1");
        let checked =
            check(&bundle_only, &[rights(true, true), rights(true, true)]).expect("bundle-only is not stopped");
        assert_eq!(checked.lines[1].direction, Direction::SendOnly);
    }

    #[test]
    fn ptime_goes_into_every_audio_section_once() {
        let answer = with_ptime(&with_ptime(OFFER, 10), 10);
        assert_eq!(answer.matches("a=ptime:10\r\n").count(), 2);
        assert_eq!(answer.matches("a=maxptime:10\r\n").count(), 2);
    }
}
