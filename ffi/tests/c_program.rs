//! Builds `tests/c/abi.c` against `include/eagertpu.h` and the built
//! `libeagertpu_ffi`, and runs it: ops in all three modes, errors, handles.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding `libeagertpu_ffi.so` for this build profile.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/c_program-<hash> -> target/<profile>
    let dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    assert!(
        dir.join("libeagertpu_ffi.so").exists(),
        "libeagertpu_ffi.so not found in {}",
        dir.display()
    );
    dir
}

#[test]
fn a_c_program_runs_ops_in_every_mode_through_the_header() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("abi_c_test");
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("../include"))
        .arg(root.join("tests/c/abi.c"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-leagertpu_ffi", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "compiling abi.c:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe)
        .env_remove("EAGERTPU_MODE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "abi.c failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
