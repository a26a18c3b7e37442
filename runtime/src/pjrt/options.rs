//! `CompileOptionsProto`, the serialized options `PJRT_Client_Compile` requires.
//!
//! Only the fields EagerTPU sets are declared (field numbers from XLA's
//! `compile_options.proto` and `xla_data.proto`); protobuf skips the rest. An
//! empty options string makes the XLA CPU plugin abort the process, so every
//! compile goes through [`CompileOptions::encode`].
//!
//! XLA compiler options (`DebugOptions` fields such as `xla_cpu_use_xnnpack`)
//! travel by name in `env_option_overrides`, the mechanism behind JAX's
//! `compiler_options`: the plugin applies them over its defaults (and over
//! `XLA_FLAGS`). They are part of the encoded options, hence of every
//! program's cache key.

use std::collections::BTreeMap;

use prost::Message;

#[derive(Clone, PartialEq, Message)]
struct CompileOptionsProto {
    #[prost(message, optional, tag = "3")]
    executable_build_options: Option<ExecutableBuildOptionsProto>,
    #[prost(bool, tag = "4")]
    compile_portable_executable: bool,
    /// Sorted by name, so equal options encode to equal bytes.
    #[prost(btree_map = "string, message", tag = "7")]
    env_option_overrides: BTreeMap<String, OptionOverrideProto>,
}

/// `OptionOverrideProto`: a `oneof` of which EagerTPU sets one member; an
/// optional field per member encodes the same bytes.
#[derive(Clone, PartialEq, Message)]
struct OptionOverrideProto {
    #[prost(string, optional, tag = "1")]
    string_field: Option<String>,
    #[prost(bool, optional, tag = "2")]
    bool_field: Option<bool>,
    #[prost(int64, optional, tag = "3")]
    int_field: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct ExecutableBuildOptionsProto {
    #[prost(int64, tag = "4")]
    num_replicas: i64,
    #[prost(int64, tag = "5")]
    num_partitions: i64,
    #[prost(message, optional, tag = "9")]
    device_assignment: Option<DeviceAssignmentProto>,
}

#[derive(Clone, PartialEq, Message)]
struct DeviceAssignmentProto {
    #[prost(int32, tag = "1")]
    replica_count: i32,
    #[prost(int32, tag = "2")]
    computation_count: i32,
    #[prost(message, repeated, tag = "3")]
    computation_devices: Vec<ComputationDevice>,
}

#[derive(Clone, PartialEq, Message)]
struct ComputationDevice {
    #[prost(int64, repeated, tag = "1")]
    replica_device_ids: Vec<i64>,
}

/// Where a program runs: for how many replicas, on which devices.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Placement {
    /// One replica, runnable on any addressable device (chosen at execute time).
    Portable,
    /// One replica per listed device id, in replica order (collectives).
    Replicated { device_ids: Vec<i64> },
}

/// The value of one XLA compiler option.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum XlaOption {
    Bool(bool),
    Int(i64),
    Str(String),
}

impl XlaOption {
    /// `true`/`false`, an integer, or any other text as a string.
    pub fn parse(text: &str) -> XlaOption {
        let text = text.trim();
        match text {
            "true" => XlaOption::Bool(true),
            "false" => XlaOption::Bool(false),
            _ => match text.parse::<i64>() {
                Ok(n) => XlaOption::Int(n),
                Err(_) => XlaOption::Str(text.to_string()),
            },
        }
    }
}

/// How a program is compiled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    pub placement: Placement,
    /// XLA compiler options by name (`xla_cpu_use_xnnpack`, ...).
    pub xla: BTreeMap<String, XlaOption>,
}

/// XLA options every program for `platform` needs to compute correct values.
///
/// The XLA CPU plugin runs f32 dots through XNNPACK and, when a dot's
/// right-hand side is an entry parameter, packs that operand once and reuses
/// the packing for as long as the parameter's buffer has the same *address*
/// (XLA's `XnnDotThunk` with `capture_rhs`; its own comment calls address
/// identity "not correct"). An allocator hands a freed address to the next
/// buffer of that size, so an eager runtime that frees a weight (or its
/// transpose) and allocates the next one gets the previous step's weights
/// multiplied in, silently: a training loss off by 0.4% at step 2, growing
/// every step. With XNNPACK off the plugin's Eigen dots run instead (as fast
/// as XNNPACK's on this 2-core host once XNNPACK has to repack every step,
/// which a training step must).
pub fn required_xla_options(platform: &str) -> BTreeMap<String, XlaOption> {
    let mut options = BTreeMap::new();
    if platform == "cpu" {
        options.insert("xla_cpu_use_xnnpack".to_string(), XlaOption::Bool(false));
    }
    options
}

/// XLA options the runtime compiles with for speed on `platform` (the user's
/// `EAGERTPU_XLA_OPTIONS` override them; results do not depend on them).
///
/// The XLA CPU plugin emits 256-bit vector loops even on a host with
/// AVX-512. A fused chunk of elementwise ops is one loop that carries each
/// vector through every op, so it is bound by the ops' latency, not by
/// throughput: twice the lanes halve its time. Measured on the bench's
/// 200-op elementwise chain over 256 floats (`perf`, the plugin's generated
/// code only): 25.6 us a run at 256 bits, 14.1 us at 512, and a chunk a host
/// read waits for is on the step's critical path.
pub fn tuned_xla_options(platform: &str) -> BTreeMap<String, XlaOption> {
    let mut options = BTreeMap::new();
    if platform == "cpu" && host_has_avx512() {
        options.insert(
            "xla_cpu_prefer_vector_width".to_string(),
            XlaOption::Int(512),
        );
    }
    options
}

fn host_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

impl CompileOptions {
    /// One replica on any device, with no XLA options (a raw PJRT compile;
    /// the runtime compiles through [`crate::pjrt::Client::compile_options`]).
    pub fn portable() -> CompileOptions {
        CompileOptions {
            placement: Placement::Portable,
            xla: BTreeMap::new(),
        }
    }

    pub fn is_portable(&self) -> bool {
        self.placement == Placement::Portable
    }

    /// Replicas one execution of the program spans.
    pub fn replicas(&self) -> usize {
        match &self.placement {
            Placement::Portable => 1,
            Placement::Replicated { device_ids } => device_ids.len(),
        }
    }

    /// The serialized `CompileOptionsProto`.
    pub fn encode(&self) -> Vec<u8> {
        let (build, portable) = match &self.placement {
            Placement::Portable => (
                ExecutableBuildOptionsProto {
                    num_replicas: 1,
                    num_partitions: 1,
                    device_assignment: None,
                },
                true,
            ),
            Placement::Replicated { device_ids } => (
                ExecutableBuildOptionsProto {
                    num_replicas: device_ids.len() as i64,
                    num_partitions: 1,
                    device_assignment: Some(DeviceAssignmentProto {
                        replica_count: device_ids.len() as i32,
                        computation_count: 1,
                        computation_devices: vec![ComputationDevice {
                            replica_device_ids: device_ids.clone(),
                        }],
                    }),
                },
                false,
            ),
        };
        let env_option_overrides = self
            .xla
            .iter()
            .map(|(name, value)| {
                let mut o = OptionOverrideProto::default();
                match value {
                    XlaOption::Bool(b) => o.bool_field = Some(*b),
                    XlaOption::Int(n) => o.int_field = Some(*n),
                    XlaOption::Str(s) => o.string_field = Some(s.clone()),
                }
                (name.clone(), o)
            })
            .collect();
        CompileOptionsProto {
            executable_build_options: Some(build),
            compile_portable_executable: portable,
            env_option_overrides,
        }
        .encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_options_set_one_replica_and_one_partition() {
        // Field 3 (build options) holding field 4 = 1 and field 5 = 1, then field 4 = true.
        assert_eq!(
            CompileOptions::portable().encode(),
            vec![0x1a, 0x04, 0x20, 0x01, 0x28, 0x01, 0x20, 0x01]
        );
    }

    #[test]
    fn an_xla_option_is_a_map_entry_of_name_and_oneof_value() {
        let mut options = CompileOptions::portable();
        options.xla.insert("xla_a".into(), XlaOption::Bool(false));
        let bytes = options.encode();
        // Field 7 (length-delimited): entry { 1: "xla_a", 2: { 2: false } }.
        let entry = [
            0x3a, 0x0b, 0x0a, 0x05, b'x', b'l', b'a', b'_', b'a', 0x12, 0x02, 0x10, 0x00,
        ];
        assert_eq!(&bytes[8..], &entry);
    }

    #[test]
    fn equal_options_encode_equally_whatever_the_insertion_order() {
        let mut a = CompileOptions::portable();
        a.xla.insert("xla_b".into(), XlaOption::Int(3));
        a.xla.insert("xla_a".into(), XlaOption::Str("x".into()));
        let mut b = CompileOptions::portable();
        b.xla.insert("xla_a".into(), XlaOption::Str("x".into()));
        b.xla.insert("xla_b".into(), XlaOption::Int(3));
        assert_eq!(a.encode(), b.encode());
    }

    #[test]
    fn xla_option_values_parse_as_bool_int_or_string() {
        assert_eq!(XlaOption::parse("true"), XlaOption::Bool(true));
        assert_eq!(XlaOption::parse(" false "), XlaOption::Bool(false));
        assert_eq!(XlaOption::parse("-7"), XlaOption::Int(-7));
        assert_eq!(XlaOption::parse("greedy"), XlaOption::Str("greedy".into()));
    }

    #[test]
    fn the_cpu_platform_compiles_without_xnnpack() {
        assert_eq!(
            required_xla_options("cpu").get("xla_cpu_use_xnnpack"),
            Some(&XlaOption::Bool(false))
        );
        assert!(required_xla_options("tpu").is_empty());
    }

    #[test]
    fn tuning_options_are_for_the_cpu_plugin_only() {
        assert!(tuned_xla_options("tpu").is_empty());
        assert!(tuned_xla_options("cuda").is_empty());
        let cpu = tuned_xla_options("cpu");
        assert_eq!(
            cpu.get("xla_cpu_prefer_vector_width"),
            host_has_avx512().then_some(&XlaOption::Int(512))
        );
        assert!(
            cpu.keys()
                .all(|k| !required_xla_options("cpu").contains_key(k))
        );
    }
}
