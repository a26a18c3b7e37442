//! `Client` and `Device`: one PJRT client per plugin, and its addressable devices.

use std::ffi::CString;
use std::sync::Arc;

use pjrt_sys::*;

use super::api::{OptionValue, Plugin, named_values, pjrt_call, str_from};
use super::options::{CompileOptions, Placement, required_xla_options, tuned_xla_options};
use crate::error::Result;

/// Owns a `PJRT_Client`; shared by every buffer and executable made from it.
pub(super) struct ClientInner {
    pub(super) plugin: Arc<Plugin>,
    pub(super) raw: *mut PJRT_Client,
    platform_name: String,
    platform_version: String,
    devices: Vec<DeviceInfo>,
    /// The key-value store the plugin may call while the client lives.
    _kv: Option<Arc<super::kv::KvCallbacks>>,
}

impl ClientInner {
    /// Device memory is ordinary host memory holding dense row-major arrays
    /// (the XLA CPU plugin): a host read of a ready buffer is a `memcpy`.
    pub(super) fn memory_is_host(&self) -> bool {
        self.platform_name == "cpu"
    }
}

// SAFETY: a PJRT client is thread-safe; every C API call on it may be made from
// any thread.
unsafe impl Send for ClientInner {}
// SAFETY: as above.
unsafe impl Sync for ClientInner {}

#[derive(Debug, Clone)]
struct DeviceInfo {
    raw: *mut PJRT_Device,
    id: i32,
    kind: String,
    description: String,
}

/// A PJRT client.
#[derive(Clone)]
pub struct Client {
    pub(super) inner: Arc<ClientInner>,
}

impl Client {
    /// Creates a client with the given plugin-specific create options
    /// (`cpu_device_count` for the CPU plugin, for example).
    pub fn create(plugin: Arc<Plugin>, options: &[(&str, OptionValue)]) -> Result<Client> {
        Client::create_with_store(plugin, options, None)
    }

    /// A client whose plugin finds the job's other processes through `kv`
    /// (PJRT's distributed client: libtpu, the CUDA plugin).
    pub fn create_with_store(
        plugin: Arc<Plugin>,
        options: &[(&str, OptionValue)],
        kv: Option<Arc<super::kv::KvCallbacks>>,
    ) -> Result<Client> {
        let owned: Vec<(CString, OptionValue)> = options
            .iter()
            .map(|(k, v)| (CString::new(*k).unwrap_or_default(), v.clone()))
            .collect();
        let mut strings = vec![];
        let values = named_values(&owned, &mut strings);
        let mut args = PJRT_Client_Create_Args {
            create_options: values.as_ptr(),
            num_options: values.len(),
            ..Default::default()
        };
        if let Some(kv) = &kv {
            kv.install(&mut args);
        }
        pjrt_call!(plugin, PJRT_Client_Create, &mut args)?;
        let mut inner = ClientInner {
            plugin,
            raw: args.client,
            platform_name: String::new(),
            platform_version: String::new(),
            devices: vec![],
            _kv: kv,
        };
        // From here on, `inner` destroys the client if anything below fails.
        inner.platform_name = inner.platform_name()?;
        inner.platform_version = inner.platform_version()?;
        inner.devices = inner.addressable_devices()?;
        Ok(Client {
            inner: Arc::new(inner),
        })
    }

    /// The options the runtime compiles a program with: `placement`, plus the
    /// XLA options this platform needs for correct results
    /// ([`required_xla_options`]) and those that make it faster
    /// ([`tuned_xla_options`]).
    pub fn compile_options(&self, placement: Placement) -> CompileOptions {
        let mut xla = tuned_xla_options(self.platform_name());
        xla.extend(required_xla_options(self.platform_name()));
        CompileOptions { placement, xla }
    }

    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.inner.plugin
    }

    /// `"cpu"`, `"tpu"`, `"cuda"`...
    pub fn platform_name(&self) -> &str {
        &self.inner.platform_name
    }

    pub fn platform_version(&self) -> &str {
        &self.inner.platform_version
    }

    /// The addressable devices, in the plugin's order.
    pub fn devices(&self) -> Vec<Device> {
        (0..self.inner.devices.len())
            .map(|index| Device {
                client: self.inner.clone(),
                index,
            })
            .collect()
    }

    pub fn device_count(&self) -> usize {
        self.inner.devices.len()
    }

    /// The device at `index` among the addressable devices.
    pub fn device(&self, index: usize) -> Option<Device> {
        (index < self.inner.devices.len()).then(|| Device {
            client: self.inner.clone(),
            index,
        })
    }
}

impl ClientInner {
    fn platform_name(&self) -> Result<String> {
        let mut args = PJRT_Client_PlatformName_Args {
            client: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_Client_PlatformName, &mut args)?;
        // SAFETY: the name is owned by the client and `platform_name_size` long.
        Ok(unsafe { str_from(args.platform_name, args.platform_name_size) })
    }

    fn platform_version(&self) -> Result<String> {
        let mut args = PJRT_Client_PlatformVersion_Args {
            client: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_Client_PlatformVersion, &mut args)?;
        // SAFETY: the version is owned by the client and `platform_version_size` long.
        Ok(unsafe { str_from(args.platform_version, args.platform_version_size) })
    }

    fn addressable_devices(&self) -> Result<Vec<DeviceInfo>> {
        let mut args = PJRT_Client_AddressableDevices_Args {
            client: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_Client_AddressableDevices, &mut args)?;
        let raws: Vec<*mut PJRT_Device> = (0..args.num_addressable_devices)
            // SAFETY: the client owns an array of `num_addressable_devices` devices.
            .map(|i| unsafe { *args.addressable_devices.add(i) })
            .collect();
        raws.into_iter().map(|raw| self.describe(raw)).collect()
    }

    fn describe(&self, raw: *mut PJRT_Device) -> Result<DeviceInfo> {
        let mut d = PJRT_Device_GetDescription_Args {
            device: raw,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_Device_GetDescription, &mut d)?;
        let mut id = PJRT_DeviceDescription_Id_Args {
            device_description: d.device_description,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_DeviceDescription_Id, &mut id)?;
        let mut kind = PJRT_DeviceDescription_Kind_Args {
            device_description: d.device_description,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_DeviceDescription_Kind, &mut kind)?;
        let mut dbg = PJRT_DeviceDescription_DebugString_Args {
            device_description: d.device_description,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_DeviceDescription_DebugString, &mut dbg)?;
        // SAFETY: both strings are owned by the device description, which lives
        // as long as the client, and are `*_size` bytes long.
        let (kind, description) = unsafe {
            (
                str_from(kind.device_kind, kind.device_kind_size),
                str_from(dbg.debug_string, dbg.debug_string_size),
            )
        };
        Ok(DeviceInfo {
            raw,
            id: id.id,
            kind,
            description,
        })
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        let mut args = PJRT_Client_Destroy_Args {
            client: self.raw,
            ..Default::default()
        };
        if let Err(e) = pjrt_call!(self.plugin, PJRT_Client_Destroy, &mut args) {
            tracing::warn!("destroying the PJRT client: {e}");
        }
    }
}

/// Device memory use, as far as the plugin reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    pub bytes_in_use: i64,
    pub peak_bytes_in_use: Option<i64>,
    pub num_allocs: Option<i64>,
    pub largest_alloc_size: Option<i64>,
    pub bytes_limit: Option<i64>,
}

/// One addressable device of a client.
#[derive(Clone)]
pub struct Device {
    pub(super) client: Arc<ClientInner>,
    pub(super) index: usize,
}

impl Device {
    fn info(&self) -> &DeviceInfo {
        &self.client.devices[self.index]
    }

    pub(super) fn raw(&self) -> *mut PJRT_Device {
        self.info().raw
    }

    /// Position among the client's addressable devices.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The plugin's global device id.
    pub fn id(&self) -> i32 {
        self.info().id
    }

    /// The device kind, e.g. `"cpu"` or `"TPU v5 lite"`.
    pub fn kind(&self) -> &str {
        &self.info().kind
    }

    pub fn description(&self) -> &str {
        &self.info().description
    }

    /// Memory statistics; an error when the plugin does not report them
    /// (the XLA CPU plugin does not).
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        let mut args = PJRT_Device_MemoryStats_Args {
            device: self.raw(),
            ..Default::default()
        };
        pjrt_call!(self.client.plugin, PJRT_Device_MemoryStats, &mut args)?;
        let opt = |set: bool, v: i64| set.then_some(v);
        Ok(MemoryStats {
            bytes_in_use: args.bytes_in_use,
            peak_bytes_in_use: opt(args.peak_bytes_in_use_is_set, args.peak_bytes_in_use),
            num_allocs: opt(args.num_allocs_is_set, args.num_allocs),
            largest_alloc_size: opt(args.largest_alloc_size_is_set, args.largest_alloc_size),
            bytes_limit: opt(args.bytes_limit_is_set, args.bytes_limit),
        })
    }
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} ({})",
            self.client.platform_name,
            self.index,
            self.kind()
        )
    }
}
