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

thread_local! {
    static FOREIGN: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
    /// The last foreign origin seen: a loop calls ops from the same line over
    /// and over, so its string is shared instead of copied per op.
    static LAST: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Runs `f` with every op it records attributed to `origin` (for callers
/// outside Rust, such as the C ABI).
pub fn with_origin<R>(origin: &str, f: impl FnOnce() -> R) -> R {
    let shared = LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some(s) if **s == *origin => s.clone(),
            _ => {
                let s: Arc<str> = Arc::from(origin);
                *last = Some(s.clone());
                s
            }
        }
    });
    let previous = FOREIGN.with(|o| o.borrow_mut().replace(shared));
    let out = f();
    FOREIGN.with(|o| *o.borrow_mut() = previous);
    out
}

/// The origin of an op called from `caller`.
pub(crate) fn current(caller: &'static Location<'static>) -> Origin {
    FOREIGN.with(|o| match &*o.borrow() {
        Some(s) => Origin::Foreign(s.clone()),
        None => Origin::Rust(caller),
    })
}
