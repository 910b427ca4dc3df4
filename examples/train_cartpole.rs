//! Run: start a server (`cargo run --release -- serve`), then `cargo run --release --example train_cartpole [URL]` (default `ws://127.0.0.1:8765`).
//!
//! A random-policy training loop over the server's `cartpole` with the
//! blocking client: a baseline of uniformly random actions, then a random
//! search over linear policies `action = int(w · obs > 0)` (each candidate
//! drawn uniformly in `[-1, 1]^4` and scored on seeded episodes; the best
//! one is kept), and a final evaluation of the best policy on fresh
//! episodes.

use std::time::Instant;
use unienv_remote::client::{blocking, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::sims::SplitMix64;
use unienv_remote::Value;

const CANDIDATES: usize = 30;
const EPISODES_PER_SCORE: i64 = 3;
const FINAL_EPISODES: i64 = 10;

/// Runs one episode and returns its return and length.
fn episode(
    env: &blocking::EnvProxy,
    seed: i64,
    mut policy: impl FnMut(&[f32]) -> i64,
) -> Result<(f64, u64), Box<dyn std::error::Error>> {
    let reset = env.reset(ResetArgs::with_seed(seed))?;
    let mut obs = observation(&reset.observation)?;
    let (mut total, mut steps) = (0.0, 0);
    loop {
        let step = env.step(policy(&obs))?;
        total += step.reward_f64().unwrap_or(0.0);
        steps += 1;
        obs = observation(&step.observation)?;
        if step.is_done() {
            return Ok((total, steps));
        }
    }
}

fn observation(v: &Value) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let array = v.as_array().ok_or("cartpole observes a float32 array")?;
    Ok(array.to_vec::<f32>()?)
}

fn linear(w: [f32; 4]) -> impl Fn(&[f32]) -> i64 {
    move |obs: &[f32]| i64::from(obs.iter().zip(w).map(|(o, w)| o * w).sum::<f32>() > 0.0)
}

/// Prints an error readably (`error: …`, not Rust's debug form) and exits 1.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "ws://127.0.0.1:8765".to_string());
    let client = blocking::Client::connect(&url, ClientConfig::default())?;
    let env = client.env("cartpole")?;
    println!(
        "connected to {} {} at {url}; action space {}, observation space {}",
        client.server_info().server,
        client.server_info().server_version,
        env.action_space().map_or("-".into(), |s| s.to_string()),
        env.observation_space()
            .map_or("-".into(), |s| s.to_string()),
    );
    let mut rng = SplitMix64::new(7);
    let started = Instant::now();
    let mut total_steps = 0;

    // Baseline: uniformly random actions.
    let mut baseline = 0.0;
    for seed in 0..FINAL_EPISODES {
        let (ret, steps) = episode(&env, 1000 + seed, |_| i64::from(rng.next_f64() < 0.5))?;
        baseline += ret;
        total_steps += steps;
    }
    baseline /= FINAL_EPISODES as f64;
    println!("random actions: mean return {baseline:.1}");

    // Random search over linear policies.
    let mut best = ([0.0f32; 4], f64::NEG_INFINITY);
    for candidate in 0..CANDIDATES {
        let w = [(); 4].map(|_| rng.uniform(-1.0, 1.0) as f32);
        let mut score = 0.0;
        for seed in 0..EPISODES_PER_SCORE {
            let (ret, steps) = episode(&env, seed, linear(w))?;
            score += ret;
            total_steps += steps;
        }
        score /= EPISODES_PER_SCORE as f64;
        if score > best.1 {
            best = (w, score);
            println!("candidate {candidate:2}: mean return {score:6.1}  (new best, w = {w:.3?})");
        }
        if score >= 500.0 {
            break;
        }
    }

    // Evaluation on fresh episodes.
    let mut evaluation = 0.0;
    for seed in 0..FINAL_EPISODES {
        let (ret, steps) = episode(&env, 2000 + seed, linear(best.0))?;
        evaluation += ret;
        total_steps += steps;
    }
    evaluation /= FINAL_EPISODES as f64;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "best policy: mean return {evaluation:.1} over {FINAL_EPISODES} fresh episodes \
         (random actions: {baseline:.1})"
    );
    println!(
        "{total_steps} steps in {seconds:.2} s ({:.0} steps/s)",
        total_steps as f64 / seconds
    );
    env.close()?;
    client.close();
    Ok(())
}
