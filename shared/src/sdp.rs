//! SDP as partyline reads and edits it, in one place and on `sdp-types`: [`parse`] a text into a
//! [`Session`], inspect its media sections ([`formats`], [`rtpmaps`]) and the attributes of the
//! session or of a section ([`Attributes`]: values, properties, the direction), edit those
//! attributes, and write the session back with its `Display` (CRLF lines). The readers' own rules
//! live with them: AES67's ([`crate::aes67`]), control's WHIP/WHEP checks and its tidying of
//! Janus's answers, the rooms endpoint's offer checks and direction grants. [`BadSdp`] is what
//! partyline answers when it refuses an SDP.
//!
//! What a parse and a write keep, checked against browsers' offers (tests below): every `a=`
//! line, known or not, with its value as written and in its order, at session level and per
//! section; the sections in their order; `c=`, `b=`, `k=`, `i=` lines. What they change, none of
//! which a browser, str0m or Janus writes: session-level lines are written in RFC 8866's order
//! (`v o s i u e p c b t r z k a`); a line of an unknown type (`x=`) is dropped; runs of spaces
//! between the fields of `o=`, `c=` and `t=` become one; a session without `o=`, `s=` or `t=`
//! gets `o=- 0 0 IN IP4 0.0.0.0`, `s=` and `t=0 0`. No text handling is left beside this.

use sdp_types::Attribute;
pub use sdp_types::{Direction, Media, ParserError, RtpMap, Session};

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

/// Reads an SDP. Its lines may end with CRLF or LF alone (SAP's and pasted SDPs do); whitespace
/// at the end of a line, and around the whole text, is not part of it.
pub fn parse(text: &str) -> Result<Session, ParserError> {
    let text: String = text.trim().lines().map(|line| format!("{}\r\n", line.trim_end())).collect();
    Session::parse(text.as_bytes())
}

/// A media section's formats (its payload types, for RTP), as its `m=` line lists them.
pub fn formats(media: &Media) -> impl Iterator<Item = &str> {
    media.fmt.split_whitespace()
}

/// A media section's `a=rtpmap`s, those that read as one.
pub fn rtpmaps(media: &Media) -> impl Iterator<Item = RtpMap> + '_ {
    media.attributes_typed::<RtpMap>().filter_map(Result::ok)
}

/// The four directions, as their attributes name them (RFC 8866 §6.7).
const DIRECTIONS: [Direction; 4] = [Direction::SendRecv, Direction::SendOnly, Direction::RecvOnly, Direction::Inactive];

/// The attributes (`a=` lines) of a session or of one of its media sections, by their exact,
/// case-sensitive names, in their order.
pub trait Attributes {
    fn attribute_list(&self) -> &[Attribute];
    fn attribute_list_mut(&mut self) -> &mut Vec<Attribute>;

    /// The values of every `a=NAME:VALUE`, in order.
    fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.attribute_list().iter().filter(move |a| a.attribute == name).filter_map(|a| a.value.as_deref())
    }

    /// The value of the first `a=NAME:VALUE`.
    fn value(&self, name: &str) -> Option<&str> {
        self.attribute_list().iter().filter(|a| a.attribute == name).find_map(|a| a.value.as_deref())
    }

    /// Whether the property `a=NAME` (no value) is there.
    fn flag(&self, name: &str) -> bool {
        self.attribute_list().iter().any(|a| a.attribute == name && a.value.is_none())
    }

    /// The direction its attributes say (the first of `a=sendrecv`, `a=sendonly`, `a=recvonly`,
    /// `a=inactive`), if any: a section without one takes the session's, a session without one
    /// is `sendrecv`.
    fn direction(&self) -> Option<Direction> {
        self.attribute_list().iter().find_map(direction_of)
    }

    /// Drops every direction attribute and, with `Some`, writes `direction` after the others.
    fn set_direction(&mut self, direction: Option<Direction>) {
        self.attribute_list_mut().retain(|a| direction_of(a).is_none());
        if let Some(direction) = direction {
            self.attribute_list_mut().push(direction.into());
        }
    }

    /// Drops every `a=NAME` and `a=NAME:…`.
    fn remove_attribute(&mut self, name: &str) {
        self.attribute_list_mut().retain(|a| a.attribute != name);
    }

    /// Writes `a=NAME:VALUE` after the others.
    fn push_attribute(&mut self, name: &str, value: impl ToString) {
        self.attribute_list_mut().push(Attribute::with_value(name, value));
    }
}

fn direction_of(attribute: &Attribute) -> Option<Direction> {
    let name = attribute.attribute.as_str();
    DIRECTIONS.into_iter().find(|d| attribute.value.is_none() && d.as_str() == name)
}

impl Attributes for Session {
    fn attribute_list(&self) -> &[Attribute] {
        &self.attributes
    }

    fn attribute_list_mut(&mut self) -> &mut Vec<Attribute> {
        &mut self.attributes
    }
}

impl Attributes for Media {
    fn attribute_list(&self) -> &[Attribute] {
        &self.attributes
    }

    fn attribute_list_mut(&mut self) -> &mut Vec<Attribute> {
        &mut self.attributes
    }
}

#[cfg(test)]
mod tests;
