//! `CompileOptionsProto`, the serialized options `PJRT_Client_Compile` requires.
//!
//! Only the fields EagerTPU sets are declared (field numbers from XLA's
//! `compile_options.proto` and `xla_data.proto`); protobuf skips the rest. An
//! empty options string makes the XLA CPU plugin abort the process, so every
//! compile goes through [`CompileOptions::encode`].

use prost::Message;

#[derive(Clone, PartialEq, Message)]
struct CompileOptionsProto {
    #[prost(message, optional, tag = "3")]
    executable_build_options: Option<ExecutableBuildOptionsProto>,
    #[prost(bool, tag = "4")]
    compile_portable_executable: bool,
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

/// How a program is compiled: for how many replicas, on which devices.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CompileOptions {
    /// One replica, runnable on any addressable device (chosen at execute time).
    Portable,
    /// One replica per listed device id, in replica order (collectives).
    Replicated { device_ids: Vec<i64> },
}

impl CompileOptions {
    /// The serialized `CompileOptionsProto`.
    pub fn encode(&self) -> Vec<u8> {
        let proto = match self {
            CompileOptions::Portable => CompileOptionsProto {
                executable_build_options: Some(ExecutableBuildOptionsProto {
                    num_replicas: 1,
                    num_partitions: 1,
                    device_assignment: None,
                }),
                compile_portable_executable: true,
            },
            CompileOptions::Replicated { device_ids } => CompileOptionsProto {
                executable_build_options: Some(ExecutableBuildOptionsProto {
                    num_replicas: device_ids.len() as i64,
                    num_partitions: 1,
                    device_assignment: Some(DeviceAssignmentProto {
                        replica_count: device_ids.len() as i32,
                        computation_count: 1,
                        computation_devices: vec![ComputationDevice {
                            replica_device_ids: device_ids.clone(),
                        }],
                    }),
                }),
                compile_portable_executable: false,
            },
        };
        proto.encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_options_set_one_replica_and_one_partition() {
        // Field 3 (build options) holding field 4 = 1 and field 5 = 1, then field 4 = true.
        assert_eq!(
            CompileOptions::Portable.encode(),
            vec![0x1a, 0x04, 0x20, 0x01, 0x28, 0x01, 0x20, 0x01]
        );
    }
}
