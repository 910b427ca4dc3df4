//! Many remote environments stepped as one (a vector env).
//!
//! [`VectorEnv`] drives N env-mode resources, on any mix of servers and
//! resource IDs, the way Gymnasium's `VectorEnv` drives N local envs:
//!
//! - **All requests at once.** [`VectorEnv::step_async`] queues every
//!   resource's request on its connection before the call returns (a single
//!   env's step with its reply handed to the vector env's sink as it is read,
//!   no task per request; other requests carried by one task on the runtime
//!   that created the vector env); [`VectorEnv::step_wait`] gathers the
//!   replies and stacks them. The learner's compute between the
//!   two calls overlaps the simulators'. Envs on the same server share one
//!   connection (their requests are pipelined on it; the server runs each
//!   domain on its own thread).
//! - **Batched resources.** An env with a `batch_size` B (a batched UniEnv
//!   env, e.g. Python's `unienv_remote.BatchedEnv` or the crate's
//!   [`BatchedEnv`](crate::host::BatchedEnv)) contributes B consecutive
//!   sub-environments, stepped by one request per step; batched and
//!   unbatched resources mix, as long as one element of each has the same
//!   spaces ([`VectorEnv::single_observation_space`]). Autoreset reaches a
//!   batched resource through reset masks (one extra request on a step
//!   where some of its sub-envs must be reset: in `NextStep` mode pipelined
//!   right behind the step, in `SameStep` mode after the step's reply, which
//!   says who ended; see the `NextStep` note below). A failed request fails all of its
//!   sub-environments: the resource is faulted as a whole.
//! - **Asynchronous stepping, EnvPool's way.** [`VectorEnv::send`] steps
//!   some sub-environments (whole resources) and [`VectorEnv::recv`]
//!   returns the first ones whose results arrived (at least `min`, whole
//!   resources, ids in [`VectorStep::env_id`]), so a learner never waits for
//!   the slowest simulator.
//! - **Stacking.** Observations are stacked along a new leading axis
//!   ([`stack`]): arrays of one dtype and shape become one array, numbers and
//!   booleans become 1-D arrays, dicts and tuples are stacked field by field;
//!   anything else (strings, mismatched shapes) is gathered into a list.
//!   Rewards are `f64`, `terminated` / `truncated` are booleans, one per env.
//!   Actions are given stacked and split by [`unstack`] (or one per env).
//! - **Autoreset** ([`AutoresetMode`]): by default Gymnasium 1.x's
//!   `NEXT_STEP`, what its `SyncVectorEnv` and `AsyncVectorEnv` do unless
//!   told otherwise. An env whose episode ended (terminated or truncated) in
//!   one step is reset (without a seed, so its generator continues) in the
//!   next step instead of stepped: that step's action for it is ignored, and
//!   it reports the reset's observation and info with reward 0 and
//!   `terminated = truncated = false` ([`VectorStep::autoreset`] marks it).
//!   `SAME_STEP` resets right after the ending step and reports the reset's
//!   observation, with the ending step's observation and info in
//!   [`VectorStep::final_observation`] / [`VectorStep::final_info`];
//!   `DISABLED` never resets. In `NEXT_STEP` mode, the finished
//!   sub-environments of a batched resource are stepped once more (their
//!   action ignored, their result discarded) before their masked reset: a
//!   batched env steps all of its sub-envs or none.
//! - **Reconnecting.** [`VectorEnv::reconnect`] points some envs at a new
//!   address (a restarted server) without touching the others; they too
//!   are reset before they are stepped.
//! - **Per-env failures.** A sub-environment whose request fails is reported
//!   in [`VectorStep::errors`] (with [`VectorError::is_uncertain`] telling,
//!   exactly as [`ClientError::is_uncertain`](crate::client::ClientError::is_uncertain), whether its mutation may have
//!   executed); the others' results are complete. Its slots in the stacked
//!   arrays hold zeros (reward 0, not terminated, not truncated). Nothing is
//!   retried. A failed env is not stepped again until a successful reset: until
//!   then each step reports [`VectorError::NeedsReset`] for it without
//!   sending anything. A certain refusal (`invalid_request` not marked
//!   uncertain: an action the server refused before the env ran, NaN, out
//!   of bounds, or of the wrong shape) is reported the same way in its call
//!   but does not fail the env: nothing changed, and the next step goes on
//!   from where it was.
//!
//! [`BlockingVectorEnv`] owns its runtime, for code that is not async: a
//! current-thread runtime driven by the calling thread (its `step_async`
//! writes the requests, its `step_wait` reads the replies), so that a
//! vector step costs no hand-off between threads on the learner's side.
//!
//! ```
//! use unienv_remote::client::vector::{AutoresetMode, BlockingVectorEnv, EnvAddress};
//! use unienv_remote::client::ClientConfig;
//! use unienv_remote::server::{Server, ServerConfig};
//! use unienv_remote::{fixtures, NdArray, Value};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = tokio::runtime::Runtime::new()?;
//! let mut builder = Server::builder(ServerConfig::default());
//! fixtures::register(&mut builder)?;
//! let server = builder.start()?;
//! let listener = runtime.block_on(server.listen("127.0.0.1:0"))?;
//!
//! // Two envs: any mix of servers and resource IDs works the same way.
//! let addresses = vec![
//!     EnvAddress::new(listener.url(), "counter"),
//!     EnvAddress::new(listener.url(), "large_info"),
//! ];
//! let mut envs =
//!     BlockingVectorEnv::connect(&addresses, ClientConfig::default(), AutoresetMode::NextStep)?;
//! let reset = envs.reset(BlockingVectorEnv::seeded(Some(1), 2))?;
//! assert!(reset.errors.iter().all(Option::is_none));
//! // One stacked action of shape (2, 2), split along the first axis.
//! let actions = Value::from(NdArray::from_shape_vec(vec![2, 2], vec![1.0f32; 4])?);
//! envs.step_async_stacked(&actions)?;
//! // ... compute here while the servers step ...
//! let step = envs.step_wait()?;
//! assert_eq!(step.reward, vec![4.0, 6.0]); // seeds 1 and 2, plus 1 each, summed
//! envs.close();
//! runtime.block_on(server.shutdown());
//! # Ok(()) }
//! ```

mod blocking;
mod env;
mod mode;

pub use crate::codec::stack::{stack, stack_filled, unstack, zeros_like};
pub use blocking::attributes::AttributeError;
pub use blocking::BlockingVectorEnv;
pub use env::{
    AutoresetMode, EnvAddress, InfoBlock, StepInfos, VectorEnv, VectorError, VectorReset,
    VectorStep,
};

#[cfg(test)]
mod tests;
