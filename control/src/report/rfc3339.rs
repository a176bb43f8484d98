//! RFC 3339 times, read and written: the report's window comes from a query string in any
//! offset (read by `time`'s RFC 3339 parser); the journal's and the report's times are written
//! in UTC to the millisecond, always with three digits, so that they sort as text.

use time::OffsetDateTime;
use time::UtcOffset;
use time::error::Parse;
use time::format_description::BorrowedFormatItem;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

const UTC_MILLISECONDS: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// Why a text is not an RFC 3339 time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTime {
    #[error("is not an RFC 3339 time (e.g. 2026-05-01T18:00:00Z or 2026-05-01T20:00:00+02:00)")]
    Shape,
    #[error("names no such date or time of day")]
    OutOfRange,
}

/// Reads an RFC 3339 time, as UTC. A space where the offset's sign belongs is taken for `+`: a
/// `+` not percent-encoded in a query string arrives as a space.
pub fn parse(text: &str) -> Result<OffsetDateTime, BadTime> {
    let sign = text.len().checked_sub(6).filter(|&at| text.as_bytes()[at] == b' ');
    let text = match sign {
        Some(at) => format!("{}+{}", &text[..at], &text[at + 1..]),
        None => text.to_owned(),
    };
    // Fields of the right shape that name no date (30 February) are out of range; a field
    // beyond what its digits may say (a 13th month, a 25 h offset) is no RFC 3339 time at all.
    let time = OffsetDateTime::parse(&text, &Rfc3339).map_err(|error| match error {
        Parse::TryFromParsed(_) => BadTime::OutOfRange,
        _ => BadTime::Shape,
    })?;
    Ok(time.to_offset(UtcOffset::UTC))
}

/// `time` in RFC 3339, UTC, to the millisecond (truncated).
pub fn format(time: OffsetDateTime) -> String {
    // Fails only when writing to the string fails, which it does not.
    time.to_offset(UtcOffset::UTC).format(UTC_MILLISECONDS).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Data-driven: a text and the UTC time it names, or why it names none.
    #[test]
    fn rfc_3339_times_are_read_in_any_offset_as_utc() {
        let cases: [(&str, Result<String, BadTime>); 15] = [
            ("2026-05-01T18:00:00Z", Ok("2026-05-01T18:00:00.000Z".into())),
            ("2026-05-01t18:00:00z", Ok("2026-05-01T18:00:00.000Z".into())),
            ("2026-05-01 18:00:00Z", Ok("2026-05-01T18:00:00.000Z".into())),
            ("2026-05-01T20:30:00+02:30", Ok("2026-05-01T18:00:00.000Z".into())),
            ("2026-05-01T20:30:00 02:30", Ok("2026-05-01T18:00:00.000Z".into())),
            ("2026-05-01T16:00:00-02:00", Ok("2026-05-01T18:00:00.000Z".into())),
            ("2026-05-01T00:30:00+01:00", Ok("2026-04-30T23:30:00.000Z".into())),
            ("2026-05-01T18:00:00.25Z", Ok("2026-05-01T18:00:00.250Z".into())),
            ("2026-05-01T18:00:00.123956789Z", Ok("2026-05-01T18:00:00.123Z".into())),
            ("2026-05-01T18:00:00.1234567891Z", Ok("2026-05-01T18:00:00.123Z".into())),
            ("2026-05-01T18:00:00", Err(BadTime::Shape)),
            ("yesterday", Err(BadTime::Shape)),
            ("2026-5-01T18:00:00Z", Err(BadTime::Shape)),
            ("2026-02-30T18:00:00Z", Err(BadTime::OutOfRange)),
            ("2026-05-01T24:00:00Z", Err(BadTime::OutOfRange)),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).map(format), want, "{text}");
        }
        for text in ["2026-13-01T18:00:00Z", "2026-05-01T18:60:00Z"] {
            assert_eq!(parse(text), Err(BadTime::OutOfRange), "{text}");
        }
        for text in [
            "2026-05-01T18:00:00+25:00",
            "2026-05-01T18:00:00.Z",
            "2026-05-01T18:00:00+0200",
            "2026-05-01T18:00Z",
            "2026-05-01T1é:00:00Z",
        ] {
            assert_eq!(parse(text), Err(BadTime::Shape), "{text}");
        }
    }
}
