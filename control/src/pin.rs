//! PINs of groups and positions: stored as PBKDF2-HMAC-SHA256 hashes with a random salt (ring),
//! checked in constant time, and guessed at most [`MAX_WRONG_TRIES`] times a minute from one
//! address. A PIN is never stored, logged or shown.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;
use partyline_shared::config::PinHash;
use ring::pbkdf2;

const ALGORITHM: pbkdf2::Algorithm = pbkdf2::PBKDF2_HMAC_SHA256;
/// A PIN has few digits: what keeps it from being guessed is [`PinLimiter`]; the hash keeps a
/// PIN reused elsewhere out of the config file.
const ITERATIONS: u32 = 50_000;
const SALT_BYTES: usize = 16;
const HASH_BYTES: usize = 32;

/// Wrong PINs one client address may send per [`WINDOW`].
pub const MAX_WRONG_TRIES: u32 = 5;
const WINDOW: Duration = Duration::from_secs(60);

/// A PIN as the admin sets it: 4 to 12 digits (what a phone's keypad and a stage manager's
/// memory handle).
pub fn check(pin: &str) -> Result<(), String> {
    if (4..=12).contains(&pin.len()) && pin.chars().all(|c| c.is_ascii_digit()) {
        Ok(())
    } else {
        Err("a PIN is 4 to 12 digits".into())
    }
}

/// The stored form of `pin`, with a fresh salt.
pub fn hash(pin: &str) -> std::io::Result<PinHash> {
    let mut salt = [0u8; SALT_BYTES];
    getrandom::fill(&mut salt).map_err(std::io::Error::other)?;
    let mut out = [0u8; HASH_BYTES];
    pbkdf2::derive(ALGORITHM, iterations(ITERATIONS), &salt, pin.as_bytes(), &mut out);
    Ok(PinHash(format!("{}{ITERATIONS}${}${}", PinHash::SCHEME, B64.encode(salt), B64.encode(out))))
}

/// Whether `pin` is the one `stored` was made from; false for a malformed hash.
pub fn verify(stored: &PinHash, pin: &str) -> bool {
    let Some(rest) = stored.0.strip_prefix(PinHash::SCHEME) else { return false };
    let mut parts = rest.split('$');
    let (Some(rounds), Some(salt), Some(expected), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Ok(rounds), Ok(salt), Ok(expected)) = (rounds.parse::<u32>(), B64.decode(salt), B64.decode(expected)) else {
        return false;
    };
    rounds > 0 && pbkdf2::verify(ALGORITHM, iterations(rounds), &salt, pin.as_bytes(), &expected).is_ok()
}

fn iterations(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

/// Wrong PINs per client address, in a sliding window of a minute.
#[derive(Debug, Default)]
pub struct PinLimiter {
    wrong: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl PinLimiter {
    /// Whether `from` may try a PIN now (fewer than [`MAX_WRONG_TRIES`] wrong ones lately).
    pub fn may_try(&self, from: IpAddr) -> bool {
        let mut wrong = self.wrong.lock().unwrap_or_else(PoisonError::into_inner);
        wrong.retain(|_, (since, _)| since.elapsed() < WINDOW);
        wrong.get(&from).is_none_or(|(_, count)| *count < MAX_WRONG_TRIES)
    }

    /// Counts a wrong PIN from `from`.
    pub fn wrong(&self, from: IpAddr) {
        let mut wrong = self.wrong.lock().unwrap_or_else(PoisonError::into_inner);
        wrong.entry(from).or_insert((Instant::now(), 0)).1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_pin_only() {
        let stored = hash("1234").expect("hash");
        assert!(stored.0.starts_with(PinHash::SCHEME) && !stored.0.contains("1234"), "{}", stored.0);
        assert!(verify(&stored, "1234"));
        for wrong in ["1235", "", "12345", "1234 "] {
            assert!(!verify(&stored, wrong), "{wrong:?}");
        }
        assert_ne!(hash("1234").expect("hash"), stored, "salted: the same PIN hashes differently");
        for broken in ["", "pbkdf2-sha256$", "pbkdf2-sha256$0$AA$AA", "pbkdf2-sha256$x$AA$AA", "md5$1$a$b"] {
            assert!(!verify(&PinHash(broken.into()), "1234"), "{broken}");
        }
    }

    #[test]
    fn pins_are_four_to_twelve_digits() {
        for good in ["0000", "123456789012"] {
            assert!(check(good).is_ok(), "{good}");
        }
        for bad in ["123", "1234567890123", "12a4", "", "١٢٣٤"] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_limiter_counts_per_address() {
        let limiter = PinLimiter::default();
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        for _ in 0..MAX_WRONG_TRIES {
            assert!(limiter.may_try(a));
            limiter.wrong(a);
        }
        assert!(!limiter.may_try(a), "blocked after {MAX_WRONG_TRIES} wrong PINs");
        assert!(limiter.may_try(b), "another address is not");
    }
}
