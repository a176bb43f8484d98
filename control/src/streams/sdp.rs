//! What a WHIP or WHEP offer must be before it goes to Janus: an SDP with an audio section that
//! offers Opus, whose direction suits the kind (a WHIP client sends, a WHEP client receives).
//! Janus checks the rest; this is so that a bad offer is a clear 400, and nothing is
//! registered for it.

use partyline_shared::config::StreamKind;

/// Why an offer is refused: a code for programs and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadOffer {
    /// `bad_sdp`, `no_audio`, `unsupported_codec` or `wrong_direction`.
    pub code: &'static str,
    pub message: String,
}

fn bad(code: &'static str, message: impl Into<String>) -> BadOffer {
    BadOffer { code, message: message.into() }
}

/// Checks `offer` for `kind`.
pub fn check_offer(offer: &str, kind: StreamKind) -> Result<(), BadOffer> {
    let mut lines = offer.lines().map(str::trim_end);
    if lines.next() != Some("v=0") {
        return Err(bad("bad_sdp", "not an SDP offer: it must start with \"v=0\""));
    }
    let audio = audio_section(offer).ok_or_else(|| bad("no_audio", "the offer has no audio section (m=audio)"))?;
    let opus = audio
        .iter()
        .any(|l| l.strip_prefix("a=rtpmap:").is_some_and(|m| m.to_ascii_lowercase().contains(" opus/48000")));
    if !opus {
        return Err(bad(
            "unsupported_codec",
            "the audio section offers no Opus (a=rtpmap:… opus/48000): partyline's lines are Opus",
        ));
    }
    let direction = audio
        .iter()
        .find_map(|l| {
            ["sendrecv", "sendonly", "recvonly", "inactive"].into_iter().find(|d| l.strip_prefix("a=") == Some(*d))
        })
        .unwrap_or("sendrecv");
    let fits = match kind {
        StreamKind::Whip => matches!(direction, "sendonly" | "sendrecv"),
        StreamKind::Whep => matches!(direction, "recvonly" | "sendrecv"),
    };
    if !fits {
        let what = if kind == StreamKind::Whip { "sends (sendonly)" } else { "receives (recvonly)" };
        return Err(bad(
            "wrong_direction",
            format!("the audio section is {direction}: a {} client {what}", kind.as_str().to_uppercase()),
        ));
    }
    Ok(())
}

/// The lines of the first audio section (from its `m=audio` to the next `m=`).
fn audio_section(offer: &str) -> Option<Vec<&str>> {
    let mut lines = offer.lines().map(str::trim_end).skip_while(|l| !l.starts_with("m=audio"));
    let first = lines.next()?;
    Some(std::iter::once(first).chain(lines.take_while(|l| !l.starts_with("m="))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &str = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:111 opus/48000/2\r\na=sendonly\r\n";

    #[test]
    fn an_offer_needs_opus_audio_in_the_direction_of_its_kind() {
        assert_eq!(check_offer(OFFER, StreamKind::Whip), Ok(()));
        assert_eq!(check_offer(&OFFER.replace("sendonly", "recvonly"), StreamKind::Whep), Ok(()));
        assert_eq!(check_offer(&OFFER.replace("a=sendonly\r\n", ""), StreamKind::Whep), Ok(()), "sendrecv by default");
        let cases = [
            ("hello", StreamKind::Whip, "bad_sdp"),
            (&*OFFER.replace("m=audio", "m=video"), StreamKind::Whip, "no_audio"),
            (&*OFFER.replace("opus/48000/2", "PCMU/8000"), StreamKind::Whip, "unsupported_codec"),
            (OFFER, StreamKind::Whep, "wrong_direction"),
            (&*OFFER.replace("sendonly", "recvonly"), StreamKind::Whip, "wrong_direction"),
        ];
        for (offer, kind, code) in cases {
            assert_eq!(check_offer(offer, kind).map_err(|e| e.code), Err(code), "{offer:?}");
        }
        let video_first =
            OFFER.replace("m=audio", "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 VP8/90000\r\nm=audio");
        assert_eq!(check_offer(&video_first, StreamKind::Whip), Ok(()), "the audio section wherever it is");
    }
}
