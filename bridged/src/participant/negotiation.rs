//! A branch's WebRTC negotiation: the offer, with every local ICE candidate, and Janus's
//! answer. Session descriptions are handled as `gst_sdp` messages, never edited as text.

use anyhow::{Context as _, anyhow};
use gst::glib;
use gst::prelude::*;
use tokio::sync::mpsc;

use super::{STEP_TIMEOUT, Stages};

/// What webrtcbin tells the negotiation.
#[derive(Debug)]
pub enum RtcEvent {
    NegotiationNeeded,
    /// A local ICE candidate (`candidate:…`) of media line `mline`.
    Candidate {
        mline: u32,
        candidate: String,
    },
    GatheringComplete,
}

/// webrtcbin's signals as [`RtcEvent`]s, and its state changes as timing marks. Connected
/// before the bin starts, so that no signal is missed.
pub fn watch(webrtc: &gst::Element, stages: &Stages) -> mpsc::UnboundedReceiver<RtcEvent> {
    let (rtc_tx, rtc_rx) = mpsc::unbounded_channel();
    let tx = rtc_tx.clone();
    webrtc.connect("on-negotiation-needed", false, move |_| {
        let _ = tx.send(RtcEvent::NegotiationNeeded);
        None
    });
    let tx = rtc_tx.clone();
    webrtc.connect("on-ice-candidate", false, move |values| {
        if let (Ok(mline), Ok(candidate)) = (values[1].get::<u32>(), values[2].get::<String>()) {
            let _ = tx.send(RtcEvent::Candidate { mline, candidate });
        }
        None
    });
    let timing = stages.clone();
    webrtc.connect_notify(Some("ice-connection-state"), move |webrtc, _| {
        let state = webrtc.property::<gst_webrtc::WebRTCICEConnectionState>("ice-connection-state");
        timing.mark(&format!("ICE connection state {state:?}"));
    });
    let timing = stages.clone();
    webrtc.connect_notify(Some("connection-state"), move |webrtc, _| {
        let state = webrtc.property::<gst_webrtc::WebRTCPeerConnectionState>("connection-state");
        timing.mark(&format!("peer connection state {state:?} (ICE and DTLS)"));
    });
    webrtc.connect_notify(Some("ice-gathering-state"), move |webrtc, _| {
        let state = webrtc.property::<gst_webrtc::WebRTCICEGatheringState>("ice-gathering-state");
        if state == gst_webrtc::WebRTCICEGatheringState::Complete {
            let _ = rtc_tx.send(RtcEvent::GatheringComplete);
        }
    });
    rtc_rx
}

/// Creates the offer, sets it as local description and waits until ICE gathering is over, so
/// the offer carries every candidate (host candidates only: gathering takes milliseconds, and
/// one `join` replaces a trickle of requests). Returns the SDP text.
pub async fn offer(
    webrtc: &gst::Element,
    rtc: &mut mpsc::UnboundedReceiver<RtcEvent>,
    stages: &Stages,
) -> anyhow::Result<String> {
    // webrtcbin asks once its transceiver is ready.
    loop {
        match rtc.recv().await {
            Some(RtcEvent::NegotiationNeeded) => break,
            Some(_) => {}
            None => return Err(anyhow!("webrtcbin went away")),
        }
    }
    stages.mark("negotiation needed");
    let (promise, reply) = gst::Promise::new_future();
    webrtc.emit_by_name::<()>("create-offer", &[&None::<gst::Structure>, &promise]);
    // The reply is kept until the offer has been read from it.
    let reply =
        reply.await.map_err(|e| anyhow!("create-offer: {e:?}"))?.ok_or_else(|| anyhow!("create-offer: no reply"))?;
    if let Ok(error) = reply.get::<glib::Error>("error") {
        return Err(anyhow!("create-offer: {error}"));
    }
    let offer = reply.get::<gst_webrtc::WebRTCSessionDescription>("offer").context("create-offer")?;
    stages.mark("offer created");
    webrtc.emit_by_name::<()>("set-local-description", &[&offer, &None::<gst::Promise>]);
    // The DTLS transport exists once the local description is set.
    if let Some(transceiver) =
        webrtc.emit_by_name::<Option<gst_webrtc::WebRTCRTPTransceiver>>("get-transceiver", &[&0i32])
        && let Some(sender) = transceiver.sender()
        && let Some(dtls) = sender.transport()
    {
        let timing = stages.clone();
        dtls.connect_notify(Some("state"), move |dtls, _| {
            timing.mark(&format!("DTLS state {:?}", dtls.property::<gst_webrtc::WebRTCDTLSTransportState>("state")));
        });
    }
    let mut candidates = Vec::new();
    loop {
        match rtc.recv().await {
            Some(RtcEvent::Candidate { mline, candidate }) => {
                stages.mark(&format!("local candidate {candidate}"));
                candidates.push((mline, candidate));
            }
            Some(RtcEvent::GatheringComplete) => {
                stages.mark("ICE gathering complete");
                break;
            }
            Some(RtcEvent::NegotiationNeeded) => {}
            None => return Err(anyhow!("webrtcbin went away")),
        }
    }
    let local = webrtc
        .property::<Option<gst_webrtc::WebRTCSessionDescription>>("local-description")
        .ok_or_else(|| anyhow!("no local description"))?;
    let mut sdp = local.sdp().to_owned();
    with_candidates(&mut sdp, &candidates)?;
    sdp.as_text().context("the offer")
}

/// Puts the gathered candidates (`candidate:…`, by media line) into `sdp`, each media line's
/// closed by `end-of-candidates`, unless webrtcbin already wrote candidates into its local
/// description. Fails when `sdp` ends up with none: Janus could not reach us.
pub fn with_candidates(sdp: &mut gst_sdp::SDPMessageRef, candidates: &[(u32, String)]) -> anyhow::Result<()> {
    let has_candidates = |sdp: &gst_sdp::SDPMessageRef| sdp.medias().any(|m| m.attribute_val("candidate").is_some());
    if !has_candidates(sdp) {
        let mut completed = Vec::new();
        for (mline, candidate) in candidates {
            let value = candidate.strip_prefix("candidate:").unwrap_or(candidate);
            let media =
                sdp.media_mut(*mline).ok_or_else(|| anyhow!("a candidate of media line {mline}, not in the offer"))?;
            media.add_attribute("candidate", Some(value));
            if !completed.contains(mline) {
                completed.push(*mline);
            }
        }
        for mline in completed {
            if let Some(media) = sdp.media_mut(mline) {
                media.add_attribute("end-of-candidates", None);
            }
        }
    }
    if !has_candidates(sdp) {
        return Err(anyhow!("ICE gathered no candidate (check ice_addresses)"));
    }
    Ok(())
}

/// Janus's answer as a session description.
pub fn answer(sdp: &str) -> anyhow::Result<gst_webrtc::WebRTCSessionDescription> {
    let message = gst_sdp::SDPMessage::parse_buffer(sdp.as_bytes()).context("Janus's answer is not SDP")?;
    if message.medias_len() == 0 {
        return Err(anyhow!("Janus's answer has no media line"));
    }
    Ok(gst_webrtc::WebRTCSessionDescription::new(gst_webrtc::WebRTCSDPType::Answer, message))
}

/// Sets Janus's answer as webrtcbin's remote description.
pub async fn set_answer(webrtc: &gst::Element, sdp: &str) -> anyhow::Result<()> {
    let answer = answer(sdp)?;
    let (promise, reply) = gst::Promise::new_future();
    webrtc.emit_by_name::<()>("set-remote-description", &[&answer, &promise]);
    let reply =
        tokio::time::timeout(STEP_TIMEOUT, reply).await.map_err(|_| anyhow!("set-remote-description timed out"))?;
    if let Ok(Some(reply)) = reply
        && let Ok(error) = reply.get::<glib::Error>("error")
    {
        return Err(anyhow!("set-remote-description: {error}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An offer as webrtcbin makes it: one bundled audio line, no candidate yet.
    const OFFER: &str = "v=0\r\n\
        o=- 4064476960435580409 0 IN IP4 0.0.0.0\r\n\
        s=-\r\n\
        t=0 0\r\n\
        a=ice-options:trickle\r\n\
        a=group:BUNDLE audio0\r\n\
        m=audio 9 UDP/TLS/RTP/SAVPF 111\r\n\
        c=IN IP4 0.0.0.0\r\n\
        a=setup:actpass\r\n\
        a=ice-ufrag:Ab12\r\n\
        a=ice-pwd:Cd34Cd34Cd34Cd34Cd34Cd34\r\n\
        a=rtcp-mux\r\n\
        a=mid:audio0\r\n\
        a=sendrecv\r\n\
        a=rtpmap:111 OPUS/48000/2\r\n\
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n\
        a=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\n";
    const HOST: &str = "candidate:1 1 UDP 2015363327 10.77.0.1 43210 typ host";

    fn parse(text: &str) -> gst_sdp::SDPMessage {
        gst::init().expect("GStreamer");
        gst_sdp::SDPMessage::parse_buffer(text.as_bytes()).expect("SDP")
    }

    #[test]
    fn the_candidates_go_into_their_media_line_closed_by_end_of_candidates() {
        let mut sdp = parse(OFFER);
        let relay = "candidate:2 1 UDP 1015363327 10.77.0.1 43211 typ host";
        with_candidates(&mut sdp, &[(0, HOST.into()), (0, relay.into())]).expect("candidates");
        let text = sdp.as_text().expect("text");
        let media = text.find("m=audio").expect("the media line");
        let host =
            text.find("a=candidate:1 1 UDP 2015363327 10.77.0.1 43210 typ host\r\n").expect("the host candidate");
        let end = text.find("a=end-of-candidates\r\n").expect("end-of-candidates");
        assert!(media < host && host < end, "{text}");
        let again = parse(&text);
        let audio = again.media(0).expect("audio");
        assert_eq!(audio.attribute_val_n("candidate", 1), Some("2 1 UDP 1015363327 10.77.0.1 43211 typ host"));
        assert_eq!(audio.attribute_val("mid"), Some("audio0"), "the rest is kept");
        assert_eq!(text.matches("a=end-of-candidates").count(), 1);
    }

    #[test]
    fn candidates_webrtcbin_wrote_itself_are_left_alone() {
        let written = format!("{OFFER}a={HOST}\r\n");
        let mut sdp = parse(&written);
        with_candidates(&mut sdp, &[(0, HOST.into())]).expect("candidates");
        assert_eq!(sdp.as_text().expect("text").matches("a=candidate").count(), 1);
    }

    #[test]
    fn an_offer_without_any_candidate_is_refused() {
        let mut sdp = parse(OFFER);
        let error = with_candidates(&mut sdp, &[]).expect_err("no candidate");
        assert!(error.to_string().contains("ice_addresses"), "{error}");
        let error = with_candidates(&mut sdp, &[(3, HOST.into())]).expect_err("no such media line");
        assert!(error.to_string().contains("media line 3"), "{error}");
    }

    #[test]
    fn janus_answer() {
        gst::init().expect("GStreamer");
        let text = OFFER.replace("a=setup:actpass", "a=setup:active") + &format!("a={HOST}\r\n");
        let described = answer(&text).expect("an answer");
        assert_eq!(described.type_(), gst_webrtc::WebRTCSDPType::Answer);
        assert_eq!(described.sdp().media(0).and_then(|m| m.attribute_val("setup")), Some("active"));
        assert!(answer("v=0\r\ns=-\r\n").is_err(), "no media line");
    }
}
