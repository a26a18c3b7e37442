//! A loaded PJRT plugin and the one helper through which every PJRT call goes.
//!
//! `Plugin` owns the `dlopen`ed library (never unloaded: XLA does not support it)
//! and the plugin's function table. [`pjrt_call!`] checks that the table has the
//! entry (its offset is below `PJRT_Api.struct_size`), fills `struct_size`, makes
//! the call and turns a `PJRT_Error*` into a [`PjrtError`] carrying the call's
//! name, the plugin's error code and message.

use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use pjrt_sys::*;

use crate::error::{Error, Result};

/// An error returned by a PJRT call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed ({code}): {message}")]
pub struct PjrtError {
    /// The C API entry, e.g. `PJRT_Client_Compile`.
    pub call: &'static str,
    pub code: ErrorCode,
    pub message: String,
}

/// The plugin's error code (absl status codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode(pub i32);

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            PJRT_Error_Code_CANCELLED => "CANCELLED",
            PJRT_Error_Code_UNKNOWN => "UNKNOWN",
            PJRT_Error_Code_INVALID_ARGUMENT => "INVALID_ARGUMENT",
            PJRT_Error_Code_DEADLINE_EXCEEDED => "DEADLINE_EXCEEDED",
            PJRT_Error_Code_NOT_FOUND => "NOT_FOUND",
            PJRT_Error_Code_ALREADY_EXISTS => "ALREADY_EXISTS",
            PJRT_Error_Code_PERMISSION_DENIED => "PERMISSION_DENIED",
            PJRT_Error_Code_RESOURCE_EXHAUSTED => "RESOURCE_EXHAUSTED",
            PJRT_Error_Code_FAILED_PRECONDITION => "FAILED_PRECONDITION",
            PJRT_Error_Code_ABORTED => "ABORTED",
            PJRT_Error_Code_OUT_OF_RANGE => "OUT_OF_RANGE",
            PJRT_Error_Code_UNIMPLEMENTED => "UNIMPLEMENTED",
            PJRT_Error_Code_INTERNAL => "INTERNAL",
            PJRT_Error_Code_UNAVAILABLE => "UNAVAILABLE",
            PJRT_Error_Code_DATA_LOSS => "DATA_LOSS",
            PJRT_Error_Code_UNAUTHENTICATED => "UNAUTHENTICATED",
            _ => return write!(f, "code {}", self.0),
        };
        f.write_str(name)
    }
}

/// A plugin attribute value (`PJRT_Plugin_Attributes`).
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    String(String),
    Int(i64),
    IntList(Vec<i64>),
    Float(f32),
    Bool(bool),
}

impl std::fmt::Display for Attribute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attribute::String(s) => f.write_str(s),
            Attribute::Int(i) => write!(f, "{i}"),
            Attribute::IntList(v) => {
                let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                f.write_str(&parts.join("."))
            }
            Attribute::Float(x) => write!(f, "{x}"),
            Attribute::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A loaded, initialized PJRT plugin.
pub struct Plugin {
    path: PathBuf,
    api: *const PJRT_Api,
    version: (i32, i32),
    attributes: Vec<(String, Attribute)>,
    // Keeps the library mapped for the life of the process.
    _lib: libloading::Library,
}

// SAFETY: the PJRT C API is thread-safe: the function table is immutable after
// `GetPjrtApi` returns, and every entry may be called from any thread.
unsafe impl Send for Plugin {}
// SAFETY: as above; `Plugin` holds no interior mutability of its own.
unsafe impl Sync for Plugin {}

/// Calls a PJRT function-table entry by name through [`Plugin::call`].
///
/// `pjrt_call!(plugin, PJRT_Client_Compile, &mut args)` checks the entry exists
/// in this plugin's table, sets `args.struct_size` and converts the error.
macro_rules! pjrt_call {
    ($plugin:expr, $entry:ident, $args:expr) => {
        $plugin.call(
            stringify!($entry),
            ::std::mem::offset_of!(::pjrt_sys::PJRT_Api, $entry),
            |api: &::pjrt_sys::PJRT_Api| api.$entry,
            $args,
        )
    };
}
pub(crate) use pjrt_call;

static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<Plugin>>>> = OnceLock::new();

impl Plugin {
    /// Loads (once per process and path) and initializes the plugin at `path`.
    pub fn load(path: &Path) -> Result<Arc<Plugin>> {
        let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let registry = LOADED.get_or_init(Default::default);
        let mut loaded = registry.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = loaded.get(&key) {
            return Ok(p.clone());
        }
        let plugin = Arc::new(Self::open(&key)?);
        loaded.insert(key, plugin.clone());
        Ok(plugin)
    }

    fn open(path: &Path) -> Result<Plugin> {
        let load_err = |reason: String| Error::PluginLoad {
            path: path.to_path_buf(),
            reason,
        };
        // SAFETY: loading a shared library runs its initializers; a PJRT plugin's
        // initializers only set up its own state. The library stays loaded for the
        // life of the process (`Plugin`s are never dropped from `LOADED`).
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| load_err(e.to_string()))?;
        // SAFETY: `GetPjrtApi` is the PJRT plugin entry point, declared in the
        // PJRT C API as `const PJRT_Api* GetPjrtApi(void)`.
        let get_api = unsafe { lib.get::<GetPjrtApiFn>(b"GetPjrtApi\0") }
            .map_err(|e| load_err(format!("not a PJRT plugin: no GetPjrtApi symbol ({e})")))?;
        // SAFETY: calling the entry point as declared; it takes no arguments.
        let api = unsafe { get_api() };
        if api.is_null() {
            return Err(load_err("GetPjrtApi returned null".into()));
        }
        // SAFETY: `api` is non-null and points at the plugin's static table. The
        // three leading fields exist in every PJRT C API version.
        let (struct_size, version) = unsafe {
            let v = &(*api).pjrt_api_version;
            ((*api).struct_size, (v.major_version, v.minor_version))
        };
        if version.0 != PJRT_API_MAJOR {
            return Err(Error::PluginVersion {
                path: path.to_path_buf(),
                plugin: version,
                supported: (PJRT_API_MAJOR, PJRT_API_MINOR),
            });
        }
        let header = std::mem::offset_of!(PJRT_Api, PJRT_Error_Destroy);
        if struct_size < header {
            return Err(load_err(format!(
                "its function table is {struct_size} bytes, smaller than the PJRT_Api header"
            )));
        }
        let mut plugin = Plugin {
            path: path.to_path_buf(),
            api,
            version,
            attributes: vec![],
            _lib: lib,
        };
        let mut init = PJRT_Plugin_Initialize_Args::default();
        pjrt_call!(plugin, PJRT_Plugin_Initialize, &mut init)?;
        plugin.attributes = plugin.read_attributes()?;
        Ok(plugin)
    }

    fn read_attributes(&self) -> Result<Vec<(String, Attribute)>> {
        let mut args = PJRT_Plugin_Attributes_Args::default();
        if !self.has_entry(std::mem::offset_of!(PJRT_Api, PJRT_Plugin_Attributes)) {
            return Ok(vec![]);
        }
        pjrt_call!(self, PJRT_Plugin_Attributes, &mut args)?;
        let mut out = Vec::with_capacity(args.num_attributes);
        for i in 0..args.num_attributes {
            // SAFETY: the plugin returned `num_attributes` named values with the
            // lifetime of the process.
            let nv = unsafe { &*args.attributes.add(i) };
            // SAFETY: `name` points at `name_size` bytes owned by the plugin.
            let name = unsafe { str_from(nv.name, nv.name_size) };
            // SAFETY: the union member read is the one `type_` selects; array and
            // string members point at `value_size` elements owned by the plugin.
            let value = unsafe {
                match nv.type_ {
                    PJRT_NamedValue_kString => {
                        Attribute::String(str_from(nv.value.string_value, nv.value_size))
                    }
                    PJRT_NamedValue_kInt64 => Attribute::Int(nv.value.int64_value),
                    PJRT_NamedValue_kInt64List => Attribute::IntList(
                        std::slice::from_raw_parts(nv.value.int64_array_value, nv.value_size)
                            .to_vec(),
                    ),
                    PJRT_NamedValue_kFloat => Attribute::Float(nv.value.float_value),
                    PJRT_NamedValue_kBool => Attribute::Bool(nv.value.bool_value),
                    _ => continue,
                }
            };
            out.push((name, value));
        }
        Ok(out)
    }

    /// The path the plugin was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The plugin's PJRT C API version `(major, minor)`.
    pub fn api_version(&self) -> (i32, i32) {
        self.version
    }

    /// `"0.81"`.
    pub fn api_version_string(&self) -> String {
        format!("{}.{}", self.version.0, self.version.1)
    }

    /// The size of the plugin's function table in bytes.
    pub fn table_size(&self) -> usize {
        // SAFETY: `api` points at the plugin's static table (checked at load).
        unsafe { (*self.api).struct_size }
    }

    /// The plugin's attributes (`xla_version`, `stablehlo_current_version`, ...).
    pub fn attributes(&self) -> &[(String, Attribute)] {
        &self.attributes
    }

    /// One attribute by name.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// Whether the plugin's function table extends past `offset`.
    pub(super) fn has_entry(&self, offset: usize) -> bool {
        offset + std::mem::size_of::<usize>() <= self.table_size()
    }

    /// The one call helper. Use it through [`pjrt_call!`].
    pub(super) fn call<A: Args>(
        &self,
        name: &'static str,
        offset: usize,
        entry: impl FnOnce(&PJRT_Api) -> Entry<A>,
        args: &mut A,
    ) -> Result<()> {
        if !self.has_entry(offset) {
            return Err(self.unavailable(name));
        }
        // SAFETY: the entry lies within the plugin's table (checked above).
        let Some(f) = entry(unsafe { &*self.api }) else {
            return Err(self.unavailable(name));
        };
        args.set_struct_size();
        // SAFETY: `f` is the plugin's implementation of `name`, whose argument
        // struct is `A` (bound by `pjrt_sys::api_table!`); `args` is a valid,
        // initialized `A` with `struct_size` set and outlives the call.
        let err = unsafe { f(args) };
        self.check(name, err)
    }

    fn unavailable(&self, name: &'static str) -> Error {
        Error::Unavailable {
            entry: name,
            version: self.api_version_string(),
        }
    }

    /// Converts (and frees) a `PJRT_Error*` returned by `name`.
    pub(super) fn check(&self, name: &'static str, err: *mut PJRT_Error) -> Result<()> {
        if err.is_null() {
            return Ok(());
        }
        Err(Error::Pjrt(self.take_error(name, err)))
    }

    /// Reads the code and message of `err`, then destroys it.
    pub(super) fn take_error(&self, name: &'static str, err: *mut PJRT_Error) -> PjrtError {
        // SAFETY: the error entries are in every PJRT table (checked at load);
        // `err` is a live error owned by us, destroyed exactly once below.
        unsafe {
            let api = &*self.api;
            let mut msg = PJRT_Error_Message_Args::default();
            msg.set_struct_size();
            msg.error = err;
            let message = match api.PJRT_Error_Message {
                Some(f) => {
                    f(&mut msg);
                    str_from(msg.message, msg.message_size)
                }
                None => String::from("(no message: PJRT_Error_Message is missing)"),
            };
            let mut code = PJRT_Error_GetCode_Args::default();
            code.set_struct_size();
            code.error = err;
            let code = match api.PJRT_Error_GetCode {
                Some(f) if f(&mut code).is_null() => code.code,
                _ => PJRT_Error_Code_UNKNOWN,
            };
            let mut destroy = PJRT_Error_Destroy_Args::default();
            destroy.set_struct_size();
            destroy.error = err;
            if let Some(f) = api.PJRT_Error_Destroy {
                f(&mut destroy);
            }
            PjrtError {
                call: name,
                code: ErrorCode(code),
                message,
            }
        }
    }

    /// Raw table access for the struct-size probe.
    pub(super) fn raw_api(&self) -> *const PJRT_Api {
        self.api
    }
}

/// Copies `len` bytes at `ptr` into a `String` (lossy UTF-8; empty if null).
///
/// # Safety
/// `ptr` must be null or point at `len` readable bytes.
pub(super) unsafe fn str_from(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() || len == 0 {
        return String::new();
    }
    // SAFETY: guaranteed by the caller.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// A named value passed to the plugin, with its storage.
#[derive(Debug, Clone)]
pub enum OptionValue {
    Int(i64),
    Bool(bool),
    Str(String),
}

/// Builds `PJRT_NamedValue`s that borrow from `options` (which must outlive them).
pub(super) fn named_values(
    options: &[(CString, OptionValue)],
    strings: &mut Vec<CString>,
) -> Vec<PJRT_NamedValue> {
    options
        .iter()
        .map(|(name, value)| {
            let mut nv = PJRT_NamedValue::default();
            nv.set_struct_size();
            nv.name = name.as_ptr();
            nv.name_size = name.as_bytes().len();
            match value {
                OptionValue::Int(i) => {
                    nv.type_ = PJRT_NamedValue_kInt64;
                    nv.value.int64_value = *i;
                    nv.value_size = 1;
                }
                OptionValue::Bool(b) => {
                    nv.type_ = PJRT_NamedValue_kBool;
                    nv.value.bool_value = *b;
                    nv.value_size = 1;
                }
                OptionValue::Str(s) => {
                    let c = CString::new(s.as_str()).unwrap_or_default();
                    nv.type_ = PJRT_NamedValue_kString;
                    nv.value.string_value = c.as_ptr();
                    nv.value_size = c.as_bytes().len();
                    strings.push(c);
                }
            }
            nv
        })
        .collect()
}
