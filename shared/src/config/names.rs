//! The rule for display names (groups, server audio users, positions, channels) and their ids.

use crate::slug::slugify;

/// The longest name (group, server audio user, channel) the system accepts, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// Checks a display name (group, server audio user, channel): no control characters, at most
/// [`MAX_NAME_CHARS`] characters. Emptiness is the caller's rule.
pub fn check_name_chars(name: &str) -> Result<(), String> {
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("is longer than {MAX_NAME_CHARS} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err("contains a control character".into());
    }
    if name.chars().any(is_invisible_format) {
        return Err("contains an invisible formatting character (bidi override, zero-width)".into());
    }
    Ok(())
}

/// Characters that change how a name is shown without being seen (`Stage\u{202E}Left`
/// displays reversed): bidi controls, zero-width characters, the byte-order mark.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Checks a name that must yield a non-empty id.
pub fn check_entity_name(name: &str) -> Result<String, String> {
    if name.trim() != name {
        return Err("has leading or trailing white space".into());
    }
    check_name_chars(name)?;
    let id = slugify(name);
    if id.is_empty() {
        return Err(format!("{name:?} gives an empty id: use at least one letter a-z or digit"));
    }
    Ok(id)
}
