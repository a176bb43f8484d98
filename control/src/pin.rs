//! PINs of groups and positions: stored as PBKDF2-HMAC-SHA256 hashes with a random salt (ring),
//! checked in constant time, and guessed at most [`MAX_WRONG_TRIES`] times a minute from one
//! address. A PIN is never stored, logged or shown.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;
use partyline_shared::config::PinHash;
use partyline_shared::sync::lock;
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

/// PBKDF2 verifications running at once, from every address together: each takes a core for
/// tens of milliseconds, on purpose.
const MAX_VERIFYING: usize = 2;

/// PIN tries per client address: at most [`MAX_WRONG_TRIES`] wrong ones in any [`WINDOW`]. A try
/// counts from before it is verified (a try in flight holds a place as if it were wrong), so
/// guesses sent in parallel cannot get more than that many verified; a right one gives its
/// place back. And at most [`MAX_VERIFYING`] verifications run at once, whoever asks.
#[derive(Debug)]
pub struct PinLimiter {
    tries: Mutex<HashMap<IpAddr, Tries>>,
    /// Woken whenever a try ends: tries waiting for a place look again.
    ended: tokio::sync::Notify,
    verifying: tokio::sync::Semaphore,
}

impl Default for PinLimiter {
    fn default() -> Self {
        PinLimiter {
            tries: Mutex::default(),
            ended: tokio::sync::Notify::new(),
            verifying: tokio::sync::Semaphore::new(MAX_VERIFYING),
        }
    }
}

#[derive(Debug, Default)]
struct Tries {
    /// When each wrong PIN of the window was tried.
    wrong: std::collections::VecDeque<Instant>,
    in_flight: u32,
}

impl Tries {
    fn forget_old(&mut self) {
        while self.wrong.front().is_some_and(|at| at.elapsed() >= WINDOW) {
            self.wrong.pop_front();
        }
    }

    fn wrong_count(&self) -> u32 {
        u32::try_from(self.wrong.len()).unwrap_or(u32::MAX)
    }
}

/// `from` has tried [`MAX_WRONG_TRIES`] wrong PINs within the last minute.
#[derive(Debug, thiserror::Error)]
#[error("too many wrong PINs from {0}")]
pub struct TooManyTries(pub IpAddr);

impl PinLimiter {
    /// A place for one try from `from`, once one is free (tries of `from` in flight hold
    /// theirs until verified), and a turn among the verifications; refused at once when `from`
    /// has had its wrong tries for the window.
    pub async fn begin(&self, from: IpAddr) -> Result<PinTry<'_>, TooManyTries> {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered before the check: a try ending in between still wakes this one.
            ended.as_mut().enable();
            {
                let mut tries = lock(&self.tries);
                tries.retain(|_, t| {
                    t.forget_old();
                    t.in_flight > 0 || !t.wrong.is_empty()
                });
                let mine = tries.entry(from).or_default();
                if mine.wrong_count() >= MAX_WRONG_TRIES {
                    return Err(TooManyTries(from));
                }
                if mine.wrong_count() + mine.in_flight < MAX_WRONG_TRIES {
                    mine.in_flight += 1;
                    break;
                }
            }
            ended.await;
        }
        // Holds the place from here: a request dropped while waiting for its turn gives it up.
        let mut attempt = PinTry { limiter: self, from, outcome: None, _turn: None };
        attempt._turn = self.verifying.acquire().await.ok();
        Ok(attempt)
    }

    fn end(&self, from: IpAddr, wrong: bool) {
        let mut tries = lock(&self.tries);
        let mine = tries.entry(from).or_default();
        mine.in_flight = mine.in_flight.saturating_sub(1);
        if wrong {
            mine.wrong.push_back(Instant::now());
        }
        drop(tries);
        self.ended.notify_waiters();
    }
}

/// One PIN try in flight: say how it went ([`PinTry::right`], [`PinTry::wrong`]); dropped
/// unsaid (the request went away mid-check), it counts as wrong.
#[derive(Debug)]
pub struct PinTry<'a> {
    limiter: &'a PinLimiter,
    from: IpAddr,
    outcome: Option<bool>,
    /// The turn among the verifications, held until the try ends.
    _turn: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl PinTry<'_> {
    pub fn right(mut self) {
        self.outcome = Some(false);
    }

    pub fn wrong(mut self) {
        self.outcome = Some(true);
    }
}

impl Drop for PinTry<'_> {
    fn drop(&mut self) {
        self.limiter.end(self.from, self.outcome.unwrap_or(true));
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

    #[tokio::test]
    async fn the_limiter_counts_per_address() {
        let limiter = PinLimiter::default();
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        for _ in 0..MAX_WRONG_TRIES {
            limiter.begin(a).await.expect("a place").wrong();
        }
        assert!(limiter.begin(a).await.is_err(), "refused after {MAX_WRONG_TRIES} wrong PINs");
        limiter.begin(b).await.expect("another address is not").right();
        for _ in 0..10 {
            limiter.begin(b).await.expect("right PINs give their place back").right();
        }
    }

    /// Guesses in parallel: tries in flight hold places, so no more than the limit are ever
    /// verified, and the rest are refused once those turn out wrong.
    #[tokio::test]
    async fn parallel_tries_never_get_more_than_the_limit_verified() {
        let limiter = std::sync::Arc::new(PinLimiter::default());
        let from = IpAddr::from([10, 0, 0, 3]);
        let verified = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let guesses: Vec<_> = (0..60)
            .map(|_| {
                let (limiter, verified) = (std::sync::Arc::clone(&limiter), std::sync::Arc::clone(&verified));
                tokio::spawn(async move {
                    let attempt = limiter.begin(from).await.ok()?;
                    tokio::task::yield_now().await;
                    verified.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    attempt.wrong();
                    Some(())
                })
            })
            .collect();
        let mut tried = 0;
        for guess in guesses {
            tried += u32::from(guess.await.expect("task").is_some());
        }
        assert_eq!(tried, MAX_WRONG_TRIES, "tries that got a place");
        assert_eq!(verified.load(std::sync::atomic::Ordering::Relaxed), MAX_WRONG_TRIES);
    }

    #[tokio::test]
    async fn a_try_dropped_unsaid_counts_as_wrong() {
        let limiter = PinLimiter::default();
        let from = IpAddr::from([10, 0, 0, 4]);
        for _ in 0..MAX_WRONG_TRIES {
            drop(limiter.begin(from).await.expect("a place"));
        }
        assert!(limiter.begin(from).await.is_err());
    }
}
