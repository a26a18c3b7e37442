//! Asks a plugin which argument-struct size it expects for each entry we call.
//!
//! A PJRT plugin checks `args->struct_size` first and refuses a struct smaller
//! than its own with "Unexpected <struct> size: expected N, got M". Calling each
//! entry with a deliberately tiny `struct_size` makes the plugin tell us N, with
//! no other effect. `make test` runs this against the XLA CPU plugin (0.81) and
//! libtpu (0.117) to prove our structs are large enough for both.

use pjrt_sys::{API_ENTRIES, PJRT_Error};

use super::api::Plugin;

/// What a plugin expects of one argument struct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructSizeReport {
    pub entry: &'static str,
    pub args: &'static str,
    /// Our `STRUCT_SIZE`.
    pub ours: usize,
    /// The plugin's, when it told us; `None` if the entry is absent or the
    /// plugin did not complain about a tiny struct.
    pub plugin: Option<usize>,
}

/// Entries not probed: the error entries have no size check.
const SKIP: &[&str] = &["PJRT_Error_GetCode"];

type RawEntry = unsafe extern "C" fn(*mut u8) -> *mut PJRT_Error;

/// Probes every entry EagerTPU calls that exists in this plugin's table.
pub fn struct_sizes(plugin: &Plugin) -> Vec<StructSizeReport> {
    let api = plugin.raw_api();
    let mut out = vec![];
    for entry in API_ENTRIES {
        let Some((args, ours)) = entry.args else {
            continue;
        };
        if SKIP.contains(&entry.name) || !plugin.has_entry(entry.offset) {
            continue;
        }
        // SAFETY: `entry.offset` is the offset of a function-pointer field of
        // `PJRT_Api` and lies within the plugin's table (checked above).
        let f: Option<RawEntry> = unsafe {
            *api.cast::<u8>()
                .add(entry.offset)
                .cast::<Option<RawEntry>>()
        };
        let Some(f) = f else { continue };
        // An argument struct claiming 8 bytes: only `struct_size` is valid, and the
        // rest of the buffer is zero, so a plugin that reads on anyway sees nulls.
        let mut buf = [0u8; 1024];
        buf[..8].copy_from_slice(&8usize.to_ne_bytes());
        // SAFETY: every PJRT entry takes a pointer to an argument struct starting
        // with `struct_size`; the plugin checks it before reading further fields.
        let err = unsafe { f(buf.as_mut_ptr()) };
        let expected = if err.is_null() {
            None
        } else {
            let message = plugin.take_error(entry.name, err).message;
            parse_expected(&message)
        };
        out.push(StructSizeReport {
            entry: entry.name,
            args,
            ours,
            plugin: expected,
        });
    }
    out
}

/// `"... size: expected 88, got 8 ..."` -> 88.
fn parse_expected(message: &str) -> Option<usize> {
    let key = "size: expected ";
    let rest = &message[message.find(key)? + key.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_plugin_message() {
        let m = "Unexpected PJRT_Client_Create_Args size: expected 88, got 8. Check versions.";
        assert_eq!(super::parse_expected(m), Some(88));
        assert_eq!(super::parse_expected("something else"), None);
    }
}
