//! The Rust `BlockingVectorEnv` as a learner, for `benches/scaling.py`'s
//! `rust2` configuration (BENCHMARKS.md, "Scaling"): N remote env-mode
//! resources stepped in lockstep with random in-bounds actions, one stacked
//! action per vector step (`step_async_stacked`, then `step_wait`), the
//! default autoreset (`NextStep`).
//!
//! Built as an example (its path is stable):
//! `cargo build --release --example vector_driver`, then
//! `target/release/examples/vector_driver URL ID [URL ID ...]`.
//!
//! It connects to every `(URL, ID)`, resets them (seed 0), steps them for a
//! warm-up of `VECTOR_DRIVER_WARMUP` seconds (default 0.3) and prints one
//! JSON line `{"ready": true, "rss_growth": BYTES}` (its resident set's
//! growth while connecting and warming up). Then, for each line read from
//! stdin holding a number of seconds, it resets the envs (seed 0), steps
//! them for that long and prints one JSON line
//! `{"env_steps": N, "window": SECONDS, "durations": [SECONDS, ...]}` (the
//! wall time of each vector step). It closes the envs and exits 0 when stdin
//! ends. The caller measures this process's CPU (`/proc/PID/stat`) around
//! each round.
//!
//! Any failure (a connection, a refused request, a failed sub-environment,
//! an action space other than a float `Box`) is printed on stderr and exits
//! 1.

/// The allocator of the Python package and of the `unienv-remote` binary
/// (mimalloc), so that this learner is compared with the Python one over
/// the same core, not over another allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use unienv_remote::client::vector::{AutoresetMode, BlockingVectorEnv, EnvAddress, VectorError};
use unienv_remote::client::ClientConfig;
use unienv_remote::host::space::{BoxSpace, Space};
use unienv_remote::sims::SplitMix64;
use unienv_remote::{DType, NdArray, Value};

/// How many distinct stacked actions are drawn (cycled through, as the
/// Python configurations do).
const POOL: usize = 16;

/// The first sub-environment failure in `errors`, as a message.
fn first_failure(what: &str, errors: &[Option<VectorError>]) -> Result<(), String> {
    match errors
        .iter()
        .enumerate()
        .find_map(|(i, e)| e.as_ref().map(|e| (i, e)))
    {
        Some((i, e)) => Err(format!("{what}: env {i} failed: {e}")),
        None => Ok(()),
    }
}

/// Resident set size of this process in bytes (`/proc/self/status`), 0 if
/// unknown.
fn rss_bytes() -> u64 {
    std::fs::read_to_string(Path::new("/proc/self/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// The bound of element `flat` (C order in `shape`) from a bound array
/// whose axes are each the full dimension or 1 (broadcast).
fn bound_at(bound: &[f64], bound_shape: &[usize], shape: &[usize], flat: usize) -> f64 {
    let (mut rest, mut index, mut stride) = (flat, 0, 1);
    for (axis, &dim) in shape.iter().enumerate().rev() {
        let coordinate = rest % dim.max(1);
        rest /= dim.max(1);
        let bdim = bound_shape.get(axis).copied().unwrap_or(1);
        if bdim != 1 {
            index += coordinate * stride;
        }
        stride *= bdim;
    }
    bound.get(index).copied().unwrap_or(0.0)
}

/// `POOL` stacked actions of shape `(num_envs, *space.shape)`, uniform in
/// the space's bounds.
fn action_pool(space: &BoxSpace, num_envs: usize) -> Result<Vec<Value>, String> {
    let (low, high) = (space.low.to_f64_vec(), space.high.to_f64_vec());
    let per_env: usize = space.shape.iter().product();
    let mut shape = vec![num_envs];
    shape.extend_from_slice(&space.shape);
    let mut rng = SplitMix64::new(0);
    let mut uniform = |flat: usize| {
        let lo = bound_at(&low, space.low.shape(), &space.shape, flat);
        let hi = bound_at(&high, space.high.shape(), &space.shape, flat);
        let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + unit * (hi - lo)
    };
    let mut pool = Vec::with_capacity(POOL);
    for _ in 0..POOL {
        let flat = (0..num_envs * per_env).map(|i| uniform(i % per_env.max(1)));
        let array = if space.dtype == DType::F32 {
            NdArray::from_shape_vec(shape.clone(), flat.map(|x| x as f32).collect::<Vec<_>>())
        } else if space.dtype == DType::F64 {
            NdArray::from_shape_vec(shape.clone(), flat.collect::<Vec<_>>())
        } else {
            return Err(format!(
                "unsupported action dtype {:?} (float32 or float64 Box only)",
                space.dtype
            ));
        };
        pool.push(Value::from(
            array.map_err(|e| format!("building an action: {e}"))?,
        ));
    }
    Ok(pool)
}

/// Resets (seed 0) and steps for `seconds`; env steps, the window in
/// seconds and, if `durations` is given, each vector step's seconds.
fn lockstep(
    envs: &mut BlockingVectorEnv,
    pool: &[Value],
    seconds: f64,
    mut durations: Option<&mut Vec<f64>>,
) -> Result<(u64, f64), String> {
    let reset = envs
        .reset(BlockingVectorEnv::seeded(Some(0), envs.num_envs()))
        .map_err(|e| format!("reset: {e}"))?;
    first_failure("reset", &reset.errors)?;
    let until =
        Duration::try_from_secs_f64(seconds).map_err(|e| format!("{seconds} seconds: {e}"))?;
    let start = Instant::now();
    let (mut steps, mut now) = (0u64, start);
    while now - start < until {
        let action = &pool[steps as usize % pool.len()];
        envs.step_async_stacked(action)
            .map_err(|e| format!("step: {e}"))?;
        let step = envs.step_wait().map_err(|e| format!("step: {e}"))?;
        first_failure("step", &step.errors)?;
        let after = Instant::now();
        if let Some(d) = durations.as_deref_mut() {
            d.push((after - now).as_secs_f64());
        }
        now = after;
        steps += 1;
    }
    Ok((steps * envs.num_envs() as u64, (now - start).as_secs_f64()))
}

fn run() -> Result<(), String> {
    let rss_start = rss_bytes();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || !args.len().is_multiple_of(2) {
        return Err("usage: vector_driver URL ID [URL ID ...] (seconds per round on stdin)".into());
    }
    let addresses: Vec<EnvAddress> = args
        .chunks(2)
        .map(|pair| EnvAddress::new(pair[0].as_str(), pair[1].as_str()))
        .collect();
    let warmup = match std::env::var("VECTOR_DRIVER_WARMUP") {
        Ok(v) => v
            .parse::<f64>()
            .map_err(|e| format!("VECTOR_DRIVER_WARMUP={v:?}: {e}"))?,
        Err(_) => 0.3,
    };

    let mut envs =
        BlockingVectorEnv::connect(&addresses, ClientConfig::default(), AutoresetMode::NextStep)
            .map_err(|e| format!("connect: {e}"))?;
    let space = envs
        .inner()
        .single_action_space()
        .ok_or("the envs have no action space")?;
    let pool = match space.as_ref() {
        Space::Box(b) => action_pool(b, envs.num_envs())?,
        other => {
            return Err(format!(
                "unsupported action space {other:?} (float Box only)"
            ))
        }
    };
    lockstep(&mut envs, &pool, warmup, None)?;

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let emit = |out: &mut std::io::StdoutLock<'_>, line: serde_json::Value| {
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("writing to stdout: {e}"))
    };
    emit(
        &mut out,
        serde_json::json!({"ready": true, "rss_growth": rss_bytes().saturating_sub(rss_start)}),
    )?;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        let seconds: f64 = line
            .trim()
            .parse()
            .map_err(|e| format!("stdin line {line:?} is not a number of seconds: {e}"))?;
        let mut durations = Vec::new();
        let (env_steps, window) = lockstep(&mut envs, &pool, seconds, Some(&mut durations))?;
        emit(
            &mut out,
            serde_json::json!({"env_steps": env_steps, "window": window, "durations": durations}),
        )?;
    }
    envs.close();
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("vector_driver: {e}");
        std::process::exit(1);
    }
}
