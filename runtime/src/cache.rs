//! The one compile cache every mode uses: memory -> disk -> compile.
//!
//! - Memory: an LRU of loaded executables keyed by the chunk's `Graph` (op
//!   kinds, attributes, operand positions, input types; never values), compared
//!   by full equality, so it cannot collide.
//! - Program key: a 128-bit digest of the emitted StableHLO text, the compile
//!   options and the plugin's identity. Concurrent requests for one key wait
//!   for a single compile (single flight).
//! - Disk (`disk.rs`): serialized executables, loaded with
//!   `PJRT_Executable_DeserializeAndLoad`; entries carry the full text.
//! - A miss that recompiles a program seen before with other input shapes is
//!   explained once per pair (`Metrics::recompile_reasons`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use dashmap::DashMap;
use fusion::hash::{FxBuild, digest128, fx_hash};
use fusion::lower::Target;
use fusion::{Def, Graph, TensorType};
use lru::LruCache;

use crate::disk::{DiskCache, DiskConfig, Lookup};
use crate::error::Result;
use crate::lock;
use crate::metrics::Counters;
use crate::pjrt::{Client, CompileOptions, Executable, Placement, XlaOption, required_xla_options};
use crate::trace;

/// A compiled program.
pub(crate) struct Program {
    pub exe: Arc<Executable>,
}

/// Loaded executables kept in memory.
const MEMORY_ENTRIES: usize = 4096;
/// Loaded replicated executables (collectives) kept in memory.
const REPLICATED_ENTRIES: usize = 256;

type Flight = Arc<OnceLock<Result<Arc<Executable>>>>;

pub(crate) struct CompileCache {
    client: Client,
    /// Platform name and version, PJRT API version, and `XLA_FLAGS` (which
    /// the plugin reads when it compiles).
    fingerprint: String,
    options: CompileOptions,
    /// What the lowering may assume of the platform's compiler.
    target: Target,
    /// `options`, encoded once (part of every program key).
    encoded_options: Vec<u8>,
    programs: Mutex<LruCache<Graph, Arc<Program>, FxBuild>>,
    /// Programs run as one replica per device (collectives), by program key.
    replicated: Mutex<LruCache<u128, Arc<Program>, FxBuild>>,
    in_flight: DashMap<u128, Flight>,
    disk: Option<DiskCache>,
    explainer: Mutex<Explainer>,
}

impl CompileCache {
    /// A cache compiling with the options `client`'s platform needs, then
    /// `xla_options` (`EAGERTPU_XLA_OPTIONS`) over them.
    pub fn new(
        client: Client,
        disk: Option<DiskConfig>,
        xla_options: &BTreeMap<String, XlaOption>,
    ) -> CompileCache {
        let fingerprint = format!(
            "{} {} (PJRT C API {}) XLA_FLAGS={}",
            client.platform_name(),
            client.platform_version(),
            client.plugin().api_version_string(),
            std::env::var("XLA_FLAGS").unwrap_or_default()
        );
        let mut options = client.compile_options(Placement::Portable);
        let required = required_xla_options(client.platform_name());
        for (name, value) in xla_options {
            if let Some(required) = required.get(name).filter(|r| *r != value) {
                tracing::warn!(
                    "EAGERTPU_XLA_OPTIONS sets {name}={value:?}, which EagerTPU sets to \
                     {required:?} on this platform for correct results: values may be wrong"
                );
            }
            options.xla.insert(name.clone(), value.clone());
        }
        CompileCache {
            target: Target::of_platform(client.platform_name()),
            client,
            fingerprint,
            encoded_options: options.encode(),
            options,
            programs: Mutex::new(LruCache::with_hasher(
                NonZeroUsize::new(MEMORY_ENTRIES).unwrap_or(NonZeroUsize::MIN),
                FxBuild::default(),
            )),
            replicated: Mutex::new(LruCache::with_hasher(
                NonZeroUsize::new(REPLICATED_ENTRIES).unwrap_or(NonZeroUsize::MIN),
                FxBuild::default(),
            )),
            in_flight: DashMap::new(),
            disk: disk.map(DiskCache::new),
            explainer: Mutex::default(),
        }
    }

    /// The program for `graph` if it is in memory (counted as a hit).
    pub fn loaded(&self, graph: &Graph, counters: &Counters) -> Option<Arc<Program>> {
        let p = lock(&self.programs).get(graph).cloned();
        if p.is_some() {
            Counters::add(&counters.memory_hits, 1);
        }
        p
    }

    /// The program for `graph` if the on-disk cache has it (loaded into
    /// memory); never compiles.
    pub fn load_from_disk(&self, graph: &Graph, counters: &Counters) -> Option<Arc<Program>> {
        let disk = self.disk.as_ref()?;
        let text = fusion::lower::lower_for(graph, self.target);
        let key = self.program_key(&text);
        let Lookup::Hit(bytes) = disk.load(key, &text, &self.fingerprint) else {
            return None;
        };
        let exe = Executable::deserialize_and_load(&self.client, &bytes, &self.options).ok()?;
        if let Some(reason) = lock(&self.explainer).explain(key, graph) {
            tracing::warn!(target: "eagertpu::recompile", "{reason}");
            lock(&counters.recompile_reasons).push(reason);
        }
        Counters::add(&counters.disk_hits, 1);
        let program = Arc::new(Program { exe: Arc::new(exe) });
        lock(&self.programs).put(graph.clone(), program.clone());
        Some(program)
    }

    fn program_key(&self, text: &str) -> u128 {
        self.key_with(text, &self.encoded_options)
    }

    fn key_with(&self, text: &str, encoded_options: &[u8]) -> u128 {
        digest128(&[
            text.as_bytes(),
            encoded_options,
            self.fingerprint.as_bytes(),
        ])
    }

    /// The program for `graph` run as one replica on each device of
    /// `device_ids`, in replica order (a collective): from memory, from
    /// disk, or compiled, once per key.
    pub fn get_replicated(
        &self,
        graph: &Graph,
        device_ids: &[i64],
        counters: &Counters,
    ) -> Result<Arc<Program>> {
        let options = CompileOptions {
            placement: Placement::Replicated {
                device_ids: device_ids.to_vec(),
            },
            xla: self.options.xla.clone(),
        };
        let text = fusion::lower::lower_for(graph, self.target);
        let key = self.key_with(&text, &options.encode());
        if let Some(p) = lock(&self.replicated).get(&key) {
            Counters::add(&counters.memory_hits, 1);
            return Ok(p.clone());
        }
        self.single_flight(
            key,
            counters,
            || self.load_or_compile(key, &text, &options, counters),
            |p| {
                lock(&self.replicated).put(key, p.clone());
            },
        )
    }

    /// Loads or compiles program `key` once however many threads ask for it
    /// at the same time (`load`); `remember` puts it in memory before the
    /// flight ends, so a later request finds it there. A thread that waited
    /// for another's load counts a memory hit.
    fn single_flight(
        &self,
        key: u128,
        counters: &Counters,
        load: impl FnOnce() -> Result<Arc<Executable>>,
        remember: impl FnOnce(&Arc<Program>),
    ) -> Result<Arc<Program>> {
        let flight = self.in_flight.entry(key).or_default().clone();
        let mut loaded_here = false;
        let exe = flight
            .get_or_init(|| {
                loaded_here = true;
                load()
            })
            .clone();
        if !loaded_here {
            // Another thread compiled (or loaded) it while we waited.
            Counters::add(&counters.memory_hits, 1);
        }
        let program = exe.map(|exe| Arc::new(Program { exe }));
        if let Ok(p) = &program {
            remember(p);
        }
        self.in_flight.remove(&key);
        program
    }

    /// Whether programs are kept on disk.
    pub fn has_disk(&self) -> bool {
        self.disk.is_some()
    }

    /// The compiled program for `graph`: from memory, from disk, or compiled.
    pub fn get(&self, graph: &Graph, counters: &Counters) -> Result<Arc<Program>> {
        if let Some(p) = lock(&self.programs).get(graph) {
            Counters::add(&counters.memory_hits, 1);
            return Ok(p.clone());
        }
        let text = fusion::lower::lower_for(graph, self.target);
        let key = self.program_key(&text);
        self.single_flight(
            key,
            counters,
            || self.load_or_compile_explained(key, &text, graph, counters),
            |p| {
                lock(&self.programs).put(graph.clone(), p.clone());
            },
        )
    }

    fn load_or_compile_explained(
        &self,
        key: u128,
        text: &str,
        graph: &Graph,
        counters: &Counters,
    ) -> Result<Arc<Executable>> {
        if let Some(reason) = lock(&self.explainer).explain(key, graph) {
            tracing::warn!(target: "eagertpu::recompile", "{reason}");
            lock(&counters.recompile_reasons).push(reason);
        }
        self.load_or_compile(key, text, &self.options, counters)
    }

    fn load_or_compile(
        &self,
        key: u128,
        text: &str,
        options: &CompileOptions,
        counters: &Counters,
    ) -> Result<Arc<Executable>> {
        // For the profiler: the user's line whose op needed the program (none
        // on a background compile thread).
        let origin = trace::recording().then(crate::origin::foreign).flatten();
        let detail = || format!("{} lines of StableHLO", text.lines().count());
        if let Some(disk) = &self.disk {
            let start_ns = trace::recording().then(trace::now_ns);
            match disk.load(key, text, &self.fingerprint) {
                Lookup::Hit(bytes) => {
                    match Executable::deserialize_and_load(&self.client, &bytes, options) {
                        Ok(exe) => {
                            Counters::add(&counters.disk_hits, 1);
                            if let Some(start_ns) = start_ns {
                                trace::record_since(
                                    trace::Kind::DiskLoad,
                                    start_ns,
                                    origin.as_ref(),
                                    detail(),
                                );
                            }
                            return Ok(Arc::new(exe));
                        }
                        Err(e) => {
                            disk.warn_once(key, &format!("the plugin cannot load it: {e}"));
                            Counters::add(&counters.disk_bad_entries, 1);
                        }
                    }
                }
                Lookup::Bad => Counters::add(&counters.disk_bad_entries, 1),
                Lookup::Miss => {}
            }
        }
        Counters::add(&counters.misses, 1);
        let start = Instant::now();
        let span = trace::span(trace::Kind::Compile, origin.as_ref(), detail);
        let exe = Executable::compile(&self.client, text, options)?;
        drop(span);
        Counters::add(&counters.compiles, 1);
        Counters::add(&counters.compile_nanos, start.elapsed().as_nanos() as u64);
        tracing::debug!(
            target: "eagertpu::compile",
            ms = start.elapsed().as_secs_f64() * 1e3,
            "compiled\n{text}"
        );
        if let Some(disk) = &self.disk {
            match exe
                .serialize()
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    disk.store(key, text, &self.fingerprint, &bytes)
                        .map_err(|e| e.to_string())
                }) {
                Ok(true) => Counters::add(&counters.disk_writes, 1),
                Ok(false) => {}
                Err(e) => disk.warn_once(key, &format!("cannot write it: {e}")),
            }
        }
        Ok(Arc::new(exe))
    }

    /// A new executable of `graph`, compiled and counted nowhere (the hazard
    /// checker's second copy of a program: it must not share the first's
    /// state in the plugin).
    pub fn compile_uncounted(&self, graph: &Graph) -> Result<Executable> {
        Executable::compile(
            &self.client,
            &fusion::lower::lower_for(graph, self.target),
            &self.options,
        )
    }

    /// Number of executables held in memory.
    pub fn executables(&self) -> usize {
        lock(&self.programs).len()
    }
}

/// Explains recompilations: programs with the same op sequence as an earlier
/// one but other input types or attributes.
#[derive(Default)]
struct Explainer {
    /// Op-sequence signature -> the first program compiled with it.
    seen: HashMap<u64, (u128, Graph)>,
    reported: HashSet<(u128, u128)>,
}

/// Programs smaller than this are single ops with their helpers (debug and
/// strict mode): a new shape there is an eager op meeting a new shape, not a
/// recompiled step.
const EXPLAIN_MIN_OPS: usize = 3;
/// At most this many explanations are kept and logged.
const EXPLAIN_MAX: usize = 100;

impl Explainer {
    /// Why `graph` (key `key`) is compiled although a program with the same op
    /// sequence was compiled before: which inputs changed type.
    fn explain(&mut self, key: u128, graph: &Graph) -> Option<String> {
        let ops = graph.nodes().count();
        if ops < EXPLAIN_MIN_OPS || graph.num_params() == 0 || self.reported.len() >= EXPLAIN_MAX {
            return None;
        }
        let skeleton = fx_hash(
            &graph
                .defs()
                .iter()
                .map(|d| match d {
                    Def::Param(_) => ("param", vec![]),
                    Def::Node(n) => (n.op.name(), n.inputs.iter().map(|v| v.0).collect()),
                })
                .collect::<Vec<_>>(),
        );
        let Some((first_key, first)) = self.seen.get(&skeleton) else {
            self.seen.insert(skeleton, (key, graph.clone()));
            return None;
        };
        let old: Vec<&TensorType> = first.param_types().collect();
        let new: Vec<&TensorType> = graph.param_types().collect();
        let changed: Vec<String> = old
            .iter()
            .zip(&new)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, (a, b))| format!("input {i} changed from {a} to {b}"))
            .collect();
        if *first_key == key || changed.is_empty() || !self.reported.insert((*first_key, key)) {
            return None;
        }
        Some(format!(
            "recompiling a {ops}-op program seen before with other input shapes: {}",
            changed.join(", ")
        ))
    }
}
