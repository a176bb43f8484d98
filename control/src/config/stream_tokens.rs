//! The edits of a group's stream tokens (WHIP and WHEP): one added with the hash of a secret
//! the caller made, one revoked by its id.

use partyline_shared::Config;
use partyline_shared::config::{StreamKind, StreamToken, check_stream_tokens};

use super::edit::{EditError, not_found};

/// The most stream tokens a group keeps.
pub const MAX_STREAM_TOKENS: usize = 16;

/// Adds a stream token of `kind` named `name` to group `group`, stored as `hash` under `id`.
pub fn add_stream_token(config: &mut Config, group: &str, token: StreamToken) -> Result<StreamToken, EditError> {
    let (index, _) = config.group(group).ok_or_else(|| not_found("group", group))?;
    let tokens = &mut config.groups[index].stream_tokens;
    if tokens.len() >= MAX_STREAM_TOKENS {
        let message = format!("the group has {MAX_STREAM_TOKENS} stream tokens, the most it keeps: revoke one first");
        return Err(EditError::Conflict(message));
    }
    let mut next = tokens.clone();
    next.push(StreamToken { name: token.name.trim().to_owned(), ..token });
    check_stream_tokens(&next).map_err(|(field, message)| {
        let field = if field.ends_with(".name") { "name" } else { "token" };
        EditError::Invalid { field, message }
    })?;
    *tokens = next;
    Ok(tokens.last().cloned().expect("just added"))
}

/// Revokes group `group`'s stream token `id`.
pub fn revoke_stream_token(config: &mut Config, group: &str, id: &str) -> Result<StreamToken, EditError> {
    let (index, _) = config.group(group).ok_or_else(|| not_found("group", group))?;
    let tokens = &mut config.groups[index].stream_tokens;
    let at = tokens.iter().position(|t| t.id == id).ok_or_else(|| not_found("stream token", id))?;
    Ok(tokens.remove(at))
}

/// The group and token a secret's hash names, for `kind`: `(group id, token)`.
pub fn stream_token_by_hash(config: &Config, kind: StreamKind, hash: &str) -> Option<(String, StreamToken)> {
    config.groups.iter().find_map(|g| {
        let token = g.stream_tokens.iter().find(|t| t.kind == kind && t.hash == hash)?;
        Some((g.id(), token.clone()))
    })
}

#[cfg(test)]
mod tests {
    use partyline_shared::config::{Group, STREAM_TOKEN_SCHEME};

    use super::*;

    fn token(id: &str, name: &str) -> StreamToken {
        let hash = format!("{STREAM_TOKEN_SCHEME}{}", id.repeat(64 / id.len()));
        StreamToken { id: id.into(), kind: StreamKind::Whip, name: name.into(), hash }
    }

    #[test]
    fn stream_tokens_are_added_found_and_revoked() {
        let mut config = Config::default();
        config.groups = vec![Group::new("Show", None)];
        let added = add_stream_token(&mut config, "show", token("ab", " OBS ")).expect("added");
        assert_eq!(added.name, "OBS", "trimmed");
        assert!(matches!(add_stream_token(&mut config, "nope", token("cd", "x")), Err(EditError::NotFound { .. })));
        assert!(matches!(add_stream_token(&mut config, "show", token("ab", "again")), Err(EditError::Invalid { .. })));
        let (group, found) = stream_token_by_hash(&config, StreamKind::Whip, &added.hash).expect("found");
        assert_eq!((group.as_str(), found.id.as_str()), ("show", "ab"));
        assert!(
            stream_token_by_hash(&config, StreamKind::Whep, &added.hash).is_none(),
            "a WHIP token is no WHEP token"
        );
        revoke_stream_token(&mut config, "show", "ab").expect("revoked");
        assert!(stream_token_by_hash(&config, StreamKind::Whip, &added.hash).is_none());
        assert!(matches!(revoke_stream_token(&mut config, "show", "ab"), Err(EditError::NotFound { .. })));
        config.validate().expect("valid");
    }
}
