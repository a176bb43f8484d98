//! `groups[].streamTokens`: the bearer tokens that let other systems into a line by WHIP
//! (RFC 9725: a publisher's audio into the group's room, e.g. OBS Studio) or out of it by WHEP
//! (a player listening to the line's mix). The admin creates one per use; the secret is shown
//! once and only its SHA-256 is stored:
//!
//! ```yaml
//! groups:
//!   - name: Show
//!     streamTokens:
//!       - { id: 3f9a0c1b, kind: whip, name: Vision mixer, hash: "sha256$…" }
//! ```

use serde::{Deserialize, Serialize};

/// What a stream token admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum StreamKind {
    /// A publisher into the line (`POST /api/whip/{group}`): heard on it, hears nothing.
    Whip,
    /// A player of the line's mix (`POST /api/whep/{group}`): hears it, is never heard.
    Whep,
}

impl StreamKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::Whip => "whip",
            StreamKind::Whep => "whep",
        }
    }
}

/// A stream token as stored: the secret itself never is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamToken {
    /// Random hex, unique in its group: how the admin names it to revoke it.
    pub id: String,
    pub kind: StreamKind,
    /// What it is for ("Vision mixer", "Remote director").
    pub name: String,
    /// `sha256$` and the hex SHA-256 of the secret.
    pub hash: String,
}

/// The scheme of [`StreamToken::hash`].
pub const STREAM_TOKEN_SCHEME: &str = "sha256$";

/// A group's stream tokens: ids unique, names given, hashes of the scheme. The error is the
/// entry's field (`streamTokens[i].id`, …) and why.
pub fn check_stream_tokens(tokens: &[StreamToken]) -> Result<(), (String, String)> {
    for (i, token) in tokens.iter().enumerate() {
        let at = |field: &str| format!("streamTokens[{i}].{field}");
        if token.id.is_empty() || !token.id.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err((at("id"), "hex digits".into()));
        }
        if tokens[..i].iter().any(|t| t.id == token.id) {
            return Err((at("id"), format!("{:?} is used twice", token.id)));
        }
        if token.name.trim().is_empty() || token.name.chars().count() > 64 {
            return Err((at("name"), "1 to 64 characters".into()));
        }
        let hex = token.hash.strip_prefix(STREAM_TOKEN_SCHEME).unwrap_or_default();
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err((at("hash"), "not a stream token hash: create tokens through the admin API or UI".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(id: &str, name: &str, hash: &str) -> StreamToken {
        StreamToken { id: id.into(), kind: StreamKind::Whip, name: name.into(), hash: hash.into() }
    }

    #[test]
    fn stream_tokens_have_unique_ids_names_and_hashes() {
        let hash = format!("{STREAM_TOKEN_SCHEME}{}", "ab".repeat(32));
        assert_eq!(check_stream_tokens(&[token("0a1b", "OBS", &hash), token("0a1c", "Player", &hash)]), Ok(()));
        let cases = [
            (vec![token("xyz", "OBS", &hash)], "streamTokens[0].id"),
            (vec![token("0a", "OBS", &hash), token("0a", "Again", &hash)], "streamTokens[1].id"),
            (vec![token("0a", " ", &hash)], "streamTokens[0].name"),
            (vec![token("0a", "OBS", "plain-secret")], "streamTokens[0].hash"),
        ];
        for (tokens, field) in cases {
            assert_eq!(check_stream_tokens(&tokens).expect_err("refused").0, field);
        }
        assert_eq!(serde_json::to_string(&StreamKind::Whep).expect("json"), "\"whep\"");
    }

    #[test]
    fn the_config_shown_by_the_api_hides_stream_token_hashes() {
        let mut config = crate::config::Config::default();
        let mut group = crate::config::Group::new("Show", None);
        group.stream_tokens = vec![token("0a", "OBS", &format!("{STREAM_TOKEN_SCHEME}{}", "ab".repeat(32)))];
        config.groups = vec![group];
        let shown = config.redacted();
        assert!(!shown.groups[0].stream_tokens[0].hash.contains("abab"), "{:?}", shown.groups[0].stream_tokens);
        assert_eq!(shown.groups[0].stream_tokens[0].name, "OBS", "the rest is shown");
    }
}
