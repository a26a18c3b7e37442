//! Work to finish before the process tears a plugin down.

use std::ffi::c_int;

unsafe extern "C" {
    fn atexit(hook: extern "C" fn()) -> c_int;
}

/// Runs `hook` when the process exits (returning from `main` or calling
/// `exit`), before the static destructors of the plugin code that has run so
/// far: exit handlers run in the reverse order of their registration, and a
/// plugin's objects register theirs when they are built (at load, or at the
/// first call that builds them). A thread still inside the plugin when those
/// run dies there ("pure virtual method called"): the hook is where it is
/// stopped. False if the C library refused the hook.
pub fn before_plugin_teardown(hook: extern "C" fn()) -> bool {
    // SAFETY: the C library's `atexit`, given a function that lives as long
    // as the program.
    unsafe { atexit(hook) == 0 }
}
