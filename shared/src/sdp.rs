//! What partyline answers when it refuses an SDP: an AES67 stream's description
//! ([`crate::aes67`]) or a WHIP or WHEP client's offer (control's streams).

/// Why an SDP is refused: a code for programs and a message for people. Each reader's
/// documentation lists the codes it gives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadSdp {
    pub code: &'static str,
    pub message: String,
}

impl BadSdp {
    pub fn new(code: &'static str, message: impl Into<String>) -> BadSdp {
        BadSdp { code, message: message.into() }
    }
}
