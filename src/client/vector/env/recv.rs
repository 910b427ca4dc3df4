//! Asynchronous stepping, EnvPool's way: [`VectorEnv::send`] steps some
//! sub-environments, [`VectorEnv::recv`] returns the first ones whose
//! results arrived, so a learner never waits for the slowest simulator.
//!
//! ```text
//! envs.reset(...)                          // every env ready
//! envs.send(actions_for_all, &all_ids)     // first round: everyone
//! loop {
//!     let got = envs.recv(m).await?;       // >= m envs, whole resources
//!     let actions = policy(&got.observation);
//!     envs.send(actions, &got.env_id)?;    // those envs go again
//! }
//! ```

use super::{VectorEnv, VectorError, VectorStep};
use crate::codec::Value;

impl VectorEnv {
    /// Sends the step of sub-environments `env_id` (`actions[k]` for
    /// `env_id[k]`; with autoreset as in [`step_async`](Self::step_async))
    /// and returns without waiting. The ids must cover whole resources (all
    /// `batch_size` sub-envs of a batched one: one request steps them all)
    /// none of which is in flight. Collect the results with
    /// [`recv`](Self::recv).
    pub fn send(&mut self, actions: Vec<Value>, env_id: &[usize]) -> Result<(), VectorError> {
        let n = self.num_envs();
        if actions.len() != env_id.len() {
            return Err(VectorError::InvalidUse(format!(
                "{} actions for {} env ids",
                actions.len(),
                env_id.len()
            )));
        }
        let mut slot: Vec<Option<usize>> = vec![None; n];
        for (k, &i) in env_id.iter().enumerate() {
            if i >= n {
                return Err(VectorError::InvalidUse(format!(
                    "env {i} does not exist ({n} envs)"
                )));
            }
            if slot[i].replace(k).is_some() {
                return Err(VectorError::InvalidUse(format!("env {i} is sent twice")));
            }
        }
        let mut chosen = Vec::new();
        for (k, r) in self.resources.iter().enumerate() {
            let covered = r.range().filter(|&i| slot[i].is_some()).count();
            if covered == 0 {
                continue;
            }
            if covered != r.width() {
                return Err(VectorError::InvalidUse(format!(
                    "envs {}..{} are one batched resource ({}): send all of them or none",
                    r.offset,
                    r.offset + r.width(),
                    r.proxy.id()
                )));
            }
            if self.busy[k] {
                return Err(VectorError::InvalidUse(format!(
                    "env {} is already in flight: recv its result first",
                    r.offset
                )));
            }
            chosen.push(k);
        }
        let mut actions: Vec<Option<Value>> = actions.into_iter().map(Some).collect();
        let chosen = chosen
            .into_iter()
            .map(|k| {
                let own: Vec<Value> = self.resources[k]
                    .range()
                    .filter_map(|i| slot[i].and_then(|s| actions[s].take()))
                    .collect();
                (k, own)
            })
            .collect();
        self.launch(chosen);
        Ok(())
    }

    /// [`send`](Self::send) with the actions stacked along the first axis
    /// (split by [`unstack`](super::unstack)), in the order of `env_id`.
    pub fn send_stacked(&mut self, actions: &Value, env_id: &[usize]) -> Result<(), VectorError> {
        let split = super::unstack(actions, env_id.len()).map_err(VectorError::InvalidUse)?;
        self.send(split, env_id)
    }

    /// Waits until the results of at least `min` sub-environments have
    /// arrived (or of every one in flight, if fewer are), and returns
    /// them: whole resources, in the order they arrived, with their ids in
    /// [`VectorStep::env_id`]. Results already arrived are returned without
    /// waiting for `min` more only when nothing else is in flight.
    pub async fn recv(&mut self, min: usize) -> Result<VectorStep, VectorError> {
        if !self.is_step_pending() {
            return Err(VectorError::InvalidUse(
                "nothing is in flight: send first".into(),
            ));
        }
        let outcomes = self.outcomes(min).await;
        Ok(self.gather(outcomes))
    }
}
