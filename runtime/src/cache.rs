//! The compile cache: program structure -> StableHLO text -> loaded executable.
//!
//! The first tier is keyed by the `Graph` itself (op kinds, attributes, operand
//! positions and input types; never values) and compares by full equality, so
//! it cannot collide. The second tier is keyed by the emitted text and the
//! plugin's identity, so structurally different graphs that lower to the same
//! program share one executable. Only a miss in both tiers compiles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use fusion::Graph;

use crate::error::Result;
use crate::metrics::Counters;
use crate::pjrt::{Client, CompileOptions, Executable};
use crate::value::lock;

/// (plugin identity, StableHLO text).
type ExecutableKey = (String, Arc<str>);

/// A compiled program.
pub(crate) struct Program {
    pub exe: Arc<Executable>,
}

pub(crate) struct CompileCache {
    client: Client,
    /// Platform name and version plus PJRT API version.
    identity: String,
    programs: Mutex<HashMap<Graph, Arc<Program>>>,
    executables: Mutex<HashMap<ExecutableKey, Arc<Executable>>>,
}

impl CompileCache {
    pub fn new(client: Client) -> CompileCache {
        let identity = format!(
            "{} {} (PJRT C API {})",
            client.platform_name(),
            client.platform_version(),
            client.plugin().api_version_string()
        );
        CompileCache {
            client,
            identity,
            programs: Mutex::default(),
            executables: Mutex::default(),
        }
    }

    /// The compiled program for `graph`, compiling it on a miss.
    pub fn get(&self, graph: &Graph, counters: &Counters) -> Result<Arc<Program>> {
        if let Some(p) = lock(&self.programs).get(graph) {
            Counters::add(&counters.cache_hits, 1);
            return Ok(p.clone());
        }
        let text: Arc<str> = fusion::lower::lower(graph).into();
        let key = (self.identity.clone(), text.clone());
        let cached = lock(&self.executables).get(&key).cloned();
        let exe = match cached {
            Some(exe) => {
                Counters::add(&counters.cache_hits, 1);
                exe
            }
            None => {
                let start = Instant::now();
                let exe = Arc::new(Executable::compile(
                    &self.client,
                    &text,
                    &CompileOptions::Portable,
                )?);
                Counters::add(&counters.compiles, 1);
                Counters::add(&counters.compile_nanos, start.elapsed().as_nanos() as u64);
                tracing::debug!(target: "eagertpu::compile", ms = start.elapsed().as_secs_f64() * 1e3, "compiled\n{text}");
                lock(&self.executables).insert(key, exe.clone());
                exe
            }
        };
        let program = Arc::new(Program { exe });
        lock(&self.programs).insert(graph.clone(), program.clone());
        Ok(program)
    }

    /// Number of distinct executables held.
    pub fn executables(&self) -> usize {
        lock(&self.executables).len()
    }
}
