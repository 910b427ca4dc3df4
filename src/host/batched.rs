//! One stepping core for batched envs, [`BatchedCore`], and [`BatchedEnv`]:
//! N environments of the crate as one batched env (`batch_size` N) on it.
//!
//! [`BatchedCore`] is the one owner of what a batch of N sub-envs does per
//! row, whatever the sub-envs are ([`SubEnv`]): this crate's [`Env`]s (the
//! Rust host's [`BatchedEnv`]) or Python objects (the Python host's
//! `unienv_remote.BatchedEnv`, through the extension's `BatchedCore`). It
//! holds the sub-envs and which of them must be reset before the batch
//! steps again, turns a reset mask into rows and a seed into each row's
//! seed, steps every row (in turn, or on threads) and fails the batch on a
//! sub-env's error. What a row's action is and how the rows' results are
//! assembled belong to the caller (its data model).
//!
//! [`BatchedEnv`]'s semantics are UniEnv's batched ones:
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
//!   `step` is refused until every sub-env has been reset since. Every
//!   sub-env steps before the first error (by index) is reported.

use super::args::{ResetArgs, ResetResult, StepResult};
use super::error::{HostError, HostResult};
use super::space::{BinarySpace, BoxSpace, DictSpace, DynamicBoxSpace, Space};
use super::traits::Env;
use crate::codec::stack::{stack, unstack};
use crate::codec::vector_info;
use crate::codec::{Dict, NdArray, Value};

/// One sub-environment of a [`BatchedCore`]: what the core calls for its
/// row. Every [`Env`] is one (its reset options are its keyword arguments).
pub trait SubEnv {
    /// One row of a batched action.
    type Action;
    /// What one `step` returns.
    type Step;
    /// What one `reset` returns.
    type Reset;
    /// What every reset row receives besides its seed.
    type Options;
    /// A sub-env's failure.
    type Error;

    /// Steps with this row's action.
    fn step_row(&mut self, action: Self::Action) -> Result<Self::Step, Self::Error>;

    /// Resets with this row's seed.
    fn reset_row(
        &mut self,
        seed: Option<i64>,
        options: &Self::Options,
    ) -> Result<Self::Reset, Self::Error>;

    /// Whether `error` stops the batch at once without failing it (a
    /// Python `KeyboardInterrupt`); no error does by default.
    fn interrupts(_error: &Self::Error) -> bool {
        false
    }
}

impl<E: Env> SubEnv for E {
    type Action = Value;
    type Step = StepResult;
    type Reset = ResetResult;
    type Options = Dict;
    type Error = HostError;

    fn step_row(&mut self, action: Value) -> HostResult<StepResult> {
        Env::step(self, action)
    }

    fn reset_row(&mut self, seed: Option<i64>, options: &Dict) -> HostResult<ResetResult> {
        Env::reset(
            self,
            ResetArgs {
                seed,
                mask: None,
                kwargs: options.clone(),
            },
        )
    }
}

/// The seeds of a batched reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seeds {
    /// No seed: no row draws one.
    None,
    /// Row `i` gets `s + i`, as Gymnasium's vector envs derive it.
    Base(i64),
    /// One seed (or none) per row.
    Each(Vec<Option<i64>>),
}

impl Seeds {
    fn row(&self, i: usize) -> Option<i64> {
        match self {
            Seeds::None => None,
            Seeds::Base(s) => Some(s.wrapping_add(i as i64)),
            Seeds::Each(seeds) => seeds[i],
        }
    }
}

/// Why a [`BatchedCore`] call failed.
#[derive(Debug, thiserror::Error)]
pub enum BatchError<E> {
    /// `step` of a batch some of whose sub-envs failed and were not reset
    /// since (`pending`); nothing ran.
    #[error("sub-envs {pending:?} failed and were not reset since")]
    Faulted {
        /// The sub-envs to reset, in order.
        pending: Vec<usize>,
    },
    /// Sub-env `index`, the first to fail, failed with `error`: every
    /// sub-env must be reset before the batch steps again.
    #[error("sub-env {index}: {error}")]
    Failed {
        /// The sub-env.
        index: usize,
        /// Its error.
        error: E,
    },
    /// Sub-env `index` stopped the batch with `error`
    /// ([`SubEnv::interrupts`]): the batch is not failed by it.
    #[error("sub-env {index} interrupted: {error}")]
    Interrupted {
        /// The sub-env.
        index: usize,
        /// Its error.
        error: E,
    },
    /// `given` actions or mask entries for a batch of `n`; nothing ran.
    #[error("{given} rows for a batch of {n}")]
    Rows {
        /// How many were given.
        given: usize,
        /// The batch size.
        n: usize,
    },
    /// `given` seeds for a batch of `n`; nothing ran.
    #[error("{given} seeds for {n} sub-envs")]
    Seeds {
        /// How many were given.
        given: usize,
        /// The batch size.
        n: usize,
    },
}

/// A [`BatchedCore`] call's result: `T`, or the error of sub-envs `S`.
pub type BatchResult<T, S> = Result<T, BatchError<<S as SubEnv>::Error>>;

/// The rows a reset ran and their results, in order.
pub type ResetRows<S> = (Vec<usize>, Vec<<S as SubEnv>::Reset>);

/// The `(index, input)` of each row a call runs, indices ascending.
type Inputs<I> = Vec<(usize, I)>;

/// What the rows of one call gave: `(index, result)` of those that
/// succeeded, `(index, error)` of those that failed, and the error that
/// stopped a slice of rows at once.
struct Ran<T, E> {
    done: Vec<(usize, T)>,
    failed: Vec<(usize, E)>,
    interrupted: Option<(usize, E)>,
}

/// Runs `f` on each `(index, input)` of `inputs` (indices ascending, all in
/// `offset..offset + subs.len()`), in turn; stops at an interrupting error.
fn run_rows<S: SubEnv, I, T>(
    subs: &mut [S],
    offset: usize,
    inputs: Vec<(usize, I)>,
    f: &impl Fn(&mut S, I) -> Result<T, S::Error>,
) -> Ran<T, S::Error> {
    let mut ran = Ran {
        done: Vec::with_capacity(inputs.len()),
        failed: Vec::new(),
        interrupted: None,
    };
    for (i, input) in inputs {
        match f(&mut subs[i - offset], input) {
            Ok(t) => ran.done.push((i, t)),
            Err(e) if S::interrupts(&e) => {
                ran.interrupted = Some((i, e));
                break;
            }
            Err(e) => ran.failed.push((i, e)),
        }
    }
    ran
}

/// N sub-envs stepped and reset row by row (see the [module docs](self)).
pub struct BatchedCore<S> {
    subs: Vec<S>,
    /// Sub-envs to reset before the batch steps again (after a failure).
    must_reset: Vec<bool>,
}

impl<S: SubEnv> BatchedCore<S> {
    /// A core of `subs` (their number is the batch size).
    pub fn new(subs: Vec<S>) -> BatchedCore<S> {
        BatchedCore {
            must_reset: vec![false; subs.len()],
            subs,
        }
    }

    /// The batch size.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    /// Whether the batch has no sub-env.
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// The sub-envs, in order.
    pub fn subs(&self) -> &[S] {
        &self.subs
    }

    /// The sub-envs, in order, to call outside the core (`render`, `close`).
    pub fn subs_mut(&mut self) -> &mut [S] {
        &mut self.subs
    }

    /// Whether a sub-env failed and the batch was not reset since: `step`
    /// is refused.
    pub fn faulted(&self) -> bool {
        self.must_reset.iter().any(|&m| m)
    }

    /// `Ok` when the batch may step; [`BatchError::Faulted`] otherwise
    /// (what [`BatchedCore::step`] checks first, for callers that check it
    /// before they split their action).
    pub fn ready(&self) -> Result<(), BatchError<S::Error>> {
        if self.faulted() {
            let pending = (0..self.len()).filter(|&i| self.must_reset[i]).collect();
            return Err(BatchError::Faulted { pending });
        }
        Ok(())
    }

    /// Steps every sub-env with its row of `actions` (one per sub-env), in
    /// order; the results, in order.
    pub fn step(&mut self, actions: Vec<S::Action>) -> BatchResult<Vec<S::Step>, S> {
        let inputs = self.step_inputs(actions)?;
        let ran = run_rows(&mut self.subs, 0, inputs, &|s: &mut S, a| s.step_row(a));
        self.settle(ran, false)
    }

    /// The rows of a reset: the indices of `mask` (every row when `None`).
    /// Every reset row gets its seed of `seeds` and `options`; returns the
    /// rows and their results, in order.
    pub fn reset(
        &mut self,
        mask: Option<&[bool]>,
        seeds: &Seeds,
        options: &S::Options,
    ) -> BatchResult<ResetRows<S>, S> {
        let inputs = self.reset_inputs(mask, seeds)?;
        let indices: Vec<usize> = inputs.iter().map(|&(i, _)| i).collect();
        let ran = run_rows(&mut self.subs, 0, inputs, &|s: &mut S, seed| {
            s.reset_row(seed, options)
        });
        Ok((indices, self.settle(ran, true)?))
    }

    fn step_inputs(&self, actions: Vec<S::Action>) -> BatchResult<Inputs<S::Action>, S> {
        self.ready()?;
        if actions.len() != self.len() {
            return Err(BatchError::Rows {
                given: actions.len(),
                n: self.len(),
            });
        }
        Ok(actions.into_iter().enumerate().collect())
    }

    fn reset_inputs(
        &self,
        mask: Option<&[bool]>,
        seeds: &Seeds,
    ) -> BatchResult<Inputs<Option<i64>>, S> {
        let n = self.len();
        if let Some(m) = mask {
            if m.len() != n {
                return Err(BatchError::Rows { given: m.len(), n });
            }
        }
        if let Seeds::Each(s) = seeds {
            if s.len() != n {
                return Err(BatchError::Seeds { given: s.len(), n });
            }
        }
        Ok((0..n)
            .filter(|&i| mask.is_none_or(|m| m[i]))
            .map(|i| (i, seeds.row(i)))
            .collect())
    }

    /// The results of a call's rows, in order, or its error: an
    /// interruption as it is; else the first failure (by index), which
    /// fails the batch. A successful reset clears its rows' failure.
    fn settle<T>(&mut self, ran: Ran<T, S::Error>, reset: bool) -> BatchResult<Vec<T>, S> {
        if let Some((index, error)) = ran.interrupted {
            return Err(BatchError::Interrupted { index, error });
        }
        if let Some((index, error)) = ran.failed.into_iter().min_by_key(|&(i, _)| i) {
            self.must_reset.iter_mut().for_each(|m| *m = true);
            return Err(BatchError::Failed { index, error });
        }
        let mut done = ran.done;
        done.sort_by_key(|&(i, _)| i);
        if reset {
            for &(i, _) in &done {
                self.must_reset[i] = false;
            }
        }
        Ok(done.into_iter().map(|(_, t)| t).collect())
    }
}

impl<S> BatchedCore<S>
where
    S: SubEnv + Send,
    S::Action: Send,
    S::Step: Send,
    S::Reset: Send,
    S::Options: Sync,
    S::Error: Send,
{
    /// [`BatchedCore::step`] on `threads` threads, each stepping a
    /// contiguous slice of the sub-envs in turn (in turn on this thread
    /// when `threads` is 1).
    pub fn step_on(
        &mut self,
        actions: Vec<S::Action>,
        threads: usize,
    ) -> BatchResult<Vec<S::Step>, S> {
        let inputs = self.step_inputs(actions)?;
        let ran = run_threaded(&mut self.subs, inputs, threads, &|s: &mut S, a| {
            s.step_row(a)
        });
        self.settle(ran, false)
    }

    /// [`BatchedCore::reset`] on `threads` threads, as
    /// [`BatchedCore::step_on`] steps.
    pub fn reset_on(
        &mut self,
        mask: Option<&[bool]>,
        seeds: &Seeds,
        options: &S::Options,
        threads: usize,
    ) -> BatchResult<ResetRows<S>, S> {
        let inputs = self.reset_inputs(mask, seeds)?;
        let indices: Vec<usize> = inputs.iter().map(|&(i, _)| i).collect();
        let ran = run_threaded(&mut self.subs, inputs, threads, &|s: &mut S, seed| {
            s.reset_row(seed, options)
        });
        Ok((indices, self.settle(ran, true)?))
    }
}

/// [`run_rows`] over `threads` contiguous slices of `subs`, each on its
/// own scoped thread (on this one when there is one slice).
fn run_threaded<S, I, T>(
    subs: &mut [S],
    inputs: Vec<(usize, I)>,
    threads: usize,
    f: &(impl Fn(&mut S, I) -> Result<T, S::Error> + Sync),
) -> Ran<T, S::Error>
where
    S: SubEnv + Send,
    I: Send,
    T: Send,
    S::Error: Send,
{
    let n = subs.len();
    let threads = threads.clamp(1, n.max(1));
    if threads == 1 {
        return run_rows(subs, 0, inputs, f);
    }
    let mut ran = Ran {
        done: Vec::with_capacity(inputs.len()),
        failed: Vec::new(),
        interrupted: None,
    };
    std::thread::scope(|scope| {
        let mut rest = subs;
        let mut inputs = inputs.into_iter().peekable();
        let mut handles = Vec::with_capacity(threads);
        let mut start = 0;
        for k in 1..=threads {
            let end = k * n / threads;
            let (slice, tail) = std::mem::take(&mut rest).split_at_mut(end - start);
            rest = tail;
            let mut mine = Vec::new();
            while let Some(input) = inputs.next_if(|(i, _)| *i < end) {
                mine.push(input);
            }
            let offset = start;
            handles.push(scope.spawn(move || run_rows(slice, offset, mine, f)));
            start = end;
        }
        for handle in handles {
            let part = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            ran.done.extend(part.done);
            ran.failed.extend(part.failed);
            if ran.interrupted.is_none() {
                ran.interrupted = part.interrupted;
            }
        }
    });
    ran
}

/// N environments as one batched env (see the [module docs](self)).
pub struct BatchedEnv<E: Env> {
    core: BatchedCore<E>,
    action_space: Option<Space>,
    observation_space: Option<Space>,
    context_space: Option<Space>,
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
            core: BatchedCore::new(envs),
        })
    }

    /// The sub-environments, in order.
    pub fn envs(&self) -> &[E] {
        self.core.subs()
    }
}

/// A [`BatchedCore`] error as the Rust host reports it.
fn host_error(e: BatchError<HostError>) -> HostError {
    match e {
        BatchError::Faulted { pending } => HostError::invalid_argument(format!(
            "a sub-env failed: reset the batch (sub-env {} and the others not reset since) before stepping it",
            pending.first().copied().unwrap_or_default()
        )),
        BatchError::Failed { index, error } | BatchError::Interrupted { index, error } => {
            HostError::new(format!("sub-env {index}: {error}"))
        }
        BatchError::Rows { .. } | BatchError::Seeds { .. } => {
            HostError::invalid_argument(e.to_string())
        }
    }
}

impl<E: Env> Env for BatchedEnv<E> {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        let n = self.core.len();
        let mask: Option<Vec<bool>> = match &args.mask {
            None => None,
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
                Some(bools)
            }
        };
        let seeds = args.seed.map_or(Seeds::None, Seeds::Base);
        let (indices, results) = self
            .core
            .reset(mask.as_deref(), &seeds, &args.kwargs)
            .map_err(host_error)?;
        let mut contexts = Vec::with_capacity(results.len());
        let mut observations = Vec::with_capacity(results.len());
        let mut infos = Vec::with_capacity(results.len());
        for r in results {
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
        let n = self.core.len();
        self.core.ready().map_err(host_error)?;
        let actions = unstack(&action, n).map_err(HostError::invalid_argument)?;
        let results = self.core.step(actions).map_err(host_error)?;
        let mut observations = Vec::with_capacity(n);
        let (mut rewards, mut terminated, mut truncated) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let mut infos = Vec::with_capacity(n);
        for (i, s) in results.into_iter().enumerate() {
            rewards.push(s.reward.as_scalar_f64().ok_or_else(|| {
                HostError::new(format!("sub-env {i}: reward is a {}", s.reward.type_name()))
            })?);
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
        self.core.subs().iter().any(Env::awaits_reset)
    }

    fn render(&mut self) -> HostResult<Value> {
        let frames: HostResult<Vec<Value>> =
            self.core.subs_mut().iter_mut().map(Env::render).collect();
        Ok(Value::List(frames?))
    }

    fn close(&mut self) {
        self.core.subs_mut().iter_mut().for_each(Env::close);
    }

    fn batch_size(&self) -> Option<usize> {
        Some(self.core.len())
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
        self.core.subs()[0].render_mode()
    }

    fn render_fps(&self) -> Option<i64> {
        self.core.subs()[0].render_fps()
    }

    fn metadata(&self) -> Dict {
        self.core.subs()[0].metadata()
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

    /// A sub-env of the core's tests: counts its steps, fails (or
    /// interrupts) on an action of -1 (-2), records its seeds.
    #[derive(Default)]
    struct Probe {
        steps: usize,
        seeds: Vec<Option<i64>>,
    }

    #[derive(Debug, PartialEq, thiserror::Error)]
    enum ProbeError {
        #[error("failed")]
        Failed,
        #[error("interrupted")]
        Interrupt,
    }

    impl SubEnv for Probe {
        type Action = i64;
        type Step = usize;
        type Reset = Option<i64>;
        type Options = ();
        type Error = ProbeError;

        fn step_row(&mut self, action: i64) -> Result<usize, ProbeError> {
            self.steps += 1;
            match action {
                -1 => Err(ProbeError::Failed),
                -2 => Err(ProbeError::Interrupt),
                _ => Ok(self.steps),
            }
        }

        fn reset_row(&mut self, seed: Option<i64>, _: &()) -> Result<Option<i64>, ProbeError> {
            self.seeds.push(seed);
            Ok(seed)
        }

        fn interrupts(e: &ProbeError) -> bool {
            *e == ProbeError::Interrupt
        }
    }

    fn probes(n: usize) -> BatchedCore<Probe> {
        BatchedCore::new((0..n).map(|_| Probe::default()).collect())
    }

    /// Every row steps before the first failure (by index) is reported,
    /// in turn and on threads alike; the batch is refused until every row
    /// was reset, and a masked reset clears only its rows.
    #[test]
    fn the_core_steps_every_row_and_fails_the_batch_on_the_first_error() {
        for threads in [1, 2, 3, 7] {
            let mut core = probes(5);
            assert_eq!(core.step_on(vec![0; 5], threads).expect("step"), vec![1; 5]);
            let e = core
                .step_on(vec![0, -1, 0, -1, 0], threads)
                .expect_err("a failure");
            assert!(
                matches!(
                    e,
                    BatchError::Failed {
                        index: 1,
                        error: ProbeError::Failed
                    }
                ),
                "{e:?}"
            );
            assert!(
                core.subs().iter().all(|p| p.steps == 2),
                "every row stepped"
            );
            let e = core.step_on(vec![0; 5], threads).expect_err("faulted");
            assert!(matches!(&e, BatchError::Faulted { pending } if pending == &[0, 1, 2, 3, 4]));
            let mask = [true, false, true, false, false];
            let (rows, seeds) = core
                .reset_on(Some(&mask), &Seeds::Base(10), &(), threads)
                .expect("reset");
            assert_eq!((rows, seeds), (vec![0, 2], vec![Some(10), Some(12)]));
            let e = core.step(vec![0; 5]).expect_err("still faulted");
            assert!(matches!(&e, BatchError::Faulted { pending } if pending == &[1, 3, 4]));
            core.reset_on(None, &Seeds::None, &(), threads)
                .expect("reset");
            assert!(!core.faulted());
            assert_eq!(
                core.step_on(vec![0; 5], threads).expect("steps again"),
                vec![3; 5]
            );
        }
    }

    #[test]
    fn an_interruption_propagates_without_failing_the_batch() {
        let mut core = probes(3);
        let e = core.step(vec![0, -2, -1]).expect_err("interrupted");
        assert!(
            matches!(e, BatchError::Interrupted { index: 1, .. }),
            "{e:?}"
        );
        let steps: Vec<usize> = core.subs().iter().map(|p| p.steps).collect();
        assert_eq!(steps, vec![1, 1, 0], "the rows after it did not step");
        assert!(!core.faulted());
    }

    #[test]
    fn rows_and_seeds_of_another_count_are_refused_before_anything_runs() {
        let mut core = probes(3);
        assert!(matches!(
            core.step(vec![0; 2]),
            Err(BatchError::Rows { given: 2, n: 3 })
        ));
        let e = core
            .reset(None, &Seeds::Each(vec![Some(1), None]), &())
            .expect_err("two seeds");
        assert_eq!(e.to_string(), "2 seeds for 3 sub-envs");
        assert!(matches!(
            core.reset(Some(&[true]), &Seeds::None, &()),
            Err(BatchError::Rows { given: 1, n: 3 })
        ));
        assert!(core
            .subs()
            .iter()
            .all(|p| p.steps == 0 && p.seeds.is_empty()));
        let (rows, seeds) = core
            .reset(None, &Seeds::Each(vec![Some(1), None, Some(i64::MAX)]), &())
            .expect("reset");
        assert_eq!(
            (rows, seeds),
            (vec![0, 1, 2], vec![Some(1), None, Some(i64::MAX)])
        );
    }
}
