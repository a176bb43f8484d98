//! RFC 3339 times, read and written: the report's window comes from a query string in any
//! offset; the journal's and the report's times are written in UTC to the millisecond, always
//! with three digits, so that they sort as text. (Read by hand: the `time` crate's parser is a
//! feature of its own that nothing else of control needs.)

use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

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

/// Reads `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (the `T` also `t` or a space, `Z` also
/// `z`), as UTC. A space where the offset's sign belongs is taken for `+`: a `+` not
/// percent-encoded in a query string arrives as a space.
pub fn parse(text: &str) -> Result<OffsetDateTime, BadTime> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || !matches!(bytes[10], b'T' | b't' | b' ') {
        return Err(BadTime::Shape);
    }
    let date = date(&text[..10])?;
    let (time_of_day, offset) = split_offset(&text[11..])?;
    let time = time_of_day_of(time_of_day)?;
    let local = PrimitiveDateTime::new(date, time);
    Ok(local.assume_offset(offset).to_offset(UtcOffset::UTC))
}

/// `time` in RFC 3339, UTC, to the millisecond (truncated).
pub fn format(time: OffsetDateTime) -> String {
    // Fails only when writing to the string fails, which it does not.
    time.to_offset(UtcOffset::UTC).format(UTC_MILLISECONDS).unwrap_or_default()
}

fn date(text: &str) -> Result<Date, BadTime> {
    let [year, month, day] = fields(text, b'-', [4, 2, 2])?;
    let month = u8::try_from(month).ok().and_then(|m| Month::try_from(m).ok()).ok_or(BadTime::OutOfRange)?;
    let year = i32::try_from(year).map_err(|_| BadTime::OutOfRange)?;
    Date::from_calendar_date(year, month, u8::try_from(day).map_err(|_| BadTime::OutOfRange)?)
        .map_err(|_| BadTime::OutOfRange)
}

/// The time of day and the offset after it.
fn split_offset(text: &str) -> Result<(&str, UtcOffset), BadTime> {
    if let Some(time) = text.strip_suffix(['Z', 'z']) {
        return Ok((time, UtcOffset::UTC));
    }
    let at = text.len().checked_sub(6).ok_or(BadTime::Shape)?;
    let (time, offset) = text.split_at_checked(at).ok_or(BadTime::Shape)?;
    let sign = match offset.as_bytes()[0] {
        b'+' | b' ' => 1,
        b'-' => -1,
        _ => return Err(BadTime::Shape),
    };
    let [hours, minutes] = fields(&offset[1..], b':', [2, 2])?;
    // RFC 3339's offsets; `time` would take up to 25 hours.
    let (Ok(hours @ 0..=23), Ok(minutes @ 0..=59)) = (i8::try_from(hours), i8::try_from(minutes)) else {
        return Err(BadTime::OutOfRange);
    };
    let offset = UtcOffset::from_hms(sign * hours, sign * minutes, 0).map_err(|_| BadTime::OutOfRange)?;
    Ok((time, offset))
}

fn time_of_day_of(text: &str) -> Result<Time, BadTime> {
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (text, None),
    };
    let [hour, minute, second] = fields(whole, b':', [2, 2, 2])?;
    let nanos = match fraction {
        None => 0,
        Some(digits) if (1..=9).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) => {
            // Nine digits at most: the padded text is the nanoseconds.
            format!("{digits:0<9}").parse().map_err(|_| BadTime::Shape)?
        }
        Some(_) => return Err(BadTime::Shape),
    };
    let narrow = |v: u32| u8::try_from(v).map_err(|_| BadTime::OutOfRange);
    Time::from_hms_nano(narrow(hour)?, narrow(minute)?, narrow(second)?, nanos).map_err(|_| BadTime::OutOfRange)
}

/// `N` runs of ASCII digits of the given widths, separated by `separator`.
fn fields<const N: usize>(text: &str, separator: u8, widths: [usize; N]) -> Result<[u32; N], BadTime> {
    let mut values = [0; N];
    let mut parts = text.split(char::from(separator));
    for (value, width) in values.iter_mut().zip(widths) {
        let part = parts.next().ok_or(BadTime::Shape)?;
        if part.len() != width || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BadTime::Shape);
        }
        *value = part.parse().map_err(|_| BadTime::Shape)?;
    }
    if parts.next().is_some() {
        return Err(BadTime::Shape);
    }
    Ok(values)
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
            ("2026-05-01T18:00:00.1234567891Z", Err(BadTime::Shape)),
            ("2026-05-01T18:00:00", Err(BadTime::Shape)),
            ("yesterday", Err(BadTime::Shape)),
            ("2026-5-01T18:00:00Z", Err(BadTime::Shape)),
            ("2026-02-30T18:00:00Z", Err(BadTime::OutOfRange)),
            ("2026-05-01T24:00:00Z", Err(BadTime::OutOfRange)),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).map(format), want, "{text}");
        }
        for text in ["2026-05-01T18:00:00+25:00", "2026-13-01T18:00:00Z", "2026-05-01T18:60:00Z"] {
            assert_eq!(parse(text), Err(BadTime::OutOfRange), "{text}");
        }
        for text in ["2026-05-01T18:00:00.Z", "2026-05-01T18:00:00+0200", "2026-05-01T18:00Z", "2026-05-01T1é:00:00Z"]
        {
            assert_eq!(parse(text), Err(BadTime::Shape), "{text}");
        }
    }
}
