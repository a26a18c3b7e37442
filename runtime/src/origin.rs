//! Where an op was recorded, for error messages: the Rust caller's location
//! (`#[track_caller]`), or a string from a foreign caller (the C ABI passes the
//! Python `file:line` that called the op).

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;
use std::sync::Arc;

#[derive(Clone, Debug)]
pub enum Origin {
    Rust(&'static Location<'static>),
    Foreign(Arc<str>),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Rust(l) => write!(f, "{l}"),
            Origin::Foreign(s) => f.write_str(s),
        }
    }
}

/// How many recent foreign origins a thread keeps: a loop's body calls ops
/// from a few lines over and over (a chain of four ops alternates four).
const RECENT: usize = 8;

thread_local! {
    static FOREIGN: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
    /// The last foreign origins seen, most recent first: their strings are
    /// shared instead of copied per op.
    static RECENT_ORIGINS: RefCell<Vec<Arc<str>>> = const { RefCell::new(Vec::new()) };
}

/// `origin` as a shared string: one of the recent ones when it is among
/// them (moved to the front), else a new one.
fn shared(origin: &str) -> Arc<str> {
    RECENT_ORIGINS.with(|recent| {
        let mut recent = recent.borrow_mut();
        if let Some(i) = recent.iter().position(|s| **s == *origin) {
            let s = recent[i].clone();
            recent[..=i].rotate_right(1);
            return s;
        }
        let s: Arc<str> = Arc::from(origin);
        if recent.len() == RECENT {
            recent.pop();
        }
        recent.insert(0, s.clone());
        s
    })
}

/// Runs `f` with every op it records attributed to `origin` (for callers
/// outside Rust, such as the C ABI).
pub fn with_origin<R>(origin: &str, f: impl FnOnce() -> R) -> R {
    let previous = FOREIGN.with(|o| o.borrow_mut().replace(shared(origin)));
    let out = f();
    FOREIGN.with(|o| *o.borrow_mut() = previous);
    out
}

/// The foreign caller's line this thread is working for, if any (none on
/// the runtime's own threads).
pub(crate) fn foreign() -> Option<Origin> {
    FOREIGN.with(|o| o.borrow().clone().map(Origin::Foreign))
}

/// The origin of an op called from `caller`.
pub(crate) fn current(caller: &'static Location<'static>) -> Origin {
    FOREIGN.with(|o| match &*o.borrow() {
        Some(s) => Origin::Foreign(s.clone()),
        None => Origin::Rust(caller),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn foreign() -> Arc<str> {
        match current(Location::caller()) {
            Origin::Foreign(s) => s,
            Origin::Rust(l) => panic!("expected a foreign origin, got {l}"),
        }
    }

    #[test]
    fn recent_origins_are_shared_and_each_op_keeps_its_own() {
        let lines: Vec<String> = (0..RECENT + 2).map(|i| format!("model.py:{i}")).collect();
        // A loop body alternating between a few lines: each string is
        // allocated once and every op gets its own line.
        let first: Vec<Arc<str>> = lines[..4].iter().map(|l| with_origin(l, foreign)).collect();
        for _ in 0..3 {
            for (l, s) in lines[..4].iter().zip(&first) {
                let got = with_origin(l, foreign);
                assert_eq!(&*got, l.as_str());
                assert!(Arc::ptr_eq(&got, s), "{l} was copied again");
            }
        }
        // More lines than are kept: the oldest is copied anew, still right.
        for l in &lines {
            assert_eq!(&*with_origin(l, foreign), l.as_str());
        }
        let again = with_origin(&lines[0], foreign);
        assert_eq!(&*again, lines[0].as_str());
        assert!(!Arc::ptr_eq(&again, &first[0]));
        // Outside with_origin, the Rust caller.
        assert!(matches!(current(Location::caller()), Origin::Rust(_)));
    }
}
