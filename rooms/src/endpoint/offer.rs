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
//! The checks are textual and cheap (str0m's parsed SDP is private to it): they name what a
//! browser's offer lacks before str0m sees it.

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

/// One m-section's lines (the `m=` line first).
struct Section<'a> {
    lines: Vec<&'a str>,
}

impl<'a> Section<'a> {
    fn kind(&self) -> &'a str {
        self.lines[0].trim_start_matches("m=").split(' ').next().unwrap_or("")
    }

    fn attribute(&self, name: &str) -> Option<&'a str> {
        self.lines.iter().find_map(|line| line.strip_prefix("a=")?.strip_prefix(name))
    }

    fn has_flag(&self, name: &str) -> bool {
        self.lines.iter().any(|line| line.strip_prefix("a=") == Some(name))
    }

    /// Port 0 outside the bundle: a transceiver the panel stopped (JSEP keeps its m-line).
    fn is_stopped(&self) -> bool {
        self.lines[0].split(' ').nth(1) == Some("0") && !self.has_flag("bundle-only")
    }

    fn mid(&self) -> Option<&'a str> {
        self.attribute("mid:").map(str::trim).filter(|mid| !mid.is_empty())
    }

    /// Opus at 48 kHz in stereo, among the payload types of the m-line.
    fn offers_opus(&self) -> bool {
        let formats: Vec<&str> = self.lines[0].split(' ').skip(3).collect();
        self.lines.iter().filter_map(|line| line.strip_prefix("a=rtpmap:")).any(|map| {
            let mut parts = map.splitn(2, ' ');
            let pt = parts.next().unwrap_or("");
            let codec = parts.next().unwrap_or("").trim();
            formats.contains(&pt) && codec.eq_ignore_ascii_case("opus/48000/2")
        })
    }

    fn direction(&self) -> Option<Direction> {
        self.lines.iter().find_map(|line| direction_attribute(line))
    }
}

fn direction_attribute(line: &str) -> Option<Direction> {
    match line.strip_prefix("a=")? {
        "sendrecv" => Some(Direction::SendRecv),
        "sendonly" => Some(Direction::SendOnly),
        "recvonly" => Some(Direction::RecvOnly),
        "inactive" => Some(Direction::Inactive),
        _ => None,
    }
}

/// Checks `offer` against `rights` (one per audio m-line, in order) and rewrites its directions.
pub(super) fn check(offer: &str, rights: &[LineRights]) -> Result<CheckedOffer, OfferError> {
    let text: Vec<&str> = offer.lines().map(|line| line.trim_end_matches('\r')).collect();
    if text.first().map(|line| line.trim()) != Some("v=0") {
        return Err(OfferError::NotSdp("it does not begin with v=0".into()));
    }
    let first_media = text.iter().position(|line| line.starts_with("m=")).ok_or(OfferError::NoAudio)?;
    let (session, media) = text.split_at(first_media);
    let sections = split_sections(media);
    let session_direction = session.iter().find_map(|line| direction_attribute(line)).unwrap_or(Direction::SendRecv);
    let lines = grant(&sections, rights, session_direction)?;
    check_bundle(session, &lines)?;
    Ok(CheckedOffer { sdp: rewrite(session, &sections, &lines), lines })
}

fn split_sections<'a>(media: &[&'a str]) -> Vec<Section<'a>> {
    let mut sections: Vec<Section<'a>> = Vec::new();
    for line in media {
        match sections.last_mut() {
            Some(section) if !line.starts_with("m=") => section.lines.push(line),
            _ => sections.push(Section { lines: vec![line] }),
        }
    }
    sections
}

fn grant(sections: &[Section<'_>], rights: &[LineRights], session: Direction) -> Result<Vec<GrantedLine>, OfferError> {
    if let Some((index, section)) = sections.iter().enumerate().find(|(_, section)| section.kind() != "audio") {
        return Err(OfferError::NotAudio { index, kind: section.kind().to_owned() });
    }
    if sections.len() != rights.len() {
        return Err(OfferError::LineCount { offered: sections.len(), expected: rights.len() });
    }
    let mut granted = Vec::with_capacity(sections.len());
    for (index, (section, rights)) in sections.iter().zip(rights).enumerate() {
        let mid = section.mid().ok_or(OfferError::NoMid { index })?;
        if section.is_stopped() {
            granted.push(GrantedLine { mid: mid.to_owned(), direction: Direction::Inactive, stopped: true });
            continue;
        }
        if !section.offers_opus() {
            return Err(OfferError::NoOpus { index });
        }
        if !section.has_flag("rtcp-mux") {
            return Err(OfferError::NoRtcpMux { index });
        }
        let offered = section.direction().unwrap_or(session);
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

fn check_bundle(session: &[&str], lines: &[GrantedLine]) -> Result<(), OfferError> {
    let bundled = session
        .iter()
        .filter_map(|line| line.strip_prefix("a=group:BUNDLE"))
        .map(|mids| mids.split_whitespace().collect::<Vec<_>>())
        .any(|mids| lines.iter().filter(|line| !line.stopped).all(|line| mids.contains(&line.mid.as_str())));
    if bundled { Ok(()) } else { Err(OfferError::NotBundled) }
}

/// The offer as str0m is to see it: each m-line's direction the reverse of the server's grant,
/// the session-level direction (if any) dropped.
fn rewrite(session: &[&str], sections: &[Section<'_>], lines: &[GrantedLine]) -> String {
    let mut sdp = String::new();
    for line in session.iter().filter(|line| direction_attribute(line).is_none()) {
        push_line(&mut sdp, line);
    }
    for (section, granted) in sections.iter().zip(lines) {
        for line in section.lines.iter().filter(|line| direction_attribute(line).is_none()) {
            push_line(&mut sdp, line);
        }
        // Last: attributes follow the m-section's c= and b= lines.
        push_line(&mut sdp, panel_attribute(granted.direction));
    }
    sdp
}

fn push_line(sdp: &mut String, line: &str) {
    sdp.push_str(line);
    sdp.push_str("\r\n");
}

/// The attribute the panel's side would write for the server's `direction`.
fn panel_attribute(direction: Direction) -> &'static str {
    match direction {
        Direction::SendRecv => "a=sendrecv",
        Direction::RecvOnly => "a=sendonly",
        Direction::SendOnly => "a=recvonly",
        Direction::Inactive => "a=inactive",
    }
}

/// `answer` with `a=ptime` and `a=maxptime` of `ptime` ms in every audio m-section (str0m writes
/// neither): the frame length the server asks the panel to send.
pub(super) fn with_ptime(answer: &str, ptime: u16) -> String {
    let mut sdp = String::with_capacity(answer.len() + 64);
    let mut in_audio = false;
    let end_of_section = |sdp: &mut String, in_audio: bool| {
        if in_audio {
            push_line(sdp, &format!("a=ptime:{ptime}"));
            push_line(sdp, &format!("a=maxptime:{ptime}"));
        }
    };
    for line in answer.lines().map(|line| line.trim_end_matches('\r')) {
        if line.starts_with("m=") {
            end_of_section(&mut sdp, in_audio);
            in_audio = line.starts_with("m=audio");
        }
        let ours = line.starts_with("a=ptime:") || line.starts_with("a=maxptime:");
        if !(in_audio && ours) {
            push_line(&mut sdp, line);
        }
    }
    end_of_section(&mut sdp, in_audio);
    sdp
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
