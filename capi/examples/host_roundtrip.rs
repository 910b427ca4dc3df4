//! Benchmark: the step round trip of a cart-pole hosted from C (through the
//! C ABI: examples/c/cartpole, worker mode; examples/c/engine_loop, pump
//! mode; examples/cpp/cartpole, the C++ wrapper) against the crate's own
//! Rust-hosted `CartPole`, each in a process of its own on loopback, driven
//! by the crate's Rust client, interleaved in rounds so that the machine's
//! load falls on all of them alike. Reports per-step latency and the ratio
//! of each to the Rust-hosted one.
//!
//! ```text
//! make -C examples/c && make -C examples/cpp
//! cargo run --release -p unienv-remote-capi --example host_roundtrip -- [--steps N] [--rounds R]
//! ```
//!
//! With `--serve-rust` the program is instead the Rust-hosted server (the
//! built-in `CartPole`, default configuration, as the C hosts use), printing
//! its URL; the benchmark starts itself that way.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use unienv_remote::client::{Client, ClientConfig, EnvProxy};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::Value;

fn serve_rust() -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = Server::builder(ServerConfig::default());
    builder.register_env("cartpole", unienv_remote::sims::CartPole::new())?;
    let server = builder.start()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = server.listen("127.0.0.1:0").await?;
        println!("serving cartpole on {}", listener.url());
        // Until the benchmark kills it.
        std::future::pending::<()>().await;
        Ok::<(), std::io::Error>(())
    })?;
    Ok(())
}

struct Host {
    name: &'static str,
    child: Child,
    url: String,
}

fn start(name: &'static str, program: &Path, args: &[&str]) -> Host {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (build the examples first)",
                program.display()
            )
        });
    let stdout = child.stdout.take().expect("piped stdout");
    let url = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("ws://"))
                .map(String::from)
        })
        .unwrap_or_else(|| panic!("{name} printed no URL"));
    Host { name, child, url }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn steps(env: &EnvProxy, n: usize, seed: &mut i64, out: &mut Vec<Duration>) {
    let mut action = 0i64;
    for _ in 0..n {
        let t = Instant::now();
        let s = env.step(Value::Int(action)).await.expect("step");
        out.push(t.elapsed());
        action = 1 - action;
        if s.is_done() {
            *seed += 1;
            env.reset(ResetArgs::with_seed(*seed)).await.expect("reset");
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--serve-rust") {
        return serve_rust();
    }
    let flag = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (n, rounds) = (flag("--steps", 2000), flag("--rounds", 10));
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let me = std::env::current_exe()?;
    let mut hosts = vec![
        start("rust", &me, &["--serve-rust"]),
        start("c", &root.join("examples/c/cartpole"), &["127.0.0.1:0"]),
        start(
            "c-pump",
            &root.join("examples/c/engine_loop"),
            &["127.0.0.1:0"],
        ),
        start("cpp", &root.join("examples/cpp/cartpole"), &["127.0.0.1:0"]),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results = runtime.block_on(async {
        let mut envs = Vec::new();
        for h in &hosts {
            let client = Client::connect(&h.url, ClientConfig::default())
                .await
                .expect("connect");
            let env = client.env("cartpole").await.expect("env");
            env.reset(ResetArgs::with_seed(0)).await.expect("reset");
            envs.push((client, env));
        }
        let mut seeds = vec![0i64; hosts.len()];
        let mut samples = vec![Vec::new(); hosts.len()];
        // Warm-up, then interleaved rounds (the order rotates each round).
        for (i, (_, env)) in envs.iter().enumerate() {
            steps(env, n / 4, &mut seeds[i], &mut Vec::new()).await;
        }
        for round in 0..rounds {
            for k in 0..envs.len() {
                let i = (k + round) % envs.len();
                steps(&envs[i].1, n, &mut seeds[i], &mut samples[i]).await;
            }
        }
        for (client, _) in envs {
            client.close().await;
        }
        samples
    });
    // Per host: median, mean and p99 over every step; and, per round, the
    // ratio of its median to the Rust host's median of the same round
    // (adjacent in time, so slow drifts of the machine's load cancel),
    // summarised by the median and the quartiles over the rounds.
    let summary = |s: &[Duration]| {
        let mut s = s.to_vec();
        s.sort();
        let mean = s.iter().sum::<Duration>() / s.len().max(1) as u32;
        (percentile(&s, 0.5), mean, percentile(&s, 0.99))
    };
    let per_round: Vec<Vec<Duration>> = results
        .iter()
        .map(|s| s.chunks(n).map(|c| summary(c).0).collect())
        .collect();
    println!(
        "step round trip, {rounds} interleaved rounds of {n} steps per host (Rust client, loopback)"
    );
    println!(
        "{:<8} {:>10} {:>10} {:>10} {:>22}",
        "host", "median µs", "mean µs", "p99 µs", "ratio (q1 median q3)"
    );
    for (i, h) in hosts.iter().enumerate() {
        let (median, mean, p99) = summary(&results[i]);
        let mut ratios: Vec<f64> = per_round[i]
            .iter()
            .zip(&per_round[0])
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
        println!(
            "{:<8} {:>10.1} {:>10.1} {:>10.1} {:>8.3} {:>6.3} {:>6.3}",
            h.name,
            median.as_secs_f64() * 1e6,
            mean.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            q(0.25),
            q(0.5),
            q(0.75)
        );
    }
    for h in &mut hosts {
        let _ = h.child.kill();
        let _ = h.child.wait();
    }
    Ok(())
}
