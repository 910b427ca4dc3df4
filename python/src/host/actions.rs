//! Actions checked and converted on the Python host, as `unienv-remote serve`
//! does for Rust simulators (SPEC.md, "Action checking on the Python host").
//!
//! Before an env's `step` or a node's `set_next_action` reaches Python, the
//! action is converted where that is unambiguous ([`Space::coerce`]: `1`
//! becomes a 0-d array of the space's integer dtype, `[0.5]` a float32 array
//! of shape `(1,)`) and checked against the resource's action space
//! ([`Space::check`]). A refusal is a [`HostError::invalid_argument`]: the
//! client gets a certain `invalid_request` naming the element and the bound,
//! and the domain is not faulted. An env's `step` before its first
//! successful `reset`/`reload` is refused the same way.
//!
//! The action space is read from the object (`action_space`) at every call
//! and parsed again only when the attribute holds another object. For
//! `unienv`'s `FromGymnasiumEnv` (and a `BatchedEnv` of Gymnasium or
//! `FromGymnasiumEnv` sub-envs), `Discrete`/`MultiDiscrete` spaces become
//! integer boxes whose `high` UniEnv means as exclusive (`[start, start+n)`)
//! while its document reads as inclusive: the check uses `start+n-1`.

use crate::common::convert::{from_py, ArrayMode};
use pyo3::intern;
use pyo3::prelude::*;
use unienv_remote::codec::ScalarKind;
use unienv_remote::host::{HostError, HostResult, Space};
use unienv_remote::protocol::ResourceKind;
use unienv_remote::{DType, Dict, NdArray, Value};

/// The refusal of `step` before the first reset, as the built-in simulators
/// word it.
pub(crate) const STEP_BEFORE_RESET: &str =
    "step() was called before reset(): call reset() first to start an episode";

/// Per-resource state of the action check.
pub(crate) struct ActionGuard {
    /// Whether checking is on (`RemoteServer(validate_actions=...)`).
    enabled: bool,
    /// Whether `step` needs a reset first: a leaf env (not composed of a
    /// world and nodes, which are driven in other ways too).
    tracks_reset: bool,
    /// Whether a reset or reload of the env succeeded.
    reset_done: bool,
    /// The action space object last read, and what it parsed to (`None`:
    /// a space the crate does not know, not checked).
    space: Option<(Py<PyAny>, Option<Space>)>,
}

impl ActionGuard {
    /// The guard of a resource of `kind`; `composed` when it is an env
    /// exposing a world and nodes.
    pub(crate) fn new(enabled: bool, kind: ResourceKind, composed: bool) -> ActionGuard {
        ActionGuard {
            enabled,
            tracks_reset: kind == ResourceKind::Env && !composed,
            reset_done: false,
            space: None,
        }
    }

    /// Whether checking is on.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Converts and checks the action of a `method` call of resource `id`
    /// (`obj`) in place; an error refuses the call before Python sees it.
    pub(crate) fn admit(
        &mut self,
        obj: &Bound<'_, PyAny>,
        kind: ResourceKind,
        id: &str,
        method: &str,
        args: &mut [Value],
        kwargs: &mut Dict,
    ) -> HostResult<()> {
        if !self.enabled {
            return Ok(());
        }
        let takes_action = (kind == ResourceKind::Env && method == "step")
            || (kind == ResourceKind::Node && method == "set_next_action");
        if !takes_action {
            return Ok(());
        }
        let action = match args.len() {
            0 => kwargs.get_mut("action"),
            1 if !kwargs.contains_key("action") => args.first_mut(),
            // A wrong argument count is the object's to report.
            _ => None,
        };
        if let Some(action) = action {
            if let Some(space) = self.space(obj) {
                if let Some(converted) = space.coerce(action) {
                    *action = converted;
                }
                if let Err(problem) = space.check(action, "action") {
                    tracing::info!(target: "unienv_remote_native::actions", resource = %id, method, %problem, "action refused");
                    return Err(HostError::invalid_argument(format!(
                        "{method}() on '{id}' refused the action: {problem}"
                    )));
                }
            }
        }
        if self.tracks_reset && method == "step" && !self.reset_done {
            tracing::info!(target: "unienv_remote_native::actions", resource = %id, "step before reset refused");
            return Err(HostError::invalid_argument(STEP_BEFORE_RESET));
        }
        Ok(())
    }

    /// Records the outcome of a call: a successful env reset or reload
    /// starts an episode.
    pub(crate) fn finished(&mut self, method: &str, ok: bool) {
        if ok && matches!(method, "reset" | "reload") {
            self.reset_done = true;
        }
    }

    /// The parsed action space of `obj`, read again only when the attribute
    /// holds another object than last time.
    fn space(&mut self, obj: &Bound<'_, PyAny>) -> Option<&Space> {
        let py = obj.py();
        let current = match obj.getattr(intern!(py, "action_space")) {
            Ok(s) if !s.is_none() => s,
            _ => {
                self.space = None;
                return None;
            }
        };
        let stale = !self
            .space
            .as_ref()
            .is_some_and(|(seen, _)| seen.bind(py).is(&current));
        if stale {
            let parsed = parse(obj, &current);
            self.space = Some((current.unbind(), parsed));
        }
        self.space.as_ref().and_then(|(_, s)| s.as_ref())
    }
}

/// The crate's form of a UniEnv space object (`None` when it cannot be
/// read), adjusted for `FromGymnasiumEnv`'s exclusive discrete bounds.
fn parse(obj: &Bound<'_, PyAny>, space: &Bound<'_, PyAny>) -> Option<Space> {
    let py = obj.py();
    let doc = py
        .import(intern!(
            py,
            "unienv_interface.space.space_utils.serialization_utils"
        ))
        .and_then(|m| m.getattr(intern!(py, "space_to_json")))
        .and_then(|f| f.call1((space,)))
        .and_then(|d| from_py(&d, ArrayMode::Copy))
        .ok()?;
    let parsed = Space::from_value(&doc).ok()?;
    Some(match gymnasium_space(obj, "action_space") {
        Some(gym) => exclusive_discrete(&gym, parsed),
        None => parsed,
    })
}

/// The space document a descriptor publishes for `name` of `obj`: with
/// checking on, a `FromGymnasiumEnv`'s action and observation spaces made
/// from `Discrete` / `MultiDiscrete` have the `high` bound their values
/// reach (`start + n - 1`, what the action check uses); any other document
/// is `space_to_json`'s, unchanged.
pub(crate) fn published(obj: &Bound<'_, PyAny>, name: &str, doc: Value, enabled: bool) -> Value {
    if !enabled || !matches!(name, "action_space" | "observation_space") {
        return doc;
    }
    let Some(gym) = gymnasium_space(obj, name) else {
        return doc;
    };
    let Ok(parsed) = Space::from_value(&doc) else {
        return doc;
    };
    let adjusted = exclusive_discrete(&gym, parsed.clone());
    if adjusted == parsed {
        doc
    } else {
        adjusted.to_value()
    }
}

/// The Gymnasium space `name` of a `FromGymnasiumEnv`, or of the sub-envs
/// of a `unienv_remote.BatchedEnv` (its `_gymnasium_space(name)`: one
/// sub-env's, which `exclusive_discrete` applies to the batched boxes
/// element by element); `None` for any other object, or without gymnasium.
fn gymnasium_space<'py>(obj: &Bound<'py, PyAny>, name: &str) -> Option<Bound<'py, PyAny>> {
    let py = obj.py();
    if let Some(batched) = crate::host::hooks::gymnasium_space(obj, name).ok()? {
        return Some(batched);
    }
    let class = py
        .import(intern!(py, "unienv_interface.wrapper.gym_compat"))
        .and_then(|m| m.getattr(intern!(py, "FromGymnasiumEnv")))
        .ok()?;
    if !obj.is_instance(&class).ok()? {
        return None;
    }
    obj.getattr(intern!(py, "env"))
        .and_then(|e| e.getattr(name))
        .ok()
}

/// Lowers the `high` of integer boxes made from Gymnasium's `Discrete` and
/// `MultiDiscrete` by one (UniEnv builds them as `[start, start + n)`),
/// through `Dict`, `Tuple` and `OneOf` spaces.
fn exclusive_discrete(gym: &Bound<'_, PyAny>, space: Space) -> Space {
    let py = gym.py();
    let Ok(spaces) = py.import(intern!(py, "gymnasium.spaces")) else {
        return space;
    };
    let is = |name: &str| {
        spaces
            .getattr(name)
            .and_then(|c| gym.is_instance(&c))
            .unwrap_or(false)
    };
    match space {
        Space::Box(mut b)
            if (is("Discrete") || is("MultiDiscrete"))
                && b.dtype.kind() == ScalarKind::Int
                && b.high.dtype() == DType::I64 =>
        {
            let lowered: Vec<i64> = b
                .high
                .to_f64_vec()
                .into_iter()
                .map(|x| (x as i64).saturating_sub(1))
                .collect();
            if let Ok(high) = NdArray::from_shape_vec(b.high.shape().to_vec(), lowered) {
                b.high = high;
            }
            Space::Box(b)
        }
        Space::Dict(d) if is("Dict") => Space::dict(d.entries().iter().map(|(k, s)| {
            let adjusted = match gym.get_item(k) {
                Ok(g) => exclusive_discrete(&g, s.clone()),
                Err(_) => s.clone(),
            };
            (k.clone(), adjusted)
        })),
        Space::Tuple(items) if is("Tuple") => Space::Tuple(exclusive_items(gym, items)),
        Space::Union(items) if is("OneOf") => Space::Union(exclusive_items(gym, items)),
        other => other,
    }
}

/// [`exclusive_discrete`] of each of a `Tuple`'s or a `OneOf`'s spaces (both
/// index their spaces as `gym[i]`).
fn exclusive_items(gym: &Bound<'_, PyAny>, items: Vec<Space>) -> Vec<Space> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, s)| match gym.get_item(i) {
            Ok(g) => exclusive_discrete(&g, s),
            Err(_) => s,
        })
        .collect()
}

/// `_native.coerce_action(space_document, action)`: the action converted as
/// the Python host converts it (see [`Space::coerce`]), or the action itself
/// when nothing converts or the document is not a space the crate knows.
/// Our client calls it before sending a plain (non-array) action.
#[pyfunction]
fn coerce_action<'py>(
    space_document: &Bound<'py, PyAny>,
    action: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = action.py();
    let Ok(space) = from_py(space_document, ArrayMode::Copy)
        .map_err(|_| ())
        .and_then(|doc| Space::from_value(&doc).map_err(|_| ()))
    else {
        return Ok(action);
    };
    let Ok(value) = from_py(&action, ArrayMode::Copy) else {
        return Ok(action);
    };
    match space.coerce(&value) {
        Some(converted) => crate::common::convert::to_py(py, &converted),
        None => Ok(action),
    }
}

/// Registers `coerce_action`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(coerce_action, m)?)
}
