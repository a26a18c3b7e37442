//! Counters of what the runtime did, cheap enough for the op path, and the
//! report users read.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fusion::policy::CutReason;

use crate::lock;
use crate::origin::Origin;

#[derive(Default)]
pub(crate) struct Counters {
    pub ops_recorded: AtomicU64,
    pub memory_hits: AtomicU64,
    pub disk_hits: AtomicU64,
    pub misses: AtomicU64,
    pub compiles: AtomicU64,
    pub compile_nanos: AtomicU64,
    pub disk_writes: AtomicU64,
    pub disk_bad_entries: AtomicU64,
    pub executions: AtomicU64,
    pub chunks: [AtomicU64; CutReason::ALL.len()],
    pub transfers_to_device: AtomicU64,
    pub bytes_to_device: AtomicU64,
    pub transfers_to_host: AtomicU64,
    pub bytes_to_host: AtomicU64,
    pub host_syncs: AtomicU64,
    pub donated_buffers: AtomicU64,
    pub donations_blocked_by_readers: AtomicU64,
    pub hazard_checks: AtomicU64,
    pub lifted_scalars: AtomicU64,
    pub chunk_keys: AtomicU64,
    pub chunks_op_by_op: AtomicU64,
    pub chunks_op_by_op_while_compiling: AtomicU64,
    pub chunks_split: AtomicU64,
    pub drifting_calls: AtomicU64,
    pub background_compiles: AtomicU64,
    pub promotions: AtomicU64,
    pub replayed_chunks: AtomicU64,
    pub replayed_ops: AtomicU64,
    pub replay_misses: AtomicU64,
    pub launcher_chunks: AtomicU64,
    pub launcher_paced: AtomicU64,
    pub compiled_graph_calls: AtomicU64,
    pub direct_graph_calls: AtomicU64,
    /// Collectives run, and collectives that failed every rank (a mismatch,
    /// a missing rank, a failed input).
    pub collectives: AtomicU64,
    pub collective_errors: AtomicU64,
    pub recompile_reasons: Mutex<Vec<String>>,
    /// CPU fallbacks by op (a caller that runs an op on the CPU for lack of
    /// a kernel reports it: `crate::note_fallback`).
    pub fallbacks: Mutex<BTreeMap<String, u64>>,
    /// Host syncs by the call site that made them.
    pub host_sync_sites: Mutex<HashMap<Arc<str>, u64>>,
}

impl Counters {
    #[inline]
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A host sync (a wait for the device to read a value) made at `site`.
    pub fn host_sync(&self, site: Origin) {
        Counters::add(&self.host_syncs, 1);
        let site: Arc<str> = match site {
            Origin::Foreign(s) => s,
            Origin::Rust(l) => Arc::from(l.to_string()),
        };
        *lock(&self.host_sync_sites).entry(site).or_default() += 1;
    }

    pub fn cut(&self, reason: CutReason) {
        Counters::add(&self.chunks[reason.index()], 1);
    }

    pub fn snapshot(&self, cached_executables: usize) -> Metrics {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Metrics {
            ops_recorded: get(&self.ops_recorded),
            compiles: get(&self.compiles),
            compile_seconds: get(&self.compile_nanos) as f64 * 1e-9,
            memory_hits: get(&self.memory_hits),
            disk_hits: get(&self.disk_hits),
            misses: get(&self.misses),
            disk_writes: get(&self.disk_writes),
            disk_bad_entries: get(&self.disk_bad_entries),
            executions: get(&self.executions),
            chunks: CutReason::ALL
                .iter()
                .map(|r| (r.name(), get(&self.chunks[r.index()])))
                .collect(),
            transfers_to_device: get(&self.transfers_to_device),
            bytes_to_device: get(&self.bytes_to_device),
            transfers_to_host: get(&self.transfers_to_host),
            bytes_to_host: get(&self.bytes_to_host),
            host_syncs: get(&self.host_syncs),
            donated_buffers: get(&self.donated_buffers),
            donations_blocked_by_readers: get(&self.donations_blocked_by_readers),
            hazard_checks: get(&self.hazard_checks),
            lifted_scalars: get(&self.lifted_scalars),
            chunk_keys: get(&self.chunk_keys),
            chunks_op_by_op: get(&self.chunks_op_by_op),
            chunks_op_by_op_while_compiling: get(&self.chunks_op_by_op_while_compiling),
            chunks_split: get(&self.chunks_split),
            drifting_calls: get(&self.drifting_calls),
            background_compiles: get(&self.background_compiles),
            compiling_in_background: 0,
            promotions: get(&self.promotions),
            replayed_chunks: get(&self.replayed_chunks),
            replayed_ops: get(&self.replayed_ops),
            replay_misses: get(&self.replay_misses),
            launcher_chunks: get(&self.launcher_chunks),
            launcher_paced: get(&self.launcher_paced),
            compiled_graph_calls: get(&self.compiled_graph_calls),
            direct_graph_calls: get(&self.direct_graph_calls),
            collectives: get(&self.collectives),
            collective_errors: get(&self.collective_errors),
            collectives_waiting: crate::tensor::group::waiting(),
            cached_executables,
            live_buffers: crate::pjrt::live::BUFFERS.get(),
            live_executables: crate::pjrt::live::EXECUTABLES.get(),
            recompile_reasons: lock(&self.recompile_reasons).clone(),
            fallbacks: lock(&self.fallbacks)
                .iter()
                .map(|(op, n)| (op.clone(), *n))
                .collect(),
            host_syncs_by_site: {
                let mut sites: Vec<(String, u64)> = lock(&self.host_sync_sites)
                    .iter()
                    .map(|(s, n)| (s.to_string(), *n))
                    .collect();
                sites.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                sites
            },
            op_timing: crate::timing::snapshot(),
        }
    }
}

/// A snapshot of the runtime's counters (`eagertpu::metrics()`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Ops recorded by the API (including internal helper ops).
    pub ops_recorded: u64,
    /// Programs compiled by the plugin.
    pub compiles: u64,
    pub compile_seconds: f64,
    /// Programs found in the in-memory cache.
    pub memory_hits: u64,
    /// Programs loaded from the on-disk cache.
    pub disk_hits: u64,
    /// Programs found in neither tier (each is compiled).
    pub misses: u64,
    /// Entries written to the on-disk cache.
    pub disk_writes: u64,
    /// On-disk entries that could not be used (corrupted, truncated, foreign).
    pub disk_bad_entries: u64,
    /// Chunks executed.
    pub executions: u64,
    /// Chunks cut, by trigger (`every_op`, `host_read`, `period`, ...).
    pub chunks: Vec<(&'static str, u64)>,
    pub transfers_to_device: u64,
    pub bytes_to_device: u64,
    pub transfers_to_host: u64,
    pub bytes_to_host: u64,
    /// Times the host waited for the device to read a value.
    pub host_syncs: u64,
    /// Input buffers donated to an output (updated in place).
    pub donated_buffers: u64,
    /// Dead inputs not donated because an execution that reads them, or a
    /// host read, had not finished (their update got fresh memory instead).
    pub donations_blocked_by_readers: u64,
    /// Launches checked by `EAGERTPU_CHECK_HAZARDS=1`.
    pub hazard_checks: u64,
    /// Scalars passed as parameters instead of being compiled in.
    pub lifted_scalars: u64,
    /// Distinct fused chunks seen (a loop that settled adds none).
    pub chunk_keys: u64,
    /// Fused chunks run as their ops one by one because their program was
    /// not ready (not yet hot, or compiling).
    pub chunks_op_by_op: u64,
    /// Of those, chunks whose program was compiling in the background.
    pub chunks_op_by_op_while_compiling: u64,
    /// Fused chunks whose calls of changing shapes ran apart from the rest
    /// (a decode step reading a growing mask: the rest keeps its program).
    pub chunks_split: u64,
    /// Calls launched as they were recorded, in fused mode, while the
    /// stream's sizes changed at every iteration (`fusion::policy::SizeDrift`).
    pub drifting_calls: u64,
    /// Fused programs compiled (or loaded) by the background compile pool.
    pub background_compiles: u64,
    /// Fused programs the compile pool is building now (a gauge).
    pub compiling_in_background: u64,
    /// Chunks that ran op by op and then, their program ready, as one program.
    pub promotions: u64,
    /// Fused chunks launched by trace-guarded replay: their ops matched a
    /// chunk launched before, op for op, so they were bound to its program's
    /// parameters without building, hashing or looking up a graph.
    pub replayed_chunks: u64,
    /// Ops in those chunks (each recorded without type inference).
    pub replayed_ops: u64,
    /// Chunks whose ops matched a replay plan but whose binding did not (a
    /// tensor held elsewhere, two arguments now one tensor): built in full.
    pub replay_misses: u64,
    /// Fused chunks cut by the window (period and length cuts) and handed to
    /// the stream's launcher thread, which called the plugin while the
    /// recording thread went on (`stream/launcher.rs`).
    pub launcher_chunks: u64,
    /// Those the launcher was polling for when they came (at the pace of
    /// the loop's cuts): the recording thread woke no one.
    pub launcher_paced: u64,
    /// Calls of compiled graphs (`torch.compile`), each one chunk of its own
    /// (in debug mode, none: a graph's ops run one by one there).
    pub compiled_graph_calls: u64,
    /// Those that ran their program directly on the inputs' buffers, with
    /// no op recorded (`graphs.rs`).
    pub direct_graph_calls: u64,
    /// Collectives run across a process group's ranks.
    pub collectives: u64,
    /// Collectives that failed every rank (a mismatch, a missing rank).
    pub collective_errors: u64,
    /// Where ranks wait now: one line per collective some ranks are waiting
    /// at, naming each waiting rank's call and line, how long it has waited,
    /// and the ranks missing (with the last collective each finished).
    pub collectives_waiting: Vec<String>,
    /// Executables held by the in-memory cache.
    pub cached_executables: usize,
    /// Device buffers alive now.
    pub live_buffers: i64,
    /// Loaded executables alive now.
    pub live_executables: i64,
    /// Why programs seen before were compiled again (once per pair).
    pub recompile_reasons: Vec<String>,
    /// CPU fallbacks by op name, sorted by name.
    pub fallbacks: Vec<(String, u64)>,
    /// Host syncs by call site (`file:line`), the most frequent first.
    pub host_syncs_by_site: Vec<(String, u64)>,
    /// (stage, calls, nanoseconds) of the op path's stages, counted while
    /// `EAGERTPU_OP_TIMING=1` (`runtime::timing`); zeros otherwise.
    pub op_timing: Vec<(&'static str, u64, u64)>,
}

impl Metrics {
    /// Cache hits over both tiers.
    pub fn cache_hits(&self) -> u64 {
        self.memory_hits + self.disk_hits
    }

    /// Chunks cut for `reason` (a `CutReason` name, e.g. `"host_read"`).
    pub fn chunks_cut(&self, reason: &str) -> u64 {
        self.chunks
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }

    /// The counters as one JSON object (numbers as numbers; `chunks` by cut
    /// reason; `recompile_reasons` as strings).
    pub fn to_json(&self) -> String {
        let chunks: Vec<String> = self
            .chunks
            .iter()
            .map(|(r, n)| format!("\"{r}\": {n}"))
            .collect();
        let reasons: Vec<String> = self
            .recompile_reasons
            .iter()
            .map(|r| json_string(r))
            .collect();
        let counted = |pairs: &[(String, u64)]| -> String {
            pairs
                .iter()
                .map(|(k, n)| format!("{}: {n}", json_string(k)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let timing: Vec<String> = self
            .op_timing
            .iter()
            .map(|(s, calls, nanos)| format!("\"{s}\": {{\"calls\": {calls}, \"nanos\": {nanos}}}"))
            .collect();
        format!(
            "{{\"ops_recorded\": {}, \"compiles\": {}, \"compile_seconds\": {:.6}, \
             \"memory_hits\": {}, \"disk_hits\": {}, \"cache_hits\": {}, \"misses\": {}, \
             \"disk_writes\": {}, \"disk_bad_entries\": {}, \"executions\": {}, \"chunks\": {{{}}}, \
             \"transfers_to_device\": {}, \"bytes_to_device\": {}, \"transfers_to_host\": {}, \
             \"bytes_to_host\": {}, \"host_syncs\": {}, \"donated_buffers\": {}, \"donations_blocked_by_readers\": {}, \
             \"hazard_checks\": {}, \"lifted_scalars\": {}, \"chunk_keys\": {}, \
             \"chunks_op_by_op\": {}, \"chunks_op_by_op_while_compiling\": {}, \"chunks_split\": {}, \"drifting_calls\": {}, \
             \"background_compiles\": {}, \"compiling_in_background\": {}, \"promotions\": {}, \
             \"replayed_chunks\": {}, \"replayed_ops\": {}, \"replay_misses\": {}, \"launcher_chunks\": {}, \"launcher_paced\": {}, \
             \"compiled_graph_calls\": {}, \"direct_graph_calls\": {}, \"collectives\": {}, \"collective_errors\": {}, \"collectives_waiting\": [{}], \
             \"cached_executables\": {}, \"live_buffers\": {}, \"live_executables\": {}, \
             \"recompile_reasons\": [{}], \"fallbacks\": {{{}}}, \"host_syncs_by_site\": {{{}}}, \
             \"op_timing\": {{{}}}}}",
            self.ops_recorded,
            self.compiles,
            self.compile_seconds,
            self.memory_hits,
            self.disk_hits,
            self.cache_hits(),
            self.misses,
            self.disk_writes,
            self.disk_bad_entries,
            self.executions,
            chunks.join(", "),
            self.transfers_to_device,
            self.bytes_to_device,
            self.transfers_to_host,
            self.bytes_to_host,
            self.host_syncs,
            self.donated_buffers,
            self.donations_blocked_by_readers,
            self.hazard_checks,
            self.lifted_scalars,
            self.chunk_keys,
            self.chunks_op_by_op,
            self.chunks_op_by_op_while_compiling,
            self.chunks_split,
            self.drifting_calls,
            self.background_compiles,
            self.compiling_in_background,
            self.promotions,
            self.replayed_chunks,
            self.replayed_ops,
            self.replay_misses,
            self.launcher_chunks,
            self.launcher_paced,
            self.compiled_graph_calls,
            self.direct_graph_calls,
            self.collectives,
            self.collective_errors,
            self.collectives_waiting
                .iter()
                .map(|w| json_string(w))
                .collect::<Vec<_>>()
                .join(", "),
            self.cached_executables,
            self.live_buffers,
            self.live_executables,
            reasons.join(", "),
            counted(&self.fallbacks),
            counted(&self.host_syncs_by_site),
            timing.join(", ")
        )
    }

    /// A human-readable report.
    pub fn report(&self) -> String {
        let chunks: Vec<String> = self
            .chunks
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        let mut s = format!(
            "ops recorded        {}\n\
             chunks executed     {} (cut by: {})\n\
             compiles            {} ({:.3} s)\n\
             cache               {} memory hits, {} disk hits, {} misses, {} disk writes, {} bad disk entries\n\
             to device           {} transfers, {} bytes\n\
             to host             {} transfers, {} bytes, {} host syncs\n\
             donated buffers     {} ({} blocked by unfinished readers)\n\
             hazard checks       {}\n\
             lifted scalars      {}\n\
             fused chunk keys    {} ({} chunks run op by op, {} while compiling; {} promoted; {} split by changing shapes; {} calls launched as recorded while sizes drift)\n\
             background compiles {} ({} compiling now)\n\
             replayed            {} chunks, {} ops ({} misses)\n\
             launcher thread     {} chunks ({} polled for at the loop's pace)\n\
             compiled graph calls {} ({} direct)\n\
             collectives         {} ({} failed)\n\
             cached executables  {}\n\
             live buffers        {}\n\
             live executables    {}\n",
            self.ops_recorded,
            self.executions,
            if chunks.is_empty() {
                "-".into()
            } else {
                chunks.join(", ")
            },
            self.compiles,
            self.compile_seconds,
            self.memory_hits,
            self.disk_hits,
            self.misses,
            self.disk_writes,
            self.disk_bad_entries,
            self.transfers_to_device,
            self.bytes_to_device,
            self.transfers_to_host,
            self.bytes_to_host,
            self.host_syncs,
            self.donated_buffers,
            self.donations_blocked_by_readers,
            self.hazard_checks,
            self.lifted_scalars,
            self.chunk_keys,
            self.chunks_op_by_op,
            self.chunks_op_by_op_while_compiling,
            self.promotions,
            self.chunks_split,
            self.drifting_calls,
            self.background_compiles,
            self.compiling_in_background,
            self.replayed_chunks,
            self.replayed_ops,
            self.replay_misses,
            self.launcher_chunks,
            self.launcher_paced,
            self.compiled_graph_calls,
            self.direct_graph_calls,
            self.collectives,
            self.collective_errors,
            self.cached_executables,
            self.live_buffers,
            self.live_executables
        );
        for w in &self.collectives_waiting {
            s += &format!("  waiting: {w}\n");
        }
        for r in &self.recompile_reasons {
            s += &format!("recompiled          {r}\n");
        }
        let fallbacks: u64 = self.fallbacks.iter().map(|(_, n)| n).sum();
        s += &format!("cpu fallbacks       {fallbacks}\n");
        for (op, n) in &self.fallbacks {
            s += &format!("  {op}: {n}\n");
        }
        let syncs: u64 = self.host_syncs_by_site.iter().map(|(_, n)| n).sum();
        s += &format!("host syncs by site  {syncs}\n");
        for (site, n) in self.host_syncs_by_site.iter().take(20) {
            s += &format!("  {site}: {n}\n");
        }
        s
    }
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
