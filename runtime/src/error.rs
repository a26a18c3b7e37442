//! The runtime's error type. Every variant says what failed and why; errors
//! about one op name the op, its input types and where it was recorded.

use std::path::PathBuf;

use crate::pjrt::PjrtError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// Bad input to an op (shape, dtype, dim, index), found when it is recorded.
    #[error("{0}")]
    Op(#[from] fusion::Error),

    /// A PJRT call failed.
    #[error(transparent)]
    Pjrt(#[from] PjrtError),

    /// An op failed to compile or execute, or produced NaN/Inf under
    /// `EAGERTPU_CHECK_NAN=1`.
    #[error("{op}({inputs}) recorded at {origin}: {cause}")]
    AtOp {
        op: &'static str,
        /// The input types, `float32[2, 3], float32[3]`.
        inputs: String,
        /// Where the op was recorded (`src/main.rs:12:5`).
        origin: String,
        cause: Box<Error>,
    },

    #[error(
        "produced {nan} NaN and {inf} infinite values in a {output} result (EAGERTPU_CHECK_NAN=1)"
    )]
    NonFinite {
        output: String,
        nan: usize,
        inf: usize,
    },

    #[error("no PJRT plugin for `{plugin}`: looked for it at\n{}\n{hint}", list(.tried))]
    PluginNotFound {
        plugin: String,
        tried: Vec<PathBuf>,
        hint: String,
    },

    #[error("cannot load the PJRT plugin {}: {reason}", .path.display())]
    PluginLoad { path: PathBuf, reason: String },

    #[error(
        "the PJRT plugin {} implements PJRT C API {}.{}; EagerTPU supports major version {} (bound up to {}.{})",
        .path.display(), .plugin.0, .plugin.1, .supported.0, .supported.0, .supported.1
    )]
    PluginVersion {
        path: PathBuf,
        plugin: (i32, i32),
        supported: (i32, i32),
    },

    #[error("{entry} is not available in this plugin (PJRT C API {version})")]
    Unavailable {
        entry: &'static str,
        version: String,
    },

    /// A launch that would compute with the wrong memory, found by
    /// `EAGERTPU_CHECK_HAZARDS=1`.
    #[error("buffer hazard (EAGERTPU_CHECK_HAZARDS=1): {0}")]
    Hazard(String),

    #[error("{what}: {message}")]
    Config { what: &'static str, message: String },

    /// A CPU fallback refused under `EAGERTPU_FALLBACK=error`.
    #[error(
        "{op} has no tpu kernel and EAGERTPU_FALLBACK=error forbids running it on the CPU (unset it to run it there, counted)"
    )]
    FallbackRefused { op: String },

    /// A bad address, view or size given to the storage table (`storage.rs`).
    #[error("{0}")]
    Storage(String),

    #[error("internal error: {0}")]
    Internal(String),
}

fn list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "  (nowhere: no search directory exists)".into();
    }
    paths
        .iter()
        .map(|p| format!("  - {}", p.display()))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Error {
    /// The innermost cause (through `AtOp`).
    pub fn root(&self) -> &Error {
        match self {
            Error::AtOp { cause, .. } => cause.root(),
            e => e,
        }
    }
}
