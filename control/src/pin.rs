//! PINs of groups and positions: stored as PBKDF2-HMAC-SHA256 hashes with a random salt (ring),
//! checked in constant time, and guessed at most [`MAX_WRONG_TRIES`] times a minute from one
//! address and [`MAX_WRONG_PER_PIN`] times a minute from all. A PIN is never stored, logged or
//! shown.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;
use partyline_shared::Config;
use partyline_shared::config::{OFF_SITE_MIN_PIN_DIGITS, PinHash};
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
pub fn check(pin: &str, config: &Config) -> Result<(), String> {
    let fewest = if config.network.off_site() { OFF_SITE_MIN_PIN_DIGITS } else { 4 };
    if (fewest..=12).contains(&pin.len()) && pin.chars().all(|c| c.is_ascii_digit()) {
        Ok(())
    } else if fewest > 4 {
        // Off-site, anyone on the internet may guess (within the per-address and per-PIN budgets).
        Err(format!("a PIN is {fewest} to 12 digits while crew can join from off-site (`network`)"))
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

/// Wrong tries of one PIN per [`WINDOW`], from every address together: guesses spread over
/// many addresses (a LAN, IPv6) get no further than this. A 4-digit PIN then takes days of
/// guessing where one address alone would take a month, and the admin sees the warning.
pub const MAX_WRONG_PER_PIN: u32 = 20;

/// What a budget of wrong tries is kept for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Budget {
    /// A client address (an IPv6 /64 as one: [`crate::limits::address_key`]).
    Address(IpAddr),
    /// A PIN, by what it guards (`group "foh"`).
    Pin(String),
}

impl Budget {
    fn limit(&self) -> u32 {
        match self {
            Budget::Address(_) => MAX_WRONG_TRIES,
            Budget::Pin(_) => MAX_WRONG_PER_PIN,
        }
    }
}

/// PIN tries: at most [`MAX_WRONG_TRIES`] wrong ones per client address and
/// [`MAX_WRONG_PER_PIN`] per PIN in any [`WINDOW`]. A try counts from before it is verified (a
/// try in flight holds a place as if it were wrong), so guesses sent in parallel cannot get
/// more than that many verified; a right one gives its place back. And at most
/// [`MAX_VERIFYING`] verifications run at once, whoever asks.
#[derive(Debug)]
pub struct PinLimiter {
    tries: Mutex<HashMap<Budget, Tries>>,
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

/// A try refused: its address, or its PIN, has had its wrong tries for the window.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TooManyTries {
    #[error("too many wrong PINs from {0}")]
    FromAddress(IpAddr),
    #[error("too many wrong tries of the PIN of {0} from the network: it is refused for a minute")]
    OfPin(String),
}

impl PinLimiter {
    /// A place for one try from `from` of the PIN guarding `guarded`, once one is free (tries
    /// in flight hold theirs until verified), and a turn among the verifications; refused at
    /// once when the address or the PIN has had its wrong tries for the window.
    pub async fn begin(&self, from: IpAddr, guarded: &str) -> Result<PinTry<'_>, TooManyTries> {
        let budgets = [Budget::Address(crate::limits::address_key(from)), Budget::Pin(guarded.to_owned())];
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered before the check: a try ending in between still wakes this one.
            ended.as_mut().enable();
            if self.take_places(&budgets)? {
                break;
            }
            ended.await;
        }
        // Holds the places from here: a request dropped while waiting for its turn gives them up.
        let mut attempt = PinTry { limiter: self, budgets, outcome: None, _turn: None };
        attempt._turn = self.verifying.acquire().await.ok();
        Ok(attempt)
    }

    /// Takes a place in each of `budgets` if each has one free now (`false`: wait for a try in
    /// flight to end); refused when one has had its wrong tries.
    fn take_places(&self, budgets: &[Budget]) -> Result<bool, TooManyTries> {
        let mut tries = lock(&self.tries);
        tries.retain(|_, t| {
            t.forget_old();
            t.in_flight > 0 || !t.wrong.is_empty()
        });
        for budget in budgets {
            let used = tries.get(budget).map_or(0, Tries::wrong_count);
            if used >= budget.limit() {
                return Err(match budget {
                    Budget::Pin(what) => TooManyTries::OfPin(what.clone()),
                    Budget::Address(address) => TooManyTries::FromAddress(*address),
                });
            }
        }
        let free = budgets.iter().all(|b| tries.get(b).is_none_or(|t| t.wrong_count() + t.in_flight < b.limit()));
        if free {
            for budget in budgets {
                tries.entry(budget.clone()).or_default().in_flight += 1;
            }
        }
        Ok(free)
    }

    fn end(&self, budgets: &[Budget], wrong: bool) {
        let mut tries = lock(&self.tries);
        for budget in budgets {
            let mine = tries.entry(budget.clone()).or_default();
            mine.in_flight = mine.in_flight.saturating_sub(1);
            if wrong {
                mine.wrong.push_back(Instant::now());
                if let Budget::Pin(what) = budget
                    && mine.wrong_count() == budget.limit()
                {
                    tracing::warn!(
                        what,
                        wrong = budget.limit(),
                        "a PIN's wrong tries from the network are spent: its tries are refused for a minute"
                    );
                }
            }
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
    budgets: [Budget; 2],
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
        self.limiter.end(&self.budgets, self.outcome.unwrap_or(true));
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
    fn pins_are_four_to_twelve_digits_and_six_once_crew_join_from_off_site() {
        let lan = Config::default();
        for good in ["0000", "123456789012"] {
            assert!(check(good, &lan).is_ok(), "{good}");
        }
        for bad in ["123", "1234567890123", "12a4", "", "١٢٣٤"] {
            assert!(check(bad, &lan).is_err(), "{bad}");
        }
        let mut off_site = Config::default();
        off_site.network.public_address = Some(IpAddr::from([203, 0, 113, 10]));
        assert!(check("12345", &off_site).expect_err("refused").contains("6 to 12 digits"));
        assert!(check("123456", &off_site).is_ok());
    }

    #[tokio::test]
    async fn the_limiter_counts_per_address() {
        let limiter = PinLimiter::default();
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        for _ in 0..MAX_WRONG_TRIES {
            limiter.begin(a, "stage").await.expect("a place").wrong();
        }
        assert!(limiter.begin(a, "stage").await.is_err(), "refused after {MAX_WRONG_TRIES} wrong PINs");
        limiter.begin(b, "stage").await.expect("another address is not").right();
        for _ in 0..10 {
            limiter.begin(b, "stage").await.expect("right PINs give their place back").right();
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
                    let attempt = limiter.begin(from, "stage").await.ok()?;
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
            drop(limiter.begin(from, "stage").await.expect("a place"));
        }
        assert!(limiter.begin(from, "stage").await.is_err());
    }

    /// Guesses spread over many addresses (a LAN, an IPv6 /64's worth) stop at the PIN's own
    /// budget, while another PIN is still tried; an IPv6 /64 counts as one address.
    #[tokio::test]
    async fn a_pin_s_wrong_tries_are_counted_across_addresses_and_a_64_is_one_address() {
        let limiter = PinLimiter::default();
        for n in 0..MAX_WRONG_PER_PIN {
            let from = IpAddr::from([10, 0, 1, u8::try_from(n).expect("a byte")]);
            limiter.begin(from, "group \"foh\"").await.expect("a place").wrong();
        }
        let fresh = IpAddr::from([10, 0, 2, 1]);
        let refused = limiter.begin(fresh, "group \"foh\"").await.err();
        assert_eq!(refused, Some(TooManyTries::OfPin("group \"foh\"".into())));
        limiter.begin(fresh, "group \"stage\"").await.expect("another PIN is not").right();

        for n in 0..MAX_WRONG_TRIES {
            let from = IpAddr::from([0x2001, 0xdb8, 0, 7, 0, 0, 0, u16::try_from(n).expect("small")]);
            limiter.begin(from, "group \"stage\"").await.expect("a place").wrong();
        }
        let same_64 = IpAddr::from([0x2001, 0xdb8, 0, 7, 0xffff, 0, 0, 1]);
        assert!(limiter.begin(same_64, "group \"stage\"").await.is_err(), "the /64 has had its tries");
    }
}
