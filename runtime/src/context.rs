//! The process-wide runtime: the plugin, one client, one stream per device,
//! the compile cache and the counters. Started on first use; if starting fails
//! (no plugin, say), every call returns that error.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use crate::cache::CompileCache;
use crate::config::{Config, Mode};
use crate::error::{Error, Result};
use crate::metrics::Counters;
use crate::pjrt::locate::{self, PluginKind};
use crate::pjrt::{Client, OptionValue, Plugin};
use crate::stream::Stream;

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
             mode              {}\n",
            self.plugin_path,
            self.plugin_kind,
            self.platform_name,
            self.platform_version,
            self.pjrt_api,
            self.stablehlo_current,
            self.stablehlo_minimum,
            self.device_count,
            self.device_kind,
            self.mode
        )
    }
}

pub(crate) struct Runtime {
    pub config: Config,
    /// Raise at the first op producing NaN/Inf (starts as `EAGERTPU_CHECK_NAN`).
    pub check_nan: AtomicBool,
    pub streams: Vec<Stream>,
    pub cache: CompileCache,
    pub counters: Counters,
    pub manifest: Manifest,
}

static RUNTIME: OnceLock<Result<Runtime>> = OnceLock::new();

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
    if config.mode != Mode::Debug {
        return Err(Error::Config {
            what: "EAGERTPU_MODE",
            message: format!(
                "mode `{}` is not available yet; use EAGERTPU_MODE=debug",
                config.mode
            ),
        });
    }
    let located = locate::resolve(config.plugin.as_deref())?;
    locate::prepare_environment(located.kind);
    let plugin = Plugin::load(&located.path)?;
    let mut options = vec![];
    if located.kind == PluginKind::Cpu
        && let Some(n) = config.device_count
    {
        options.push(("cpu_device_count", OptionValue::Int(n)));
    }
    let client = Client::create(plugin.clone(), &options)?;
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
    let manifest = manifest(&plugin, &client, located.kind, config.mode);
    tracing::info!(target: "eagertpu::manifest", "EagerTPU run manifest\n{}", manifest.report());
    let streams = devices
        .into_iter()
        .enumerate()
        .map(|(i, d)| Stream::new(i, d))
        .collect();
    Ok(Runtime {
        cache: CompileCache::new(client.clone()),
        check_nan: AtomicBool::new(config.check_nan),
        config,
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
        device_kind: devices
            .first()
            .map(|d| d.kind().to_string())
            .unwrap_or_default(),
        mode,
    }
}
