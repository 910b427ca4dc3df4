//! A step round trip through the relay against the same step direct, in
//! one run on one machine (SPEC.md, "Relay and dial-out hosts"): one
//! fixture server both listening (direct) and dialing an in-process relay
//! (through it), our client, on `bench_state` and `bench_image`, the two
//! paths measured in alternating rounds; the ratio is relay / direct.
//!
//! Run: `cargo bench --bench relay` (`RELAY_SECONDS`, the time per path
//! and round, default 2; `RELAY_ROUNDS`, default 3). Without `--bench`
//! (as `cargo test --all-targets` runs it) it is a smoke run: a few steps
//! each, no figures worth reading.

use std::time::{Duration, Instant};
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::relay::{Relay, RelayConfig};
use unienv_remote::server::{DialOptions, Server, ServerConfig};

const ENVS: [&str; 2] = ["bench_state", "bench_image"];

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Step round trips on `id` at `url` for `budget` (at least `min` steps):
/// every round trip's time.
async fn steps(url: &str, id: &str, budget: Duration, min: usize) -> Vec<Duration> {
    let client = Client::connect(url, ClientConfig::default())
        .await
        .expect("connect");
    let env = client.env(id).await.expect("env");
    let space = env
        .descriptor()
        .action_space()
        .expect("the env's action space");
    let action = unienv_remote::cli::neutral_action(&space).expect("a neutral action");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    // Warm-up.
    for _ in 0..min.min(20) {
        env.step(action.clone()).await.expect("step");
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < min || start.elapsed() < budget {
        let t = Instant::now();
        env.step(action.clone()).await.expect("step");
        samples.push(t.elapsed());
    }
    env.close().await.expect("release");
    client.close().await;
    samples
}

fn median_us(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (budget, rounds, min) = if bench {
        (
            Duration::from_secs_f64(env_f64("RELAY_SECONDS", 2.0)),
            env_f64("RELAY_ROUNDS", 3.0) as usize,
            200,
        )
    } else {
        (Duration::ZERO, 1, 20)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let relay = Relay::start("127.0.0.1:0", RelayConfig::default())
            .await
            .expect("relay");
        let mut b = Server::builder(ServerConfig::default());
        unienv_remote::fixtures::register(&mut b).expect("fixtures");
        let server = b.start().expect("server");
        let listener = server.listen("127.0.0.1:0").await.expect("listen");
        let dial = server
            .dial(&relay.url(), DialOptions::new("bench"))
            .expect("dial");
        assert!(dial.wait_registered(Duration::from_secs(30)).await);
        let direct = listener.url();
        let through = relay.host_url("bench");
        println!("step round trip, our client, median over {rounds} alternating rounds:");
        for id in ENVS {
            let (mut d, mut r) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                d.extend(steps(&direct, id, budget, min).await);
                r.extend(steps(&through, id, budget, min).await);
            }
            let (d, r) = (median_us(d), median_us(r));
            println!(
                "  {id:<12} direct {d:>9.1} µs   through the relay {r:>9.1} µs   ratio {:.2}x",
                r / d
            );
        }
        dial.stop();
        server.shutdown().await;
        relay.shutdown().await;
    });
}
