//! The slug rule: how a group's id is derived from its name.
//!
//! Ids are never stored; they are recomputed from `name` at every load, so this function is
//! part of the on-disk format: changing it renames groups.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Derives a group id from a display name.
///
/// NFD with combining marks removed, lower-case, trim, runs of white space → `-`, keep only
/// `[a-z0-9_-]`, collapse `--`, trim `-`. The result may be empty (for a name written only in
/// a non-Latin script, say); callers reject such names.
pub fn slugify(name: &str) -> String {
    // An ASCII name (the usual one) has nothing to decompose: the same answer, without the
    // Unicode tables (ids are derived at every use, several per request).
    let folded = if name.is_ascii() {
        name.to_ascii_lowercase()
    } else {
        name.nfd().filter(|c| !is_combining_mark(*c)).collect::<String>().to_lowercase()
    };
    let mut slug = String::with_capacity(folded.len());
    for word in folded.split_whitespace() {
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.extend(word.chars().filter(|c| matches!(c, 'a'..='z' | '0'..='9' | '_' | '-')));
    }
    collapse_dashes(&slug)
}

fn collapse_dashes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::slugify;

    #[test]
    fn slug_cases() {
        let cases = [
            ("Scène Côté Jardin", "scene-cote-jardin"),
            ("  Two   Spaces ", "two-spaces"),
            ("UPPER", "upper"),
            ("a--b", "a-b"),
            ("a - b", "a-b"),
            ("-lead-", "lead"),
            ("snake_case ok", "snake_case-ok"),
            ("Ünïcödé Ñ", "unicode-n"),
            ("Tab\tand\nnewline", "tab-and-newline"),
            ("Stage Left!", "stage-left"),
            ("日本", ""),
            ("   ", ""),
            ("---", ""),
        ];
        for (name, want) in cases {
            assert_eq!(slugify(name), want, "slug of {name:?}");
        }
    }
}
