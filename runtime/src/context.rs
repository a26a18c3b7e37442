//! The process-wide runtime: the plugin, one client, one stream per device,
//! the compile cache and the counters. Started on first use; if starting fails
//! (no plugin, say), every call returns that error.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use fusion::policy::CutReason;
use std::sync::{Arc, OnceLock};

use crate::cache::CompileCache;
use crate::compiler::BackgroundCompiler;
use crate::config::{Config, Mode};
use crate::error::{Error, Result};
use crate::metrics::Counters;
use crate::pjrt::kv::{self, KeyValueStore, KvCallbacks};
use crate::pjrt::locate::{self, PluginKind};
use crate::pjrt::{Client, OptionValue, Plugin};
use crate::stream::{HazardChecker, Stream};

/// What this run is running on: logged once at start, and in every report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub plugin_path: String,
    pub plugin_kind: String,
    pub platform_name: String,
    pub platform_version: String,
    /// The plugin's PJRT C API version, `0.81`.
    pub pjrt_api: String,
    pub stablehlo_current: String,
    pub stablehlo_minimum: String,
    pub xla_version: String,
    pub device_count: usize,
    pub device_kind: String,
    pub mode: Mode,
    /// The on-disk compile cache directory (`None`: off).
    pub cache_dir: Option<String>,
    /// How the host heap treats freed memory: `cached` (kept for reuse, the
    /// CPU plugin's device memory: `EAGERTPU_CPU_HEAP`) or `system`.
    pub cpu_heap: &'static str,
}

impl Manifest {
    /// One line per field.
    pub fn report(&self) -> String {
        format!(
            "plugin            {} ({})\n\
             platform          {} {}\n\
             PJRT C API        {}\n\
             StableHLO         {} (minimum {})\n\
             devices           {} x {}\n\
             mode              {}\n\
             compile cache     {}\n\
             host heap         {}\n",
            self.plugin_path,
            self.plugin_kind,
            self.platform_name,
            self.platform_version,
            self.pjrt_api,
            self.stablehlo_current,
            self.stablehlo_minimum,
            self.device_count,
            self.device_kind,
            self.mode,
            self.cache_dir
                .as_deref()
                .unwrap_or("memory only (EAGERTPU_CACHE_DIR=off)"),
            match self.cpu_heap {
                "cached" => "freed memory kept for reuse (EAGERTPU_CPU_HEAP=cache)",
                _ => "the C library's defaults",
            }
        )
    }
}

pub(crate) struct Runtime {
    /// The current mode (starts as `EAGERTPU_MODE`).
    mode: AtomicU8,
    /// Raise at the first op producing NaN/Inf (starts as `EAGERTPU_CHECK_NAN`).
    pub check_nan: AtomicBool,
    /// Check every launch for buffer hazards (`EAGERTPU_CHECK_HAZARDS`).
    pub hazards: Option<HazardChecker>,
    pub streams: Vec<Stream>,
    pub cache: CompileCache,
    /// Compiles hot fused chunks off the recording thread.
    pub compiler: BackgroundCompiler,
    /// Sightings of a fused chunk before it is compiled.
    pub hot_threshold: u32,
    /// Promote fused chunks at a point fixed by the op stream (see
    /// `stream::tiers`): always with `EAGERTPU_DETERMINISTIC=1`, else as
    /// `set_deterministic` last said.
    pub deterministic_always: bool,
    pub deterministic: AtomicBool,
    /// Replay fused chunks that match one launched before (`EAGERTPU_REPLAY`).
    pub replay: bool,
    /// Refuse CPU fallbacks (`EAGERTPU_FALLBACK=error`).
    pub fallback_is_error: bool,
    /// How long a collective waits for its group (`EAGERTPU_COLLECTIVE_TIMEOUT`).
    pub collective_timeout: std::time::Duration,
    pub counters: Counters,
    pub manifest: Manifest,
}

static RUNTIME: OnceLock<Result<Runtime>> = OnceLock::new();

const MODES: [Mode; 3] = [Mode::Debug, Mode::Strict, Mode::Fused];

impl Runtime {
    pub fn mode(&self) -> Mode {
        MODES[self.mode.load(Ordering::Acquire) as usize % MODES.len()]
    }

    /// The mode ops execute in: debug while the NaN check is on, since it
    /// checks every op's results.
    pub fn effective_mode(&self) -> Mode {
        if self.check_nan() {
            Mode::Debug
        } else {
            self.mode()
        }
    }

    pub fn deterministic(&self) -> bool {
        self.deterministic_always || self.deterministic.load(Ordering::Relaxed)
    }

    pub fn check_nan(&self) -> bool {
        self.check_nan.load(Ordering::Relaxed)
    }

    /// Switches mode; what is pending runs first.
    pub fn set_mode(&self, mode: Mode) -> Result<()> {
        self.cut_all(CutReason::ModeSwitch)?;
        let i = MODES.iter().position(|m| *m == mode).unwrap_or(0);
        self.mode.store(i as u8, Ordering::Release);
        Ok(())
    }

    /// Cuts every stream for `reason`.
    pub fn cut_all(&self, reason: CutReason) -> Result<()> {
        for s in &self.streams {
            s.cut(self, reason)?;
        }
        Ok(())
    }
}

/// This process's place in a multi-process job, and the store its plugin
/// finds the others through (set before the runtime starts).
struct Distributed {
    node_id: usize,
    num_nodes: usize,
    kv: Arc<KvCallbacks>,
}

static DISTRIBUTED: OnceLock<Distributed> = OnceLock::new();

/// Makes this process node `node_id` of `num_nodes` of a job whose plugin
/// clients find each other through `store` (PJRT's distributed client:
/// libtpu and the CUDA plugin call it while the client starts; the CPU plugin
/// takes it and never calls it). Must come before the runtime starts (the
/// first op), once.
pub fn set_distributed_store(
    store: Arc<dyn KeyValueStore>,
    node_id: usize,
    num_nodes: usize,
) -> Result<()> {
    let bad = |message: String| Error::Config {
        what: "distributed store",
        message,
    };
    if node_id >= num_nodes {
        return Err(bad(format!(
            "got node {node_id} of {num_nodes}; expected a node in 0..{num_nodes}"
        )));
    }
    if RUNTIME.get().is_some() {
        return Err(bad(
            "the runtime has already started; set the store before the first tpu op".into(),
        ));
    }
    let kv = Arc::new(KvCallbacks::new(store));
    DISTRIBUTED
        .set(Distributed {
            node_id,
            num_nodes,
            kv,
        })
        .map_err(|_| bad("a store was already set for this process".into()))
}

/// Calls the distributed store's callbacks as a plugin's client does when it
/// starts: every node of the job running this within `timeout` proves the
/// store reaches them all (`pjrt::kv::check_store`).
pub fn check_distributed_store(timeout: std::time::Duration) -> Result<()> {
    let d = DISTRIBUTED.get().ok_or_else(|| Error::Config {
        what: "distributed store",
        message: "no store was set (set_distributed_store)".into(),
    })?;
    kv::check_store(&d.kv, d.node_id, d.num_nodes, timeout).map_err(|f| Error::Config {
        what: "distributed store",
        message: format!("{f:?}"),
    })
}

/// The runtime, started on first call.
pub(crate) fn get() -> Result<&'static Runtime> {
    match RUNTIME.get_or_init(start) {
        Ok(rt) => Ok(rt),
        Err(e) => Err(e.clone()),
    }
}

fn init_logging(filter: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("warn"));
    // An application that installed its own subscriber keeps it.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn start() -> Result<Runtime> {
    let config = Config::from_env()?;
    init_logging(&config.log);
    crate::pjrt::set_wait_spin(config.wait_spin);
    let located = locate::resolve(config.plugin.as_deref())?;
    locate::prepare_environment(located.kind);
    let plugin = Plugin::load(&located.path)?;
    let cpu_heap = match located.kind == PluginKind::Cpu
        && config.cpu_heap_cached
        && crate::pjrt::heap::keep_freed_memory()
    {
        true => "cached",
        false => "system",
    };
    let mut options = vec![];
    if located.kind == PluginKind::Cpu
        && let Some(n) = config.device_count
    {
        options.push(("cpu_device_count", OptionValue::Int(n)));
    }
    let distributed = DISTRIBUTED.get();
    if let Some(d) = distributed
        && located.kind != PluginKind::Cpu
    {
        options.push(("node_id", OptionValue::Int(d.node_id as i64)));
        options.push(("num_nodes", OptionValue::Int(d.num_nodes as i64)));
    }
    let kv = distributed.map(|d| d.kv.clone());
    let client = Client::create_with_store(plugin.clone(), &options, kv)?;
    let devices = client.devices();
    if devices.is_empty() {
        return Err(Error::Config {
            what: "PJRT client",
            message: format!(
                "the {} plugin reports no addressable devices",
                client.platform_name()
            ),
        });
    }
    let mut manifest = manifest(&plugin, &client, located.kind, config.mode);
    manifest.cpu_heap = cpu_heap;
    manifest.cache_dir = config.disk_cache.as_ref().map(|d| {
        let ro = if d.readonly { " (read-only)" } else { "" };
        format!("{}{ro}", d.dir.display())
    });
    tracing::info!(target: "eagertpu::manifest", "EagerTPU run manifest\n{}", manifest.report());
    let streams = devices
        .into_iter()
        .enumerate()
        .map(|(i, d)| Stream::new(i, d, config.window))
        .collect();
    Ok(Runtime {
        cache: CompileCache::new(
            client.clone(),
            config.disk_cache.clone(),
            &config.xla_options,
        ),
        mode: AtomicU8::new(MODES.iter().position(|m| *m == config.mode).unwrap_or(0) as u8),
        check_nan: AtomicBool::new(config.check_nan),
        hazards: config.check_hazards.then(HazardChecker::default),
        compiler: BackgroundCompiler::new(config.compile_threads),
        hot_threshold: config.hot_threshold,
        deterministic_always: config.deterministic,
        deterministic: AtomicBool::new(false),
        replay: config.replay,
        fallback_is_error: config.fallback_is_error,
        collective_timeout: config.collective_timeout,
        streams,
        counters: Counters::default(),
        manifest,
    })
}

fn manifest(plugin: &Arc<Plugin>, client: &Client, kind: PluginKind, mode: Mode) -> Manifest {
    let attr = |name: &str| {
        plugin
            .attribute(name)
            .map(|a| a.to_string())
            .unwrap_or_else(|| "unknown".into())
    };
    let devices = client.devices();
    Manifest {
        plugin_path: plugin.path().display().to_string(),
        plugin_kind: kind.name().to_string(),
        platform_name: client.platform_name().to_string(),
        platform_version: client.platform_version().to_string(),
        pjrt_api: plugin.api_version_string(),
        stablehlo_current: attr("stablehlo_current_version"),
        stablehlo_minimum: attr("stablehlo_minimum_version"),
        xla_version: attr("xla_version"),
        device_count: devices.len(),
        cache_dir: None,
        cpu_heap: "system",
        device_kind: devices
            .first()
            .map(|d| d.kind().to_string())
            .unwrap_or_default(),
        mode,
    }
}
