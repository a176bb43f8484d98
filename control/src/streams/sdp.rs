//! What a WHIP or WHEP offer must be before it goes to Janus: an SDP with an audio section that
//! offers Opus, whose direction is the kind's and only that (a WHIP client only sends, a WHEP
//! client only receives: a `sendrecv` WHIP offer would be answered `sendrecv` and get the line's
//! mix, which a publish-only token must not).
//! Janus checks the rest; this is so that a bad offer is a clear 400, and nothing is
//! registered for it.

use partyline_shared::config::StreamKind;
use partyline_shared::sdp::{self, Attributes, BadSdp, Direction};

/// Checks `offer` for `kind`: `bad_sdp`, `no_audio`, `unsupported_codec` or `wrong_direction`
/// when it will not do.
pub fn check_offer(offer: &str, kind: StreamKind) -> Result<(), BadSdp> {
    let session = sdp::parse(offer).map_err(|e| BadSdp::new("bad_sdp", format!("not an SDP offer: {e}")))?;
    let audio = session
        .medias
        .iter()
        .find(|m| m.media == "audio")
        .ok_or_else(|| BadSdp::new("no_audio", "the offer has no audio section (m=audio)"))?;
    if !sdp::rtpmaps(audio).any(|m| m.encoding_name.eq_ignore_ascii_case("opus") && m.clock_rate == 48_000) {
        return Err(BadSdp::new(
            "unsupported_codec",
            "the audio section offers no Opus (a=rtpmap:… opus/48000): partyline's lines are Opus",
        ));
    }
    // The section's own attribute, as Janus reads it.
    let direction = audio.direction().unwrap_or(Direction::SendRecv);
    let fits = match kind {
        StreamKind::Whip => direction == Direction::SendOnly,
        StreamKind::Whep => direction == Direction::RecvOnly,
    };
    if !fits {
        let what = if kind == StreamKind::Whip { "only sends (sendonly)" } else { "only receives (recvonly)" };
        return Err(BadSdp::new(
            "wrong_direction",
            format!("the audio section is {direction}: a {} client {what}", kind.as_str().to_uppercase()),
        ));
    }
    Ok(())
}

/// Janus's answer as browsers take it. AudioBridge answers every section but the first audio
/// one `a=inactive` with payload type 0, which the offer's section did not offer (Janus 1.1.2:
/// `m=video 9 UDP/TLS/RTP/SAVPF 0`); Chromium then refuses the whole answer ("Failed to set
/// remote video description send parameters"). Such a section gets the offer's first payload
/// type for it, with its `a=rtpmap` (and, sending nothing, loses its `a=ssrc`), and stays
/// inactive; the rest is left as Janus wrote it. An answer or offer that does not read as SDP
/// is left alone.
pub fn tidy_answer(offer: &str, answer: &str) -> String {
    let (Ok(offer), Ok(mut tidy)) = (sdp::parse(offer), sdp::parse(answer)) else {
        return answer.to_owned();
    };
    for (theirs, ours) in offer.medias.iter().zip(&mut tidy.medias) {
        let offered: Vec<&str> = sdp::formats(theirs).collect();
        if sdp::formats(ours).any(|f| offered.contains(&f)) {
            continue;
        }
        let Some(first) = offered.first() else { continue };
        ours.fmt = (*first).to_owned();
        let rtpmap = theirs.values("rtpmap").find(|map| map.split(' ').next() == Some(first));
        if let Some(rtpmap) = rtpmap {
            ours.remove_attribute("ssrc");
            ours.push_attribute("rtpmap", rtpmap);
        }
    }
    tidy.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFER: &str = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:111 opus/48000/2\r\na=sendonly\r\n";

    #[test]
    fn an_offer_needs_opus_audio_in_the_direction_of_its_kind() {
        assert_eq!(check_offer(OFFER, StreamKind::Whip), Ok(()));
        assert_eq!(check_offer(&OFFER.replace("sendonly", "recvonly"), StreamKind::Whep), Ok(()));
        let cases = [
            // sendrecv, said or by default: a publisher would receive the line, a player send.
            (&*OFFER.replace("sendonly", "sendrecv"), StreamKind::Whip, "wrong_direction"),
            (&*OFFER.replace("a=sendonly\r\n", ""), StreamKind::Whip, "wrong_direction"),
            (&*OFFER.replace("sendonly", "sendrecv"), StreamKind::Whep, "wrong_direction"),
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

    #[test]
    fn a_section_janus_answers_with_a_payload_type_it_was_not_offered_gets_the_offer_s() {
        let offer = "v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96 97\r\na=mid:0\r\na=rtpmap:96 VP8/90000\r\na=rtpmap:97 rtx/90000\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111 0\r\na=mid:1\r\na=rtpmap:111 opus/48000/2\r\n";
        // As Janus 1.1.2's AudioBridge answers it (abridged).
        let answer = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\nm=video 9 UDP/TLS/RTP/SAVPF 0\r\na=inactive\r\na=mid:0\r\na=ssrc:2736989203 cname:janus\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=sendonly\r\na=mid:1\r\na=rtpmap:111 opus/48000/2\r\na=ssrc:3414173706 cname:janus\r\n";
        let tidy = tidy_answer(offer, answer);
        let expected = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=inactive\r\na=mid:0\r\na=rtpmap:96 VP8/90000\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=sendonly\r\na=mid:1\r\na=rtpmap:111 opus/48000/2\r\na=ssrc:3414173706 cname:janus\r\n";
        assert_eq!(tidy, expected);
        assert_eq!(tidy_answer(offer, &tidy), tidy, "an answer already right is left as it is");
    }
}
