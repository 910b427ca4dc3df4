//! A domain's side of recording ([`crate::record`]): after an env-mode
//! `reset`, `reload` or `step` succeeds, its action and result (cloned:
//! arrays share their bytes) go to the recorder's queue.

use super::hosted::Hosted;
use super::instance::Instance;
use super::shared::Core;
use crate::codec::{Dict, Value};
use crate::protocol::{Method, ResourceKind};
use crate::record::{EnvSpaces, Event};
use std::collections::HashMap;
use std::sync::Arc;

/// What a recorded call needs from its request, taken before the call
/// consumes it.
pub(crate) struct Pending {
    method: Method,
    /// `step`'s action or `reset`'s mask.
    argument: Option<Value>,
}

/// The env resources of this instantiation whose recording is open.
#[derive(Default)]
pub(crate) struct Recording {
    opened: HashMap<usize, Arc<str>>,
}

/// The action of a `step` or the mask of a `reset`/`reload` of an env, when
/// the server records.
pub(crate) fn capture(
    core: &Core,
    kind: ResourceKind,
    method: Method,
    args: &[Value],
    kwargs: &Dict,
) -> Option<Pending> {
    core.recorder.as_ref()?;
    if kind != ResourceKind::Env {
        return None;
    }
    let argument = match method {
        Method::Step => kwargs.get("action").or_else(|| args.first()).cloned(),
        Method::Reset | Method::Reload => kwargs.get("mask").cloned(),
        _ => return None,
    };
    Some(Pending { method, argument })
}

impl Recording {
    /// Queues a succeeded call's transition data.
    pub(crate) fn record(
        &mut self,
        core: &Core,
        instance: &mut Instance,
        index: usize,
        pending: Pending,
        value: &Value,
    ) {
        let Some(recorder) = core.recorder.as_ref() else {
            return;
        };
        let id = match self.opened.get(&index) {
            Some(id) => id.clone(),
            None => {
                let meta = &instance.resources[index];
                let id: Arc<str> = Arc::from(meta.id.as_str());
                let Some(spaces) = instance.hosted.as_mut().and_then(|h| env_spaces(h, meta))
                else {
                    tracing::warn!(resource = %id, "recording: the env has no observation or action space");
                    return;
                };
                recorder.send(Event::Open {
                    id: id.clone(),
                    spaces: Box::new(spaces),
                });
                self.opened.insert(index, id.clone());
                id
            }
        };
        let event = match pending.method {
            Method::Step => Event::Step {
                id,
                action: pending.argument.unwrap_or_default(),
                result: without_info(value),
            },
            _ => Event::Reset {
                id,
                result: value.clone(),
                mask: pending.argument.filter(|m| !m.is_null()),
            },
        };
        recorder.send(event);
    }

    /// The domain is disposed: its envs' open episodes are committed.
    pub(crate) fn close(&mut self, core: &Core) {
        if let Some(recorder) = core.recorder.as_ref() {
            for (_, id) in self.opened.drain() {
                recorder.send(Event::Close { id });
            }
        }
    }
}

/// A `step` result without its `info` (the recording does not keep it, and
/// an info dict can be far larger than the rest): `(obs, reward,
/// terminated, truncated)`; other values as they are.
fn without_info(value: &Value) -> Value {
    match value {
        Value::Tuple(items) | Value::List(items) if items.len() == 5 => {
            Value::Tuple(items[..4].to_vec())
        }
        other => other.clone(),
    }
}

/// An env's declared spaces and batch size, from its descriptor members.
fn env_spaces(hosted: &mut Hosted, meta: &super::hosted::ResourceMeta) -> Option<EnvSpaces> {
    let mut d = Dict::new();
    hosted.attrs(meta).write(ResourceKind::Env, &mut d);
    let space = |k: &str| {
        d.get(k)
            .filter(|v| !v.is_null())
            .and_then(|v| crate::host::Space::from_value(v).ok())
    };
    Some(EnvSpaces {
        observation: space("observation_space")?,
        action: space("action_space")?,
        context: space("context_space"),
        batch_size: d
            .get("batch_size")
            .and_then(Value::as_i64)
            .and_then(|b| usize::try_from(b).ok()),
    })
}
