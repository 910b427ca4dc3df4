//! Replacing sub-environments' connections: after a server restarts (a
//! new process, maybe at a new URL, e.g. a restarted Ray actor) or a
//! connection was lost, [`VectorEnv::reconnect`] points some envs at their
//! new address without touching the others.

use super::{join, single_spaces, EnvAddress, StepSink, VectorEnv, VectorError};
use crate::client::{Client, ClientConfig, ClientError, CloseReason};

impl VectorEnv {
    /// Connects sub-environments `changes[k].0` to `changes[k].1` (one new
    /// connection per distinct URL, made at once, with `config`) and
    /// replaces their proxies; the other envs, their episodes and pending
    /// autoresets are untouched. An index names a resource by its first
    /// sub-environment; the new env must have its `batch_size`, and all of
    /// its sub-environments are reconnected. A reconnected env must be reset before it
    /// is stepped (a step reports [`VectorError::NeedsReset`] for it until
    /// then): its state on the server is not the one this vector env last
    /// saw. Its old connection stays open (or closed, if it was lost) until
    /// [`close`](Self::close), as it may carry other envs.
    ///
    /// All or nothing: fails with [`VectorError::InvalidUse`] (a step is
    /// pending, an index is out of range or given twice, or a new env's
    /// spaces differ from the env it replaces) or [`VectorError::Connect`]
    /// (a server cannot be reached or lacks the env), changing nothing.
    pub async fn reconnect(
        &mut self,
        changes: &[(usize, EnvAddress)],
        config: ClientConfig,
    ) -> Result<(), VectorError> {
        if self.is_step_pending() {
            return Err(VectorError::InvalidUse(
                "a step is pending: call step_wait before reconnecting".into(),
            ));
        }
        let n = self.num_envs();
        for (k, (i, _)) in changes.iter().enumerate() {
            if *i >= n {
                return Err(VectorError::InvalidUse(format!(
                    "env {i} does not exist ({n} envs)"
                )));
            }
            if self.resource_of(*i).offset != *i {
                return Err(VectorError::InvalidUse(format!(
                    "env {i} is inside the batched resource starting at env {}: reconnect that one",
                    self.resource_of(*i).offset
                )));
            }
            if changes[..k].iter().any(|(j, _)| j == i) {
                return Err(VectorError::InvalidUse(format!(
                    "env {i} is reconnected twice"
                )));
            }
        }
        let mut urls: Vec<&str> = Vec::new();
        for (_, a) in changes {
            if !urls.contains(&a.url.as_str()) {
                urls.push(&a.url);
            }
        }
        let connecting: Vec<_> = urls
            .iter()
            .map(|url| {
                let (url, config) = (url.to_string(), config.clone());
                self.handle
                    .spawn(async move { Client::connect(&url, config).await })
            })
            .collect();
        let mut clients = Vec::with_capacity(urls.len());
        let mut failure = None;
        for (url, task) in urls.iter().zip(connecting) {
            match join(task).await {
                Ok(c) => clients.push(c),
                Err(error) => {
                    failure.get_or_insert(VectorError::Connect {
                        url: url.to_string(),
                        error,
                    });
                }
            }
        }
        let mut proxies = Vec::with_capacity(changes.len());
        if failure.is_none() {
            for (i, a) in changes {
                let Some(k) = urls.iter().position(|u| *u == a.url) else {
                    unreachable!("every URL was collected above")
                };
                let old = self.resource_of(*i);
                match clients[k].env(&a.resource_id).await {
                    Ok(env)
                        if env.batch_size() != old.batch
                            || single_spaces(&env, env.batch_size())
                                != (
                                    self.single_action.clone(),
                                    self.single_observation.clone(),
                                ) =>
                    {
                        failure = Some(VectorError::InvalidUse(format!(
                            "env {i}: {} at {} does not have the batch size and the action and observation spaces of the env it replaces ({})",
                            a.resource_id,
                            a.url,
                            old.proxy.id()
                        )));
                        break;
                    }
                    Ok(env) => proxies.push(env),
                    Err(error) => {
                        failure = Some(VectorError::Connect {
                            url: a.url.clone(),
                            error,
                        });
                        break;
                    }
                }
            }
        }
        if let Some(e) = failure {
            for c in &clients {
                c.close().await;
            }
            return Err(e);
        }
        for ((i, a), env) in changes.iter().zip(proxies) {
            let k = self.resources.partition_point(|r| r.offset < *i);
            self.resources[k].proxy = env;
            for j in self.resources[k].range() {
                self.failed[j] = Some(ClientError::Closed(CloseReason::Reconnected {
                    resource_id: a.resource_id.clone(),
                    url: a.url.clone(),
                }));
                self.needs_autoreset[j] = false;
                self.last[j] = None;
            }
        }
        // The sink steps the new proxies (no step is pending: none of its
        // requests is out).
        self.sink = StepSink::new(
            self.arrivals.clone(),
            self.resources.iter().map(|r| (&r.proxy, r.batch)),
            self.mode,
        );
        self.clients.extend(clients);
        Ok(())
    }
}
