//! The compile cache: hit and miss counts, a second process loading what the
//! first compiled, damaged entries, read-only mode, the size bound, writers
//! racing, and one compile when several threads ask for one program.
//!
//! Each case runs the child test `child_workload` (this binary, re-run) with
//! its own cache directory; the child compiles `PROGRAMS` distinct one-op
//! programs in debug mode and prints its metrics.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use eagertpu::{Mode, Tensor};

/// A fresh, empty cache directory for one case.
fn cache_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cache-tests")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn spawn(dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = common::child_command("child_workload", &[]);
    cmd.env("EAGERTPU_CACHE_DIR", dir);
    cmd.env("EAGERTPU_LOG", "warn");
    cmd.env_remove("PROGRAMS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// What a child reported.
#[derive(Debug, Default, PartialEq)]
struct Report {
    misses: u64,
    disk_hits: u64,
    disk_bad: u64,
    disk_writes: u64,
    compiles: u64,
    checksum: String,
    stderr: String,
}

fn report(out: Output) -> Report {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.find("CACHE ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no report in:\n{stdout}"));
    let mut r = Report {
        stderr,
        ..Default::default()
    };
    for kv in line.split_whitespace().skip(1) {
        let (k, v) = kv.split_once('=').unwrap();
        let n = || v.parse().unwrap();
        match k {
            "misses" => r.misses = n(),
            "disk_hits" => r.disk_hits = n(),
            "disk_bad" => r.disk_bad = n(),
            "disk_writes" => r.disk_writes = n(),
            "compiles" => r.compiles = n(),
            "checksum" => r.checksum = v.to_string(),
            _ => {}
        }
    }
    r
}

fn run(dir: &Path, env: &[(&str, &str)]) -> Report {
    report(spawn(dir, env).output().unwrap())
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "etpu"));
    v.sort();
    v
}

#[test]
fn child_workload() {
    if std::env::var("EAGERTPU_TEST_CHILD").as_deref() != Ok("child_workload") {
        return;
    }
    eagertpu::set_mode(Mode::Debug).unwrap();
    let programs: i64 = std::env::var("PROGRAMS").map_or(3, |p| p.parse().unwrap());
    let mut checksum = 0.0f64;
    let order: Vec<i64> = if std::env::var("REVERSE").is_ok() {
        (0..programs).rev().collect()
    } else {
        (0..programs).collect()
    };
    for i in order {
        let n = 8 + i;
        let a =
            Tensor::from_slice(&(0..n).map(|v| v as f32 + 0.5).collect::<Vec<_>>(), &[n]).unwrap();
        // One op per program: atan2 of a [n] tensor.
        let r = a.atan2(&a).unwrap().to_vec::<f32>().unwrap();
        checksum += r.iter().map(|&x| x as f64).sum::<f64>();
    }
    let m = eagertpu::metrics().unwrap();
    println!(
        "CACHE misses={} disk_hits={} disk_bad={} disk_writes={} compiles={} checksum={checksum:.6}",
        m.misses, m.disk_hits, m.disk_bad_entries, m.disk_writes, m.compiles
    );
}

#[test]
fn a_second_process_loads_what_the_first_compiled() {
    let dir = cache_dir("second_process");
    let first = run(&dir, &[]);
    assert_eq!(
        (
            first.misses,
            first.compiles,
            first.disk_writes,
            first.disk_hits
        ),
        (3, 3, 3, 0),
        "{first:?}"
    );
    assert_eq!(entries(&dir).len(), 3);
    let second = run(&dir, &[]);
    assert_eq!(
        (
            second.misses,
            second.compiles,
            second.disk_hits,
            second.disk_bad
        ),
        (0, 0, 3, 0),
        "{second:?}"
    );
    assert_eq!(
        second.checksum, first.checksum,
        "a loaded executable computes the same"
    );
}

#[test]
fn damaged_and_foreign_entries_are_misses_with_one_warning_and_are_rewritten() {
    let dir = cache_dir("damaged");
    let first = run(&dir, &[]);
    let files = entries(&dir);
    assert_eq!(files.len(), 3);
    // Corrupted: one payload byte flipped.
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&files[0], &bytes).unwrap();
    // Truncated.
    let bytes = std::fs::read(&files[1]).unwrap();
    std::fs::write(&files[1], &bytes[..bytes.len() / 2]).unwrap();
    // Foreign: written by another plugin (same length, other identity).
    let bytes = std::fs::read(&files[2]).unwrap();
    let at = bytes
        .windows(4)
        .position(|w| w == b"cpu ")
        .expect("the fingerprint is in the header");
    let mut foreign = bytes.clone();
    foreign[at..at + 3].copy_from_slice(b"tpu");
    std::fs::write(&files[2], &foreign).unwrap();

    let second = run(&dir, &[]);
    assert_eq!(
        (
            second.disk_hits,
            second.disk_bad,
            second.misses,
            second.compiles
        ),
        (0, 3, 3, 3),
        "{second:?}"
    );
    assert_eq!(second.checksum, first.checksum);
    assert_eq!(
        second.stderr.matches("compile cache entry ignored").count(),
        3,
        "{}",
        second.stderr
    );
    for reason in ["checksum", "truncated", "another plugin"] {
        assert!(
            second.stderr.contains(reason),
            "{reason}: {}",
            second.stderr
        );
    }
    // Rewritten: the next process loads every program.
    let third = run(&dir, &[]);
    assert_eq!(
        (third.disk_hits, third.disk_bad, third.misses),
        (3, 0, 0),
        "{third:?}"
    );
}

#[test]
fn read_only_mode_reads_but_never_writes() {
    let dir = cache_dir("read_only");
    let ro = [("EAGERTPU_CACHE_READONLY", "1")];
    let empty = run(&dir, &ro);
    assert_eq!((empty.compiles, empty.disk_writes), (3, 0), "{empty:?}");
    assert!(entries(&dir).is_empty());
    run(&dir, &[]);
    let old = SystemTime::now() - Duration::from_secs(3600);
    for f in entries(&dir) {
        std::fs::File::options()
            .append(true)
            .open(&f)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let filled = run(&dir, &ro);
    assert_eq!(
        (filled.disk_hits, filled.compiles, filled.disk_writes),
        (3, 0, 0),
        "{filled:?}"
    );
    for f in entries(&dir) {
        assert_eq!(
            std::fs::metadata(&f).unwrap().modified().unwrap(),
            old,
            "{f:?} was touched"
        );
    }
}

#[test]
fn the_size_bound_evicts_the_least_recently_used_entries() {
    let probe = cache_dir("size_probe");
    run(&probe, &[("PROGRAMS", "1")]);
    let one = std::fs::metadata(&entries(&probe)[0]).unwrap().len();
    let dir = cache_dir("bounded");
    let max = (one * 5 / 2).to_string();
    let bounded = [
        ("EAGERTPU_CACHE_MAX_BYTES", max.as_str()),
        ("PROGRAMS", "6"),
    ];
    let r = run(&dir, &bounded);
    assert_eq!(r.disk_writes, 6, "{r:?}");
    let left = entries(&dir);
    let total: u64 = left
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(
        total <= one * 5 / 2 + 64 && left.len() <= 2,
        "{} entries, {total} bytes",
        left.len()
    );
    // The newest entries survived: the last programs load from disk (asked
    // for first, before new writes evict them).
    let again = run(&dir, &[bounded[0], bounded[1], ("REVERSE", "1")]);
    assert_eq!(
        (again.disk_hits, again.misses),
        (left.len() as u64, 6 - left.len() as u64),
        "{again:?}"
    );
}

#[test]
fn two_processes_writing_one_key_at_once_both_succeed() {
    for round in 0..3 {
        let dir = cache_dir(&format!("racing_{round}"));
        let piped = |mut c: Command| {
            c.stdout(Stdio::piped()).stderr(Stdio::piped());
            c.spawn().unwrap()
        };
        let a = piped(spawn(&dir, &[]));
        let b = piped(spawn(&dir, &[]));
        let (ra, rb) = (
            report(a.wait_with_output().unwrap()),
            report(b.wait_with_output().unwrap()),
        );
        assert_eq!(ra.checksum, rb.checksum);
        let after = run(&dir, &[]);
        assert_eq!(
            (after.disk_hits, after.disk_bad, after.misses),
            (3, 0, 0),
            "{after:?}"
        );
        let stray: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
            .collect();
        assert!(stray.is_empty(), "temporary files left: {stray:?}");
    }
}

#[test]
fn four_threads_asking_for_one_program_compile_it_once() {
    // A program no other test uses.
    let (graph, _) = eagertpu::internals::bench_hooks::add_program(12_347);
    let before = eagertpu::metrics().unwrap();
    let barrier = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (g, b) = (graph.clone(), barrier.clone());
            std::thread::spawn(move || {
                b.wait();
                eagertpu::internals::bench_hooks::cache_get(&g).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let after = eagertpu::metrics().unwrap();
    let loads = (after.misses + after.disk_hits) - (before.misses + before.disk_hits);
    assert_eq!(loads, 1, "one compile (or one disk load) for one key");
    assert_eq!(after.memory_hits - before.memory_hits, 3);
}
