//! The one way partyline's threads take a `std::sync::Mutex`.
//!
//! A lock whose holder panicked is taken as it is, not refused: every mutex in the daemons
//! guards state that stays consistent between statements (a registry entry, a queue, a list),
//! and the process must go on serving (the panic itself is logged by whoever caught it).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, also after a panic of another holder.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_as_it_is() {
        let shared = std::sync::Arc::new(Mutex::new(1));
        let holder = std::sync::Arc::clone(&shared);
        let panicked = std::thread::spawn(move || {
            let mut value = holder.lock().expect("first");
            *value = 2;
            panic!("a holder panics");
        })
        .join();
        assert!(panicked.is_err() && shared.is_poisoned());
        assert_eq!(*lock(&shared), 2);
    }
}
