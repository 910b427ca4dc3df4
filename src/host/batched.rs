//! [`BatchedEnv`]: N environments of the crate as one batched env
//! (`batch_size` N), the Rust twin of Python's `unienv_remote.BatchedEnv`.
//!
//! One request to such a resource steps all N sub-environments: one
//! message and one reply for N env steps. Semantics are UniEnv's batched
//! ones:
//!
//! - the spaces are the sub-envs' spaces batched as unienv's `batch_space`
//!   batches them (a leading axis of N; box bounds get a leading axis of 1);
//! - `step` takes the batched action (leading axis N) and returns the
//!   stacked observation, `reward` (`float64`, shape `(N,)`), `terminated`
//!   and `truncated` (`bool`, shape `(N,)`), and the infos in Gymnasium's
//!   vector layout (key `k`: one entry per sub-env, `_k`: the bool mask of
//!   the sub-envs that reported it; dicts nest); there is no autoreset;
//! - `reset(mask=…, seed=…)` resets the sub-envs of `mask` (all when absent)
//!   and returns only their rows; seed `s` gives sub-env `i` the seed
//!   `s + i`, as Gymnasium's vector envs derive it;
//! - a sub-env's error fails the call (the server faults the resource) and
//!   `step` is refused until every sub-env has been reset since.

use super::args::{ResetArgs, ResetResult, StepResult};
use super::error::{HostError, HostResult};
use super::space::{BinarySpace, BoxSpace, DictSpace, DynamicBoxSpace, Space};
use super::traits::Env;
use crate::codec::stack::{stack, unstack};
use crate::codec::vector_info;
use crate::codec::{Dict, NdArray, Value};

/// N environments as one batched env (see the [module docs](self)).
pub struct BatchedEnv<E: Env> {
    envs: Vec<E>,
    action_space: Option<Space>,
    observation_space: Option<Space>,
    context_space: Option<Space>,
    /// Sub-envs to reset before the batch steps again (after an error).
    must_reset: Vec<bool>,
}

/// `space` with a leading batch axis of `n`, as unienv's `batch_space`
/// builds it (box bounds get a leading axis of 1; text and union spaces
/// become a `BatchedSpace`).
pub fn batch_space(space: &Space, n: usize) -> Space {
    fn lead(a: &NdArray) -> NdArray {
        let mut shape = vec![1];
        shape.extend_from_slice(a.shape());
        NdArray::from_bytes(a.dtype(), shape, a.bytes().clone()).unwrap_or_else(|_| a.clone())
    }
    fn front(n: usize, shape: &[usize]) -> Vec<usize> {
        let mut s = vec![n];
        s.extend_from_slice(shape);
        s
    }
    match space {
        Space::Box(b) => Space::Box(BoxSpace {
            shape: front(n, &b.shape),
            low: lead(&b.low),
            high: lead(&b.high),
            dtype: b.dtype,
        }),
        Space::Binary(b) => Space::Binary(BinarySpace {
            shape: front(n, &b.shape),
            dtype: b.dtype,
        }),
        Space::DynamicBox(b) => Space::DynamicBox(DynamicBoxSpace {
            low: lead(&b.low),
            high: lead(&b.high),
            shape_low: front(n, &b.shape_low),
            shape_high: front(n, &b.shape_high),
            dtype: b.dtype,
            fill_value: b.fill_value.clone(),
        }),
        Space::Dict(d) => Space::Dict(DictSpace::new(
            d.entries()
                .iter()
                .map(|(k, s)| (k.clone(), batch_space(s, n))),
        )),
        Space::Tuple(t) => Space::Tuple(t.iter().map(|s| batch_space(s, n)).collect()),
        Space::Graph(g) => {
            let mut g = (**g).clone();
            g.batch_shape = front(n, &g.batch_shape);
            Space::Graph(Box::new(g))
        }
        Space::Batched(b) => Space::batched(b.single_space.clone(), front(n, &b.batch_shape)),
        Space::Text(_) | Space::Union(_) => Space::batched(space.clone(), vec![n]),
    }
}

impl<E: Env> BatchedEnv<E> {
    /// A batch of `envs` (at least one, all unbatched, with the same
    /// spaces).
    pub fn new(envs: Vec<E>) -> HostResult<BatchedEnv<E>> {
        let Some(first) = envs.first() else {
            return Err(HostError::new("a BatchedEnv needs at least one env"));
        };
        let spaces = |e: &E| (e.action_space(), e.observation_space(), e.context_space());
        let single = spaces(first);
        for (i, e) in envs.iter().enumerate() {
            if e.batch_size().is_some() {
                return Err(HostError::new(format!("sub-env {i} is batched")));
            }
            if spaces(e) != single {
                return Err(HostError::new(format!(
                    "sub-env {i}'s spaces differ from sub-env 0's"
                )));
            }
        }
        let n = envs.len();
        let batch = |s: Option<Space>| s.map(|s| batch_space(&s, n));
        Ok(BatchedEnv {
            action_space: batch(single.0),
            observation_space: batch(single.1),
            context_space: batch(single.2),
            must_reset: vec![false; n],
            envs,
        })
    }

    /// The sub-environments, in order.
    pub fn envs(&self) -> &[E] {
        &self.envs
    }
}

impl<E: Env> Env for BatchedEnv<E> {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        let n = self.envs.len();
        let mask: Vec<bool> = match &args.mask {
            None => vec![true; n],
            Some(m) => {
                // Refused before any sub-env is touched: a certain
                // invalid_request, the batch still usable.
                let bools = m.to_vec::<bool>().map_err(|e| {
                    HostError::invalid_argument(format!("a reset mask must be a bool array: {e}"))
                })?;
                if bools.len() != n || m.shape().len() != 1 {
                    return Err(HostError::invalid_argument(format!(
                        "a reset mask of shape {:?} for a batch of {n} (one bool per sub-env)",
                        m.shape()
                    )));
                }
                bools
            }
        };
        let indices: Vec<usize> = (0..n).filter(|&i| mask[i]).collect();
        let mut contexts = Vec::with_capacity(indices.len());
        let mut observations = Vec::with_capacity(indices.len());
        let mut infos = Vec::with_capacity(indices.len());
        for &i in &indices {
            let sub = ResetArgs {
                seed: args.seed.map(|s| s.wrapping_add(i as i64)),
                mask: None,
                kwargs: args.kwargs.clone(),
            };
            let r = self.envs[i].reset(sub).map_err(|e| {
                self.must_reset.iter_mut().for_each(|m| *m = true);
                HostError::new(format!("sub-env {i}: {e}"))
            })?;
            self.must_reset[i] = false;
            contexts.push(r.context);
            observations.push(r.observation);
            infos.push(r.info);
        }
        let context = if contexts.iter().all(Value::is_null) {
            Value::Null
        } else {
            stack(&contexts.iter().collect::<Vec<_>>())
        };
        Ok(ResetResult::new(
            context,
            stack(&observations.iter().collect::<Vec<_>>()),
            vector_info::gather(n, &indices, &infos),
        ))
    }

    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        let n = self.envs.len();
        if let Some(i) = self.must_reset.iter().position(|&m| m) {
            return Err(HostError::invalid_argument(format!(
                "a sub-env failed: reset the batch (sub-env {i} and the others not reset since) before stepping it"
            )));
        }
        let actions = unstack(&action, n).map_err(HostError::invalid_argument)?;
        let mut observations = Vec::with_capacity(n);
        let (mut rewards, mut terminated, mut truncated) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut infos = Vec::with_capacity(n);
        for (i, (env, a)) in self.envs.iter_mut().zip(actions).enumerate() {
            let fail = |e: String| HostError::new(format!("sub-env {i}: {e}"));
            let s = match env.step(a) {
                Ok(s) => s,
                Err(e) => {
                    self.must_reset.iter_mut().for_each(|m| *m = true);
                    return Err(fail(e.to_string()));
                }
            };
            rewards.push(
                s.reward
                    .as_scalar_f64()
                    .ok_or_else(|| fail(format!("reward is a {}", s.reward.type_name())))?,
            );
            terminated.push(s.terminated.truthy().unwrap_or(false));
            truncated.push(s.truncated.truthy().unwrap_or(false));
            observations.push(s.observation);
            infos.push(s.info);
        }
        let indices: Vec<usize> = (0..n).collect();
        Ok(StepResult::new(
            stack(&observations.iter().collect::<Vec<_>>()),
            NdArray::from_vec(rewards),
            NdArray::from_vec(terminated),
            NdArray::from_vec(truncated),
            vector_info::gather(n, &indices, &infos),
        ))
    }

    fn awaits_reset(&self) -> bool {
        self.envs.iter().any(Env::awaits_reset)
    }

    fn render(&mut self) -> HostResult<Value> {
        let frames: HostResult<Vec<Value>> = self.envs.iter_mut().map(Env::render).collect();
        Ok(Value::List(frames?))
    }

    fn close(&mut self) {
        self.envs.iter_mut().for_each(Env::close);
    }

    fn batch_size(&self) -> Option<usize> {
        Some(self.envs.len())
    }

    fn action_space(&self) -> Option<Space> {
        self.action_space.clone()
    }

    fn observation_space(&self) -> Option<Space> {
        self.observation_space.clone()
    }

    fn context_space(&self) -> Option<Space> {
        self.context_space.clone()
    }

    fn render_mode(&self) -> Option<String> {
        self.envs[0].render_mode()
    }

    fn render_fps(&self) -> Option<i64> {
        self.envs[0].render_fps()
    }

    fn metadata(&self) -> Dict {
        self.envs[0].metadata()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{CounterEnv, CounterVariant};

    fn counters(n: usize) -> BatchedEnv<CounterEnv> {
        BatchedEnv::new(
            (0..n)
                .map(|_| CounterEnv::new(None, CounterVariant::Plain))
                .collect(),
        )
        .expect("a batch")
    }

    fn positions(v: &Value) -> Vec<f64> {
        v.get("position")
            .and_then(Value::as_array)
            .map(NdArray::to_f64_vec)
            .unwrap_or_default()
    }

    #[test]
    fn transitions_equal_independent_envs() {
        let n = 3;
        let mut batch = counters(n);
        let mut alone: Vec<CounterEnv> = (0..n)
            .map(|_| CounterEnv::new(None, CounterVariant::Plain))
            .collect();
        assert_eq!(batch.batch_size(), Some(n));
        let single = alone[0].observation_space().map(|s| batch_space(&s, n));
        assert_eq!(batch.observation_space(), single);
        let r = batch.reset(ResetArgs::with_seed(-2)).expect("reset");
        let mut want = Vec::new();
        for (i, e) in alone.iter_mut().enumerate() {
            let r = e.reset(ResetArgs::with_seed(-2 + i as i64)).expect("reset");
            want.extend(positions(&r.observation));
        }
        assert_eq!(positions(&r.observation), want);
        // Every sub-env's seed, in Gymnasium's layout.
        assert_eq!(
            r.info
                .get("seed")
                .and_then(Value::as_array)
                .map(NdArray::to_f64_vec),
            Some(vec![-2.0, -1.0, 0.0])
        );
        for t in 0..6 {
            let rows: Vec<Value> = (0..n)
                .map(|i| Value::from(NdArray::from_vec(vec![(i + t) as f32, 1.0])))
                .collect();
            let s = batch
                .step(stack(&rows.iter().collect::<Vec<_>>()))
                .expect("step");
            let mut want_obs = Vec::new();
            let mut want_reward = Vec::new();
            let mut want_term = Vec::new();
            for (e, a) in alone.iter_mut().zip(rows) {
                let s = e.step(a).expect("step");
                want_obs.extend(positions(&s.observation));
                want_reward.push(s.reward.as_scalar_f64().expect("reward"));
                want_term.push(s.terminated.truthy().expect("terminated"));
            }
            assert_eq!(positions(&s.observation), want_obs);
            assert_eq!(
                s.reward.as_array().map(NdArray::to_f64_vec),
                Some(want_reward)
            );
            assert_eq!(
                s.terminated
                    .as_array()
                    .and_then(|a| a.to_vec::<bool>().ok()),
                Some(want_term)
            );
        }
        // A masked reset returns only the masked rows.
        let mask = NdArray::from_vec(vec![false, true, false]);
        let r = batch
            .reset(ResetArgs {
                seed: Some(10),
                mask: Some(mask),
                ..ResetArgs::default()
            })
            .expect("masked reset");
        assert_eq!(positions(&r.observation), vec![11.0, 11.0]);
        assert_eq!(
            r.info
                .get("_seed")
                .and_then(Value::as_array)
                .map(NdArray::to_f64_vec),
            Some(vec![0.0, 1.0, 0.0])
        );
    }

    /// A reset mask of another dtype or shape is refused as an invalid
    /// argument (a certain `invalid_request`, no fault): no sub-env is
    /// reset, and the batch steps on.
    #[test]
    fn a_bad_reset_mask_is_an_invalid_argument_and_the_batch_steps_on() {
        use crate::host::HostErrorKind;
        let mut batch = counters(2);
        batch.reset(ResetArgs::default()).expect("reset");
        for mask in [
            NdArray::from_vec(vec![1u8, 0]),
            NdArray::from_vec(vec![1.0f32, 0.0]),
            NdArray::from_vec(vec![true, false, true]),
            NdArray::from_shape_vec(vec![2, 1], vec![true, false]).expect("a 2-D mask"),
        ] {
            let e = batch
                .reset(ResetArgs {
                    mask: Some(mask.clone()),
                    ..ResetArgs::default()
                })
                .expect_err("a bad mask");
            assert_eq!(e.kind(), HostErrorKind::InvalidArgument, "{mask:?}: {e}");
            assert!(e.to_string().contains("reset mask"), "{e}");
        }
        let action = stack(&[
            &Value::from(NdArray::from_vec(vec![1.0f32, 1.0])),
            &Value::from(NdArray::from_vec(vec![1.0f32, 1.0])),
        ]);
        batch.step(action).expect("the batch steps on");
    }

    #[test]
    fn a_failing_sub_env_fails_the_batch_until_reset() {
        let mut batch = counters(2);
        batch.reset(ResetArgs::default()).expect("reset");
        // A string is no action for a counter: sub-env 0 fails.
        let bad = Value::List(vec![Value::from("x"), Value::from("y")]);
        let e = batch.step(bad).expect_err("a bad action");
        assert!(e.to_string().contains("sub-env 0"), "{e}");
        let good = stack(&[
            &Value::from(NdArray::from_vec(vec![1.0f32, 1.0])),
            &Value::from(NdArray::from_vec(vec![1.0f32, 1.0])),
        ]);
        assert!(batch.step(good.clone()).is_err(), "refused until reset");
        batch.reset(ResetArgs::default()).expect("reset");
        batch.step(good).expect("steps again");
    }

    #[test]
    fn infos_take_gymnasiums_layout() {
        let a = Dict::new().with("x", 1.5).with("s", "a");
        let b = Dict::new()
            .with("s", "b")
            .with("d", Dict::new().with("k", true));
        let info = vector_info::gather(3, &[0, 2], &[a, b]);
        assert_eq!(
            info.get("x")
                .and_then(Value::as_array)
                .map(NdArray::to_f64_vec),
            Some(vec![1.5, 0.0, 0.0])
        );
        assert_eq!(
            info.get("_x")
                .and_then(Value::as_array)
                .map(NdArray::to_f64_vec),
            Some(vec![1.0, 0.0, 0.0])
        );
        assert_eq!(
            info.get("s"),
            Some(&Value::List(vec![
                Value::from("a"),
                Value::Null,
                Value::from("b")
            ]))
        );
        assert_eq!(
            info.get("d")
                .and_then(|d| d.get("_k"))
                .and_then(Value::as_array)
                .map(NdArray::to_f64_vec),
            Some(vec![0.0, 0.0, 1.0])
        );
    }
}
