//! [`VectorEnv`]: sub-environments stepped concurrently, with autoreset.

mod reconnect;

use super::stack::{stack_filled, unstack};
use crate::client::{Client, ClientConfig, ClientError, CloseReason, EnvProxy, ProtocolViolation};
use crate::codec::{Dict, NdArray, Value};
use crate::host::{ResetArgs, Space};
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
/// `gymnasium.vector.AutoresetMode` (see the [module docs](super)).
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
#[derive(Debug, Clone, thiserror::Error)]
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
    /// The wait was interrupted (see [`interrupt`](crate::client::interrupt)):
    /// the sub-environments' requests in flight were dropped, and those of
    /// mutations closed their connections (outcome unknown).
    #[error("interrupted")]
    Interrupted,
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
            VectorError::InvalidUse(_) | VectorError::Interrupted => None,
        }
    }
}

/// What [`VectorEnv::reset`] returns.
#[derive(Debug, Clone)]
pub struct VectorReset {
    /// The observations, stacked ([`stack`](super::stack); zeros for failed envs; `Null`
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
#[derive(Debug, Clone)]
pub struct VectorStep {
    /// The observations, stacked ([`stack`](super::stack); zeros for failed envs; `Null`
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

/// N remote envs stepped together (see the [module docs](super)).
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
            CloseReason::TaskEnded {
                detail: e.to_string(),
            },
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
        ClientError::Protocol(ProtocolViolation::RewardNotANumber {
            found: s.reward.type_name(),
        })
    })?;
    let flag = |v: &Value, flag: &'static str| {
        v.truthy().ok_or_else(|| {
            ClientError::Protocol(ProtocolViolation::FlagNotABool {
                flag,
                value: v.to_string(),
            })
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
