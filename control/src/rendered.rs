//! An answer serialised once for the state it shows ([`Rendered`]): a read that the admin UI
//! polls answers with the bytes made for the same state, instead of building and serialising
//! them again (serialisation and its allocations were most of such a read's cost).

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use partyline_shared::sync::lock;

/// The last answer made, with the state it was made from.
#[derive(Debug)]
pub struct Rendered<K> {
    last: Mutex<Option<(K, Bytes)>>,
}

/// One `Arc`'s value as a state: equal to another only when the same `Arc` (held, so that its
/// address is never another value's while kept), whatever the values compare to.
#[derive(Debug)]
pub struct Same<T>(pub Arc<T>);

impl<T> PartialEq for Same<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<K> Default for Rendered<K> {
    fn default() -> Self {
        Rendered { last: Mutex::new(None) }
    }
}

impl<K: PartialEq> Rendered<K> {
    /// The answer for `state`: the last one when it was made for an equal state, else
    /// `render`'s, kept for the next. `K` must tell every state the answer shows apart (a config
    /// as [`Same`]: each change of the config is a new `Arc`).
    pub fn answer(&self, state: K, render: impl FnOnce() -> Bytes) -> Bytes {
        if let Some((made_for, bytes)) = lock(&self.last).as_ref()
            && *made_for == state
        {
            return bytes.clone();
        }
        let bytes = render();
        *lock(&self.last) = Some((state, bytes.clone()));
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_made_again_only_for_another_state() {
        let rendered = Rendered::default();
        let made = std::cell::Cell::new(0);
        let answer = |state: u32| {
            rendered.answer(state, || {
                made.set(made.get() + 1);
                Bytes::from(format!("state {state}"))
            })
        };
        assert_eq!(answer(1), "state 1");
        assert_eq!(answer(1), "state 1");
        assert_eq!(answer(2), "state 2");
        assert_eq!(answer(1), "state 1");
        assert_eq!(made.get(), 3);
        let config = Arc::new(1_u8);
        let same = Rendered::default();
        assert_eq!(same.answer(Same(Arc::clone(&config)), || Bytes::from("first")), "first");
        assert_eq!(
            same.answer(Same(Arc::new(1_u8)), || Bytes::from("an equal value, another Arc")),
            "an equal value, another Arc"
        );
    }
}
