//! Run: `cargo run --example host_custom_sim [ADDR]` (default `127.0.0.1:8765`), then connect a client, e.g. `RemoteClient.connect("ws://127.0.0.1:8765").env("oscillator")`.
//!
//! Hosts a custom simulator, a damped mass on a spring that the agent must
//! bring to rest, next to the built-in ones (`cartpole`, `pointmass`,
//! `gripper`), until Ctrl-C.

use unienv_remote::codec::{DType, Dict, NdArray, Value};
use unienv_remote::host::{Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::sims::SplitMix64;

/// x'' = −k·x − c·x' + F, with F ∈ [−1, 1]; reward −(x² + 0.1·x'²).
struct Oscillator {
    state: [f64; 2],
    steps: u32,
    rng: SplitMix64,
}

impl Env for Oscillator {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        if let Some(seed) = args.seed {
            self.rng = SplitMix64::from_seed(seed);
        }
        self.state = [self.rng.uniform(-1.0, 1.0), self.rng.uniform(-1.0, 1.0)];
        self.steps = 0;
        Ok(ResetResult::new((), self.observation(), Dict::new()))
    }

    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        // Refusals come first, before any state changes: an invalid-argument
        // error is a certain `invalid_request` and the env stays usable.
        if self.steps == u32::MAX {
            return Err(HostError::invalid_argument(
                "step() was called before reset(): call reset() first",
            ));
        }
        let force = action
            .as_scalar_f64()
            .filter(|f| f.is_finite())
            .ok_or_else(|| HostError::invalid_argument("the action is one finite number"))?
            .clamp(-1.0, 1.0);
        let [x, v] = self.state;
        let dt = 0.05;
        let v = v + dt * (-4.0 * x - 0.1 * v + force);
        self.state = [x + dt * v, v];
        self.steps += 1;
        let reward = -(self.state[0].powi(2) + 0.1 * self.state[1].powi(2));
        Ok(StepResult::new(
            self.observation(),
            reward,
            false,
            self.steps >= 200,
            Dict::new(),
        ))
    }

    fn action_space(&self) -> Option<Space> {
        Some(Space::boxed(DType::F32, vec![1], -1.0, 1.0))
    }

    fn observation_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![2]))
    }
}

impl Oscillator {
    fn observation(&self) -> NdArray {
        NdArray::from_vec(self.state.map(|s| s as f32).to_vec())
    }
}

/// Prints an error readably (`error: …`, not Rust's debug form) and exits 1.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8765".into());
    // Check actions against the action spaces before the simulators see them.
    let config = ServerConfig {
        validate_actions: true,
        ..ServerConfig::default()
    };
    let mut builder = Server::builder(config);
    let oscillator = Oscillator {
        state: [0.0; 2],
        // No episode yet: `step` refuses until the first `reset`.
        steps: u32::MAX,
        rng: SplitMix64::from_entropy(),
    };
    builder.register_env("oscillator", oscillator)?;
    unienv_remote::sims::register(&mut builder)?;
    let server = builder.start()?;
    let listener = server.listen(addr.as_str()).await?;
    println!(
        "serving {} on {}; Ctrl-C stops",
        server.roots().join(", "),
        listener.url()
    );
    tokio::signal::ctrl_c().await?;
    println!("shutting down");
    server.shutdown().await;
    Ok(())
}
