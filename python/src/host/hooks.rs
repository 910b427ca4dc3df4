//! The one way this host calls back into the Python package: the hooks
//! object `unienv_remote/_hooks.py` registers once at import
//! (`_native.set_hooks(HOOKS)`), an instance of its `NativeHooks`.
//!
//! Nothing else of the package is called by name from Rust. The calls, all
//! made with the GIL held on a domain's worker (or at the host's setup):
//!
//! | function here | hook | when |
//! | --- | --- | --- |
//! | [`is_refusal`] | `refusal` (a class) | an exception of a hosted call: one of this class is a certain `invalid_request` ([`super::python::host_error`]) |
//! | [`map_arguments`] | `map_arguments(obj, args, kwargs)` | each call of a resource whose backend is not NumPy |
//! | [`layout_factory`] | `layout_factory(server, root_id, product)` | a factory's product laid out as a domain |
//! | [`dispose`] | `dispose(items)` | a domain's objects closed, once |
//! | [`single_step_plan`] | `single_step_plan(obj)` | setup: may [`super::fast`] step this `FromGymnasiumEnv`? |
//! | [`finish_single_step`] | `finish_single_step(obj, result)` | a single step whose result is not regular |
//! | [`batch_core`] | `batch_core(obj)` | setup: the core of a `BatchedEnv` the host may step through it ([`super::batched`]) |
//! | [`gymnasium_space`] | `gymnasium_space(obj, name)` | the action check parsing a `BatchedEnv`'s space |

use crate::host::batched::PyBatchedCore;
use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// The registered hooks: the object, and its `refusal` class read once.
struct Hooks {
    object: Py<PyAny>,
    refusal: Py<PyType>,
}

static HOOKS: PyOnceLock<Hooks> = PyOnceLock::new();

/// `_native.set_hooks(hooks)`: registers the package's hooks object, once
/// (a second registration is refused).
#[pyfunction]
fn set_hooks(hooks: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = hooks.py();
    let refusal = hooks
        .getattr(intern!(py, "refusal"))?
        .cast_into::<PyType>()?
        .unbind();
    let mut fresh = false;
    HOOKS.get_or_init(py, || {
        fresh = true;
        Hooks {
            object: hooks.clone().unbind(),
            refusal,
        }
    });
    if !fresh {
        return Err(PyRuntimeError::new_err("the hooks are already registered"));
    }
    Ok(())
}

fn hooks(py: Python<'_>) -> PyResult<&Hooks> {
    HOOKS.get(py).ok_or_else(|| {
        PyRuntimeError::new_err(
            "unienv_remote's hooks are not registered: import unienv_remote, not its _native alone",
        )
    })
}

fn call<'py>(
    py: Python<'py>,
    name: &Bound<'py, pyo3::types::PyString>,
    args: impl pyo3::call::PyCallArgs<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    hooks(py)?.object.bind(py).call_method1(name, args)
}

/// Whether `e` is the hooks' `refusal`: refused before anything changed.
pub(crate) fn is_refusal(py: Python<'_>, e: &PyErr) -> bool {
    hooks(py).is_ok_and(|h| e.is_instance(py, h.refusal.bind(py)))
}

/// A non-NumPy resource's arguments on its backend and device.
pub(crate) fn map_arguments<'py>(
    obj: &Bound<'py, PyAny>,
    args: Bound<'py, PyTuple>,
    kwargs: Bound<'py, PyDict>,
) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
    let py = obj.py();
    call(py, intern!(py, "map_arguments"), (obj, args, kwargs))?.extract()
}

/// A factory's `product` laid out for domain `root_id` of `server`.
pub(crate) fn layout_factory<'py>(
    server: &Bound<'py, PyAny>,
    root_id: &str,
    product: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = server.py();
    call(
        py,
        intern!(py, "layout_factory"),
        (server, root_id, product),
    )
}

/// A domain's objects (`[(kind, obj)]`) closed once.
pub(crate) fn dispose(py: Python<'_>, items: Vec<(String, Py<PyAny>)>) -> PyResult<()> {
    call(py, intern!(py, "dispose"), (items,)).map(drop)
}

/// `(env, action_space, observation_space)` of a `FromGymnasiumEnv`.
pub(crate) type SinglePlan = (Py<PyAny>, Py<PyAny>, Py<PyAny>);

/// The [`SinglePlan`] of a `FromGymnasiumEnv` this host may step itself;
/// `None` for anything else.
pub(crate) fn single_step_plan(obj: &Bound<'_, PyAny>) -> PyResult<Option<SinglePlan>> {
    let py = obj.py();
    call(py, intern!(py, "single_step_plan"), (obj,))?.extract()
}

/// The rest of `FromGymnasiumEnv.step` after the host stepped its env.
pub(crate) fn finish_single_step<'py>(
    obj: &Bound<'py, PyAny>,
    result: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    call(py, intern!(py, "finish_single_step"), (obj, result))
}

/// The `BatchedCore` of a `BatchedEnv` this host may step through it;
/// `None` for anything else.
pub(crate) fn batch_core(obj: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyBatchedCore>>> {
    let py = obj.py();
    let core = call(py, intern!(py, "batch_core"), (obj,))?;
    if core.is_none() {
        return Ok(None);
    }
    Ok(Some(core.cast_into::<PyBatchedCore>()?.unbind()))
}

/// A `BatchedEnv`'s sub-envs' Gymnasium space `name`; `None` for anything
/// else.
pub(crate) fn gymnasium_space<'py>(
    obj: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = obj.py();
    let space = call(py, intern!(py, "gymnasium_space"), (obj, name))?;
    Ok((!space.is_none()).then_some(space))
}

/// Registers `set_hooks`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_hooks, m)?)
}
