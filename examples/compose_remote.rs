//! Run: start a server (`cargo run --release -- serve`), then `cargo run --example compose_remote [URL]` (default `ws://127.0.0.1:8765`).
//!
//! Client-side composition: the crate's `WorldEnv` composer runs in this
//! process over the remote `pointmass/world` and its root node
//! `pointmass/node` (`RemoteWorldEnv`). Each reset and step is one component
//! operation on the world's domain: the composer calls the nodes' lifecycle
//! hooks and the world's steps remotely inside it, then completes it, which
//! publishes the boundary to observers (try `unienv-remote watch URL
//! pointmass/node/body` meanwhile). The policy pushes the body towards the
//! goal it reads from the context.

use unienv_remote::client::{blocking, ClientConfig};
use unienv_remote::host::{Env, ResetArgs};
use unienv_remote::{NdArray, Value};

fn floats(v: Option<&Value>) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let array = v
        .and_then(Value::as_array)
        .ok_or("expected a float32 array")?;
    Ok(array.to_vec::<f32>()?)
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
    let world = client.world("pointmass/world")?;
    let root = client.node("pointmass/node")?;
    let mut env = blocking::RemoteWorldEnv::new(world, root)?;
    println!(
        "composed {} with {} children client-side; control timestep {}",
        env.world_id(),
        env.composer().node().child_count(),
        env.control_timestep()
            .map_or_else(|| "none".to_string(), |t| format!("{t} s"))
    );
    for episode in 0..3 {
        // One `reload` operation (the first reset) or `reset` operation.
        let reset = env.reset(ResetArgs::with_seed(episode))?;
        let goal = floats(Some(&reset.context))?;
        let mut body = reset.observation.get("body").cloned().unwrap_or_default();
        let mut total = 0.0;
        for step in 1..=250 {
            let position = floats(body.get("position"))?;
            let velocity = floats(body.get("velocity"))?;
            let push: Vec<f32> = (0..2)
                .map(|k| (3.0 * (goal[k] - position[k]) - 1.5 * velocity[k]).clamp(-1.0, 1.0))
                .collect();
            // One `step` operation: set_next_action, the update substeps and
            // world steps, then the observation reads.
            let result = env.step(Value::Array(NdArray::from_vec(push)))?;
            total += result.reward_f64().unwrap_or(0.0);
            body = result.observation.get("body").cloned().unwrap_or_default();
            if result.is_done() {
                println!(
                    "episode {episode}: {} after {step} steps, return {total:.2}",
                    if result.is_terminated() {
                        "reached the goal"
                    } else {
                        "truncated"
                    }
                );
                break;
            }
        }
    }
    env.close()?;
    client.close();
    Ok(())
}
