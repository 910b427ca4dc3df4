//! Many remote environments stepped as one (a vector env).
//!
//! [`VectorEnv`] drives N env-mode resources, on any mix of servers and
//! resource IDs, the way Gymnasium's `VectorEnv` drives N local envs:
//!
//! - **All requests at once.** [`VectorEnv::step_async`] spawns one task per
//!   sub-environment on the runtime that created the vector env, so every
//!   request is on its way before the call returns; [`VectorEnv::step_wait`]
//!   gathers the replies and stacks them. The learner's compute between the
//!   two calls overlaps the simulators'. Envs on the same server share one
//!   connection (their requests are pipelined on it; the server runs each
//!   domain on its own thread).
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
//!   `DISABLED` never resets.
//! - **Per-env failures.** A sub-environment whose request fails is reported
//!   in [`VectorStep::errors`] (with [`VectorError::is_uncertain`] telling,
//!   exactly as [`ClientError::is_uncertain`], whether its mutation may have
//!   executed); the others' results are complete. Its slots in the stacked
//!   arrays hold zeros (reward 0, not terminated, not truncated). Nothing is
//!   retried. A failed env is not stepped again until a successful reset: until
//!   then each step reports [`VectorError::NeedsReset`] for it without
//!   sending anything.
//! - **Reconnecting.** [`VectorEnv::reconnect`] points some envs at a new
//!   address (a restarted server) without touching the others; they too
//!   are reset before they are stepped.
//!
//! [`BlockingVectorEnv`] owns its runtime (one worker thread, which carries
//! the requests while the caller computes) for code that is not async.
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
//! let server = builder.start();
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

mod reconnect;

use super::{Client, ClientConfig, ClientError, EnvProxy};
use crate::codec::{DType, Dict, NdArray, Value};
use crate::host::{ResetArgs, Space};
use bytes::Bytes;
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// Where a sub-environment lives: a server URL and an env resource ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EnvAddress {
    /// The server's `ws://` URL.
    pub url: String,
    /// The env's resource ID on that server.
    pub resource_id: String,
}

impl EnvAddress {
    /// An address.
    pub fn new(url: impl Into<String>, resource_id: impl Into<String>) -> EnvAddress {
        EnvAddress {
            url: url.into(),
            resource_id: resource_id.into(),
        }
    }
}

/// When finished sub-environments are reset, following Gymnasium 1.x's
/// `gymnasium.vector.AutoresetMode` (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoresetMode {
    /// Reset in the step after the episode ended (Gymnasium's default).
    #[default]
    NextStep,
    /// Reset right after the ending step, in the same call.
    SameStep,
    /// Never reset automatically.
    Disabled,
}

impl AutoresetMode {
    /// Gymnasium's value of the mode (`"NextStep"`, `"SameStep"`,
    /// `"Disabled"`).
    pub fn as_str(self) -> &'static str {
        match self {
            AutoresetMode::NextStep => "NextStep",
            AutoresetMode::SameStep => "SameStep",
            AutoresetMode::Disabled => "Disabled",
        }
    }

    /// The mode of a Gymnasium value or name (`"NextStep"` or `"NEXT_STEP"`,
    /// case-insensitive).
    pub fn parse(s: &str) -> Option<AutoresetMode> {
        match s.to_ascii_lowercase().replace('_', "").as_str() {
            "nextstep" => Some(AutoresetMode::NextStep),
            "samestep" => Some(AutoresetMode::SameStep),
            "disabled" => Some(AutoresetMode::Disabled),
            _ => None,
        }
    }
}

/// An error of a vector env, or of one of its sub-environments.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum VectorError {
    /// Sub-environment `index`'s request failed in this call.
    #[error("env {index} ({resource_id}): {error}")]
    Env {
        /// The sub-environment's index.
        index: usize,
        /// Its resource ID.
        resource_id: String,
        /// What the client reported.
        error: ClientError,
    },
    /// Sub-environment `index` failed in an earlier call and has not been
    /// reset successfully since; nothing was sent to it.
    #[error("env {index} ({resource_id}) failed earlier and must be reset first: {error}")]
    NeedsReset {
        /// The sub-environment's index.
        index: usize,
        /// Its resource ID.
        resource_id: String,
        /// The earlier failure.
        error: ClientError,
    },
    /// A server could not be reached while building the vector env.
    #[error("cannot connect to {url}: {error}")]
    Connect {
        /// The server's URL.
        url: String,
        /// What the client reported.
        error: ClientError,
    },
    /// The call does not fit the vector env's state or shape (wrong number
    /// of actions, a step already pending, mismatched spaces, ...).
    #[error("invalid use of the vector env: {0}")]
    InvalidUse(String),
}

impl VectorError {
    /// Whether a mutation may have executed remotely: the client error's
    /// [`ClientError::is_uncertain`] for a failure in this call, `false`
    /// otherwise (nothing was sent).
    pub fn is_uncertain(&self) -> bool {
        match self {
            VectorError::Env { error, .. } => error.is_uncertain(),
            _ => false,
        }
    }

    /// The sub-environment's index, for per-env errors.
    pub fn index(&self) -> Option<usize> {
        match self {
            VectorError::Env { index, .. } | VectorError::NeedsReset { index, .. } => Some(*index),
            _ => None,
        }
    }

    /// The underlying client error, when there is one.
    pub fn client_error(&self) -> Option<&ClientError> {
        match self {
            VectorError::Env { error, .. }
            | VectorError::NeedsReset { error, .. }
            | VectorError::Connect { error, .. } => Some(error),
            VectorError::InvalidUse(_) => None,
        }
    }
}

/// What [`VectorEnv::reset`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorReset {
    /// The observations, stacked ([`stack`]; zeros for failed envs; `Null`
    /// when every env failed).
    pub observation: Value,
    /// Each env's context (`Null` when it has none or failed).
    pub contexts: Vec<Value>,
    /// Each env's info (empty for failed envs).
    pub infos: Vec<Dict>,
    /// Each env's failure, if it failed.
    pub errors: Vec<Option<VectorError>>,
}

/// What [`VectorEnv::step_wait`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorStep {
    /// The observations, stacked ([`stack`]; zeros for failed envs; `Null`
    /// when every env failed).
    pub observation: Value,
    /// Each env's reward (0 for failed and autoreset envs).
    pub reward: Vec<f64>,
    /// Each env's `terminated`.
    pub terminated: Vec<bool>,
    /// Each env's `truncated`.
    pub truncated: Vec<bool>,
    /// Each env's info (the reset's info for autoreset envs).
    pub infos: Vec<Dict>,
    /// `NextStep` mode: the envs that were reset instead of stepped in this
    /// call (their actions were ignored).
    pub autoreset: Vec<bool>,
    /// `SameStep` mode: the ending step's observation of the envs whose
    /// episode ended and that were reset in this call.
    pub final_observation: Vec<Option<Value>>,
    /// `SameStep` mode: the ending step's info of the same envs.
    pub final_info: Vec<Option<Dict>>,
    /// Each env's failure, if it failed.
    pub errors: Vec<Option<VectorError>>,
}

impl VectorStep {
    /// The rewards as a 1-D `float64` array.
    pub fn reward_array(&self) -> NdArray {
        NdArray::from_vec(self.reward.clone())
    }

    /// `terminated` as a 1-D `bool` array.
    pub fn terminated_array(&self) -> NdArray {
        NdArray::from_vec(self.terminated.clone())
    }

    /// `truncated` as a 1-D `bool` array.
    pub fn truncated_array(&self) -> NdArray {
        NdArray::from_vec(self.truncated.clone())
    }
}

/// One env's outcome of a step call.
struct EnvStep {
    observation: Value,
    reward: f64,
    terminated: bool,
    truncated: bool,
    info: Dict,
    autoreset: bool,
    final_: Option<(Value, Dict)>,
}

type Pending = Vec<Option<JoinHandle<Result<EnvStep, ClientError>>>>;

/// N remote envs stepped together (see the [module docs](self)).
pub struct VectorEnv {
    envs: Vec<EnvProxy>,
    clients: Vec<Client>,
    mode: AutoresetMode,
    handle: Handle,
    /// `NextStep`: envs to reset in the next step.
    needs_autoreset: Vec<bool>,
    /// Envs that failed and are not stepped until reset.
    failed: Vec<Option<ClientError>>,
    /// Each env's latest observation (for masked resets).
    last: Vec<Option<Value>>,
    pending: Option<Pending>,
}

impl std::fmt::Debug for VectorEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorEnv")
            .field(
                "envs",
                &self
                    .envs
                    .iter()
                    .map(|e| e.id().to_string())
                    .collect::<Vec<_>>(),
            )
            .field("mode", &self.mode)
            .finish()
    }
}

impl VectorEnv {
    /// Connects to every distinct server of `addresses` (one connection per
    /// URL, all at once) and builds the vector env over their env
    /// resources, in the order given. Must run inside a tokio runtime: the
    /// connections and the per-step tasks run on it.
    ///
    /// Fails with [`VectorError::InvalidUse`] when `addresses` is empty,
    /// names one env twice, or the envs' action or observation spaces
    /// differ, and with [`VectorError::Connect`] when a server cannot be
    /// reached or lacks the env.
    pub async fn connect(
        addresses: &[EnvAddress],
        config: ClientConfig,
        mode: AutoresetMode,
    ) -> Result<VectorEnv, VectorError> {
        let mut urls: Vec<&str> = Vec::new();
        for (i, a) in addresses.iter().enumerate() {
            if addresses[..i].contains(a) {
                return Err(VectorError::InvalidUse(format!(
                    "env {i} ({} at {}) is listed twice",
                    a.resource_id, a.url
                )));
            }
            if !urls.contains(&a.url.as_str()) {
                urls.push(&a.url);
            }
        }
        let handle = Handle::current();
        let connecting: Vec<_> = urls
            .iter()
            .map(|url| {
                let url = url.to_string();
                let config = config.clone();
                handle.spawn(async move { Client::connect(&url, config).await })
            })
            .collect();
        let mut clients = Vec::with_capacity(urls.len());
        let mut first_error = None;
        for (url, task) in urls.iter().zip(connecting) {
            match join(task).await {
                Ok(client) => clients.push(client),
                Err(error) => {
                    first_error.get_or_insert(VectorError::Connect {
                        url: url.to_string(),
                        error,
                    });
                }
            }
        }
        if let Some(e) = first_error {
            for c in &clients {
                c.close().await;
            }
            return Err(e);
        }
        let mut envs = Vec::with_capacity(addresses.len());
        for a in addresses {
            let Some(k) = urls.iter().position(|u| *u == a.url) else {
                unreachable!("every URL was collected above")
            };
            match clients[k].env(&a.resource_id).await {
                Ok(env) => envs.push(env),
                Err(error) => {
                    for c in &clients {
                        c.close().await;
                    }
                    return Err(VectorError::Connect {
                        url: a.url.clone(),
                        error,
                    });
                }
            }
        }
        let mut v = VectorEnv::from_envs(envs, mode)?;
        v.clients = clients;
        Ok(v)
    }

    /// A vector env over proxies obtained elsewhere (any clients). Must run
    /// inside a tokio runtime. Fails when `envs` is empty or the envs'
    /// spaces differ.
    pub fn from_envs(envs: Vec<EnvProxy>, mode: AutoresetMode) -> Result<VectorEnv, VectorError> {
        let Some(first) = envs.first() else {
            return Err(VectorError::InvalidUse(
                "a vector env needs at least one env".into(),
            ));
        };
        let action = first.action_space();
        let observation = first.observation_space();
        for (i, e) in envs.iter().enumerate().skip(1) {
            if e.action_space() != action || e.observation_space() != observation {
                return Err(VectorError::InvalidUse(format!(
                    "env {i} ({}) does not have the action and observation spaces of env 0 ({})",
                    e.id(),
                    first.id()
                )));
            }
        }
        let handle = Handle::try_current().map_err(|_| {
            VectorError::InvalidUse("a vector env must be built inside a tokio runtime".into())
        })?;
        let n = envs.len();
        Ok(VectorEnv {
            envs,
            clients: Vec::new(),
            mode,
            handle,
            needs_autoreset: vec![false; n],
            failed: vec![None; n],
            last: vec![None; n],
            pending: None,
        })
    }

    /// The number of sub-environments.
    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }

    /// The autoreset mode.
    pub fn autoreset_mode(&self) -> AutoresetMode {
        self.mode
    }

    /// The sub-environments' proxies, in order.
    pub fn envs(&self) -> &[EnvProxy] {
        &self.envs
    }

    /// One sub-environment's action space (all are the same).
    pub fn single_action_space(&self) -> Option<Arc<Space>> {
        self.envs[0].action_space()
    }

    /// One sub-environment's observation space (all are the same).
    pub fn single_observation_space(&self) -> Option<Arc<Space>> {
        self.envs[0].observation_space()
    }

    /// Whether a step is pending (sent by [`step_async`](Self::step_async),
    /// not yet gathered by [`step_wait`](Self::step_wait)).
    pub fn is_step_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The sub-environments that failed and must be reset before they are
    /// stepped again.
    pub fn failed(&self) -> Vec<bool> {
        self.failed.iter().map(Option::is_some).collect()
    }

    /// Reset arguments for every env from one seed, as Gymnasium does:
    /// `seed + i` for env `i`, or no seed for all.
    pub fn seeded(seed: Option<i64>, num_envs: usize) -> Vec<ResetArgs> {
        (0..num_envs)
            .map(|i| ResetArgs {
                seed: seed.map(|s| s.wrapping_add(i as i64)),
                ..ResetArgs::default()
            })
            .collect()
    }

    /// Resets every env (all requests at once), each with its own
    /// arguments (see [`VectorEnv::seeded`]). A successful reset clears an
    /// env's failure and its pending autoreset.
    pub async fn reset(&mut self, args: Vec<ResetArgs>) -> Result<VectorReset, VectorError> {
        self.reset_masked(args, None).await.map(|(reset, _)| reset)
    }

    /// Resets the envs where `mask` is true (all when `None`); the others
    /// are left alone: their slots of the stacked observation hold their
    /// latest observation (zeros if none), their contexts are `Null`, their
    /// infos empty and their errors `None`. Returns the result and the mask
    /// used.
    pub async fn reset_masked(
        &mut self,
        args: Vec<ResetArgs>,
        mask: Option<&[bool]>,
    ) -> Result<(VectorReset, Vec<bool>), VectorError> {
        let n = self.num_envs();
        if self.pending.is_some() {
            return Err(VectorError::InvalidUse(
                "a step is pending: call step_wait first".into(),
            ));
        }
        if args.len() != n {
            return Err(VectorError::InvalidUse(format!(
                "{} reset arguments for {n} envs",
                args.len()
            )));
        }
        let mask: Vec<bool> = match mask {
            Some(m) if m.len() != n => {
                return Err(VectorError::InvalidUse(format!(
                    "a reset mask of {} entries for {n} envs",
                    m.len()
                )))
            }
            Some(m) => m.to_vec(),
            None => vec![true; n],
        };
        let tasks: Vec<_> = self
            .envs
            .iter()
            .zip(args)
            .zip(&mask)
            .map(|((env, a), &on)| {
                on.then(|| {
                    let env = env.clone();
                    self.handle.spawn(async move { env.reset(a).await })
                })
            })
            .collect();
        let mut observations = Vec::with_capacity(n);
        let mut contexts = Vec::with_capacity(n);
        let mut infos = Vec::with_capacity(n);
        let mut errors = Vec::with_capacity(n);
        for (i, task) in tasks.into_iter().enumerate() {
            let Some(task) = task else {
                observations.push(self.last[i].clone());
                contexts.push(Value::Null);
                infos.push(Dict::new());
                errors.push(None);
                continue;
            };
            match join(task).await {
                Ok(r) => {
                    self.failed[i] = None;
                    self.needs_autoreset[i] = false;
                    self.last[i] = Some(r.observation.clone());
                    observations.push(Some(r.observation));
                    contexts.push(r.context);
                    infos.push(r.info);
                    errors.push(None);
                }
                Err(error) => {
                    self.failed[i] = Some(error.clone());
                    self.needs_autoreset[i] = false;
                    observations.push(None);
                    contexts.push(Value::Null);
                    infos.push(Dict::new());
                    errors.push(Some(self.env_error(i, error)));
                }
            }
        }
        let observation = stack_filled(&observations);
        Ok((
            VectorReset {
                observation,
                contexts,
                infos,
                errors,
            },
            mask,
        ))
    }

    fn env_error(&self, index: usize, error: ClientError) -> VectorError {
        VectorError::Env {
            index,
            resource_id: self.envs[index].id().to_string(),
            error,
        }
    }

    /// Sends every env's step (or, in `NextStep` mode, the reset of those
    /// whose episode ended) at once and returns without waiting; collect the
    /// results with [`step_wait`](Self::step_wait). `actions` holds one
    /// action per env.
    pub fn step_async(&mut self, actions: Vec<Value>) -> Result<(), VectorError> {
        let n = self.num_envs();
        if self.pending.is_some() {
            return Err(VectorError::InvalidUse(
                "a step is already pending: call step_wait first".into(),
            ));
        }
        if actions.len() != n {
            return Err(VectorError::InvalidUse(format!(
                "{} actions for {n} envs",
                actions.len()
            )));
        }
        let mode = self.mode;
        let pending: Pending = actions
            .into_iter()
            .enumerate()
            .map(|(i, action)| {
                if self.failed[i].is_some() {
                    return None;
                }
                let env = self.envs[i].clone();
                let reset_instead = mode == AutoresetMode::NextStep && self.needs_autoreset[i];
                Some(
                    self.handle
                        .spawn(async move { env_step(env, action, reset_instead, mode).await }),
                )
            })
            .collect();
        self.pending = Some(pending);
        Ok(())
    }

    /// [`step_async`](Self::step_async) with the actions stacked along the
    /// first axis (split by [`unstack`]).
    pub fn step_async_stacked(&mut self, actions: &Value) -> Result<(), VectorError> {
        let split = unstack(actions, self.num_envs()).map_err(VectorError::InvalidUse)?;
        self.step_async(split)
    }

    /// Waits for the step sent by [`step_async`](Self::step_async) and
    /// stacks the results.
    pub async fn step_wait(&mut self) -> Result<VectorStep, VectorError> {
        let Some(pending) = self.pending.take() else {
            return Err(VectorError::InvalidUse(
                "no step is pending: call step_async first".into(),
            ));
        };
        let n = self.num_envs();
        let mut out = VectorStep {
            observation: Value::Null,
            reward: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            infos: vec![Dict::new(); n],
            autoreset: vec![false; n],
            final_observation: vec![None; n],
            final_info: vec![None; n],
            errors: vec![None; n],
        };
        let mut observations: Vec<Option<Value>> = vec![None; n];
        for (i, task) in pending.into_iter().enumerate() {
            let Some(task) = task else {
                if let Some(error) = &self.failed[i] {
                    out.errors[i] = Some(VectorError::NeedsReset {
                        index: i,
                        resource_id: self.envs[i].id().to_string(),
                        error: error.clone(),
                    });
                }
                continue;
            };
            match join(task).await {
                Ok(s) => {
                    self.needs_autoreset[i] = s.terminated || s.truncated;
                    self.last[i] = Some(s.observation.clone());
                    observations[i] = Some(s.observation);
                    out.reward[i] = s.reward;
                    out.terminated[i] = s.terminated;
                    out.truncated[i] = s.truncated;
                    out.infos[i] = s.info;
                    out.autoreset[i] = s.autoreset;
                    if let Some((obs, info)) = s.final_ {
                        out.final_observation[i] = Some(obs);
                        out.final_info[i] = Some(info);
                    }
                }
                Err(error) => {
                    self.needs_autoreset[i] = false;
                    self.failed[i] = Some(error.clone());
                    out.errors[i] = Some(self.env_error(i, error));
                }
            }
        }
        out.observation = stack_filled(&observations);
        Ok(out)
    }

    /// [`step_async`](Self::step_async) then [`step_wait`](Self::step_wait).
    pub async fn step(&mut self, actions: Vec<Value>) -> Result<VectorStep, VectorError> {
        self.step_async(actions)?;
        self.step_wait().await
    }

    /// Closes the connections this vector env opened (those of
    /// [`VectorEnv::connect`]; proxies given to [`VectorEnv::from_envs`]
    /// are left to their owners). A pending step is abandoned.
    pub async fn close(&mut self) {
        if let Some(pending) = self.pending.take() {
            for task in pending.into_iter().flatten() {
                task.abort();
            }
        }
        for c in self.clients.drain(..) {
            c.close().await;
        }
    }
}

/// Awaits a spawned request; a task that panicked or was cancelled counts
/// as a lost reply (uncertain).
async fn join<T>(task: JoinHandle<Result<T, ClientError>>) -> Result<T, ClientError> {
    match task.await {
        Ok(r) => r,
        Err(e) => Err(ClientError::Uncertain(Box::new(ClientError::Closed(
            format!("the request's task ended: {e}"),
        )))),
    }
}

async fn env_step(
    env: EnvProxy,
    action: Value,
    reset_instead: bool,
    mode: AutoresetMode,
) -> Result<EnvStep, ClientError> {
    if reset_instead {
        let r = env.reset(ResetArgs::default()).await?;
        return Ok(EnvStep {
            observation: r.observation,
            reward: 0.0,
            terminated: false,
            truncated: false,
            info: r.info,
            autoreset: true,
            final_: None,
        });
    }
    let s = env.step(action).await?;
    let reward = s.reward.as_scalar_f64().ok_or_else(|| {
        ClientError::Protocol(format!(
            "the step's reward is not a number but {}",
            s.reward.type_name()
        ))
    })?;
    let flag = |v: &Value, what: &str| {
        v.truthy().ok_or_else(|| {
            ClientError::Protocol(format!("the step's {what} has no truth value: {v}"))
        })
    };
    let terminated = flag(&s.terminated, "terminated")?;
    let truncated = flag(&s.truncated, "truncated")?;
    if mode == AutoresetMode::SameStep && (terminated || truncated) {
        let r = env.reset(ResetArgs::default()).await?;
        return Ok(EnvStep {
            observation: r.observation,
            reward,
            terminated,
            truncated,
            info: r.info,
            autoreset: false,
            final_: Some((s.observation, s.info)),
        });
    }
    Ok(EnvStep {
        observation: s.observation,
        reward,
        terminated,
        truncated,
        info: s.info,
        autoreset: false,
        final_: None,
    })
}

/// Stacks values along a new leading axis: arrays of one dtype and shape
/// into one array (native byte order), numbers into a 1-D `float64` array
/// (`int64` when all are integers, `uint64` when all are unsigned),
/// booleans into a `bool` array, dicts with the same keys and tuples (or
/// lists) of the same length field by field. Anything else is gathered into
/// a list of the values.
pub fn stack(items: &[&Value]) -> Value {
    let Some(first) = items.first() else {
        return Value::List(Vec::new());
    };
    let gathered = || Value::List(items.iter().map(|v| (*v).clone()).collect());
    match first {
        Value::Array(_) => {
            let arrays: Option<Vec<&NdArray>> = items.iter().map(|v| v.as_array()).collect();
            match arrays.and_then(|a| stack_arrays(&a)) {
                Some(a) => Value::Array(a),
                None => gathered(),
            }
        }
        Value::Bool(_) => {
            let b: Option<Vec<bool>> = items.iter().map(|v| v.as_bool()).collect();
            b.map_or_else(gathered, |b| Value::Array(NdArray::from_vec(b)))
        }
        Value::Int(_) | Value::UInt(_) | Value::Float(_) => {
            if items.iter().all(|v| matches!(v, Value::Int(_))) {
                let v: Vec<i64> = items.iter().filter_map(|v| v.as_i64()).collect();
                Value::Array(NdArray::from_vec(v))
            } else if items.iter().all(|v| matches!(v, Value::UInt(_))) {
                let v: Vec<u64> = items.iter().filter_map(|v| v.as_u64()).collect();
                Value::Array(NdArray::from_vec(v))
            } else {
                let v: Option<Vec<f64>> = items.iter().map(|v| v.as_f64()).collect();
                v.map_or_else(gathered, |v| Value::Array(NdArray::from_vec(v)))
            }
        }
        Value::Dict(d0) => {
            let dicts: Option<Vec<&Dict>> = items
                .iter()
                .map(|v| v.as_dict().filter(|d| d.keys().eq(d0.keys())))
                .collect();
            let Some(dicts) = dicts else {
                return gathered();
            };
            let mut out = Dict::with_capacity(d0.len());
            for key in d0.keys() {
                let column: Vec<&Value> = dicts.iter().filter_map(|d| d.get(key)).collect();
                out.insert(key, stack(&column));
            }
            Value::Dict(out)
        }
        Value::Tuple(t0) | Value::List(t0) => {
            let seqs: Option<Vec<&[Value]>> = items
                .iter()
                .map(|v| match (first, v) {
                    (Value::Tuple(_), Value::Tuple(t)) | (Value::List(_), Value::List(t))
                        if t.len() == t0.len() =>
                    {
                        Some(t.as_slice())
                    }
                    _ => None,
                })
                .collect();
            let Some(seqs) = seqs else {
                return gathered();
            };
            let columns: Vec<Value> = (0..t0.len())
                .map(|k| stack(&seqs.iter().map(|s| &s[k]).collect::<Vec<_>>()))
                .collect();
            match first {
                Value::Tuple(_) => Value::Tuple(columns),
                _ => Value::List(columns),
            }
        }
        _ => gathered(),
    }
}

fn stack_arrays(arrays: &[&NdArray]) -> Option<NdArray> {
    let first = arrays.first()?.to_native();
    let dtype: DType = first.dtype();
    let row = first.as_bytes().len();
    let mut data = Vec::with_capacity(row.checked_mul(arrays.len())?);
    for a in arrays {
        let a = a.to_native();
        if a.dtype() != dtype || a.shape() != first.shape() {
            return None;
        }
        data.extend_from_slice(a.as_bytes());
    }
    let mut shape = Vec::with_capacity(first.ndim() + 1);
    shape.push(arrays.len());
    shape.extend_from_slice(first.shape());
    NdArray::from_bytes(dtype, shape, Bytes::from(data)).ok()
}

/// [`stack`] with missing entries (failed envs) filled with zeros shaped
/// like the first present one; `Null` when none is present.
pub fn stack_filled(items: &[Option<Value>]) -> Value {
    let Some(template) = items.iter().flatten().next() else {
        return Value::Null;
    };
    let filler = zeros_like(template);
    let refs: Vec<&Value> = items
        .iter()
        .map(|v| v.as_ref().unwrap_or(&filler))
        .collect();
    stack(&refs)
}

/// A value of the same structure with every number zero and every array
/// zero-filled (strings, bytes and other leaves become `Null`).
pub fn zeros_like(value: &Value) -> Value {
    match value {
        Value::Bool(_) => Value::Bool(false),
        Value::Int(_) => Value::Int(0),
        Value::UInt(_) => Value::UInt(0),
        Value::Float(_) => Value::Float(0.0),
        Value::Array(a) => NdArray::zeros(a.dtype().to_native(), a.shape().to_vec())
            .map_or(Value::Null, Value::Array),
        Value::Dict(d) => Value::Dict(d.iter().map(|(k, v)| (k, zeros_like(v))).collect()),
        Value::Tuple(t) => Value::Tuple(t.iter().map(zeros_like).collect()),
        Value::List(t) => Value::List(t.iter().map(zeros_like).collect()),
        _ => Value::Null,
    }
}

/// Splits a stacked value along its first axis into `n` values: an array
/// of leading dimension `n` into its rows (sharing its memory), a dict or
/// tuple field by field, a list of `n` items into its items.
pub fn unstack(value: &Value, n: usize) -> Result<Vec<Value>, String> {
    match value {
        Value::Array(a) => {
            if a.shape().first() != Some(&n) {
                return Err(format!(
                    "an array of shape {:?} cannot be split into {n} actions",
                    a.shape()
                ));
            }
            let row_shape = a.shape()[1..].to_vec();
            let row = a.as_bytes().len() / n.max(1);
            (0..n)
                .map(|i| {
                    NdArray::from_bytes(
                        a.dtype(),
                        row_shape.clone(),
                        a.bytes().slice(i * row..(i + 1) * row),
                    )
                    .map(Value::Array)
                    .map_err(|e| e.to_string())
                })
                .collect()
        }
        Value::Dict(d) => {
            let mut rows = vec![Dict::with_capacity(d.len()); n];
            for (k, v) in d.iter() {
                for (row, item) in rows.iter_mut().zip(unstack(v, n)?) {
                    row.insert(k, item);
                }
            }
            Ok(rows.into_iter().map(Value::Dict).collect())
        }
        Value::Tuple(t) => {
            let mut rows = vec![Vec::with_capacity(t.len()); n];
            for v in t {
                for (row, item) in rows.iter_mut().zip(unstack(v, n)?) {
                    row.push(item);
                }
            }
            Ok(rows.into_iter().map(Value::Tuple).collect())
        }
        Value::List(items) if items.len() == n => Ok(items.clone()),
        other => Err(format!(
            "a {} cannot be split into {n} actions",
            other.type_name()
        )),
    }
}

/// A [`VectorEnv`] for code that is not async: it owns a tokio runtime with
/// one worker thread, which carries every request (so
/// [`step_async`](Self::step_async) returns at once and the requests
/// progress while the caller computes). Do not use it from async code.
pub struct BlockingVectorEnv {
    env: VectorEnv,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for BlockingVectorEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.env.fmt(f)
    }
}

impl BlockingVectorEnv {
    /// Connects (see [`VectorEnv::connect`]).
    pub fn connect(
        addresses: &[EnvAddress],
        config: ClientConfig,
        mode: AutoresetMode,
    ) -> Result<BlockingVectorEnv, VectorError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("unienv-vector")
            .enable_all()
            .build()
            .map_err(|e| VectorError::Connect {
                url: String::new(),
                error: ClientError::Connect(format!("cannot start the client runtime: {e}")),
            })?;
        let env = runtime.block_on(VectorEnv::connect(addresses, config, mode))?;
        Ok(BlockingVectorEnv { env, runtime })
    }

    /// The async vector env inside (for its accessors).
    pub fn inner(&self) -> &VectorEnv {
        &self.env
    }

    /// See [`VectorEnv::seeded`].
    pub fn seeded(seed: Option<i64>, num_envs: usize) -> Vec<ResetArgs> {
        VectorEnv::seeded(seed, num_envs)
    }

    /// See [`VectorEnv::num_envs`].
    pub fn num_envs(&self) -> usize {
        self.env.num_envs()
    }

    /// See [`VectorEnv::reset`].
    pub fn reset(&mut self, args: Vec<ResetArgs>) -> Result<VectorReset, VectorError> {
        self.runtime.block_on(self.env.reset(args))
    }

    /// See [`VectorEnv::reset_masked`].
    pub fn reset_masked(
        &mut self,
        args: Vec<ResetArgs>,
        mask: Option<&[bool]>,
    ) -> Result<(VectorReset, Vec<bool>), VectorError> {
        self.runtime.block_on(self.env.reset_masked(args, mask))
    }

    /// See [`VectorEnv::step_async`]; returns without waiting.
    pub fn step_async(&mut self, actions: Vec<Value>) -> Result<(), VectorError> {
        self.env.step_async(actions)
    }

    /// See [`VectorEnv::step_async_stacked`]; returns without waiting.
    pub fn step_async_stacked(&mut self, actions: &Value) -> Result<(), VectorError> {
        self.env.step_async_stacked(actions)
    }

    /// See [`VectorEnv::step_wait`].
    pub fn step_wait(&mut self) -> Result<VectorStep, VectorError> {
        self.runtime.block_on(self.env.step_wait())
    }

    /// See [`VectorEnv::step`].
    pub fn step(&mut self, actions: Vec<Value>) -> Result<VectorStep, VectorError> {
        self.env.step_async(actions)?;
        self.step_wait()
    }

    /// Closes the connections (see [`VectorEnv::close`]).
    pub fn close(&mut self) {
        self.runtime.block_on(self.env.close());
    }
}

impl Drop for BlockingVectorEnv {
    fn drop(&mut self) {
        if tokio::runtime::Handle::try_current().is_err() {
            self.runtime.block_on(self.env.close());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_and_unstack() {
        let a = Value::from(NdArray::from_vec(vec![1.0f32, 2.0]));
        let b = Value::from(NdArray::from_vec(vec![3.0f32, 4.0]));
        let s = stack(&[&a, &b]);
        let arr = s
            .as_array()
            .cloned()
            .unwrap_or_else(|| NdArray::from_vec(vec![0u8]));
        assert_eq!(arr.shape(), &[2, 2]);
        assert_eq!(arr.to_f64_vec(), vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(unstack(&s, 2), Ok(vec![a.clone(), b.clone()]));
        let d = Value::Dict(Dict::new().with("x", a.clone()).with("r", 1.5));
        let e = Value::Dict(Dict::new().with("x", b.clone()).with("r", Value::Int(2)));
        let s = stack(&[&d, &e]);
        assert_eq!(
            s.get("r")
                .and_then(Value::as_array)
                .map(NdArray::to_f64_vec),
            Some(vec![1.5, 2.0])
        );
        // Mismatched shapes are gathered, not stacked.
        let c = Value::from(NdArray::from_vec(vec![1.0f32]));
        assert_eq!(stack(&[&a, &c]), Value::List(vec![a.clone(), c]));
        // Missing entries are zeros.
        let s = stack_filled(&[None, Some(b.clone())]);
        assert_eq!(
            s.as_array().map(NdArray::to_f64_vec),
            Some(vec![0.0, 0.0, 3.0, 4.0])
        );
        assert_eq!(stack_filled(&[None, None]), Value::Null);
        assert!(unstack(&a, 3).is_err());
    }

    #[test]
    fn autoreset_names() {
        for m in [
            AutoresetMode::NextStep,
            AutoresetMode::SameStep,
            AutoresetMode::Disabled,
        ] {
            assert_eq!(AutoresetMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(
            AutoresetMode::parse("NEXT_STEP"),
            Some(AutoresetMode::NextStep)
        );
        assert_eq!(AutoresetMode::parse("sometimes"), None);
    }
}
