//! `eagertpu-info`: which PJRT plugin EagerTPU finds, what it reports, and
//! whether a client starts on it. For bug reports and set-up checks.
//!
//! ```text
//! eagertpu-info            # plugin, API version, attributes, client and devices
//! eagertpu-info --probe    # also: argument-struct sizes the plugin expects vs ours
//! ```
//! Honours `EAGERTPU_PJRT_PLUGIN` and `EAGERTPU_DEVICE_COUNT`. Exit status: 0 when
//! a client starts, 1 when no plugin loads, 2 when the client fails to start.

use std::process::ExitCode;

use eagertpu::internals::pjrt::locate::{self, PluginKind};
use eagertpu::internals::pjrt::{Client, OptionValue, Plugin, probe};

fn main() -> ExitCode {
    let probe_sizes = std::env::args().any(|a| a == "--probe");
    let choice = std::env::var("EAGERTPU_PJRT_PLUGIN").ok();
    let located = match locate::resolve(choice.as_deref()) {
        Ok(l) => l,
        Err(e) => {
            println!("plugin: error: {e}");
            return ExitCode::from(1);
        }
    };
    println!(
        "plugin: {} ({})",
        located.path.display(),
        located.kind.name()
    );
    locate::prepare_environment(located.kind);
    let plugin = match Plugin::load(&located.path) {
        Ok(p) => p,
        Err(e) => {
            println!("load: error: {e}");
            return ExitCode::from(1);
        }
    };
    println!("pjrt_api: {}", plugin.api_version_string());
    println!("function_table_bytes: {}", plugin.table_size());
    for (name, value) in plugin.attributes() {
        println!("attribute {name}: {value}");
    }
    if probe_sizes {
        let mut too_small = 0;
        for r in probe::struct_sizes(&plugin) {
            let theirs = r.plugin.map_or("?".to_string(), |n| n.to_string());
            let ok = r.plugin.is_none_or(|n| r.ours >= n);
            too_small += !ok as usize;
            println!(
                "struct {}: ours {} plugin {} {}",
                r.args,
                r.ours,
                theirs,
                if ok { "ok" } else { "TOO SMALL" }
            );
        }
        println!("structs_too_small: {too_small}");
    }
    let mut options = vec![];
    if located.kind == PluginKind::Cpu
        && let Some(n) = std::env::var("EAGERTPU_DEVICE_COUNT")
            .ok()
            .and_then(|n| n.parse().ok())
    {
        options.push(("cpu_device_count", OptionValue::Int(n)));
    }
    let start = std::time::Instant::now();
    match Client::create(plugin, &options) {
        Ok(client) => {
            println!(
                "client: ok {} {} ({:.0} ms)",
                client.platform_name(),
                client.platform_version(),
                start.elapsed().as_secs_f64() * 1e3
            );
            for d in client.devices() {
                println!(
                    "device {}: id {} kind {} ({})",
                    d.index(),
                    d.id(),
                    d.kind(),
                    d.description()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!(
                "client: error after {:.0} ms: {e}",
                start.elapsed().as_secs_f64() * 1e3
            );
            ExitCode::from(2)
        }
    }
}
