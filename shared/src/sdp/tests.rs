use super::*;

/// Chromium's offer, abridged to one section with every kind of line it writes.
const CHROMIUM: &str = "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n\
    a=group:BUNDLE 0\r\na=extmap-allow-mixed\r\na=msid-semantic: WMS\r\n\
    m=audio 9 UDP/TLS/RTP/SAVPF 111 63 0 126\r\nc=IN IP4 0.0.0.0\r\na=rtcp:9 IN IP4 0.0.0.0\r\n\
    a=candidate:1 1 udp 2122260223 192.168.1.20 54321 typ host generation 0 network-id 1\r\n\
    a=ice-ufrag:Qx7v\r\na=ice-pwd:p3Kz9mWq2LrT8vYh5NcB1dFe\r\na=ice-options:trickle\r\n\
    a=fingerprint:sha-256 5B:0A:C3:2F:91:7E:44:D8:1C:60:AE:3B:F2:97:0D:68:E4:51:B9:2C:7A:F0:13:8E:C5:36:9D:42:AB:E7:05:7C\r\n\
    a=setup:actpass\r\na=mid:0\r\na=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\na=sendrecv\r\n\
    a=msid:- 6f1c2a3e-5b4d-4e8f-9a0b-1c2d3e4f5a60\r\na=rtcp-mux\r\na=rtcp-rsize\r\na=rtpmap:111 opus/48000/2\r\n\
    a=rtcp-fb:111 transport-cc\r\na=fmtp:111 minptime=10;useinbandfec=1\r\na=rtpmap:63 red/48000/2\r\n\
    a=fmtp:63 111/111\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:126 telephone-event/8000\r\n\
    a=ssrc:1718233401 cname:uV3kP9qLm2Xz7TcA\r\na=end-of-candidates\r\n";

/// Firefox's offer under max-bundle, abridged: a second section bundle-only on port 0.
const FIREFOX: &str = "v=0\r\no=mozilla...THIS_IS_SDPARTA-128.0 6120496524428786870 0 IN IP4 0.0.0.0\r\ns=-\r\n\
    t=0 0\r\na=fingerprint:sha-256 5B:0A:C3:2F:91:7E:44:D8:1C:60:AE:3B:F2:97:0D:68:E4:51:B9:2C:7A:F0:13:8E:C5:36:9D:42:AB:E7:05:7C\r\n\
    a=group:BUNDLE 0 1\r\na=ice-options:trickle\r\na=msid-semantic:WMS *\r\n\
    m=audio 9 UDP/TLS/RTP/SAVPF 109 9 101\r\nc=IN IP4 0.0.0.0\r\na=sendrecv\r\n\
    a=extmap:2/recvonly urn:ietf:params:rtp-hdrext:csrc-audio-level\r\n\
    a=fmtp:109 maxplaybackrate=48000;stereo=1;useinbandfec=1\r\na=fmtp:101 0-15\r\na=mid:0\r\n\
    a=msid:{5d2a8f4e-0c1b-4e3a-9f7d-2b6c8e1a4f30} {a7c3e9b1-4d2f-4a8e-b6c1-9e3f7a2d5b80}\r\na=rtcp-mux\r\n\
    a=rtpmap:109 opus/48000/2\r\na=rtpmap:9 G722/8000/1\r\na=rtpmap:101 telephone-event/8000\r\na=setup:actpass\r\n\
    m=audio 0 UDP/TLS/RTP/SAVPF 109\r\nc=IN IP4 0.0.0.0\r\nb=AS:64\r\na=bundle-only\r\na=recvonly\r\na=mid:1\r\n\
    a=rtcp-mux\r\na=rtpmap:109 opus/48000/2\r\n";

fn parsed(text: &str) -> Session {
    parse(text).expect("an SDP")
}

#[test]
fn browsers_offers_are_written_back_as_they_came() {
    for offer in [CHROMIUM, FIREFOX] {
        assert_eq!(parsed(offer).to_string(), offer);
        assert_eq!(parsed(&offer.replace("\r\n", "\n")).to_string(), offer, "LF alone");
    }
}

#[test]
fn what_a_parse_does_not_keep() {
    let session = parsed("v=0\r\nm=audio 9 RTP/AVP 0\r\n");
    assert_eq!(session.to_string(), "v=0\r\no=- 0 0 IN IP4 0.0.0.0\r\ns=\r\nt=0 0\r\nm=audio 9 RTP/AVP 0\r\n");
    let session = parsed("v=0\r\no=-  1 1 IN IP4 10.0.0.1\r\ns=-\r\nt=0 0\r\nx=unknown\r\na=tool:x \r\n");
    assert_eq!(session.to_string(), "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nt=0 0\r\na=tool:x\r\n");
    assert!(parse("hello").is_err());
    assert!(parse("v=0\r\ns=-\r\nbroken\r\n").is_err(), "a line that is not TYPE=VALUE");
}

#[test]
fn sections_attributes_and_directions_read() {
    let session = parsed(FIREFOX);
    assert_eq!(session.value("group"), Some("BUNDLE 0 1"));
    assert_eq!(session.direction(), None);
    let [first, second] = session.medias.as_slice() else { panic!("two sections") };
    assert_eq!(formats(first).collect::<Vec<_>>(), ["109", "9", "101"]);
    assert_eq!(first.value("mid"), Some("0"));
    assert_eq!(
        first.values("fmtp").collect::<Vec<_>>(),
        ["109 maxplaybackrate=48000;stereo=1;useinbandfec=1", "101 0-15"]
    );
    assert!(first.flag("rtcp-mux") && !first.flag("bundle-only") && !first.flag("mid"));
    assert_eq!(first.direction(), Some(Direction::SendRecv));
    assert_eq!(second.direction(), Some(Direction::RecvOnly));
    let opus = rtpmaps(first).find(|map| map.encoding_name == "opus").expect("opus");
    assert_eq!((opus.payload_type, opus.clock_rate, opus.encoding_params.as_deref()), (109, 48000, Some("2")));
    assert_eq!(rtpmaps(first).count(), 3);
    let extmap = parsed(&FIREFOX.replace("a=sendrecv\r\n", "")).medias[0].direction();
    assert_eq!(extmap, None, "an extmap's /recvonly is not the section's direction");
}

#[test]
fn attributes_are_edited_in_place_or_last() {
    let mut session = parsed(CHROMIUM);
    session.set_direction(Some(Direction::RecvOnly));
    let media = &mut session.medias[0];
    media.set_direction(Some(Direction::SendOnly));
    media.remove_attribute("ssrc");
    media.push_attribute("ptime", 20);
    let text = session.to_string();
    assert!(text.contains("a=msid-semantic: WMS\r\na=recvonly\r\nm=audio"), "{text}");
    assert!(!text.contains("a=sendrecv") && !text.contains("a=ssrc:"), "{text}");
    assert!(text.ends_with("a=rtpmap:126 telephone-event/8000\r\na=end-of-candidates\r\na=sendonly\r\na=ptime:20\r\n"));
    session.set_direction(None);
    assert_eq!(session.direction(), None);
    assert_eq!(session.medias[0].direction(), Some(Direction::SendOnly));
}
