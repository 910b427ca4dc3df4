//! What recording costs per transition, in CPU time (load-insensitive, unlike
//! wall time on a shared machine): the learner-side recorder
//! (`unienv_remote::record::VectorRecorder`) fed the transitions of 16
//! Pendulum-shaped sub-envs (observation `Box(3,) float32`, action
//! `Box(1,) float32`; flattened elements, one file each), episodes of 200
//! steps; and, for the floor, the same number of files of the same size
//! written by a plain loop (`std::fs::write`). With `--format parquet`,
//! the Parquet format instead (pieces of 512 transitions at the default
//! `PIECE_BYTES`, or sized for `--piece-bytes N`; no plain loop).
//!
//! `--commit-each`: waits for the writer after each episode's end, so that
//! each episode is committed on its own, as at a simulator's pace (without
//! it the writer, behind, commits several episodes of a buffer at once).
//!
//! ```sh
//! cargo bench --bench record_write -- [--steps N] [--format npz|parquet] [--piece-bytes N] [--commit-each] [DIR ...]
//! ```
//!
//! DIRs default to the system's temporary directory and `/dev/shm`. Figures:
//! the writer thread's CPU time per transition (`/proc/self/task/*/schedstat`),
//! the recording caller's (building and queueing the records), and the
//! plain loop's per file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use unienv_remote::codec::{DType, NdArray, Value};
use unienv_remote::host::Space;
use unienv_remote::record::{
    ParquetFormat, RecordFormat, RowKind, VectorRecord, VectorRecorder, PIECE_BYTES,
};

const ENVS: usize = 16;
const EPISODE: usize = 200;

/// CPU nanoseconds of this process's thread named `name`.
fn thread_cpu_ns(name: &str) -> Option<u64> {
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let stat = std::fs::read_to_string(entry.path().join("schedstat")).ok()?;
            return stat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// CPU nanoseconds of the calling thread.
fn own_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn f32s(shape: Vec<usize>, seed: usize) -> Value {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i + seed) % 97) as f32 * 0.01).collect();
    Value::Array(NdArray::from_shape_vec(shape, data).expect("shape"))
}

struct Figures {
    writer_ns: f64,
    caller_ns: f64,
    wall_us: f64,
}

fn record(dir: &Path, steps: usize, format: RecordFormat, commit_each: bool) -> Figures {
    let observation = Space::boxed(DType::F32, vec![3], -8.0, 8.0);
    let action = Space::boxed(DType::F32, vec![1], -2.0, 2.0);
    let recorder = VectorRecorder::start(dir, observation, action, ENVS, format).expect("recorder");
    let ids: Vec<usize> = (0..ENVS).collect();
    let reset = VectorRecord {
        env_id: ids.clone(),
        observation: f32s(vec![ENVS, 3], 0),
        reward: vec![0.0; ENVS],
        terminated: vec![false; ENVS],
        truncated: vec![false; ENVS],
        kind: vec![RowKind::Reset; ENVS],
    };
    recorder.record(reset.clone());
    recorder.flush();
    let writer_before = thread_cpu_ns("unienv-recorder").unwrap_or(0);
    let caller_before = own_cpu_ns();
    let begin = Instant::now();
    for t in 0..steps {
        let actions = f32s(vec![ENVS, 1], t);
        let end = (t + 1) % EPISODE == 0;
        recorder.record(VectorRecord {
            env_id: ids.clone(),
            observation: f32s(vec![ENVS, 3], t + 1),
            reward: vec![-1.5; ENVS],
            terminated: vec![false; ENVS],
            truncated: vec![end; ENVS],
            kind: (0..ENVS)
                .map(|row| RowKind::Step {
                    actions: actions.clone(),
                    row,
                })
                .collect(),
        });
        if end {
            let mut r = reset.clone();
            r.observation = f32s(vec![ENVS, 3], t + 2);
            recorder.record(r);
            if commit_each {
                recorder.flush();
            }
        }
    }
    let caller = own_cpu_ns() - caller_before;
    recorder.flush();
    let wall = begin.elapsed();
    let writer = thread_cpu_ns("unienv-recorder").unwrap_or(0) - writer_before;
    let stats = recorder.stats();
    recorder.close();
    let written = stats.transitions.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(written as usize, steps * ENVS, "every transition written");
    let n = (steps * ENVS) as f64;
    Figures {
        writer_ns: writer as f64 / n,
        caller_ns: caller as f64 / n,
        wall_us: wall.as_secs_f64() * 1e6 / n,
    }
}

/// Per file: `count` files of `size` bytes written by `std::fs::write`.
fn plain_files(dir: &Path, count: usize, size: usize) -> f64 {
    let bytes = vec![7u8; size];
    let before = own_cpu_ns();
    for i in 0..count {
        std::fs::write(dir.join(format!("{i}.npz")), &bytes).expect("write");
    }
    (own_cpu_ns() - before) as f64 / count as f64
}

fn main() {
    let mut steps: usize = 2000;
    let mut parquet = false;
    let mut piece_bytes = PIECE_BYTES;
    let mut commit_each = false;
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--steps" => steps = args.next().and_then(|s| s.parse().ok()).unwrap_or(steps),
            "--format" => parquet = args.next().as_deref() == Some("parquet"),
            "--piece-bytes" => {
                piece_bytes = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(piece_bytes)
            }
            "--commit-each" => commit_each = true,
            "--bench" => {}
            other => dirs.push(PathBuf::from(other)),
        }
    }
    let steps = steps.div_ceil(EPISODE) * EPISODE;
    if dirs.is_empty() {
        dirs.push(std::env::temp_dir());
        if Path::new("/dev/shm").is_dir() {
            dirs.push(PathBuf::from("/dev/shm"));
        }
    }
    println!(
        "{} transitions ({ENVS} envs x {steps} steps, episodes of {EPISODE})",
        steps * ENVS
    );
    for dir in dirs {
        let root = tempfile::tempdir_in(&dir).expect("temporary directory");
        if parquet {
            let format = RecordFormat::External(Arc::new(ParquetFormat::new(piece_bytes)));
            let f = record(&root.path().join("rec"), steps, format, commit_each);
            println!(
                "{} (parquet, pieces for {piece_bytes} bytes): writer {:.2} us CPU/transition, caller {:.2} us CPU/transition, \
                 wall {:.2} us/transition",
                dir.display(),
                f.writer_ns / 1e3,
                f.caller_ns / 1e3,
                f.wall_us,
            );
            continue;
        }
        let f = record(
            &root.path().join("rec"),
            steps,
            RecordFormat::Npz,
            commit_each,
        );
        let size = std::fs::metadata(root.path().join("rec/0/storage/inner_storage/0.npz"))
            .map(|m| m.len() as usize)
            .unwrap_or(256);
        let files = root.path().join("plain");
        std::fs::create_dir_all(&files).expect("mkdir");
        let plain = plain_files(&files, steps * ENVS, size);
        println!(
            "{}: writer {:.2} us CPU/transition, caller {:.2} us CPU/transition, \
             wall {:.2} us/transition; plain loop {:.2} us CPU/file ({size} bytes)",
            dir.display(),
            f.writer_ns / 1e3,
            f.caller_ns / 1e3,
            f.wall_us,
            plain / 1e3
        );
    }
}
