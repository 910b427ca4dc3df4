//! What a domain publishes at each committed boundary for the readers that
//! must never wait on its thread: `discover` and `describe` from sessions
//! that do not control the domain (and so `connect`, which discovers).
//!
//! A domain thread may be busy for as long as a hosted call runs (a
//! simulator that hangs, or that calls back into this server). Its
//! descriptors as of its last committed boundary — instantiation or
//! revival, a completed component operation, a successful env mutation —
//! are kept here, behind a `watch` channel, so that a reader answers from
//! them at once. Between boundaries the published descriptors do not move:
//! a reset inside an open component operation becomes visible to other
//! sessions when the operation completes (SPEC "Discover and describe never
//! wait").

use crate::codec::Value;
use std::sync::Arc;
use tokio::sync::watch;

/// A domain's descriptors as of its last committed boundary.
#[derive(Debug, Clone, Default)]
pub(crate) struct Committed {
    /// The descriptors (revision and sequence as stamped when they were
    /// built; readers stamp `revision` and `sequence` below). `None` while
    /// the domain is pending (never built, or evicted): a reader then asks
    /// the domain thread, which instantiates it.
    pub descriptors: Option<Arc<Vec<Value>>>,
    /// The domain's revision at the boundary.
    pub revision: u64,
    /// The boundary's sequence.
    pub sequence: u64,
    /// The session controlling the domain, if any: its `describe` requests
    /// are ordered with its calls on the domain thread.
    pub owner: Option<Arc<str>>,
    /// The descriptor cache generation the list was copied at.
    pub(crate) generation: u64,
}

impl Committed {
    /// Copies of the descriptors stamped with the boundary's revision and
    /// sequence, if the domain is instantiated.
    pub(crate) fn stamped(&self) -> Option<Vec<Value>> {
        let list = self.descriptors.as_ref()?;
        let mut out = Vec::with_capacity(list.len());
        for d in list.iter() {
            let mut d = d.clone();
            if let Some(dict) = d.as_dict_mut() {
                if let Some(v) = dict.get_mut("revision") {
                    *v = Value::from(self.revision);
                }
                if let Some(v) = dict.get_mut("sequence") {
                    *v = Value::from(self.sequence);
                }
            }
            out.push(d);
        }
        Some(out)
    }

    /// Whether the published descriptors include `resource_id`.
    pub(crate) fn has(&self, resource_id: &str) -> bool {
        self.descriptors.as_ref().is_some_and(|list| {
            list.iter()
                .any(|d| d.get("id").and_then(Value::as_str) == Some(resource_id))
        })
    }

    /// Whether `session` controls the domain.
    pub(crate) fn owned_by(&self, session: &str) -> bool {
        self.owner.as_deref() == Some(session)
    }
}

/// The sending side, held by the domain thread and by the session handles.
pub(crate) type CommittedTx = Arc<watch::Sender<Committed>>;

/// A new channel with nothing published.
pub(crate) fn channel() -> CommittedTx {
    Arc::new(watch::channel(Committed::default()).0)
}

/// Publishes a domain's descriptors at a committed boundary: copies of the
/// cached descriptors when the cache changed since the last publication
/// (refreshing them first if `refresh` says the cache is incomplete),
/// otherwise only the new revision and sequence.
pub(crate) fn publish(
    tx: &CommittedTx,
    instance: &mut super::instance::Instance,
    revision: u64,
    sequence: u64,
) {
    if instance.hosted.is_none() {
        tx.send_if_modified(|c| {
            let changed = c.descriptors.is_some();
            c.descriptors = None;
            changed
        });
        return;
    }
    let generation = instance.descriptor_generation();
    let unchanged = {
        let c = tx.borrow();
        c.descriptors.is_some() && c.generation == generation
    };
    if unchanged {
        tx.send_if_modified(|c| {
            let changed = (c.revision, c.sequence) != (revision, sequence);
            c.revision = revision;
            c.sequence = sequence;
            changed
        });
        return;
    }
    let list = match instance.cached_descriptors() {
        Some(list) => list,
        None => instance.descriptors(revision, sequence),
    };
    let generation = instance.descriptor_generation();
    tx.send_modify(|c| {
        c.descriptors = Some(Arc::new(list));
        c.generation = generation;
        c.revision = revision;
        c.sequence = sequence;
    });
}

/// Publishes the session that controls the domain (when it changed).
pub(crate) fn publish_owner(tx: &CommittedTx, owner: Option<&Arc<str>>) {
    tx.send_if_modified(|c| {
        let same = match (&c.owner, owner) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            c.owner = owner.cloned();
        }
        !same
    });
}
