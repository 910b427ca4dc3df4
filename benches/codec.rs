//! Codec benchmark: encode and decode of a step-result response, with a
//! memcpy baseline of the same byte counts.
//!
//! Messages (built identically in benches/ref_codec.py for the reference):
//! - `state`: observation {"state": float32 (32,)}
//! - `image`: observation {"image": uint8 (84, 84, 3), "state": float32 (32,)}
//! - `batch`: observation {"image": uint8 (64, 84, 84, 3), "state": float32 (64, 32)}
//!
//! each as the step tuple (observation, reward, terminated, truncated, info)
//! inside a response envelope. Run `benches/codec_compare.sh` for the
//! comparison with the reference and the ratios in BENCHMARKS.md.

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;
use unienv_remote::{dict, Codec, NdArray, Value};

fn state(rows: Option<usize>) -> NdArray {
    let n = rows.unwrap_or(1) * 32;
    let values: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.125 - 6.0).collect();
    match rows {
        None => NdArray::from_vec(values),
        Some(r) => NdArray::from_shape_vec(vec![r, 32], values).unwrap(),
    }
}

fn image(batch: Option<usize>) -> NdArray {
    let n = batch.unwrap_or(1) * 84 * 84 * 3;
    let values: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let mut shape = vec![84, 84, 3];
    if let Some(b) = batch {
        shape.insert(0, b);
    }
    NdArray::from_shape_vec(shape, values).unwrap()
}

/// The response to a `step` call: {"value": STEP, "descriptors": []}.
fn step_response(observation: unienv_remote::Dict) -> Value {
    let info = dict! { "TimeLimit.truncated" => false, "episode_step" => 17 };
    let step = Value::from((observation, 0.5, false, false, info));
    Value::from(dict! {
        "version" => 1,
        "type" => "response",
        "session_id" => "5f0c6a0e2b7d4e4f9d3c1a2b3c4d5e6f",
        "request_id" => "r-000042",
        "resource_id" => "env",
        "operation_id" => "op-000042",
        "result" => dict! { "value" => step, "descriptors" => Value::list(Vec::<Value>::new()) },
    })
}

fn messages() -> Vec<(&'static str, Value)> {
    vec![
        ("state", step_response(dict! { "state" => state(None) })),
        (
            "image",
            step_response(dict! { "image" => image(None), "state" => state(None) }),
        ),
        (
            "batch",
            step_response(dict! { "image" => image(Some(64)), "state" => state(Some(64)) }),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let codec = Codec::default();
    let messages = messages();
    // benches/codec_compare.sh checks that the reference builds the very same
    // messages: it compares these files with its own encoding.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("codec_bench");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, value) in &messages {
        let frame = codec.encode(value).unwrap();
        std::fs::write(dir.join(format!("{name}.bin")), &frame).unwrap();
        println!("message {name} {} bytes", frame.len());
    }

    let mut group = c.benchmark_group("encode");
    for (name, value) in &messages {
        let size = codec.encode(value).unwrap().len();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), value, |b, v| {
            b.iter(|| codec.encode(black_box(v)).unwrap())
        });
    }
    group.finish();

    let mut group = c.benchmark_group("decode");
    for (name, value) in &messages {
        let frame = Bytes::from(codec.encode(value).unwrap());
        group.throughput(Throughput::Bytes(frame.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &frame, |b, f| {
            b.iter(|| codec.decode(black_box(f.clone())).unwrap())
        });
    }
    group.finish();

    // memcpy of the message's byte count into a buffer that already exists.
    let mut group = c.benchmark_group("memcpy");
    for (name, value) in &messages {
        let src = codec.encode(value).unwrap();
        let mut dst = vec![0u8; src.len()];
        group.throughput(Throughput::Bytes(src.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                dst.copy_from_slice(black_box(&src));
                black_box(&dst);
            })
        });
    }
    group.finish();

    // The same copy into a freshly allocated Vec, which is what any encoder
    // returning an owned buffer must at least do.
    let mut group = c.benchmark_group("alloc_memcpy");
    for (name, value) in &messages {
        let src = codec.encode(value).unwrap();
        group.throughput(Throughput::Bytes(src.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                let mut dst = Vec::with_capacity(src.len());
                dst.extend_from_slice(black_box(&src));
                dst
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    targets = bench
}
criterion_main!(benches);
