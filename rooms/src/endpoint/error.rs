//! Why the endpoint refused something.

use std::net::SocketAddr;

use super::event::SessionId;
use super::offer::OfferError;

/// Why the endpoint could not start, or refused an offer.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("UDP socket on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
    #[error("{0} is not an address a panel can reach (the host candidate is the socket's own address)")]
    UnspecifiedAddress(SocketAddr),
    #[error("the DTLS certificate could not be made")]
    Certificate,
    #[error("refused offer: {0}")]
    Offer(#[from] OfferError),
    #[error("refused offer: the endpoint has its maximum of {max} sessions")]
    Full { max: usize },
    #[error("refused offer: str0m: {0}")]
    Rtc(#[from] str0m::RtcError),
    #[error("{0} is not open")]
    UnknownSession(SessionId),
}

/// Why a frame was not sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("{0} is not open")]
    UnknownSession(SessionId),
    #[error("{session} has no line {line}")]
    UnknownLine { session: SessionId, line: usize },
    #[error("{session} does not listen on line {line}")]
    NotListening { session: SessionId, line: usize },
    #[error("{0} is not connected yet")]
    NotConnected(SessionId),
    #[error("{session} negotiated no Opus on line {line}")]
    NoOpus { session: SessionId, line: usize },
    #[error("str0m: {0}")]
    Rtc(#[from] str0m::RtcError),
}
