//! Settings read from the environment once, when the runtime starts.

use std::collections::BTreeMap;

use fusion::policy::WindowLimits;

use crate::disk::{self, DiskConfig};
use crate::error::{Error, Result};
use crate::pjrt::XlaOption;

/// How ops execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Each op is compiled (cached), executed and awaited before the call
    /// returns; errors and NaNs stop at the op that caused them.
    Debug,
    /// Each op is enqueued asynchronously; the host waits only to read.
    Strict,
    /// The recent op stream is cut into fused chunks.
    Fused,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "debug" => Some(Mode::Debug),
            "strict" => Some(Mode::Strict),
            "fused" => Some(Mode::Fused),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Debug => "debug",
            Mode::Strict => "strict",
            Mode::Fused => "fused",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The environment EagerTPU reads (see README.md).
#[derive(Clone, Debug)]
pub struct Config {
    /// `EAGERTPU_MODE`.
    pub mode: Mode,
    /// `EAGERTPU_PJRT_PLUGIN`: a path, `cpu`, `tpu` or `cuda`; unset picks.
    pub plugin: Option<String>,
    /// `EAGERTPU_DEVICE_COUNT`: CPU plugin devices.
    pub device_count: Option<i64>,
    /// `EAGERTPU_CHECK_NAN=1`: raise at the first op producing NaN/Inf.
    pub check_nan: bool,
    /// `EAGERTPU_LOG`: a `tracing` filter.
    pub log: String,
    /// `EAGERTPU_WINDOW`: `ops` or `ops,params`, the fused window's limits.
    pub window: WindowLimits,
    /// `EAGERTPU_CACHE_DIR` (`off`: no disk tier), `EAGERTPU_CACHE_READONLY`,
    /// `EAGERTPU_CACHE_MAX_BYTES`.
    pub disk_cache: Option<DiskConfig>,
    /// `EAGERTPU_XLA_OPTIONS`: `name=value,...` XLA compiler options every
    /// program is compiled with (part of its cache key).
    pub xla_options: BTreeMap<String, XlaOption>,
    /// `EAGERTPU_CHECK_HAZARDS=1`: verify the buffer-ordering invariant at
    /// every launch (see `stream::hazards`).
    pub check_hazards: bool,
    /// `EAGERTPU_COMPILE_THREADS`: threads compiling fused chunks in the
    /// background (default 1; 0 compiles them on the recording thread).
    pub compile_threads: usize,
    /// `EAGERTPU_HOT_THRESHOLD`: how many times a fused chunk is seen before
    /// it is compiled (default 2); until then it runs op by op.
    pub hot_threshold: u32,
    /// `EAGERTPU_DETERMINISTIC=1`: a hot fused chunk is compiled on the
    /// recording thread and used from its hot sighting on, never earlier from
    /// disk, so that results depend only on the op stream (as
    /// `torch.use_deterministic_algorithms(True)` asks).
    pub deterministic: bool,
    /// `EAGERTPU_REPLAY=0`: no trace-guarded replay (`stream::replay`); every
    /// fused chunk takes the full path (inference, graph, cache lookup).
    pub replay: bool,
    /// `EAGERTPU_FALLBACK=error`: an op without a kernel is an error instead
    /// of running on the CPU (`warn`, the default: it runs there, counted and
    /// warned about once).
    pub fallback_is_error: bool,
    /// `EAGERTPU_COLLECTIVE_TIMEOUT`: seconds a collective waits for every
    /// rank of its group before failing them all (default 300).
    pub collective_timeout: std::time::Duration,
    /// `EAGERTPU_WAIT_SPIN_US`: microseconds a host wait (`.item()`, a read,
    /// `sync()`) polls the device's event, yielding the core, before it
    /// blocks (default 100; 0 blocks at once).
    pub wait_spin: std::time::Duration,
    /// `EAGERTPU_CPU_HEAP`: `cache` (the default) keeps the host heap's
    /// freed memory for reuse when the device is the XLA CPU plugin, whose
    /// device memory it is (`pjrt::heap`); `system` leaves the C library's
    /// defaults.
    pub cpu_heap_cached: bool,
}

fn bad(name: &str, value: &str, expected: &str) -> Error {
    Error::Config {
        what: "environment",
        message: format!("{name}={value}: expected {expected}"),
    }
}

fn positive(name: &str, value: &str) -> Result<u64> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| bad(name, value, "a positive integer"))
}

fn window() -> Result<WindowLimits> {
    let mut limits = WindowLimits::default();
    if let Some(w) = var("EAGERTPU_WINDOW") {
        let expected = "`ops` or `ops,params` (positive integers)";
        let mut parts = w.split(',');
        let ops = parts.next().unwrap_or_default();
        limits.max_ops = positive("EAGERTPU_WINDOW", ops)
            .map_err(|_| bad("EAGERTPU_WINDOW", &w, expected))? as usize;
        if let Some(p) = parts.next() {
            limits.max_params = positive("EAGERTPU_WINDOW", p)
                .map_err(|_| bad("EAGERTPU_WINDOW", &w, expected))?
                as usize;
        }
        if parts.next().is_some() {
            return Err(bad("EAGERTPU_WINDOW", &w, expected));
        }
    }
    Ok(limits)
}

fn disk_cache() -> Result<Option<DiskConfig>> {
    // Malformed settings are errors even when the cache is off.
    let max_bytes = var("EAGERTPU_CACHE_MAX_BYTES")
        .map(|v| positive("EAGERTPU_CACHE_MAX_BYTES", &v))
        .transpose()?;
    let readonly = flag("EAGERTPU_CACHE_READONLY")?;
    let dir = match var("EAGERTPU_CACHE_DIR") {
        Some(d) if d.trim() == "off" => return Ok(None),
        Some(d) => std::path::PathBuf::from(d),
        None => match disk::default_dir() {
            Some(d) => d,
            None => {
                tracing::warn!("no HOME or XDG_CACHE_HOME: the on-disk compile cache is off");
                return Ok(None);
            }
        },
    };
    Ok(Some(DiskConfig {
        dir,
        readonly,
        max_bytes,
    }))
}

fn xla_options() -> Result<BTreeMap<String, XlaOption>> {
    let mut options = BTreeMap::new();
    let Some(text) = var("EAGERTPU_XLA_OPTIONS") else {
        return Ok(options);
    };
    for item in text.split(',').filter(|i| !i.trim().is_empty()) {
        let (name, value) = item
            .split_once('=')
            .filter(|(n, v)| n.trim().starts_with("xla_") && !v.trim().is_empty())
            .ok_or_else(|| {
                bad(
                    "EAGERTPU_XLA_OPTIONS",
                    &text,
                    "comma-separated `xla_name=value` pairs",
                )
            })?;
        options.insert(name.trim().to_string(), XlaOption::parse(value));
    }
    Ok(options)
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn flag(name: &str) -> Result<bool> {
    match var(name).as_deref().map(str::trim) {
        None | Some("0") | Some("false") | Some("off") => Ok(false),
        Some("1") | Some("true") | Some("on") => Ok(true),
        Some(other) => Err(Error::Config {
            what: "environment",
            message: format!("{name}={other}: expected 0 or 1"),
        }),
    }
}

impl Config {
    /// Reads the environment; a malformed value is an error naming it.
    pub fn from_env() -> Result<Config> {
        let mode = match var("EAGERTPU_MODE") {
            None => Mode::Fused,
            Some(m) => Mode::parse(&m).ok_or_else(|| Error::Config {
                what: "environment",
                message: format!("EAGERTPU_MODE={m}: expected debug, strict or fused"),
            })?,
        };
        let device_count = var("EAGERTPU_DEVICE_COUNT")
            .map(|n| positive("EAGERTPU_DEVICE_COUNT", &n).map(|n| n as i64))
            .transpose()?;
        Ok(Config {
            mode,
            plugin: var("EAGERTPU_PJRT_PLUGIN"),
            device_count,
            check_nan: flag("EAGERTPU_CHECK_NAN")?,
            log: var("EAGERTPU_LOG").unwrap_or_else(|| "warn".into()),
            window: window()?,
            disk_cache: disk_cache()?,
            xla_options: xla_options()?,
            check_hazards: flag("EAGERTPU_CHECK_HAZARDS")?,
            compile_threads: match var("EAGERTPU_COMPILE_THREADS") {
                None => 1,
                Some(n) if n.trim() == "0" => 0,
                Some(n) => positive("EAGERTPU_COMPILE_THREADS", &n)? as usize,
            },
            hot_threshold: match var("EAGERTPU_HOT_THRESHOLD") {
                None => 2,
                Some(n) => positive("EAGERTPU_HOT_THRESHOLD", &n)?.min(u32::MAX as u64) as u32,
            },
            deterministic: flag("EAGERTPU_DETERMINISTIC")?,
            replay: var("EAGERTPU_REPLAY").is_none() || flag("EAGERTPU_REPLAY")?,
            fallback_is_error: match var("EAGERTPU_FALLBACK").as_deref().map(str::trim) {
                None | Some("warn") => false,
                Some("error") => true,
                Some(other) => return Err(bad("EAGERTPU_FALLBACK", other, "warn or error")),
            },
            collective_timeout: std::time::Duration::from_secs(
                match var("EAGERTPU_COLLECTIVE_TIMEOUT") {
                    None => 300,
                    Some(n) => positive("EAGERTPU_COLLECTIVE_TIMEOUT", &n)?,
                },
            ),
            wait_spin: std::time::Duration::from_micros(match var("EAGERTPU_WAIT_SPIN_US") {
                None => 100,
                Some(n) if n.trim() == "0" => 0,
                Some(n) => positive("EAGERTPU_WAIT_SPIN_US", &n)?,
            }),
            cpu_heap_cached: match var("EAGERTPU_CPU_HEAP").as_deref().map(str::trim) {
                None | Some("cache") => true,
                Some("system") => false,
                Some(other) => return Err(bad("EAGERTPU_CPU_HEAP", other, "cache or system")),
            },
        })
    }
}
