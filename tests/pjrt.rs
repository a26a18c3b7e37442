//! The safe PJRT wrappers on the real XLA CPU plugin: buffers of every dtype,
//! compile, execute, serialize / deserialize-and-load, and clean errors.

use std::sync::OnceLock;

use eagertpu::DType;
use eagertpu::internals::pjrt::{
    Buffer, Client, CompileOptions, Executable, OptionValue, Placement, Plugin, as_bytes, locate,
};

fn client() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let found = locate::resolve(Some("cpu")).expect("make setup installs the CPU plugin");
        Client::create(Plugin::load(&found.path).unwrap(), &[]).unwrap()
    })
}

const ADD: &str = r#"module @add {
  func.func public @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<f32>) {
    %s = "stablehlo.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %z = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %t = "stablehlo.reduce"(%s, %z) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %r = "stablehlo.add"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%r) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0, 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
    "func.return"(%s, %t) : (tensor<2x3xf32>, tensor<f32>) -> ()
  }
}"#;

fn f32_buffer(values: &[f32], dims: &[i64]) -> Buffer {
    let device = client().device(0).unwrap();
    Buffer::from_host(&device, DType::F32, dims, as_bytes(values)).unwrap()
}

fn read_f32(b: &Buffer) -> Vec<f32> {
    let n: i64 = b.dims().unwrap().iter().product();
    let mut out = vec![0f32; n as usize];
    b.to_host(eagertpu::internals::pjrt::as_bytes_mut(&mut out))
        .unwrap();
    out
}

fn run(exe: &Executable, a: &Buffer, b: &Buffer) -> (Vec<f32>, Vec<f32>) {
    let device = client().device(0).unwrap();
    let (outs, done) = exe.execute(&[a, b], &device).unwrap();
    if let Some(done) = done {
        done.wait().unwrap();
    }
    assert_eq!(outs.len(), 2);
    (read_f32(&outs[0]), read_f32(&outs[1]))
}

#[test]
fn buffers_round_trip_every_dtype_and_report_type_and_dims() {
    let device = client().device(0).unwrap();
    for dtype in [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ] {
        let n = 2 * 3 * 4;
        let bytes: Vec<u8> = (0..n * dtype.size_in_bytes())
            .map(|i| {
                if dtype == DType::Bool {
                    (i % 2) as u8
                } else {
                    (i * 7 % 251) as u8
                }
            })
            .collect();
        let b = Buffer::from_host(&device, dtype, &[2, 3, 4], &bytes).unwrap();
        assert_eq!(b.dtype().unwrap(), dtype);
        assert_eq!(b.dims().unwrap(), vec![2, 3, 4]);
        assert!(b.on_device_size().unwrap() >= bytes.len());
        assert!(!b.is_deleted().unwrap());
        b.ready_event().unwrap().wait().unwrap();
        let mut back = vec![0u8; bytes.len()];
        b.to_host(&mut back).unwrap();
        assert_eq!(back, bytes, "{dtype}");
        // The plugin's own copy (a TPU's path) gives the same bytes.
        let mut by_plugin = vec![0u8; bytes.len()];
        b.to_host_by_plugin(&mut by_plugin).unwrap();
        assert_eq!(by_plugin, bytes, "{dtype}");
    }
    // A 0-d buffer.
    let s = f32_buffer(&[2.5], &[]);
    assert_eq!(s.dims().unwrap(), Vec::<i64>::new());
    assert_eq!(read_f32(&s), vec![2.5]);
}

#[test]
fn compile_execute_serialize_and_deserialize_and_load() {
    let exe = Executable::compile(client(), ADD, &CompileOptions::portable()).unwrap();
    assert_eq!(exe.num_outputs(), 2);
    assert!(!exe.name().unwrap().is_empty());
    let a = f32_buffer(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = f32_buffer(&[0.5; 6], &[2, 3]);
    let (sum, total) = run(&exe, &a, &b);
    assert_eq!(sum, vec![1.5, 2.5, 3.5, 4.5, 5.5, 6.5]);
    assert_eq!(total, vec![24.0]);

    let bytes = exe.serialize().unwrap();
    assert!(bytes.len() > 100, "{} bytes", bytes.len());
    let loaded =
        Executable::deserialize_and_load(client(), &bytes, &CompileOptions::portable()).unwrap();
    assert_eq!(loaded.num_outputs(), 2);
    assert_eq!(run(&loaded, &a, &b), (sum, total));
    // The inputs are untouched (nothing was donated).
    assert_eq!(read_f32(&a), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

/// 64 rounds of `x = x * 1.0001 + 0.5` over a 1M-element array: long enough
/// that the plugin runs it on a worker thread.
fn slow_program() -> String {
    let mut body = String::new();
    let mut last = "%a".to_string();
    for i in 0..64 {
        body.push_str(&format!(
            "    %m{i} = stablehlo.multiply {last}, %k : tensor<1048576xf32>\n\
             \x20   %s{i} = stablehlo.add %m{i}, %h : tensor<1048576xf32>\n"
        ));
        last = format!("%s{i}");
    }
    format!(
        "func.func @main(%a: tensor<1048576xf32>) -> tensor<1048576xf32> {{\n\
         \x20   %k = stablehlo.constant dense<1.0001> : tensor<1048576xf32>\n\
         \x20   %h = stablehlo.constant dense<0.5> : tensor<1048576xf32>\n\
         {body}    return {last} : tensor<1048576xf32>\n}}"
    )
}

#[test]
fn reading_an_output_still_being_computed_waits_for_it() {
    let exe = Executable::compile(client(), &slow_program(), &CompileOptions::portable()).unwrap();
    let input: Vec<f32> = (0..1 << 20).map(|i| (i % 1000) as f32 * 0.01).collect();
    let a = f32_buffer(&input, &[1 << 20]);
    let expected: Vec<f32> = input
        .iter()
        .map(|&x| (0..64).fold(x, |x, _| x * 1.0001 + 0.5))
        .collect();
    for _ in 0..3 {
        let device = client().device(0).unwrap();
        // Read at once, without awaiting the execution's completion event.
        let (outs, _done) = exe.execute(&[&a], &device).unwrap();
        let got = read_f32(&outs[0]);
        let worst = got
            .iter()
            .zip(&expected)
            .map(|(g, e)| ((g - e) / e).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-5, "relative error {worst}");
    }
}

#[test]
fn executables_run_on_any_device_of_the_client() {
    let exe = Executable::compile(client(), ADD, &CompileOptions::portable()).unwrap();
    for device in client().devices() {
        let bytes = as_bytes(&[1.0f32; 6]).to_vec();
        let a = Buffer::from_host(&device, DType::F32, &[2, 3], &bytes).unwrap();
        let (outs, done) = exe.execute(&[&a, &a], &device).unwrap();
        if let Some(done) = done {
            done.wait().unwrap();
        }
        assert_eq!(read_f32(&outs[1]), vec![12.0], "device {}", device.index());
    }
}

#[test]
fn bad_programs_and_bad_calls_are_clean_errors() {
    let e = Executable::compile(client(), "this is not MLIR", &CompileOptions::portable())
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("PJRT_Client_Compile failed"), "{e}");
    let e = Executable::deserialize_and_load(client(), b"garbage", &CompileOptions::portable())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("PJRT_Executable_DeserializeAndLoad failed"),
        "{e}"
    );
    // Wrong number of arguments.
    let exe = Executable::compile(client(), ADD, &CompileOptions::portable()).unwrap();
    let a = f32_buffer(&[0.0; 6], &[2, 3]);
    let device = client().device(0).unwrap();
    let e = exe.execute(&[&a], &device).err().unwrap().to_string();
    assert!(e.starts_with("PJRT_LoadedExecutable_Execute failed"), "{e}");
    // A host buffer of the wrong size never reaches the plugin.
    let e = Buffer::from_host(&device, DType::F32, &[4], &[0u8; 3])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("3 bytes") && e.contains("16 bytes"), "{e}");
    // The CPU plugin has no memory statistics: a clean error naming the call.
    let e = device.memory_stats().err().unwrap().to_string();
    assert!(e.contains("PJRT_Device_MemoryStats"), "{e}");
    // And everything still works.
    let (sum, _) = run(&exe, &a, &a);
    assert_eq!(sum, vec![0.0; 6]);
}

/// Every replica's input is `[r + 1, 10 (r + 1), 100 (r + 1)]`; the program
/// returns the all-reduce sum over all four replicas, the sum within the
/// subgroups {0, 2} and {1, 3}, and the all-gather over all four.
const COLLECTIVES: &str = r#"module @collectives attributes {mhlo.num_replicas = 4 : i32, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<12xf32>) {
    %all = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %r = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%r) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    %pairs = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %r = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%r) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    %gathered = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<3xf32>) -> tensor<12xf32>
    "func.return"(%all, %pairs, %gathered) : (tensor<3xf32>, tensor<3xf32>, tensor<12xf32>) -> ()
  }
}"#;

/// A replicated program's collectives run as one execution spanning the
/// devices of a four-device client (issue 11's lowering target): sums over
/// all replicas and over subgroups, and a gather, on every replica.
#[test]
fn one_execution_spans_the_replicas_of_a_collective_program() {
    let found = locate::resolve(Some("cpu")).expect("make setup installs the CPU plugin");
    let four = Client::create(
        Plugin::load(&found.path).unwrap(),
        &[("cpu_device_count", OptionValue::Int(4))],
    )
    .unwrap();
    let devices = four.devices();
    assert_eq!(devices.len(), 4);
    let options = CompileOptions {
        placement: Placement::Replicated {
            device_ids: devices.iter().map(|d| d.id() as i64).collect(),
        },
        xla: Default::default(),
    };
    let exe = Executable::compile(&four, COLLECTIVES, &options).unwrap();
    let input = |r: usize| {
        let k = (r + 1) as f32;
        vec![k, 10.0 * k, 100.0 * k]
    };
    let buffers: Vec<Buffer> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| Buffer::from_host(d, DType::F32, &[3], as_bytes(&input(r))).unwrap())
        .collect();
    let lists: Vec<Vec<&Buffer>> = buffers.iter().map(|b| vec![b]).collect();
    let replicas = exe.execute_replicated(&lists).unwrap();
    assert_eq!(replicas.len(), 4);
    let gathered: Vec<f32> = (0..4).flat_map(input).collect();
    for (r, (outs, done)) in replicas.iter().enumerate() {
        if let Some(done) = done {
            done.wait().unwrap();
        }
        let pair_sum: Vec<f32> = (0..3)
            .map(|i| input(r % 2)[i] + input(r % 2 + 2)[i])
            .collect();
        assert_eq!(read_f32(&outs[0]), vec![10.0, 100.0, 1000.0], "replica {r}");
        assert_eq!(read_f32(&outs[1]), pair_sum, "replica {r}");
        assert_eq!(read_f32(&outs[2]), gathered, "replica {r}");
    }
    // A call with a list per replica missing, or with replicas passing
    // different numbers of arguments, is a clean error; so is a portable
    // program run as replicated.
    let error = |exe: &Executable, lists: &[Vec<&Buffer>]| match exe.execute_replicated(lists) {
        Ok(_) => panic!("a bad replicated call ran"),
        Err(e) => e.to_string(),
    };
    let e = error(&exe, &lists[..3]);
    assert!(e.contains("runs on 4 replica(s), got 3 list(s)"), "{e}");
    let mut uneven = lists.clone();
    uneven[2].push(&buffers[0]);
    let e = error(&exe, &uneven);
    assert!(
        e.contains("replica 2 got 2 argument(s), replica 0 got 1"),
        "{e}"
    );
    let portable = Executable::compile(client(), ADD, &CompileOptions::portable()).unwrap();
    let e = error(&portable, &lists);
    assert!(e.contains("(portable)"), "{e}");
}
