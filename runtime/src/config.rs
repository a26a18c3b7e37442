//! Settings read from the environment once, when the runtime starts.

use crate::error::{Error, Result};

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
            None => Mode::Debug,
            Some(m) => Mode::parse(&m).ok_or_else(|| Error::Config {
                what: "environment",
                message: format!("EAGERTPU_MODE={m}: expected debug, strict or fused"),
            })?,
        };
        let device_count =
            match var("EAGERTPU_DEVICE_COUNT") {
                None => None,
                Some(n) => Some(n.trim().parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(
                    || Error::Config {
                        what: "environment",
                        message: format!("EAGERTPU_DEVICE_COUNT={n}: expected a positive integer"),
                    },
                )?),
            };
        Ok(Config {
            mode,
            plugin: var("EAGERTPU_PJRT_PLUGIN"),
            device_count,
            check_nan: flag("EAGERTPU_CHECK_NAN")?,
            log: var("EAGERTPU_LOG").unwrap_or_else(|| "warn".into()),
        })
    }
}
