//! The Python host's fast paths for `step`: Gymnasium envs stepped from
//! here instead of through the Python wrapper the resource is.
//!
//! * A `unienv_remote.BatchedEnv` of Gymnasium sub-envs with Box spaces:
//!   stepped through its core ([`PyBatchedCore::step_hosted`], `batched.rs`),
//!   the batched result built there.
//! * [`FastSingle`]: unienv's `FromGymnasiumEnv` over a Gymnasium env with
//!   Box-like spaces (what `RemoteServer` hosts for `gymnasium.make(...)`):
//!   the Gymnasium env's `step` is called with the action array itself, and
//!   its result converted as it is, instead of `FromGymnasiumEnv.step`'s
//!   `to_gym_data` / `from_gym_data` (the identity for NumPy arrays of the
//!   NumPy backend) in Python.
//!
//! Both are optimisations of this host only: the Gymnasium envs see the
//! calls the wrapper makes, on this thread, and the value is the one the
//! wrapper's result converts to, bit for bit (`python/tests/
//! test_batched_fast.py`, `test_single_fast.py`); what is not regular is
//! finished by the wrapper's own Python code (the `BatchedEnv`'s assembly, the
//! hooks' `finish_single_step`, [`crate::host::hooks`]), and an exception of the
//! simulator propagates as it would through the wrapper.

use crate::common::convert::array_to_py;
use crate::host::batched::PyBatchedCore;
use crate::host::hooks;
use crate::host::outcome::{convert_result, sole_array, StepOutcome};
use numpy::PyUntypedArray;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use unienv_remote::{Dict, NdArray, Value};

/// The fast path of one hosted env.
pub(crate) enum FastStep {
    Batch(Py<PyBatchedCore>),
    Single(FastSingle),
}

impl FastStep {
    /// The fast path of env `obj` (of the NumPy backend), if one applies.
    pub(crate) fn detect(obj: &Bound<'_, PyAny>) -> Option<FastStep> {
        if let Some(core) = hooks::batch_core(obj).ok().flatten() {
            return Some(FastStep::Batch(core));
        }
        FastSingle::detect(obj).map(FastStep::Single)
    }

    /// `obj.step(*args, **kwargs)` done here; `None` when the call is not
    /// one this path takes (then the host calls `step` as usual).
    pub(crate) fn step(
        &self,
        obj: &Bound<'_, PyAny>,
        args: &[Value],
        kwargs: &Dict,
        max_message_size: usize,
    ) -> Option<StepOutcome> {
        match self {
            FastStep::Batch(core) => {
                let py = obj.py();
                match core.bind(py).try_borrow_mut() {
                    Ok(mut core) => core.step_hosted(py, args, kwargs, max_message_size),
                    // In use (a sub-env stepping its own batch): the plain
                    // way, whose core refuses it.
                    Err(_) => None,
                }
            }
            FastStep::Single(s) => s.step(obj, args, kwargs, max_message_size),
        }
    }
}

/// A `FromGymnasiumEnv` this host steps itself: its Gymnasium env and its
/// two spaces when detected, which `FromGymnasiumEnv.step` reads at every
/// call (a step finding other objects there goes the plain way).
pub(crate) struct FastSingle {
    env: Py<PyAny>,
    action_space: Py<PyAny>,
    observation_space: Py<PyAny>,
}

impl FastSingle {
    /// The fast path of `obj`, when the hooks' `single_step_plan(obj)`
    /// allows it.
    fn detect(obj: &Bound<'_, PyAny>) -> Option<FastSingle> {
        let (env, action_space, observation_space) = hooks::single_step_plan(obj).ok()??;
        Some(FastSingle {
            env,
            action_space,
            observation_space,
        })
    }

    fn step(
        &self,
        obj: &Bound<'_, PyAny>,
        args: &[Value],
        kwargs: &Dict,
        max_message_size: usize,
    ) -> Option<StepOutcome> {
        let py = obj.py();
        let action = sole_array(args, kwargs)?;
        let unchanged = |name: &Bound<'_, pyo3::types::PyString>, held: &Py<PyAny>| {
            obj.getattr(name).is_ok_and(|v| v.is(held))
        };
        if !(unchanged(intern!(py, "env"), &self.env)
            && unchanged(intern!(py, "action_space"), &self.action_space)
            && unchanged(intern!(py, "observation_space"), &self.observation_space))
        {
            return None;
        }
        Some(self.run(obj, action, max_message_size))
    }

    fn run(
        &self,
        obj: &Bound<'_, PyAny>,
        action: &NdArray,
        max_message_size: usize,
    ) -> StepOutcome {
        let py = obj.py();
        // A new NumPy array, as the plain path passes the action (which
        // `to_gym_data` returns as it is).
        let action = array_to_py(py, action)?;
        let result = self
            .env
            .bind(py)
            .call_method1(intern!(py, "step"), (action,))?;
        // `from_gym_data` returns a NumPy observation as it is: a tuple of
        // five with one is what `FromGymnasiumEnv.step` returns, item for
        // item.
        if let Ok(t) = result.cast_exact::<PyTuple>() {
            if t.len() == 5 && t.get_item(0)?.cast::<PyUntypedArray>().is_ok() {
                return convert_result(&result, max_message_size);
            }
        }
        let finished = hooks::finish_single_step(obj, result)?;
        convert_result(&finished, max_message_size)
    }
}
