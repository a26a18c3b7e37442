//! Which PJRT plugin to load.
//!
//! `EAGERTPU_PJRT_PLUGIN` is a path, or `cpu`, `tpu`, `cuda`. Unset: libtpu when a
//! TPU is attached to this machine, else the XLA CPU plugin. Plugins are looked up
//! in Python site-packages: the active virtualenv, the project's `.venv`, then
//! those of `python3`. A plugin that is not found is an error listing every place
//! tried and the command that installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};

/// A kind of plugin EagerTPU knows how to find and configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    Cpu,
    Tpu,
    Cuda,
    /// Given by path; configured with no create options.
    Custom,
}

impl PluginKind {
    /// Paths of the plugin library relative to a site-packages directory.
    fn relative_paths(self) -> &'static [&'static str] {
        match self {
            PluginKind::Cpu => &["xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"],
            PluginKind::Tpu => &["libtpu/libtpu.so"],
            PluginKind::Cuda => &[
                "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
                "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
            ],
            PluginKind::Custom => &[],
        }
    }

    fn install_hint(self) -> &'static str {
        match self {
            PluginKind::Cpu => {
                "install it with `make setup` (or `python3 -m pip install xla-cpu-pjrt==0.0.1`)"
            }
            PluginKind::Tpu => "install it with `python3 -m pip install libtpu`",
            PluginKind::Cuda => "install it with `python3 -m pip install jax-cuda12-pjrt`",
            PluginKind::Custom => "check EAGERTPU_PJRT_PLUGIN",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PluginKind::Cpu => "cpu",
            PluginKind::Tpu => "tpu",
            PluginKind::Cuda => "cuda",
            PluginKind::Custom => "custom",
        }
    }
}

/// A plugin found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub kind: PluginKind,
    pub path: PathBuf,
}

/// Whether a TPU is attached (`/dev/accel*`, or a VFIO device on newer hosts).
pub fn tpu_present() -> bool {
    let any = |dir: &str, keep: &dyn Fn(&str) -> bool| {
        std::fs::read_dir(dir)
            .map(|rd| rd.flatten().any(|e| keep(&e.file_name().to_string_lossy())))
            .unwrap_or(false)
    };
    any("/dev", &|n| n.starts_with("accel")) || any("/dev/vfio", &|n| n != "vfio")
}

/// Where to look for plugins, in order.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![];
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        dirs.extend(site_packages_of_venv(Path::new(&venv)));
    }
    let project_venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv");
    let project_venv = project_venv.canonicalize().unwrap_or(project_venv);
    dirs.extend(site_packages_of_venv(&project_venv));
    dirs
}

fn site_packages_of_venv(venv: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    if let Ok(entries) = std::fs::read_dir(venv.join("lib")) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("python") {
                out.push(e.path().join("site-packages"));
            }
        }
    }
    out.sort();
    out
}

/// The site-packages directories of `python3` (asked only when needed).
fn python_site_packages() -> Vec<PathBuf> {
    let script =
        "import site,sys\nfor p in site.getsitepackages()+[site.getusersitepackages()]: print(p)";
    Command::new("python3")
        .args(["-c", script])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
}

fn find_in(kind: PluginKind, dirs: &[PathBuf], tried: &mut Vec<PathBuf>) -> Option<PathBuf> {
    for dir in dirs {
        for rel in kind.relative_paths() {
            let p = dir.join(rel);
            if p.is_file() {
                return Some(p);
            }
            tried.push(p);
        }
    }
    None
}

/// Finds the plugin for `kind` in `dirs`, then in `python3`'s site-packages.
pub fn find(kind: PluginKind, dirs: &[PathBuf]) -> Result<Located> {
    let mut tried = vec![];
    if kind == PluginKind::Tpu
        && let Some(p) = std::env::var_os("TPU_LIBRARY_PATH").map(PathBuf::from)
    {
        if p.is_file() {
            return Ok(Located { kind, path: p });
        }
        tried.push(p);
    }
    if let Some(path) = find_in(kind, dirs, &mut tried) {
        return Ok(Located { kind, path });
    }
    let more: Vec<PathBuf> = python_site_packages()
        .into_iter()
        .filter(|d| !dirs.contains(d))
        .collect();
    if let Some(path) = find_in(kind, &more, &mut tried) {
        return Ok(Located { kind, path });
    }
    Err(Error::PluginNotFound {
        plugin: kind.name().to_string(),
        tried,
        hint: kind.install_hint().to_string(),
    })
}

/// Resolves `EAGERTPU_PJRT_PLUGIN`'s value (`None`: unset).
pub fn resolve(choice: Option<&str>) -> Result<Located> {
    let dirs = search_dirs();
    match choice.map(str::trim) {
        None | Some("") => {
            if tpu_present()
                && let Ok(found) = find(PluginKind::Tpu, &dirs)
            {
                return Ok(found);
            }
            find(PluginKind::Cpu, &dirs)
        }
        Some("cpu") => find(PluginKind::Cpu, &dirs),
        Some("tpu") => find(PluginKind::Tpu, &dirs),
        Some("cuda") | Some("gpu") => find(PluginKind::Cuda, &dirs),
        Some(path) => {
            let p = PathBuf::from(path);
            if p.is_file() {
                let kind = guess_kind(&p);
                Ok(Located { kind, path: p })
            } else {
                Err(Error::PluginNotFound {
                    plugin: path.to_string(),
                    tried: vec![p],
                    hint: "EAGERTPU_PJRT_PLUGIN must be a plugin path or one of cpu, tpu, cuda"
                        .into(),
                })
            }
        }
    }
}

fn guess_kind(path: &Path) -> PluginKind {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if name.contains("libtpu") {
        PluginKind::Tpu
    } else if name.contains("xla_cpu") {
        PluginKind::Cpu
    } else if name.contains("cuda") {
        PluginKind::Cuda
    } else {
        PluginKind::Custom
    }
}

/// Sets up the environment a plugin reads when it loads.
///
/// libtpu on a machine with no TPU attached first retries the cloud metadata
/// server for minutes; with `TPU_SKIP_MDS_QUERY=1` it fails at once with a clear
/// "no TPU device" error. We set it only when no TPU is attached and the user
/// has not set it.
pub fn prepare_environment(kind: PluginKind) {
    if kind == PluginKind::Tpu && !tpu_present() && std::env::var_os("TPU_SKIP_MDS_QUERY").is_none()
    {
        tracing::info!("no TPU attached: setting TPU_SKIP_MDS_QUERY=1 before loading libtpu");
        // SAFETY: `set_var` is unsound only if another thread reads or writes the
        // environment concurrently. This runs once, while the runtime starts and
        // before the plugin (the only other reader we start) is loaded; the
        // runtime has started no threads of its own yet.
        unsafe { std::env::set_var("TPU_SKIP_MDS_QUERY", "1") };
    }
}
