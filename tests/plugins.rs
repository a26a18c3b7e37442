//! Plugin loading: the real XLA CPU plugin and libtpu, fake plugins built here,
//! and the errors a user sees when a plugin is missing or incompatible.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eagertpu::internals::pjrt::locate::{self, PluginKind};
use eagertpu::internals::pjrt::{Client, Plugin, probe};

/// Builds a fake plugin from C source (our own, not the PJRT header) and
/// returns the path of the shared library.
fn build_fake_plugin(name: &str, source: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake_plugins");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{name}.c"));
    let lib = dir.join(format!("lib{name}.so"));
    std::fs::write(&src, source).unwrap();
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// A fake PJRT table: `PJRT_Api` header (struct_size, extension, version) then
/// `entries` function pointers, of which only Plugin_Initialize (entry 3) and
/// Plugin_Attributes (entry 4) are set; they succeed and do nothing.
fn fake_plugin_source(major: i32, minor: i32, entries: usize) -> String {
    format!(
        r#"
#include <stddef.h>
typedef struct {{ size_t struct_size; void* ext; int major; int minor; }} Version;
typedef struct {{ size_t struct_size; void* ext; Version version; void* entries[{entries}]; }} Table;
static void* ok(void* args) {{ (void)args; return NULL; }}
static Table table;
const Table* GetPjrtApi(void) {{
  table.struct_size = sizeof(Table);
  table.version.struct_size = sizeof(Version);
  table.version.major = {major};
  table.version.minor = {minor};
  table.entries[3] = (void*)ok;
  table.entries[4] = (void*)ok;
  return &table;
}}
"#
    )
}

#[test]
fn a_plugin_with_another_major_version_is_refused() {
    let lib = build_fake_plugin("major1", &fake_plugin_source(1, 3, 5));
    let err = Plugin::load(&lib)
        .err()
        .expect("a 1.x plugin must be refused")
        .to_string();
    assert!(err.contains("1.3"), "{err}");
    assert!(err.contains("major version 0"), "{err}");
    assert!(err.contains("libmajor1.so"), "{err}");
}

#[test]
fn a_missing_table_entry_is_a_clean_error_naming_it_and_the_version() {
    // A 0.1 plugin whose table ends after PJRT_Plugin_Attributes.
    let lib = build_fake_plugin("tiny_table", &fake_plugin_source(0, 1, 5));
    let plugin = Plugin::load(&lib).expect("the header and the entries it has are fine");
    assert_eq!(plugin.api_version(), (0, 1));
    let err = Client::create(plugin, &[])
        .err()
        .expect("no PJRT_Client_Create")
        .to_string();
    assert_eq!(
        err,
        "PJRT_Client_Create is not available in this plugin (PJRT C API 0.1)"
    );
}

#[test]
fn a_library_that_is_not_a_plugin_is_refused() {
    let lib = build_fake_plugin("not_a_plugin", "int answer(void) { return 42; }\n");
    let err = Plugin::load(&lib).err().unwrap().to_string();
    assert!(err.contains("no GetPjrtApi symbol"), "{err}");
    let err = Plugin::load(Path::new("/nonexistent/plugin.so"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("/nonexistent/plugin.so"), "{err}");
}

#[test]
fn a_missing_plugin_lists_every_place_tried_and_how_to_install_it() {
    let empty = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no_plugins_here");
    std::fs::create_dir_all(&empty).unwrap();
    let err = locate::find(PluginKind::Cuda, std::slice::from_ref(&empty))
        .expect_err("no CUDA plugin is installed here")
        .to_string();
    assert!(err.contains("no PJRT plugin for `cuda`"), "{err}");
    assert!(
        err.contains(
            &empty
                .join("jax_plugins/xla_cuda12/xla_cuda_plugin.so")
                .display()
                .to_string()
        ),
        "{err}"
    );
    assert!(err.contains("pip install"), "{err}");
    let err = locate::resolve(Some("/no/such/plugin.so"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("/no/such/plugin.so") && err.contains("cpu, tpu, cuda"),
        "{err}"
    );
}

#[test]
fn the_cpu_plugin_is_found_and_accepts_every_argument_struct_we_pass() {
    let found = locate::resolve(Some("cpu")).expect("make setup installs the CPU plugin");
    assert_eq!(found.kind, PluginKind::Cpu);
    let plugin = Plugin::load(&found.path).unwrap();
    assert_eq!(plugin.api_version(), (0, 81));
    let reports = probe::struct_sizes(&plugin);
    assert!(reports.len() >= 40, "{reports:?}");
    for r in &reports {
        let theirs = r
            .plugin
            .unwrap_or_else(|| panic!("{} did not report its size", r.entry));
        assert!(
            r.ours >= theirs,
            "{}: ours {} < plugin's {theirs}",
            r.args,
            r.ours
        );
    }
}

/// Runs `eagertpu-info` with `env`, killing it after `limit`.
fn run_info(
    env: &[(&str, &str)],
    args: &[&str],
    limit: Duration,
) -> (Option<i32>, String, Duration) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_eagertpu-info"));
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            use std::io::Read;
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            return (status.code(), out, start.elapsed());
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("eagertpu-info {args:?} with {env:?} hung for {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn libtpu_loads_reports_its_api_version_and_fails_fast_without_a_tpu() {
    assert!(
        locate::find(PluginKind::Tpu, &locate::search_dirs()).is_ok(),
        "libtpu is not installed: `make test` installs it into .venv (make setup-test)"
    );
    assert!(
        !locate::tpu_present(),
        "this test expects a machine without a TPU"
    );
    let (code, out, elapsed) = run_info(
        &[("EAGERTPU_PJRT_PLUGIN", "tpu")],
        &["--probe"],
        Duration::from_secs(120),
    );
    assert!(out.contains("pjrt_api: 0.117"), "{out}");
    assert!(out.contains("structs_too_small: 0"), "{out}");
    assert!(out.contains("client: error"), "{out}");
    assert!(
        out.contains("PJRT_Client_Create failed") && out.contains("TPU"),
        "{out}"
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}: {out}");
}

#[test]
fn eagertpu_info_reports_a_missing_plugin_without_panicking() {
    let (code, out, _) = run_info(
        &[("EAGERTPU_PJRT_PLUGIN", "/no/such/plugin.so")],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("plugin: error: no PJRT plugin for `/no/such/plugin.so`"),
        "{out}"
    );
}

#[test]
fn eagertpu_info_starts_a_cpu_client_with_the_requested_device_count() {
    let (code, out, _) = run_info(
        &[
            ("EAGERTPU_PJRT_PLUGIN", "cpu"),
            ("EAGERTPU_DEVICE_COUNT", "3"),
        ],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("client: ok cpu"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("device ")).count(),
        3,
        "{out}"
    );
}
