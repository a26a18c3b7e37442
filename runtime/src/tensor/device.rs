//! `Device`: a device of the loaded plugin, and where new tensors are made.

use super::Tensor;
use crate::context;
use crate::error::{Error, Result};
use crate::marker::Marker;
use crate::pjrt::MemoryStats;
use crate::storage::{self, StorageId};
use crate::stream::Stream;

/// A device of the loaded PJRT plugin (a TPU core, a GPU, a CPU "device").
#[derive(Clone, Copy)]
pub struct Device {
    pub(super) stream: &'static Stream,
}

impl Device {
    pub(super) fn from_stream(stream: &'static Stream) -> Device {
        Device { stream }
    }

    /// The device at `index` among the plugin's addressable devices.
    pub fn get(index: usize) -> Result<Device> {
        let rt = context::get()?;
        rt.streams
            .get(index)
            .map(|stream| Device { stream })
            .ok_or_else(|| Error::Config {
                what: "device",
                message: format!(
                    "device index {index} is out of range: {} device(s) available (EAGERTPU_DEVICE_COUNT sets the CPU plugin's count)",
                    rt.streams.len()
                ),
            })
    }

    /// Every addressable device.
    pub fn all() -> Result<Vec<Device>> {
        let rt = context::get()?;
        Ok(rt.streams.iter().map(|stream| Device { stream }).collect())
    }

    /// Number of addressable devices.
    pub fn count() -> Result<usize> {
        Ok(context::get()?.streams.len())
    }

    /// Position among the addressable devices.
    pub fn index(&self) -> usize {
        self.stream.index
    }

    /// The device kind reported by the plugin.
    pub fn kind(&self) -> &str {
        self.stream.device.kind()
    }

    /// Opens a call of compiled graph `id` (`torch.compile`) on this thread:
    /// what is pending runs first, then the ops recorded until
    /// [`Device::graph_end`] are one chunk, compiled at once and replayed at
    /// the graph's next calls. False in debug mode, where nothing opens and
    /// the graph's ops run one by one.
    pub fn graph_begin(&self, id: u64) -> Result<bool> {
        self.stream.graph_begin(context::get()?, id)
    }

    /// Closes this thread's open graph call and launches its ops as one
    /// program (nothing open: nothing to do).
    pub fn graph_end(&self) -> Result<()> {
        self.stream.graph_end(context::get()?)
    }

    /// After a call of graph `id` through a scope, with the tensors it read
    /// and returned: makes its later calls direct ([`Device::graph_call`])
    /// if that call ran as one chunk of the graph's own ops (no donation;
    /// index checks in the flag it exports) whose parameters were those
    /// inputs, scalars and random keys, and whose results are those outputs.
    /// True if it did.
    pub fn graph_capture(&self, id: u64, inputs: &[Tensor], outputs: &[Tensor]) -> Result<bool> {
        self.graph_capture_updating(id, inputs, outputs, &[])
    }

    /// [`Device::graph_capture`], with `updates`: `(input, output)` pairs,
    /// each an input the caller updates with that output after every call
    /// (aot_autograd's mutated inputs: an optimizer's state), which
    /// [`Device::graph_call_on_storages`] donates to it where nothing else
    /// holds it.
    pub fn graph_capture_updating(
        &self,
        id: u64,
        inputs: &[Tensor],
        outputs: &[Tensor],
        updates: &[(usize, usize)],
    ) -> Result<bool> {
        let values = |ts: &[Tensor]| ts.iter().map(|t| t.value.clone()).collect::<Vec<_>>();
        self.stream.graph_capture(
            context::get()?,
            id,
            &values(inputs),
            &values(outputs),
            updates,
        )
    }

    /// How many random draws a direct call of captured graph `id` makes:
    /// the keys [`Device::graph_call`] takes. `None` if it has no direct call.
    pub fn graph_draws(&self, id: u64) -> Result<Option<usize>> {
        Ok(self.stream.graph_draws(context::get()?, id))
    }

    /// Calls captured graph `id` directly: its program runs on `inputs`, with
    /// `keys` (one per draw, [`Device::graph_draws`]) for its random draws;
    /// nothing is recorded. `None` if it has no direct call, or the inputs'
    /// types differ from the captured ones, or the keys are not one per draw
    /// (call it through a scope then).
    pub fn graph_call(
        &self,
        id: u64,
        inputs: &[Tensor],
        keys: &[(u64, u64)],
    ) -> Result<Option<Vec<Tensor>>> {
        self.call_graph(id, inputs, keys, None)
    }

    /// [`Device::graph_call`] on inputs that are the contents of PyTorch
    /// allocations (`storages`, one per input), each held `held` more times
    /// by the caller (its handles): an input the graph updates
    /// ([`Device::graph_capture_updating`]) that nothing else holds is
    /// donated to its new value, which its allocation then holds.
    pub fn graph_call_on_storages(
        &self,
        id: u64,
        inputs: &[Tensor],
        keys: &[(u64, u64)],
        storages: &[StorageId],
        held: usize,
    ) -> Result<Option<Vec<Tensor>>> {
        if storages.len() != inputs.len() {
            return Err(Error::Internal(format!(
                "compiled graph {id}: {} inputs but {} storages",
                inputs.len(),
                storages.len()
            )));
        }
        self.call_graph(id, inputs, keys, Some((storages, held)))
    }

    fn call_graph(
        &self,
        id: u64,
        inputs: &[Tensor],
        keys: &[(u64, u64)],
        storages: Option<(&[StorageId], usize)>,
    ) -> Result<Option<Vec<Tensor>>> {
        let values: Vec<_> = inputs.iter().map(|t| t.value.clone()).collect();
        // `values` holds each input once more.
        let held = storages.map(|(_, held)| held + 1);
        let Some(results) = self
            .stream
            .graph_call(context::get()?, id, &values, keys, held)?
        else {
            return Ok(None);
        };
        if let Some((storages, _)) = storages {
            for (k, new) in results.updated {
                let new = Tensor::new(new, self.stream);
                if !storage::replace_contents(storages[k], &values[k], new)? {
                    return Err(Error::Internal(format!(
                        "compiled graph {id}: its input {k}, donated, is not the contents of allocation {}",
                        storages[k]
                    )));
                }
            }
        }
        Ok(Some(
            results
                .outputs
                .into_iter()
                .map(|v| Tensor::new(v, self.stream))
                .collect(),
        ))
    }

    /// Memory in use, when the plugin reports it (libtpu and CUDA do; the XLA
    /// CPU plugin does not, which is an error naming the missing call).
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        self.stream.device.memory_stats()
    }

    /// The plugin's memory statistics, `None` when it keeps none (its
    /// `PJRT_Device_MemoryStats` is unimplemented or absent, as on the XLA
    /// CPU plugin); any other failure is an error.
    pub fn reported_memory(&self) -> Result<Option<MemoryStats>> {
        const UNIMPLEMENTED: i32 = 12;
        match self.memory_stats() {
            Ok(m) => Ok(Some(m)),
            Err(Error::Unavailable { .. }) => Ok(None),
            Err(Error::Pjrt(e)) if e.code.0 == UNIMPLEMENTED => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Records an event after the work issued so far on this device
    /// (`torch.tpu.Event.record`); with `timing`, one that notes when that
    /// work finished ([`Marker::elapsed_ms`]).
    pub fn record_event(&self, timing: bool) -> Result<Marker> {
        self.stream.record_marker(context::get()?, timing)
    }

    /// The name of the plugin's platform (`cpu`, `tpu`, `cuda`).
    pub fn platform(&self) -> Result<String> {
        Ok(context::get()?.manifest.platform_name.clone())
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.stream, other.stream)
    }
}

impl Eq for Device {}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.stream.device)
    }
}

/// The device new tensors go to by default: device 0.
pub fn default_device() -> Result<Device> {
    Device::get(0)
}
