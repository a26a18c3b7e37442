//! Work to finish before the process tears a plugin down.

use std::ffi::c_int;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

unsafe extern "C" {
    fn atexit(hook: extern "C" fn()) -> c_int;
}

/// The hook, once registered.
static HOOK: OnceLock<extern "C" fn()> = OnceLock::new();

/// Registrations after compiles (see [`rearm_teardown_hook`]).
static REARMED: AtomicUsize = AtomicUsize::new(0);

/// Plugin calls after which the hook is registered again. The plugin builds
/// its lazily made objects in its first compiles; thousands of registrations
/// cost nothing at exit (each run after the first finds nothing to stop).
const MAX_REARMS: usize = 4096;

fn register(hook: extern "C" fn()) -> bool {
    // SAFETY: the C library's `atexit`, given a function that lives as long
    // as the program.
    unsafe { atexit(hook) == 0 }
}

/// Runs `hook` when the process exits (returning from `main` or calling
/// `exit`), before the static destructors of the plugin code that has run so
/// far: exit handlers run in the reverse order of their registration, and a
/// plugin's objects register theirs when they are built (at load, or at the
/// first call that builds them). A thread still inside the plugin when those
/// run dies there ("pure virtual method called") or spins in a destroyed
/// table: the hook is where it is stopped. The hook is registered again after
/// each compile and load ([`rearm_teardown_hook`]), so that it stays ahead of
/// the objects those built. False if the C library refused the hook.
pub fn before_plugin_teardown(hook: extern "C" fn()) -> bool {
    let _ = HOOK.set(hook);
    register(hook)
}

/// Registers the exit hook again, if there is one: after a plugin call that
/// may have built objects with exit handlers of their own.
pub(crate) fn rearm_teardown_hook() {
    if let Some(hook) = HOOK.get()
        && REARMED.fetch_add(1, Ordering::Relaxed) < MAX_REARMS
        && !register(*hook)
    {
        tracing::warn!("cannot register the compile pool's exit hook again");
    }
}
