//! Golden interop with the Python reference codec, both ways.
//!
//! Python → Rust: `tests/golden/<case>.bin` were written by the reference
//! (`tests/golden/generate.py`, cases in `tests/py/golden_cases.py`). Each must
//! decode to the tree `golden_cases()` builds here, and our encoder must
//! reproduce it byte for byte from that tree. This part needs no Python.
//!
//! Rust → Python: the interop tests write our encoding of every case (plus
//! SplitMix64 float and string stress lists) and run `tests/py/golden_check.py`,
//! which decodes them with the reference, compares against the values built in
//! Python, and re-encodes them with the reference expecting our exact bytes.

use crate::common;
use crate::support;

use bytes::Bytes;
use half::f16;
use num_complex::Complex;
use std::path::{Path, PathBuf};
use support::{arr, assert_same, big, header_of, points_inside, same, SplitMix64};
use unienv_remote::codec::{envelope_header, header_json};
use unienv_remote::{dict, Codec, Dict, Graph, NdArray, ObjectArray, Value};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn v(a: NdArray) -> Value {
    Value::Array(a)
}

fn obj(shape: &[usize], values: Vec<Value>) -> Value {
    Value::ObjectArray(ObjectArray::new(shape.to_vec(), values).unwrap())
}

fn graph(
    n_nodes: Value,
    n_edges: Value,
    nodes_features: Value,
    edges_features: Value,
    edges: Value,
) -> Value {
    Value::from(Graph {
        n_nodes,
        n_edges,
        nodes_features,
        edges_features,
        edges,
    })
}

fn step_result() -> Value {
    let state: Vec<f32> = (0..32).map(|i| i as f32 * 0.25 - 4.0).collect();
    let image: Vec<u8> = (0..8 * 8 * 3).map(|i| (i % 256) as u8).collect();
    let observation = dict! { "state" => arr(&[32], state), "image" => arr(&[8, 8, 3], image) };
    let info = dict! {
        "TimeLimit.truncated" => true,
        "episode" => dict! { "r" => 12.5, "l" => 200 },
        "timestamp_ns" => 1_800_000_000_000_000_123i64,
    };
    Value::from(dict! {
        "version" => 1,
        "type" => "response",
        "session_id" => "s-1f2e",
        "request_id" => "r42",
        "resource_id" => "env",
        "operation_id" => "op-7",
        "result" => dict! {
            "value" => (observation, 1.25, false, true, info),
            "descriptors" => Value::list(Vec::<Value>::new()),
        },
    })
}

fn hello_request() -> Value {
    Value::from(dict! {
        "version" => 1,
        "type" => "request",
        "request_id" => "r1",
        "session_id" => (),
        "op" => "hello",
        "resource_id" => (),
        "max_message_size" => 67_108_864,
    })
}

fn snapshot() -> Value {
    Value::from(dict! {
        "version" => 1,
        "type" => "snapshot",
        "session_id" => "s",
        "subscription_id" => "sub",
        "resource_id" => "env/node",
        "operation_id" => "op",
        "kind" => "step",
        "sequence" => 12,
        "timestamp_ns" => 1_800_000_000_000_000_000i64,
        "descriptor_revision" => 3,
        "descriptor" => Dict::new(),
        "data" => dict! {
            "observation" => Value::list([arr(&[2], vec![1i64, 2])]),
            "reward" => NdArray::scalar(3.0f32),
        },
    })
}

/// One (2, 3) array per dtype; the values are `DTYPE_VALUES` in golden_cases.py.
fn dtype_arrays(big_endian: bool) -> Value {
    let order = |a: NdArray| {
        if big_endian {
            big(a)
        } else {
            support::little(a)
        }
    };
    let s = [2, 3];
    let f2 = [0.0, -0.0, 1.5, -2.25, 65504.0, 6.103515625e-05]
        .map(f16::from_f64)
        .to_vec();
    let c8 = vec![
        Complex::new(0.0f32, 0.0),
        Complex::new(1.0, 2.0),
        Complex::new(-1.5, -0.25),
        Complex::new(0.0, 1.0),
        Complex::new(-2.5, 0.0),
        Complex::new(3.0, -4.0),
    ];
    let c16 = vec![
        Complex::new(0.0f64, 0.0),
        Complex::new(1.0, 2.0),
        Complex::new(0.1, -0.2),
        Complex::new(0.0, 1e300),
        Complex::new(-2.5, 0.0),
        Complex::new(3.0, -4.0),
    ];
    Value::from(dict! {
        "b1" => arr(&s, vec![true, false, true, true, false, false]),
        "i1" => arr(&s, vec![-128i8, -1, 0, 1, 2, 127]),
        "i2" => order(arr(&s, vec![-32768i16, -1, 0, 1, 258, 32767])),
        "i4" => order(arr(&s, vec![i32::MIN, -1, 0, 1, 16909060, i32::MAX])),
        "i8" => order(arr(&s, vec![i64::MIN, -1, 0, 1, 72623859790382856, i64::MAX])),
        "u1" => arr(&s, vec![0u8, 1, 2, 127, 128, 255]),
        "u2" => order(arr(&s, vec![0u16, 1, 258, 32768, 65534, 65535])),
        "u4" => order(arr(&s, vec![0u32, 1, 16909060, 1 << 31, u32::MAX - 1, u32::MAX])),
        "u8" => order(arr(&s, vec![0u64, 1, 72623859790382856, 1 << 63, u64::MAX - 1, u64::MAX])),
        "f2" => order(arr(&s, f2)),
        "f4" => order(arr(&s, vec![0.0f32, -0.0, 1.5, -2.25, f32::MAX, f32::from_bits(1)])),
        "f8" => order(arr(&s, vec![0.0f64, -0.0, 0.1, -2.25, f64::MAX, f64::from_bits(1)])),
        "c8" => order(arr(&s, c8)),
        "c16" => order(arr(&s, c16)),
    })
}

fn numpy_scalars() -> Value {
    Value::from(dict! {
        "f4" => NdArray::scalar(1.5f32),
        "f2" => NdArray::scalar(f16::from_f64(-0.5)),
        "i8" => NdArray::scalar(-7i64),
        "i1" => NdArray::scalar(-128i8),
        "u1" => NdArray::scalar(255u8),
        "u8" => NdArray::scalar(u64::MAX),
        "b1" => NdArray::scalar(true),
        "c8" => NdArray::scalar(Complex::new(1.0f32, -2.0)),
        "c16" => NdArray::scalar(Complex::new(0.5f64, 0.25)),
        "f8_is_float" => 2.5,
        "f8_nan_is_float" => NAN,
        "be_i4" => big(NdArray::scalar(-3i32)),
        "i4_0d" => NdArray::scalar(7i32),
    })
}

fn containers() -> Value {
    let empty = || Value::list(Vec::<Value>::new());
    let unit = || Value::tuple(Vec::<Value>::new());
    Value::from(dict! {
        "tuple" => Value::tuple([Value::Int(1), Value::from((2, 3.5)), empty(), unit()]),
        "single" => Value::tuple([1]),
        "list" => Value::list([
            Value::Null,
            true.into(),
            false.into(),
            "x".into(),
            Value::list([empty(), Value::list([unit()])]),
        ]),
        "ordered" => dict! { "z" => 1, "a" => 2, "m" => 3 },
        "empty_dict" => Dict::new(),
        "nested" => dict! { "a" => dict! { "b" => dict! { "c" => Value::list([Value::Int(1), Value::tuple([2.0])]) } } },
        "bool_int_float" => Value::list([
            Value::Bool(true),
            Value::Int(1),
            Value::Float(1.0),
            Value::Int(0),
            Value::Bool(false),
            Value::Float(0.0),
        ]),
        "many_keys" => (0..20).map(|i| (format!("k{i:02}"), i)).collect::<Dict>(),
    })
}

fn byte_strings() -> Value {
    let large: Vec<u8> = (0..70000u32).map(|i| ((i * 7 + 3) % 256) as u8).collect();
    Value::from(dict! {
        "empty" => Bytes::new(),
        "all_bytes" => Bytes::from((0..=255u8).collect::<Vec<_>>()),
        "large" => Bytes::from(large),
        "in_tuple" => Value::tuple([
            Value::bytes(&b"a"[..]),
            Value::bytes(Bytes::new()),
            Value::bytes(&b"bc"[..]),
        ]),
    })
}

fn floats() -> Value {
    let scalars = [
        NAN,
        INF,
        -INF,
        -0.0,
        0.0,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        0.1,
        1e16,
        1e15,
        1e-05,
        0.0001,
        123456789.125,
        -1.5e-07,
        1.0 / 3.0,
        1e22,
        #[allow(clippy::excessive_precision)]
        9007199254740993.0,
    ];
    let payloads = [
        0x7FF0_0000_0000_0001u64,
        0xFFF8_0000_0000_0000,
        0x7FF8_DEAD_0000_0000,
    ]
    .map(f64::from_bits);
    Value::from(dict! {
        "scalars" => Value::list(scalars),
        "f4" => arr(&[5], vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1.0]),
        "f8_be" => big(arr(&[3], vec![NAN, -INF, INF])),
        "f2" => arr(&[3], vec![f16::NAN, f16::INFINITY, f16::NEG_INFINITY]),
        "c16" => arr(&[2], vec![Complex::new(NAN, 1.0), Complex::new(INF, -INF)]),
        "nan_payloads" => arr(&[3], payloads.to_vec()),
    })
}

fn big_ints() -> Value {
    Value::tuple([
        Value::Int(0),
        Value::Int(-1),
        Value::Int(i64::MAX),
        Value::Int(i64::MIN),
        Value::UInt(1 << 63),
        Value::UInt(u64::MAX),
        Value::Int(1_800_000_000_000_000_000),
        Value::Int(-(1 << 31)),
        Value::Int((1 << 53) + 1),
    ])
}

fn object_arrays() -> Value {
    Value::from(dict! {
        "batch" => obj(&[2], vec![
            dict! { "pos" => arr(&[2], vec![1.0f32, 2.0]), "id" => 0 }.into(),
            dict! { "pos" => arr(&[2], vec![3.0f32, 4.0]), "id" => 1 }.into(),
        ]),
        "grid" => obj(&[2, 2], vec![
            1.into(),
            "two".into(),
            Value::Null,
            Value::tuple([Value::Float(3.0), Value::bytes(&b"four"[..])]),
        ]),
        "scalar" => obj(&[], vec![dict! { "k" => Value::list([1]) }.into()]),
        "empty" => obj(&[0], vec![]),
        "empty_2d" => obj(&[3, 0], vec![]),
        "nested" => obj(&[1], vec![obj(&[2], vec![1.into(), 2.into()])]),
    })
}

fn graphs() -> Value {
    let nodes_features: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let full = graph(
        v(arr(&[2], vec![3i64, 2])),
        v(arr(&[2], vec![2i64, 1])),
        v(arr(&[2, 3, 4], nodes_features)),
        Value::Null,
        v(arr(&[2, 2, 2], vec![0i64, 1, 1, 2, 0, 1, 0, 0])),
    );
    let minimal = graph(
        v(NdArray::scalar(4i64)),
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
    );
    let one = graph(
        v(NdArray::scalar(1i64)),
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
    );
    Value::from(dict! {
        "full" => full,
        "minimal" => minimal,
        "batched" => obj(&[2], vec![one, Value::Null]),
    })
}

fn unicode() -> Value {
    Value::from(dict! {
        "" => "",
        "ascii" => "plain",
        "latin" => "h\u{e9}llo w\u{f6}rld",
        "cjk" => "\u{65e5}\u{672c}\u{8a9e}",
        "emoji" => "\u{1F600} \u{1F44D}\u{1F3FD}",
        "controls" => "\0\u{1}\u{8}\u{c}\n\r\t\u{1f}\u{7f}",
        "quotes" => "\"quoted\" \\ back / slash",
        "separators" => "\u{2028}\u{2029}\u{feff}\u{ffff}",
        "non_bmp" => "\u{10000}\u{10FFFF}",
        "\u{43a}\u{43b}\u{44e}\u{447}" => "\u{437}\u{43d}\u{430}\u{447}\u{435}\u{43d}\u{438}\u{435}",
        "\u{1F600}" => Value::list(["emoji key", "\u{e9}"]),
    })
}

fn shapes() -> Value {
    let mut dims32 = vec![1usize; 31];
    dims32.push(2);
    Value::from(dict! {
        "scalar_f8" => NdArray::scalar(2.5f64),
        "zero_1d" => arr::<f32>(&[0], vec![]),
        "zero_3d" => big(arr::<i16>(&[3, 0, 2], vec![])),
        "dims32" => arr(&dims32, vec![0u16, 1]),
        "transposed" => arr(&[3, 2], vec![0i16, 3, 1, 4, 2, 5]),
        "fortran" => arr(&[2, 3], vec![0u32, 1, 2, 3, 4, 5]),
    })
}

/// A leaf at depth 64, under alternating lists, tuples and dicts.
fn deep() -> Value {
    let mut value = Value::Int(1);
    for level in 0..64 {
        value = match level % 3 {
            0 => Value::List(vec![value]),
            1 => Value::Tuple(vec![value]),
            _ => dict! { "k" => value }.into(),
        };
    }
    value
}

/// The Rust twin of `CASES` in tests/py/golden_cases.py.
fn golden_cases() -> Vec<(&'static str, Value)> {
    vec![
        ("step_result", step_result()),
        ("hello_request", hello_request()),
        ("snapshot", snapshot()),
        ("dtypes_little", dtype_arrays(false)),
        ("dtypes_big", dtype_arrays(true)),
        ("numpy_scalars", numpy_scalars()),
        ("containers", containers()),
        ("bytes", byte_strings()),
        ("floats", floats()),
        ("big_ints", big_ints()),
        ("object_arrays", object_arrays()),
        ("graphs", graphs()),
        ("unicode", unicode()),
        ("shapes", shapes()),
        ("deep", deep()),
        ("none_root", Value::Null),
        ("array_root", v(arr(&[3], vec![1i32, 2, 3]))),
    ]
}

/// `float_stress()` of golden_cases.py.
fn float_stress() -> Value {
    let mut rng = SplitMix64(0x5EED);
    let mut out = Vec::new();
    for _ in 0..2000 {
        out.push(f64::from_bits(rng.next()));
    }
    for _ in 0..2000 {
        out.push(f32::from_bits(rng.next() as u32) as f64);
    }
    for _ in 0..2000 {
        let r = rng.next();
        out.push((r % 1_000_000) as f64 / 10u64.pow(((r >> 32) % 9) as u32) as f64);
    }
    for _ in 0..1000 {
        let r = rng.next();
        let e = ((r >> 32) % 30) as i32 - 12;
        let m = (r % 100_000) as f64;
        let p = 10u64.pow(e.unsigned_abs()) as f64;
        out.push(if e >= 0 { m * p } else { m / p });
    }
    Value::list(out)
}

/// `string_stress()` of golden_cases.py.
fn string_stress() -> Value {
    let mut rng = SplitMix64(0x57A1);
    let mut out = Vec::new();
    for _ in 0..500 {
        let n = rng.next() % 13;
        let mut s = String::new();
        for _ in 0..n {
            let r = rng.next();
            let (kind, x) = (r % 4, r >> 8);
            let cp = match kind {
                0 => x % 0x80,
                1 => 0x80 + x % (0x800 - 0x80),
                2 => {
                    let cp = 0x800 + x % (0x10000 - 0x800);
                    if (0xD800..0xE000).contains(&cp) {
                        cp + 0x800
                    } else {
                        cp
                    }
                }
                _ => 0x10000 + x % (0x110000 - 0x10000),
            };
            s.push(char::from_u32(cp as u32).unwrap());
        }
        out.push(Value::Str(s));
    }
    Value::List(out)
}

fn stress_cases() -> Vec<(&'static str, Value)> {
    vec![
        ("stress_floats", float_stress()),
        ("stress_strings", string_stress()),
    ]
}

fn read_golden(name: &str) -> Vec<u8> {
    let path = golden_dir().join(format!("{name}.bin"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (see tests/golden/generate.py)", path.display()))
}

#[test]
fn golden_directory_holds_exactly_the_cases() {
    let mut on_disk: Vec<String> = std::fs::read_dir(golden_dir())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".bin").map(str::to_owned))
        .collect();
    on_disk.sort();
    let mut cases: Vec<String> = golden_cases()
        .into_iter()
        .map(|(n, _)| n.to_owned())
        .collect();
    cases.sort();
    assert_eq!(on_disk, cases);
}

#[test]
fn reference_golden_files_decode_to_the_expected_trees() {
    let codec = Codec::default();
    let mut failures = Vec::new();
    for (name, expected) in golden_cases() {
        let frame = Bytes::from(read_golden(name));
        match codec.decode(frame) {
            Ok(actual) => {
                if let Err(e) = same(&expected, &actual) {
                    failures.push(format!("{name}: {e}"));
                }
            }
            Err(e) => failures.push(format!("{name}: decode failed: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn encoder_reproduces_the_golden_files_byte_for_byte() {
    // Every case is byte-identical: our JSON writer follows Python's
    // json.dumps(separators=(",", ":")) exactly, attachments are C-order bytes
    // in traversal order, and the cases avoid what Rust cannot express (ints
    // beyond u64, lone surrogates).
    let codec = Codec::default();
    let mut failures = Vec::new();
    for (name, value) in golden_cases() {
        let golden = read_golden(name);
        let ours = codec.encode(&value).unwrap();
        if ours != golden {
            let ours_h = header_of(&ours).to_owned();
            let golden_h = header_of(&golden).to_owned();
            let at = ours_h
                .bytes()
                .zip(golden_h.bytes())
                .position(|(a, b)| a != b);
            failures.push(format!(
                "{name}: {} bytes vs the reference's {}; headers first differ at {at:?}:\n  ours:      {}\n  reference: {}",
                ours.len(),
                golden.len(),
                &ours_h[at.unwrap_or(0).saturating_sub(40)..(at.unwrap_or(0) + 40).min(ours_h.len())],
                &golden_h[at.unwrap_or(0).saturating_sub(40)..(at.unwrap_or(0) + 40).min(golden_h.len())],
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn golden_arrays_and_bytes_are_slices_of_the_frame() {
    fn check(v: &Value, frame: &[u8], found: &mut usize) {
        match v {
            Value::Array(a) if !a.is_empty() => {
                assert!(points_inside(a.as_bytes(), frame), "array {a:?} was copied");
                *found += 1;
            }
            Value::Bytes(b) if !b.is_empty() => {
                assert!(points_inside(b, frame), "bytes were copied");
                *found += 1;
            }
            Value::List(items) | Value::Tuple(items) => {
                items.iter().for_each(|i| check(i, frame, found))
            }
            Value::Dict(d) => d.values().for_each(|i| check(i, frame, found)),
            Value::ObjectArray(o) => o.values().iter().for_each(|i| check(i, frame, found)),
            Value::Graph(g) => g.fields().iter().for_each(|(_, i)| check(i, frame, found)),
            _ => {}
        }
    }
    let mut found = 0;
    for (name, _) in golden_cases() {
        let frame = Bytes::from(read_golden(name));
        let value = Codec::default().decode(frame.clone()).unwrap();
        check(&value, &frame, &mut found);
    }
    assert!(found > 50, "only {found} attachments checked");
}

/// The helpers an `inspect` command uses: the header text of a frame, and the
/// header our encoder would write for a tree.
#[test]
fn inspect_helpers_agree_with_the_golden_files() {
    for (name, value) in golden_cases() {
        let golden = read_golden(name);
        let header = envelope_header(&golden).unwrap();
        assert_eq!(header_json(&value).unwrap(), header, "{name}");
        let declared = u32::from_be_bytes(golden[..4].try_into().unwrap()) as usize;
        assert_eq!(header.len(), declared, "{name}");
    }
}

// ---- Rust → Python ----

fn interop_dir(label: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("codec_golden_{label}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn reference_decodes_our_encodings_to_the_python_values() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let dir = interop_dir("check");
    let codec = Codec::default();
    let cases: Vec<_> = golden_cases().into_iter().chain(stress_cases()).collect();
    for (name, value) in &cases {
        std::fs::write(
            dir.join(format!("{name}.bin")),
            codec.encode(value).unwrap(),
        )
        .unwrap();
    }
    let out = common::run_python(
        &python,
        "golden_check.py",
        &["check", dir.to_str().unwrap()],
        None,
    );
    let out = String::from_utf8(out).unwrap();
    // The script names every case it checked; all of ours must be there.
    for (name, _) in &cases {
        assert!(
            out.lines().any(|l| l == format!("ok {name}")),
            "{name} not checked:\n{out}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reference_encoded_stress_lists_decode_and_reencode_identically() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let dir = interop_dir("write");
    common::run_python(
        &python,
        "golden_check.py",
        &["write", dir.to_str().unwrap()],
        None,
    );
    let codec = Codec::default();
    for (name, expected) in stress_cases() {
        let data = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        let decoded = codec.decode(Bytes::from(data.clone())).unwrap();
        assert_same(&expected, &decoded);
        assert!(
            codec.encode(&decoded).unwrap() == data,
            "{name}: our encoding differs from the reference's"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
