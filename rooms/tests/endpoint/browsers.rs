//! Offers shaped as Chromium's and Firefox's (two sendrecv audio transceivers, as the panel makes
//! them), written after their real ones: what the endpoint must take from a browser.

/// A DTLS fingerprint's form (the value is not checked before DTLS).
const FINGERPRINT: &str = "a=fingerprint:sha-256 \
    5B:0A:C3:2F:91:7E:44:D8:1C:60:AE:3B:F2:97:0D:68:E4:51:B9:2C:7A:F0:13:8E:C5:36:9D:42:AB:E7:05:7C";

fn chromium_section(mid: u8, ssrc: u32) -> String {
    format!(
        "m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126\r\n\
         c=IN IP4 0.0.0.0\r\n\
         a=rtcp:9 IN IP4 0.0.0.0\r\n\
         a=ice-ufrag:Qx7v\r\n\
         a=ice-pwd:p3Kz9mWq2LrT8vYh5NcB1dFe\r\n\
         a=ice-options:trickle\r\n\
         {FINGERPRINT}\r\n\
         a=setup:actpass\r\n\
         a=mid:{mid}\r\n\
         a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n\
         a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r\n\
         a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\n\
         a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid\r\n\
         a=sendrecv\r\n\
         a=msid:- 6f1c2a3e-5b4d-4e8f-9a0b-1c2d3e4f5a6{mid}\r\n\
         a=rtcp-mux\r\n\
         a=rtcp-rsize\r\n\
         a=rtpmap:111 opus/48000/2\r\n\
         a=rtcp-fb:111 transport-cc\r\n\
         a=fmtp:111 minptime=10;useinbandfec=1\r\n\
         a=rtpmap:63 red/48000/2\r\n\
         a=fmtp:63 111/111\r\n\
         a=rtpmap:9 G722/8000\r\n\
         a=rtpmap:0 PCMU/8000\r\n\
         a=rtpmap:8 PCMA/8000\r\n\
         a=rtpmap:13 CN/8000\r\n\
         a=rtpmap:110 telephone-event/48000\r\n\
         a=rtpmap:126 telephone-event/8000\r\n\
         a=ssrc:{ssrc} cname:uV3kP9qLm2Xz7TcA\r\n\
         a=ssrc:{ssrc} msid:- 6f1c2a3e-5b4d-4e8f-9a0b-1c2d3e4f5a6{mid}\r\n"
    )
}

/// Chromium's offer (Unified Plan, bundle policy balanced, trickle: no candidates yet).
pub fn chromium() -> String {
    format!(
        "v=0\r\n\
         o=- 4611731400430051336 2 IN IP4 127.0.0.1\r\n\
         s=-\r\n\
         t=0 0\r\n\
         a=group:BUNDLE 0 1\r\n\
         a=extmap-allow-mixed\r\n\
         a=msid-semantic: WMS\r\n\
         {}{}",
        chromium_section(0, 1_718_233_401),
        chromium_section(1, 2_840_117_655)
    )
}

fn firefox_section(mid: u8, port: u16, ssrc: u32) -> String {
    let bundle_only = if port == 0 { "a=bundle-only\r\n" } else { "" };
    format!(
        "m=audio {port} UDP/TLS/RTP/SAVPF 109 9 0 8 101\r\n\
         c=IN IP4 0.0.0.0\r\n\
         {bundle_only}\
         a=sendrecv\r\n\
         a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r\n\
         a=extmap:2/recvonly urn:ietf:params:rtp-hdrext:csrc-audio-level\r\n\
         a=extmap:3 urn:ietf:params:rtp-hdrext:sdes:mid\r\n\
         a=fmtp:109 maxplaybackrate=48000;stereo=1;useinbandfec=1\r\n\
         a=fmtp:101 0-15\r\n\
         a=ice-pwd:6a1f0e2d9c8b7a6f5e4d3c2b1a0f9e8d\r\n\
         a=ice-ufrag:3b9e1c7a\r\n\
         a=mid:{mid}\r\n\
         a=msid:{{5d2a8f4e-0c1b-4e3a-9f7d-2b6c8e1a4f3{mid}}} {{a7c3e9b1-4d2f-4a8e-b6c1-9e3f7a2d5b8{mid}}}\r\n\
         a=rtcp-mux\r\n\
         a=rtpmap:109 opus/48000/2\r\n\
         a=rtpmap:9 G722/8000/1\r\n\
         a=rtpmap:0 PCMU/8000\r\n\
         a=rtpmap:8 PCMA/8000\r\n\
         a=rtpmap:101 telephone-event/8000\r\n\
         a=setup:actpass\r\n\
         a=ssrc:{ssrc} cname:{{e1f2a3b4-c5d6-4e7f-8a9b-0c1d2e3f4a5b}}\r\n"
    )
}

/// Firefox's offer; with `max_bundle`, its second m-line is bundle-only (port 0), as Firefox
/// writes it under the bundle policy max-bundle.
pub fn firefox(max_bundle: bool) -> String {
    format!(
        "v=0\r\n\
         o=mozilla...THIS_IS_SDPARTA-128.0 6120496524428786870 0 IN IP4 0.0.0.0\r\n\
         s=-\r\n\
         t=0 0\r\n\
         {FINGERPRINT}\r\n\
         a=group:BUNDLE 0 1\r\n\
         a=ice-options:trickle\r\n\
         a=msid-semantic:WMS *\r\n\
         {}{}",
        firefox_section(0, 9, 3_101_557_212),
        firefox_section(1, if max_bundle { 0 } else { 9 }, 918_273_645)
    )
}
