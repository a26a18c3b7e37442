//! The on-disk tier of the compile cache: serialized executables, one file per
//! program key, that a later process loads with `PJRT_Executable_DeserializeAndLoad`
//! instead of compiling.
//!
//! An entry is written to a temporary file and renamed into place, so readers
//! never see half an entry and two processes writing one key both succeed.
//! It carries a header (format version, key, plugin fingerprint), the program
//! text (to rule out key collisions) and a checksum; an entry that is corrupted,
//! truncated or written by another plugin is a miss with one warning, and is
//! rewritten. A size bound evicts the least recently used entries (by mtime,
//! which a hit refreshes). Read-only mode (shared mounts) never writes.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use fusion::hash::checksum64;

use crate::lock;

const MAGIC: &[u8; 16] = b"EAGERTPU-CACHE\0\0";
const FORMAT_VERSION: u32 = 1;
const EXTENSION: &str = "etpu";

/// Where and how the disk tier works (`EAGERTPU_CACHE_*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskConfig {
    pub dir: PathBuf,
    pub readonly: bool,
    pub max_bytes: Option<u64>,
}

/// What a lookup found.
pub(crate) enum Lookup {
    Hit(Vec<u8>),
    Miss,
    /// An entry exists but cannot be used (the reason is logged once).
    Bad,
}

pub(crate) struct DiskCache {
    config: DiskConfig,
    warned: Mutex<HashSet<u128>>,
    temp_counter: AtomicU64,
}

impl DiskCache {
    pub fn new(config: DiskConfig) -> DiskCache {
        DiskCache {
            config,
            warned: Mutex::default(),
            temp_counter: AtomicU64::new(0),
        }
    }

    fn path(&self, key: u128) -> PathBuf {
        self.config.dir.join(format!("{key:032x}.{EXTENSION}"))
    }

    /// The serialized executable stored for `key`, if it is valid for this
    /// program text and plugin.
    pub fn load(&self, key: u128, text: &str, fingerprint: &str) -> Lookup {
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return self.bad(key, &path, format!("cannot read it: {e}")),
        };
        match parse(&bytes, key, text, fingerprint) {
            Ok(payload) => {
                if !self.config.readonly {
                    // Refresh the LRU clock; failing to is harmless.
                    let _ = std::fs::File::options()
                        .append(true)
                        .open(&path)
                        .and_then(|f| f.set_modified(SystemTime::now()));
                }
                Lookup::Hit(payload.to_vec())
            }
            Err(reason) => self.bad(key, &path, reason),
        }
    }

    fn bad(&self, key: u128, path: &Path, reason: String) -> Lookup {
        self.warn_once(key, &format!("{}: {reason}", path.display()));
        Lookup::Bad
    }

    /// Logs one warning per key.
    pub fn warn_once(&self, key: u128, message: &str) {
        if lock(&self.warned).insert(key) {
            tracing::warn!(
                target: "eagertpu::cache",
                "compile cache entry ignored, recompiling: {message}"
            );
        }
    }

    /// Stores an entry (unless read-only: then `Ok(false)`), then applies the
    /// size bound.
    pub fn store(
        &self,
        key: u128,
        text: &str,
        fingerprint: &str,
        payload: &[u8],
    ) -> std::io::Result<bool> {
        if self.config.readonly {
            return Ok(false);
        }
        std::fs::create_dir_all(&self.config.dir)?;
        let entry = encode(key, text, fingerprint, payload);
        let tmp = self.config.dir.join(format!(
            ".tmp-{}-{}-{key:032x}",
            std::process::id(),
            self.temp_counter.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&entry)?;
            f.sync_data()?;
            std::fs::rename(&tmp, self.path(key))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        if let Some(max) = self.config.max_bytes {
            self.evict(max);
        }
        Ok(true)
    }

    /// Deletes the least recently used entries until the total fits `max`.
    fn evict(&self, max: u64) {
        let Ok(rd) = std::fs::read_dir(&self.config.dir) else {
            return;
        };
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = rd
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == EXTENSION))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((m.modified().ok()?, m.len(), e.path()))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort();
        for (_, len, path) in entries {
            if total <= max {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                tracing::debug!(target: "eagertpu::cache", "evicted {}", path.display());
                total -= len;
            }
        }
    }
}

fn encode(key: u128, text: &str, fingerprint: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + text.len() + fingerprint.len() + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&(fingerprint.len() as u64).to_le_bytes());
    out.extend_from_slice(fingerprint.as_bytes());
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&checksum(text.as_bytes(), payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn checksum(text: &[u8], payload: &[u8]) -> u64 {
    checksum64(text) ^ checksum64(payload).rotate_left(1)
}

/// Reads `bytes` as an entry for (`key`, `text`, `fingerprint`); the payload,
/// or why it cannot be used.
fn parse<'a>(
    bytes: &'a [u8],
    key: u128,
    text: &str,
    fingerprint: &str,
) -> Result<&'a [u8], String> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not an EagerTPU cache entry".into());
    }
    let version = u32::from_le_bytes(r.take(4)?.try_into().unwrap_or_default());
    if version != FORMAT_VERSION {
        return Err(format!(
            "format version {version}, expected {FORMAT_VERSION}"
        ));
    }
    if u128::from_le_bytes(r.take(16)?.try_into().unwrap_or_default()) != key {
        return Err("the entry holds another key".into());
    }
    let fp_len = r.u64()? as usize;
    let stored_fp = r.take(fp_len)?;
    if stored_fp != fingerprint.as_bytes() {
        return Err(format!(
            "written by another plugin ({}), this is {fingerprint}",
            String::from_utf8_lossy(stored_fp)
        ));
    }
    let text_len = r.u64()? as usize;
    let stored_text = r.take(text_len)?;
    if stored_text != text.as_bytes() {
        return Err("the entry holds another program (a key collision)".into());
    }
    let payload_len = r.u64()? as usize;
    let sum = r.u64()?;
    let payload = r.take(payload_len)?;
    if r.at != bytes.len() {
        return Err("trailing bytes after the entry".into());
    }
    if checksum(stored_text, payload) != sum {
        return Err("checksum mismatch (the entry is corrupted)".into());
    }
    Ok(payload)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                format!(
                    "truncated: {} bytes, needed more at offset {}",
                    self.bytes.len(),
                    self.at
                )
            })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
}

/// The default cache directory: `$XDG_CACHE_HOME/eagertpu`, else
/// `$HOME/.cache/eagertpu`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("eagertpu"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/eagertpu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP: &str = "cpu cpu (PJRT C API 0.81)";

    #[test]
    fn an_entry_round_trips_and_every_damage_is_detected() {
        let e = encode(7, "program", FP, b"payload");
        assert_eq!(parse(&e, 7, "program", FP), Ok(&b"payload"[..]));
        assert!(
            parse(&e, 8, "program", FP)
                .unwrap_err()
                .contains("another key")
        );
        assert!(
            parse(&e, 7, "other", FP)
                .unwrap_err()
                .contains("another program")
        );
        assert!(
            parse(&e, 7, "program", "tpu")
                .unwrap_err()
                .contains("another plugin")
        );
        assert!(
            parse(&e[..e.len() - 3], 7, "program", FP)
                .unwrap_err()
                .contains("truncated")
        );
        let mut flipped = e.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(
            parse(&flipped, 7, "program", FP)
                .unwrap_err()
                .contains("checksum")
        );
        assert!(
            parse(b"garbage", 7, "program", FP)
                .unwrap_err()
                .contains("truncated")
        );
        let mut bad_magic = e.clone();
        bad_magic[0] = b'X';
        assert!(
            parse(&bad_magic, 7, "program", FP)
                .unwrap_err()
                .contains("not an EagerTPU")
        );
    }
}
