//! A hosted Python object's descriptor members, read as the reference's
//! `_descriptor` reads them (`hasattr`/`getattr` of 13 attributes, the
//! spaces through `space_to_json`, node priorities sorted, the optional
//! `reload`), and the cheap check behind every call's descriptors: whether
//! anything differs from what was last read ([`Probe::changed`]).
//!
//! Every call's response carries the domain's descriptors, so these reads
//! run once per env step. What keeps them cheap:
//!
//! - an attribute absent last time is looked up as
//!   `getattr(obj, name, SENTINEL)` does (the interpreter's function that
//!   `builtins.getattr` runs, called directly where it can be found:
//!   [`attr`]), which for ordinary objects never creates the
//!   `AttributeError` that `hasattr` semantics would otherwise cost for
//!   each of the (usually nine) absent attributes; one present last time
//!   with `PyObject_GetAttr` (the same lookup: an `AttributeError` means
//!   absent as well);
//! - an attribute's value is not converted again: it is walked beside a
//!   snapshot of what it was ([`snapshot::Snapshot`]: exact types, dicts in
//!   order, arrays by dtype, shape and bytes; a mutation in place shows),
//!   and only a value holding other types than the snapshot knows is
//!   converted and compared with the last conversion, as before;
//! - the operations change only with an env's optional `reload`: only its
//!   presence is checked;
//! - a space is the same while the attribute holds the same object (its
//!   document is built only for another object, as before);
//! - when nothing differs, no descriptor is built at all: the domain reuses
//!   its cached one ([`unienv_remote::server::ForeignHost::descriptor_if_changed`]).

mod snapshot;

use crate::common::convert::{from_py, ArrayMode};
use crate::host::attr::{attr, attr_present};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};
use snapshot::Snapshot;
use unienv_remote::protocol::ResourceKind;
use unienv_remote::{Dict, Value};

/// Descriptor attributes read with `hasattr`, in the reference's order.
pub(crate) const ATTRS: [&str; 13] = [
    "name",
    "batch_size",
    "world_timestep",
    "world_subtimestep",
    "control_timestep",
    "update_timestep",
    "render_mode",
    "render_fps",
    "supported_render_modes",
    "has_reward",
    "has_termination_signal",
    "has_truncation_signal",
    "metadata",
];

/// The spaces of envs and nodes, in the reference's order.
pub(crate) const SPACES: [&str; 3] = ["action_space", "observation_space", "context_space"];

/// The six priority sets of nodes.
pub(crate) const PRIORITIES: [&str; 6] = [
    "reset_priorities",
    "reload_priorities",
    "after_reset_priorities",
    "after_reload_priorities",
    "pre_environment_step_priorities",
    "post_environment_step_priorities",
];

/// Python objects looked up once: `builtins.sorted` and the attribute names.
struct Lookup {
    sorted: Py<PyAny>,
    attrs: Vec<Py<PyString>>,
    spaces: Vec<Py<PyString>>,
}

static LOOKUP: PyOnceLock<Lookup> = PyOnceLock::new();

fn lookup(py: Python<'_>) -> PyResult<&Lookup> {
    LOOKUP.get_or_try_init(py, || {
        let builtins = py.import(intern!(py, "builtins"))?;
        let names = |list: &[&str]| {
            list.iter()
                .map(|n| PyString::intern(py, n).unbind())
                .collect()
        };
        Ok::<_, PyErr>(Lookup {
            sorted: builtins.getattr(intern!(py, "sorted"))?.unbind(),
            attrs: names(&ATTRS),
            spaces: names(&SPACES),
        })
    })
}

/// What one attribute was when the descriptor was last read.
enum Seen {
    /// Absent (`hasattr` false).
    Missing,
    /// Present: its conversion, and a snapshot of the object when it holds
    /// only types [`Snapshot`] compares (otherwise the next check converts
    /// it again).
    Value(Value, Option<Snapshot>),
    /// Its getter raised, or its value could not be converted: left out
    /// (and logged) each time it is read.
    Failed,
}

/// A space attribute's document, kept with the space object it was made
/// from: the document is rebuilt only when the attribute holds another
/// object.
struct SpaceDoc {
    space: Py<PyAny>,
    doc: Value,
}

/// What a resource's descriptor was last built from.
#[derive(Default)]
pub(crate) struct Probe {
    /// Per attribute of [`ATTRS`]; empty before the first read.
    attrs: Vec<Seen>,
    /// Per space of [`SPACES`]: `None` for a missing or `None` space.
    spaces: [Option<SpaceDoc>; 3],
    /// Per priority set of [`PRIORITIES`] (nodes): the sorted list, `None`
    /// when reading it failed.
    priorities: Vec<Option<Value>>,
    /// The `operations` member.
    operations: Vec<&'static str>,
}

/// Logs a member left out of a descriptor, as before.
fn skip(py: Python<'_>, id: &str, name: &str, e: PyErr) {
    let error = crate::host::python::host_error(py, e);
    tracing::warn!(target: "unienv_remote_native::descriptor", resource = %id, member = name, %error, "descriptor member left out");
}

/// The reference's `_methods`: every method of the kind, optional ones
/// (env `reload`) only when callable.
pub(crate) fn methods(obj: &Bound<'_, PyAny>, kind: ResourceKind) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = kind
        .methods()
        .iter()
        .map(|(m, _)| *m)
        .filter(|m| {
            kind != ResourceKind::Env
                || *m != "reload"
                // Looked up as the other members: an env without `reload`
                // (most) raised and dropped an AttributeError on every call.
                || has_reload(obj)
        })
        .collect();
    out.sort_unstable();
    out
}

/// Whether `obj` has a callable `reload` (a getter raising counts as none).
fn has_reload(obj: &Bound<'_, PyAny>) -> bool {
    attr(obj, intern!(obj.py(), "reload")).is_ok_and(|f| f.is_some_and(|f| f.is_callable()))
}

fn space_to_json(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    py.import(intern!(
        py,
        "unienv_interface.space.space_utils.serialization_utils"
    ))?
    .getattr(intern!(py, "space_to_json"))
}

impl Probe {
    /// The descriptor members after `domain_id`, `operations` included, in
    /// the reference's order; remembers what they were built from. A member
    /// whose getter raises (other than `AttributeError`, which means
    /// absent) or whose value cannot be encoded is left out and logged.
    pub(crate) fn read(
        &mut self,
        obj: &Bound<'_, PyAny>,
        id: &str,
        kind: ResourceKind,
        checked: bool,
    ) -> PyResult<Dict> {
        let py = obj.py();
        let l = lookup(py)?;
        let mut d = Dict::with_capacity(24);
        self.attrs.clear();
        for (i, name) in ATTRS.iter().enumerate() {
            let read = attr(obj, l.attrs[i].bind(py)).and_then(|v| {
                v.map(|v| from_py(&v, ArrayMode::Copy).map(|c| (v, c)))
                    .transpose()
            });
            self.attrs.push(match read {
                Ok(Some((v, converted))) => {
                    d.insert(*name, converted.clone());
                    Seen::Value(converted, Snapshot::take(&v))
                }
                Ok(None) => Seen::Missing,
                Err(e) => {
                    skip(py, id, name, e);
                    Seen::Failed
                }
            });
        }
        if kind != ResourceKind::World {
            for (slot, name) in SPACES.iter().enumerate() {
                match self.space_doc(obj, slot, checked) {
                    Ok(doc) => {
                        d.insert(*name, doc);
                    }
                    Err(e) => {
                        self.spaces[slot] = None;
                        skip(py, id, name, e);
                    }
                }
            }
        }
        self.priorities.clear();
        if kind == ResourceKind::Node {
            for name in PRIORITIES {
                match sorted_priorities(obj, name) {
                    Ok(v) => {
                        d.insert(name, v.clone());
                        self.priorities.push(Some(v));
                    }
                    Err(e) => {
                        skip(py, id, name, e);
                        self.priorities.push(None);
                    }
                }
            }
        }
        self.operations = methods(obj, kind);
        d.insert(
            "operations",
            Value::List(self.operations.iter().map(|m| Value::from(*m)).collect()),
        );
        Ok(d)
    }

    /// Whether [`Probe::read`] could now give other members than it did
    /// last time (always before the first read). Reads the attributes as
    /// `read` does, converting only what may have changed.
    pub(crate) fn changed(&self, obj: &Bound<'_, PyAny>, kind: ResourceKind) -> bool {
        self.differs(obj, kind).unwrap_or(true)
    }

    fn differs(&self, obj: &Bound<'_, PyAny>, kind: ResourceKind) -> PyResult<bool> {
        let py = obj.py();
        if self.attrs.len() != ATTRS.len() {
            return Ok(true);
        }
        let l = lookup(py)?;
        for (i, seen) in self.attrs.iter().enumerate() {
            let name = l.attrs[i].bind(py);
            let now = match seen {
                Seen::Value(..) => attr_present(obj, name)?,
                Seen::Missing | Seen::Failed => attr(obj, name)?,
            };
            let same = match (seen, now) {
                (Seen::Missing, None) => true,
                (Seen::Value(_, Some(snapshot)), Some(v)) => snapshot.matches(&v),
                (Seen::Value(converted, None), Some(v)) => {
                    from_py(&v, ArrayMode::Copy).is_ok_and(|c| c == *converted)
                }
                _ => false,
            };
            if !same {
                return Ok(true);
            }
        }
        if kind != ResourceKind::World {
            for (slot, cached) in self.spaces.iter().enumerate() {
                let name = l.spaces[slot].bind(py);
                let now = match cached {
                    Some(_) => attr_present(obj, name)?,
                    None => attr(obj, name)?,
                };
                let now = now.filter(|s| !s.is_none());
                let same = match (cached, now) {
                    (None, None) => true,
                    (Some(c), Some(s)) => s.is(&c.space),
                    _ => false,
                };
                if !same {
                    return Ok(true);
                }
            }
        }
        if kind == ResourceKind::Node {
            for (name, seen) in PRIORITIES.iter().zip(&self.priorities) {
                let Some(seen) = seen else {
                    return Ok(true);
                };
                if sorted_priorities(obj, name)? != *seen {
                    return Ok(true);
                }
            }
        }
        // `methods` depends on the object only through an env's `reload`.
        Ok(kind == ResourceKind::Env && has_reload(obj) != self.operations.contains(&"reload"))
    }

    /// A space's `space_to_json` document (null without a space), rebuilt
    /// only when the attribute holds another object than last time.
    /// `checked` (actions are checked): a `FromGymnasiumEnv`'s `Discrete`
    /// is published with its reachable high bound (`actions::published`).
    fn space_doc(&mut self, obj: &Bound<'_, PyAny>, slot: usize, checked: bool) -> PyResult<Value> {
        let py = obj.py();
        let name = lookup(py)?.spaces[slot].bind(py);
        let cache = &mut self.spaces[slot];
        let space = match attr(obj, name)? {
            Some(s) if !s.is_none() => s,
            _ => {
                *cache = None;
                return Ok(Value::Null);
            }
        };
        if let Some(c) = cache.as_ref().filter(|c| c.space.bind(py).is(&space)) {
            return Ok(c.doc.clone());
        }
        let doc = from_py(&space_to_json(py)?.call1((&space,))?, ArrayMode::Copy)?;
        let doc = crate::host::actions::published(obj, SPACES[slot], doc, checked);
        *cache = Some(SpaceDoc {
            space: space.unbind(),
            doc: doc.clone(),
        });
        Ok(doc)
    }
}

/// `sorted(getattr(obj, name), reverse=True)`, converted.
fn sorted_priorities(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Value> {
    let py = obj.py();
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "reverse"), true)?;
    let list = lookup(py)?
        .sorted
        .bind(py)
        .call((obj.getattr(name)?,), Some(&kwargs))?;
    from_py(&list, ArrayMode::Copy)
}
