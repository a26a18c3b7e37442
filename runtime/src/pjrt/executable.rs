//! `Executable`: a compiled, loaded program (`PJRT_LoadedExecutable`).

use std::sync::Arc;

use pjrt_sys::*;

use super::api::{pjrt_call, str_from};
use super::buffer::Buffer;
use super::client::{Client, ClientInner, Device};
use super::event::Event;
use super::live;
use super::options::CompileOptions;
use crate::error::{Error, Result};

/// An owned, loaded executable, destroyed on drop.
pub struct Executable {
    client: Arc<ClientInner>,
    raw: *mut PJRT_LoadedExecutable,
    num_outputs: usize,
    portable: bool,
    /// Replicas one execution spans (1 for a portable program).
    replicas: usize,
}

// SAFETY: a loaded executable may be executed concurrently from several threads
// and destroyed from any thread.
unsafe impl Send for Executable {}
// SAFETY: as above.
unsafe impl Sync for Executable {}

/// An executable's device-independent half (`PJRT_Executable`), owned here only
/// for as long as a query needs it.
struct Unloaded<'a> {
    client: &'a ClientInner,
    raw: *mut PJRT_Executable,
}

impl Drop for Unloaded<'_> {
    fn drop(&mut self) {
        let mut args = PJRT_Executable_Destroy_Args {
            executable: self.raw,
            ..Default::default()
        };
        if let Err(e) = pjrt_call!(self.client.plugin, PJRT_Executable_Destroy, &mut args) {
            tracing::warn!("destroying a PJRT executable: {e}");
        }
    }
}

impl Executable {
    /// Compiles MLIR text (StableHLO) for `options`.
    pub fn compile(client: &Client, mlir: &str, options: &CompileOptions) -> Result<Executable> {
        let inner = &client.inner;
        let format = "mlir";
        let mut program = PJRT_Program::default();
        program.set_struct_size();
        // The plugin only reads `code` when compiling.
        program.code = mlir.as_ptr().cast_mut().cast();
        program.code_size = mlir.len();
        program.format = format.as_ptr().cast();
        program.format_size = format.len();
        let encoded = options.encode();
        let mut args = PJRT_Client_Compile_Args {
            client: inner.raw,
            program: &program,
            compile_options: encoded.as_ptr().cast(),
            compile_options_size: encoded.len(),
            ..Default::default()
        };
        let compiled = pjrt_call!(inner.plugin, PJRT_Client_Compile, &mut args);
        super::exit::rearm_teardown_hook();
        compiled?;
        Executable::loaded(inner.clone(), args.executable, options)
    }

    /// Loads an executable serialized by [`Executable::serialize`] on a plugin
    /// with the same identity.
    pub fn deserialize_and_load(
        client: &Client,
        bytes: &[u8],
        options: &CompileOptions,
    ) -> Result<Executable> {
        let inner = &client.inner;
        let mut args = PJRT_Executable_DeserializeAndLoad_Args {
            client: inner.raw,
            serialized_executable: bytes.as_ptr().cast(),
            serialized_executable_size: bytes.len(),
            ..Default::default()
        };
        let loaded = pjrt_call!(inner.plugin, PJRT_Executable_DeserializeAndLoad, &mut args);
        super::exit::rearm_teardown_hook();
        loaded?;
        Executable::loaded(inner.clone(), args.loaded_executable, options)
    }

    fn loaded(
        client: Arc<ClientInner>,
        raw: *mut PJRT_LoadedExecutable,
        options: &CompileOptions,
    ) -> Result<Executable> {
        live::EXECUTABLES.inc();
        let mut exe = Executable {
            client,
            raw,
            num_outputs: 0,
            portable: options.is_portable(),
            replicas: options.replicas(),
        };
        // On error, `exe` is dropped and the loaded executable destroyed.
        let unloaded = exe.unloaded()?;
        let mut args = PJRT_Executable_NumOutputs_Args {
            executable: unloaded.raw,
            ..Default::default()
        };
        pjrt_call!(exe.client.plugin, PJRT_Executable_NumOutputs, &mut args)?;
        drop(unloaded);
        exe.num_outputs = args.num_outputs;
        Ok(exe)
    }

    fn unloaded(&self) -> Result<Unloaded<'_>> {
        let mut args = PJRT_LoadedExecutable_GetExecutable_Args {
            loaded_executable: self.raw,
            ..Default::default()
        };
        pjrt_call!(
            self.client.plugin,
            PJRT_LoadedExecutable_GetExecutable,
            &mut args
        )?;
        Ok(Unloaded {
            client: &self.client,
            raw: args.executable,
        })
    }

    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The executable's name (from the program's module).
    pub fn name(&self) -> Result<String> {
        let unloaded = self.unloaded()?;
        let mut args = PJRT_Executable_Name_Args {
            executable: unloaded.raw,
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Executable_Name, &mut args)?;
        // SAFETY: the name is owned by the executable, alive until `unloaded` drops.
        Ok(unsafe { str_from(args.executable_name, args.executable_name_size) })
    }

    /// The serialized executable (for the on-disk compilation cache).
    pub fn serialize(&self) -> Result<Vec<u8>> {
        let unloaded = self.unloaded()?;
        let mut args = PJRT_Executable_Serialize_Args {
            executable: unloaded.raw,
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Executable_Serialize, &mut args)?;
        let bytes = if args.serialized_bytes.is_null() {
            vec![]
        } else {
            // SAFETY: the plugin returned `serialized_bytes_size` bytes, owned by
            // `serialized_executable` until we call its deleter below.
            unsafe {
                std::slice::from_raw_parts(
                    args.serialized_bytes.cast::<u8>(),
                    args.serialized_bytes_size,
                )
            }
            .to_vec()
        };
        if let Some(deleter) = args.serialized_executable_deleter {
            // SAFETY: the deleter the plugin gave us, called once on its object.
            unsafe { deleter(args.serialized_executable) };
        }
        Ok(bytes)
    }

    /// Enqueues one execution on `device` with `inputs` (in parameter order).
    /// Returns the output buffers at once and an event completing with the
    /// execution (when the plugin gives one); outputs become readable when it
    /// completes.
    pub fn execute(
        &self,
        inputs: &[&Buffer],
        device: &Device,
    ) -> Result<(Vec<Buffer>, Option<Event>)> {
        self.execute_keeping(inputs, device, &[])
    }

    /// Runs the program like `execute`, but the inputs at `kept` (parameter
    /// indices) are not donated even if the program aliases them to an
    /// output: that output gets fresh memory, the input stays as it is.
    pub fn execute_keeping(
        &self,
        inputs: &[&Buffer],
        device: &Device,
        kept: &[i64],
    ) -> Result<(Vec<Buffer>, Option<Event>)> {
        let raw_inputs: Vec<*mut PJRT_Buffer> = inputs.iter().map(|b| b.raw()).collect();
        let mut raw_outputs: Vec<*mut PJRT_Buffer> = vec![std::ptr::null_mut(); self.num_outputs];
        let mut complete = [std::ptr::null_mut()];
        self.launch(
            &[raw_inputs.as_ptr()],
            raw_inputs.len(),
            &[raw_outputs.as_mut_ptr()],
            &mut complete,
            kept,
            Some(device),
        )?;
        Ok(self.adopt(raw_outputs, complete[0]))
    }

    /// One `PJRT_LoadedExecutable_Execute` over `arg_lists` (one list of
    /// `num_args` buffers per device), filling `out_lists` and `complete`;
    /// a portable program runs on `device` (a replicated one on the devices
    /// it was compiled for).
    fn launch(
        &self,
        arg_lists: &[*const *mut PJRT_Buffer],
        num_args: usize,
        out_lists: &[*mut *mut PJRT_Buffer],
        complete: &mut [*mut PJRT_Event],
        kept: &[i64],
        device: Option<&Device>,
    ) -> Result<()> {
        let mut options = PJRT_ExecuteOptions::default();
        options.set_struct_size();
        if !kept.is_empty() {
            options.non_donatable_input_indices = kept.as_ptr();
            options.num_non_donatable_input_indices = kept.len();
        }
        let mut args = PJRT_LoadedExecutable_Execute_Args {
            executable: self.raw,
            options: &mut options,
            argument_lists: arg_lists.as_ptr(),
            num_devices: arg_lists.len(),
            num_args,
            output_lists: out_lists.as_ptr(),
            device_complete_events: complete.as_mut_ptr(),
            ..Default::default()
        };
        if let (true, Some(device)) = (self.portable, device) {
            args.execute_device = device.raw();
        }
        pjrt_call!(self.client.plugin, PJRT_LoadedExecutable_Execute, &mut args)?;
        Ok(())
    }

    /// One device's outputs and completion event, owned.
    fn adopt(
        &self,
        raw_outputs: Vec<*mut PJRT_Buffer>,
        complete: *mut PJRT_Event,
    ) -> (Vec<Buffer>, Option<Event>) {
        let outputs = raw_outputs
            .into_iter()
            .map(|raw| Buffer::from_raw(self.client.clone(), raw))
            .collect();
        let event =
            (!complete.is_null()).then(|| Event::from_raw(self.client.plugin.clone(), complete));
        (outputs, event)
    }

    /// Runs a replicated program (compiled for `Placement::Replicated`) as
    /// one execution spanning all its devices: `inputs[r]` are replica `r`'s
    /// parameters. Returns each replica's outputs and completion event. One
    /// call launches every replica, so a collective in the program never
    /// waits in the plugin for a replica that another thread has yet to
    /// launch.
    pub fn execute_replicated(
        &self,
        inputs: &[Vec<&Buffer>],
    ) -> Result<Vec<(Vec<Buffer>, Option<Event>)>> {
        let num_args = inputs.first().map_or(0, |i| i.len());
        if self.portable || inputs.len() != self.replicas {
            return Err(Error::Internal(format!(
                "a replicated execution needs one argument list per replica: the program \
                 runs on {} replica(s){}, got {} list(s)",
                self.replicas,
                if self.portable { " (portable)" } else { "" },
                inputs.len()
            )));
        }
        if let Some(r) = inputs.iter().position(|i| i.len() != num_args) {
            return Err(Error::Internal(format!(
                "replica {r} got {} argument(s), replica 0 got {num_args}; every replica \
                 passes the same parameters",
                inputs[r].len()
            )));
        }
        let raw_inputs: Vec<Vec<*mut PJRT_Buffer>> = inputs
            .iter()
            .map(|list| list.iter().map(|b| b.raw()).collect())
            .collect();
        let arg_lists: Vec<*const *mut PJRT_Buffer> =
            raw_inputs.iter().map(|list| list.as_ptr()).collect();
        let mut raw_outputs: Vec<Vec<*mut PJRT_Buffer>> =
            vec![vec![std::ptr::null_mut(); self.num_outputs]; self.replicas];
        let out_lists: Vec<*mut *mut PJRT_Buffer> = raw_outputs
            .iter_mut()
            .map(|list| list.as_mut_ptr())
            .collect();
        let mut complete: Vec<*mut PJRT_Event> = vec![std::ptr::null_mut(); self.replicas];
        self.launch(&arg_lists, num_args, &out_lists, &mut complete, &[], None)?;
        Ok(raw_outputs
            .into_iter()
            .zip(complete)
            .map(|(outputs, done)| self.adopt(outputs, done))
            .collect())
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        let mut args = PJRT_LoadedExecutable_Destroy_Args {
            executable: self.raw,
            ..Default::default()
        };
        if let Err(e) = pjrt_call!(self.client.plugin, PJRT_LoadedExecutable_Destroy, &mut args) {
            tracing::warn!("destroying a PJRT loaded executable: {e}");
        }
        live::EXECUTABLES.dec();
    }
}
