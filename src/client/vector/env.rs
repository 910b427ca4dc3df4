//! [`VectorEnv`]: sub-environments stepped concurrently, with autoreset.

mod arrivals;
mod closing;
mod gather;
mod infos;
mod latest;
mod reconnect;
mod recv;
mod resource;
mod sink;

pub use super::mode::AutoresetMode;
use arrivals::{carry, Arrivals, Job, Outcome};
pub use infos::{InfoBlock, StepInfos};
use latest::Latest;
pub(crate) use resource::unbatched;
use resource::{reset_resource, EnvReset, Resource};
use sink::StepSink;

use crate::client::{Client, ClientConfig, ClientError, CloseReason, EnvProxy};
use crate::codec::stack::{stack_filled, unstack};
use crate::codec::{Dict, NdArray, Value};
use crate::host::{ResetArgs, Space};
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio::task::{JoinHandle, JoinSet};

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
    /// Each env's info (the reset's info for autoreset envs); a batched
    /// resource's kept whole as it arrived when none of its sub-envs was
    /// reset ([`StepInfos::to_vec`] splits them).
    pub infos: StepInfos,
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
    /// The sub-environments these results are of, in the order of every
    /// other field: `0..num_envs` for [`VectorEnv::step_wait`], those that
    /// arrived for [`VectorEnv::recv`].
    pub env_id: Vec<usize>,
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

/// A resource's reset request on its way.
type ResetTask = JoinHandle<Result<Vec<EnvReset>, ClientError>>;

/// N remote envs stepped together (see the [module docs](super)).
pub struct VectorEnv {
    resources: Vec<Resource>,
    clients: Vec<Client>,
    mode: AutoresetMode,
    handle: Handle,
    num_envs: usize,
    single_action: Option<Arc<Space>>,
    single_observation: Option<Arc<Space>>,
    /// `NextStep`: envs to reset in the next step.
    needs_autoreset: Vec<bool>,
    /// Envs that failed and are not stepped until reset.
    failed: Vec<Option<ClientError>>,
    /// Each env's latest observation (for masked resets).
    last: Vec<Option<Latest>>,
    /// The tasks carrying step requests, one per `send` (or `step_async`).
    in_flight: JoinSet<()>,
    /// Where their outcomes arrive (and those known without a request).
    arrivals: Arc<Arrivals>,
    /// Whether each resource has a step in flight (or an outcome not yet
    /// taken from `arrivals`).
    busy: Vec<bool>,
    /// Sub-envs of the busy resources.
    busy_width: usize,
    /// Carrying tasks spawned so far (see [`VectorEnv::requests_written`]).
    carried: u64,
    /// Where single envs' step replies are handed (see [`sink`]).
    sink: Arc<StepSink>,
    /// Each resource's step request handed to the sink and not yet taken:
    /// its ID (abandoned when the vector env closes).
    sunk: Vec<Option<u64>>,
    /// Whether single envs' steps go to the sink (tests compare both paths).
    sinking: bool,
}

impl std::fmt::Debug for VectorEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorEnv")
            .field(
                "resources",
                &self
                    .resources
                    .iter()
                    .map(|r| (r.proxy.id().to_string(), r.batch))
                    .collect::<Vec<_>>(),
            )
            .field("mode", &self.mode)
            .finish()
    }
}

/// The single spaces of a resource: its own, or one element's when batched.
fn single_spaces(
    proxy: &EnvProxy,
    batch: Option<usize>,
) -> (Option<Arc<Space>>, Option<Arc<Space>>) {
    let one = |s: Option<Arc<Space>>| match batch {
        None => s,
        Some(_) => s.and_then(|s| unbatched(&s)).map(Arc::new),
    };
    (one(proxy.action_space()), one(proxy.observation_space()))
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
        match VectorEnv::from_envs(envs, mode) {
            Ok(mut v) => {
                v.clients = clients;
                Ok(v)
            }
            Err(e) => {
                for c in &clients {
                    c.close().await;
                }
                Err(e)
            }
        }
    }

    /// A vector env over proxies obtained elsewhere (any clients), one
    /// resource each: an unbatched env is one sub-environment, a batched
    /// env (`batch_size` B) B consecutive ones. Must run inside a tokio
    /// runtime. Fails when `envs` is empty or the sub-environments' spaces
    /// differ (a batched env's single spaces are one element's, as unienv's
    /// `unbatch_spaces` gives them).
    pub fn from_envs(envs: Vec<EnvProxy>, mode: AutoresetMode) -> Result<VectorEnv, VectorError> {
        let Some(first) = envs.first() else {
            return Err(VectorError::InvalidUse(
                "a vector env needs at least one env".into(),
            ));
        };
        let (action, observation) = single_spaces(first, first.batch_size());
        let mut resources = Vec::with_capacity(envs.len());
        let mut offset = 0;
        for (i, e) in envs.iter().enumerate() {
            let batch = e.batch_size();
            if batch == Some(0) {
                return Err(VectorError::InvalidUse(format!(
                    "env {i} ({}) has batch_size 0",
                    e.id()
                )));
            }
            if single_spaces(e, batch) != (action.clone(), observation.clone()) {
                return Err(VectorError::InvalidUse(format!(
                    "env {i} ({}) does not have the action and observation spaces of env 0 ({})",
                    e.id(),
                    first.id()
                )));
            }
            let r = Resource {
                proxy: e.clone(),
                batch,
                offset,
            };
            offset += r.width();
            resources.push(r);
        }
        let handle = Handle::try_current().map_err(|_| {
            VectorError::InvalidUse("a vector env must be built inside a tokio runtime".into())
        })?;
        let n = offset;
        let arrivals = Arrivals::new();
        Ok(VectorEnv {
            sink: StepSink::new(
                arrivals.clone(),
                resources.iter().map(|r| (&r.proxy, r.batch)),
                mode,
            ),
            sunk: vec![None; resources.len()],
            sinking: true,
            busy: vec![false; resources.len()],
            resources,
            clients: Vec::new(),
            mode,
            handle,
            num_envs: n,
            single_action: action,
            single_observation: observation,
            needs_autoreset: vec![false; n],
            failed: vec![None; n],
            last: vec![None; n],
            in_flight: JoinSet::new(),
            arrivals,
            busy_width: 0,
            carried: 0,
        })
    }

    /// The number of sub-environments (a batched resource counts its
    /// `batch_size`).
    pub fn num_envs(&self) -> usize {
        self.num_envs
    }

    /// The autoreset mode.
    pub fn autoreset_mode(&self) -> AutoresetMode {
        self.mode
    }

    /// The resources' proxies, in order (one per address; a batched one
    /// holds several sub-environments).
    pub fn envs(&self) -> Vec<EnvProxy> {
        self.resources.iter().map(|r| r.proxy.clone()).collect()
    }

    /// Each resource's first sub-environment and how many it holds
    /// (`batch_size`, or 1 for an unbatched env), in order.
    pub fn resource_ranges(&self) -> Vec<(usize, usize)> {
        self.resources
            .iter()
            .map(|r| (r.offset, r.width()))
            .collect()
    }

    /// One sub-environment's action space (all are the same).
    pub fn single_action_space(&self) -> Option<Arc<Space>> {
        self.single_action.clone()
    }

    /// One sub-environment's observation space (all are the same).
    pub fn single_observation_space(&self) -> Option<Arc<Space>> {
        self.single_observation.clone()
    }

    /// Whether a step is pending (sent by [`step_async`](Self::step_async)
    /// or [`send`](Self::send), not yet gathered).
    pub fn is_step_pending(&self) -> bool {
        self.busy.iter().any(|&b| b)
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

    /// Resets every env (all requests at once, one per resource), each
    /// sub-environment with its own arguments (see [`VectorEnv::seeded`]).
    /// A successful reset clears an env's failure and its pending
    /// autoreset.
    pub async fn reset(&mut self, args: Vec<ResetArgs>) -> Result<VectorReset, VectorError> {
        self.reset_masked(args, None).await.map(|(reset, _)| reset)
    }

    /// Resets the envs where `mask` is true (all when `None`); the others
    /// are left alone: their slots of the stacked observation hold their
    /// latest observation (zeros if none), their contexts are `Null`, their
    /// infos empty and their errors `None`. A batched resource gets one
    /// reset with the mask of its sub-envs (and their seeds: one seed when
    /// they follow Gymnasium's `seed + i`, else a list). A failed request
    /// fails every sub-env of its resource. Returns the result and the mask
    /// used.
    pub async fn reset_masked(
        &mut self,
        args: Vec<ResetArgs>,
        mask: Option<&[bool]>,
    ) -> Result<(VectorReset, Vec<bool>), VectorError> {
        let n = self.num_envs();
        if self.is_step_pending() {
            return Err(VectorError::InvalidUse(
                "a step is pending: call step_wait (or recv) first".into(),
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
        let tasks: Vec<Option<ResetTask>> = self
            .resources
            .iter()
            .map(|r| {
                let sub: Vec<bool> = mask[r.range()].to_vec();
                sub.iter().any(|&m| m).then(|| {
                    let r = r.clone();
                    let a = args[r.range()].to_vec();
                    self.handle
                        .spawn(async move { reset_resource(&r, a, &sub).await })
                })
            })
            .collect();
        let mut observations: Vec<Option<Value>> = self
            .last
            .iter()
            .map(|l| l.as_ref().map(Latest::value))
            .collect();
        let mut contexts = vec![Value::Null; n];
        let mut infos = vec![Dict::new(); n];
        let mut errors: Vec<Option<VectorError>> = vec![None; n];
        for (k, task) in tasks.into_iter().enumerate() {
            let Some(task) = task else { continue };
            let range = self.resources[k].range();
            match join(task).await {
                Ok(rows) => {
                    let masked = range.clone().filter(|&i| mask[i]);
                    for (i, row) in masked.zip(rows) {
                        self.failed[i] = None;
                        self.needs_autoreset[i] = false;
                        self.last[i] = Some(Latest::Value(row.observation.clone()));
                        observations[i] = Some(row.observation);
                        contexts[i] = row.context;
                        infos[i] = row.info;
                    }
                }
                Err(error) => {
                    for i in range {
                        self.failed[i] = Some(error.clone());
                        self.needs_autoreset[i] = false;
                        observations[i] = None;
                        errors[i] = Some(self.env_error(i, error.clone()));
                    }
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
            resource_id: self.resource_of(index).proxy.id().to_string(),
            error,
        }
    }

    /// The resource holding sub-env `index`.
    fn resource_of(&self, index: usize) -> &Resource {
        let k = self
            .resources
            .partition_point(|r| r.offset + r.width() <= index);
        &self.resources[k.min(self.resources.len() - 1)]
    }

    /// Sends every env's step (or, in `NextStep` mode, the reset of those
    /// whose episode ended) at once, one request per resource, and returns
    /// without waiting; collect the results with
    /// [`step_wait`](Self::step_wait). `actions` holds one action per env.
    pub fn step_async(&mut self, actions: Vec<Value>) -> Result<(), VectorError> {
        let n = self.num_envs();
        if self.is_step_pending() {
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
        let ids: Vec<usize> = (0..n).collect();
        self.send(actions, &ids)
    }

    /// [`step_async`](Self::step_async) with the actions stacked along the
    /// first axis (split by [`unstack`]).
    pub fn step_async_stacked(&mut self, actions: &Value) -> Result<(), VectorError> {
        let n = self.num_envs();
        if let Value::Array(a) = actions {
            if a.shape().first() == Some(&n) && !self.is_step_pending() {
                // Not split into rows (see `send_stacked`).
                let ids: Vec<usize> = (0..n).collect();
                return self.send_stacked(actions, &ids);
            }
        }
        let split = unstack(actions, n).map_err(VectorError::InvalidUse)?;
        self.step_async(split)
    }

    /// Starts the steps of resources `chosen` (each with its action: a
    /// batched resource's stacked along the first axis). A single env's step
    /// is queued at once with its reply going to the sink; one task carries
    /// the other requests; either way they leave in one write per
    /// connection. A resource with a failed sub-env is not sent to (its
    /// outcome is known at once).
    fn launch(&mut self, chosen: Vec<(usize, Value)>) {
        // Reap the tasks of earlier sends (their outcomes are delivered).
        while self.in_flight.try_join_next().is_some() {}
        self.sink.reap();
        let next_step = self.mode == AutoresetMode::NextStep;
        let mut jobs = Vec::with_capacity(chosen.len());
        for (k, mut action) in chosen {
            self.busy[k] = true;
            let r = &self.resources[k];
            self.busy_width += r.width();
            if r.range().any(|i| self.failed[i].is_some()) {
                self.arrivals.deliver(k, r.width(), Outcome::NotSent);
                continue;
            }
            let ended: Vec<bool> = self.needs_autoreset[r.range()]
                .iter()
                .map(|&e| e && next_step)
                .collect();
            // A single env's step: its reply goes to the sink.
            if self.sinking && r.batch.is_none() && !ended.iter().any(|&e| e) {
                let sink: Arc<dyn crate::client::pending::ReplySink> = self.sink.clone();
                match r.proxy.step_to(action, sink, k) {
                    Ok(Ok(id)) => {
                        self.sunk[k] = Some(id);
                        continue;
                    }
                    Ok(Err(error)) => {
                        self.arrivals.deliver(k, 1, Outcome::Failed(error));
                        continue;
                    }
                    // Its descriptor is not known yet: the general path.
                    Err(back) => action = back,
                }
            }
            jobs.push(Job {
                k,
                resource: r.clone(),
                action,
                ended,
            });
        }
        if !jobs.is_empty() {
            let arrivals = self.arrivals.clone();
            self.carried += 1;
            self.in_flight
                .spawn_on(carry(arrivals, jobs, self.mode), &self.handle);
        }
    }

    /// The connections' frames queued so far, and those not yet written,
    /// summed over the distinct connections (tests).
    #[cfg(test)]
    pub(crate) fn frames(&self) -> (u64, u64) {
        let mut seen: Vec<&Arc<crate::client::shared::Shared>> = Vec::new();
        for r in &self.resources {
            let shared = &r.proxy.client().shared;
            if !seen.iter().any(|s| Arc::ptr_eq(s, shared)) {
                seen.push(shared);
            }
        }
        seen.iter().fold((0, 0), |(q, u), s| {
            (q + s.frames_queued(), u + s.frames_unwritten())
        })
    }

    /// Frames queued on the connections and not yet written (tests).
    #[cfg(test)]
    pub(crate) fn unwritten_frames(&self) -> u64 {
        self.frames().1
    }

    /// Steps every resource on the general path (tests).
    #[cfg(test)]
    pub(crate) fn without_sink(mut self) -> VectorEnv {
        self.sinking = false;
        self
    }

    /// How many tasks have carried requests so far (tests).
    #[cfg(test)]
    pub(crate) fn carried(&self) -> u64 {
        self.carried
    }

    /// The runtime the vector env's tasks run on (tests).
    #[cfg(test)]
    pub(crate) fn runtime_handle(&self) -> &Handle {
        &self.handle
    }

    /// Waits until the requests of every send so far are written to the
    /// sockets: their carrying tasks have handed them to the connections'
    /// writers, and the writers have flushed them. Sleeps until each of
    /// those steps says it is done (no polling loop), so a thread waiting
    /// here while another drives the runtime burns no CPU.
    pub(crate) async fn requests_written(&self) {
        self.arrivals.wait_started(self.carried).await;
        // Read after the frames were queued: at least their numbers.
        for r in &self.resources {
            let shared = &r.proxy.client().shared;
            shared.frames_written(shared.frames_queued()).await;
        }
    }

    /// Waits for the outcomes of at least `min` sub-envs (all of those in
    /// flight when fewer are) and takes them, whole resources in arrival
    /// order.
    async fn outcomes(&mut self, min: usize) -> Vec<(usize, Outcome)> {
        let min = min.clamp(1, self.busy_width.max(1));
        let taken = self.arrivals.take(min).await;
        for (k, _) in &taken {
            self.busy_width -= self.resources[*k].width();
            self.sunk[*k] = None;
        }
        taken
    }

    /// Waits for the step sent by [`step_async`](Self::step_async) and
    /// stacks the results (every env, in order).
    pub async fn step_wait(&mut self) -> Result<VectorStep, VectorError> {
        if !self.is_step_pending() {
            return Err(VectorError::InvalidUse(
                "no step is pending: call step_async first".into(),
            ));
        }
        let mut outcomes = self.outcomes(self.busy_width).await;
        outcomes.sort_by_key(|(k, _)| *k);
        Ok(self.gather(outcomes))
    }

    /// [`step_async`](Self::step_async) then [`step_wait`](Self::step_wait).
    pub async fn step(&mut self, actions: Vec<Value>) -> Result<VectorStep, VectorError> {
        self.step_async(actions)?;
        self.step_wait().await
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
