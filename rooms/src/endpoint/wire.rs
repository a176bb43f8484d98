//! The little the endpoint reads of a datagram itself, before any session has it: a STUN
//! request's USERNAME (to route a panel's first checks by the server's ufrag) and an RTP
//! packet's SSRC (clear text in SRTP, to refuse a listen-only line's packets before decrypting
//! them). Both read within bounds and give `None` on anything else.

/// RFC 5389's magic cookie, bytes 4..8 of every STUN message.
const MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];
const STUN_HEADER: usize = 20;
const USERNAME: u16 = 0x0006;

/// Whether `datagram` looks like STUN (RFC 7983: first byte 0..=3, and the cookie).
pub(super) fn is_stun(datagram: &[u8]) -> bool {
    datagram.len() >= STUN_HEADER && datagram[0] < 4 && datagram[4..8] == MAGIC_COOKIE
}

/// The local part of a STUN request's USERNAME (`server-ufrag:panel-ufrag`): the ufrag of the
/// session it is for.
pub(super) fn stun_target_ufrag(datagram: &[u8]) -> Option<&str> {
    if !is_stun(datagram) {
        return None;
    }
    let mut attributes = datagram.get(STUN_HEADER..)?;
    while attributes.len() >= 4 {
        let kind = u16::from_be_bytes([attributes[0], attributes[1]]);
        let length = usize::from(u16::from_be_bytes([attributes[2], attributes[3]]));
        let value = attributes.get(4..4 + length)?;
        if kind == USERNAME {
            let username = std::str::from_utf8(value).ok()?;
            return username.split(':').next();
        }
        attributes = attributes.get(4 + length.next_multiple_of(4)..)?;
    }
    None
}

/// The SSRC of an RTP packet (not RTCP: RFC 5761's payload types 64..=95 with the marker bit
/// are RTCP's packet types 192..=223).
pub(super) fn rtp_ssrc(datagram: &[u8]) -> Option<u32> {
    if datagram.len() < 12 || !(128..192).contains(&datagram[0]) || (192..=223).contains(&datagram[1]) {
        return None;
    }
    Some(u32::from_be_bytes([datagram[8], datagram[9], datagram[10], datagram[11]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding_request(username: &[u8]) -> Vec<u8> {
        let mut message = vec![0x00, 0x01, 0, 0];
        message.extend_from_slice(&MAGIC_COOKIE);
        message.extend_from_slice(&[7; 12]);
        // An attribute before USERNAME, padded, to walk over.
        message.extend_from_slice(&[0x80, 0x2A, 0, 3, 1, 2, 3, 0]);
        message.extend_from_slice(&USERNAME.to_be_bytes());
        message.extend_from_slice(&u16::try_from(username.len()).expect("short").to_be_bytes());
        message.extend_from_slice(username);
        message
    }

    #[test]
    fn finds_the_servers_ufrag_in_a_binding_request() {
        assert_eq!(stun_target_ufrag(&binding_request(b"srv1:pnl2")), Some("srv1"));
        assert_eq!(stun_target_ufrag(&binding_request(b"\xff\xfe:x")), None);
    }

    #[test]
    fn truncated_or_foreign_datagrams_give_nothing() {
        let request = binding_request(b"srv1:pnl2");
        for end in 0..request.len() {
            assert_eq!(stun_target_ufrag(&request[..end]), None, "cut at {end}");
        }
        assert_eq!(rtp_ssrc(&[]), None);
        assert_eq!(rtp_ssrc(&[0x80, 111, 0, 1]), None);
        assert_eq!(rtp_ssrc(&[0x80, 200, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9]), None, "RTCP");
        assert_eq!(rtp_ssrc(&[0x80, 111, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9]), Some(9));
    }
}
