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
use crate::codec::stack::stack;
use crate::codec::{NdArray, Value};

/// Rows `slots` of a stacked array (native byte order): one row as itself
/// for an unbatched resource, the rows stacked for a batched one (a slice
/// sharing the array's memory when they are consecutive).
fn rows(a: &NdArray, slots: &[usize], batched: bool) -> Value {
    let n = a.shape().first().copied().unwrap_or(0).max(1);
    let row = a.as_bytes().len() / n;
    let tail = &a.shape()[1..];
    let shape = |count: Option<usize>| -> Vec<usize> {
        count.into_iter().chain(tail.iter().copied()).collect()
    };
    let built = match (batched, slots) {
        (false, [s]) => NdArray::from_bytes(
            a.dtype(),
            shape(None),
            a.bytes().slice(s * row..(s + 1) * row),
        ),
        (true, [first, ..]) if slots.iter().enumerate().all(|(j, &s)| s == first + j) => {
            let end = (first + slots.len()) * row;
            NdArray::from_bytes(
                a.dtype(),
                shape(Some(slots.len())),
                a.bytes().slice(first * row..end),
            )
        }
        _ => {
            let mut data = Vec::with_capacity(row * slots.len());
            for &s in slots {
                data.extend_from_slice(&a.as_bytes()[s * row..(s + 1) * row]);
            }
            NdArray::from_bytes(a.dtype(), shape(Some(slots.len())), data.into())
        }
    };
    // The shapes and lengths above are the array's own: always valid.
    built.map_or(Value::Null, Value::Array)
}

impl VectorEnv {
    /// Sends the step of sub-environments `env_id` (`actions[k]` for
    /// `env_id[k]`; with autoreset as in [`step_async`](Self::step_async))
    /// and returns without waiting. The ids must cover whole resources (all
    /// `batch_size` sub-envs of a batched one: one request steps them all)
    /// none of which is in flight. Collect the results with
    /// [`recv`](Self::recv).
    pub fn send(&mut self, actions: Vec<Value>, env_id: &[usize]) -> Result<(), VectorError> {
        if actions.len() != env_id.len() {
            return Err(VectorError::InvalidUse(format!(
                "{} actions for {} env ids",
                actions.len(),
                env_id.len()
            )));
        }
        let chosen = self.choose(env_id)?;
        let mut actions: Vec<Option<Value>> = actions.into_iter().map(Some).collect();
        let chosen = chosen
            .into_iter()
            .map(|(k, slots)| {
                let mut own = slots.iter().filter_map(|&s| actions[s].take());
                let action = match self.resources[k].batch {
                    None => own.next().unwrap_or_default(),
                    Some(_) => {
                        let own: Vec<Value> = own.collect();
                        stack(&own.iter().collect::<Vec<_>>())
                    }
                };
                (k, action)
            })
            .collect();
        self.launch(chosen);
        Ok(())
    }

    /// The resources that `env_id` steps, each with the positions of its
    /// sub-envs in `env_id`, in order; refused unless the ids are valid,
    /// distinct, cover whole resources and none of them is in flight.
    fn choose(&self, env_id: &[usize]) -> Result<Vec<(usize, Vec<usize>)>, VectorError> {
        let n = self.num_envs();
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
            let slots: Vec<usize> = r.range().filter_map(|i| slot[i]).collect();
            if slots.is_empty() {
                continue;
            }
            if slots.len() != r.width() {
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
            chosen.push((k, slots));
        }
        Ok(chosen)
    }

    /// [`send`](Self::send) with the actions stacked along the first axis
    /// (split by [`unstack`](super::unstack)), in the order of `env_id`.
    /// A stacked array (native byte order) is not split into rows: each
    /// resource gets its rows as they are (a batched resource whose
    /// sub-envs are consecutive in `env_id` a slice of the array), the
    /// values `unstack` and a batched resource's `stack` would give.
    pub fn send_stacked(&mut self, actions: &Value, env_id: &[usize]) -> Result<(), VectorError> {
        if let Value::Array(a) = actions {
            if a.shape().first() == Some(&env_id.len()) && a.dtype().is_native() {
                let chosen = self.choose(env_id)?;
                let chosen = chosen
                    .into_iter()
                    .map(|(k, slots)| (k, rows(a, &slots, self.resources[k].batch.is_some())))
                    .collect();
                self.launch(chosen);
                return Ok(());
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::stack::unstack;

    #[test]
    fn rows_are_what_unstack_and_stack_give() {
        let a = NdArray::from_shape_vec(vec![5, 2], (0..10).map(|x| x as f32).collect()).unwrap();
        let split = unstack(&Value::Array(a.clone()), 5).unwrap();
        let stacked =
            |slots: &[usize]| stack(&slots.iter().map(|&s| &split[s]).collect::<Vec<_>>());
        // One row of an unbatched resource: the row itself.
        assert_eq!(rows(&a, &[3], false), split[3]);
        // Consecutive rows: a slice sharing the array's memory.
        let slice = rows(&a, &[1, 2, 3], true);
        assert_eq!(slice, stacked(&[1, 2, 3]));
        let shared = slice.as_array().map(|s| s.as_bytes().as_ptr());
        assert_eq!(shared, Some(a.as_bytes()[8..].as_ptr()));
        // Rows out of order (send's env_id in another order): copied.
        assert_eq!(rows(&a, &[4, 0], true), stacked(&[4, 0]));
        assert_eq!(rows(&a, &[2], true), stacked(&[2]));
    }
}
