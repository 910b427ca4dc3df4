//! A domain's hosted object as its thread holds it: the object (while
//! instantiated), its frozen topology, the values frozen at the last
//! mutations, its cached descriptors and the reads of snapshot fields.

use super::control::{Scope, Target};
use super::descriptors::{DescriptorCache, Stamp};
use super::hosted::{Attrs, Hosted, ResourceMeta};
use crate::codec::{Codec, Dict, DictText, Value};
use crate::host::{Field, HostError};
use crate::protocol::ResourceKind;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Captured (resource, field) values of one boundary, shared by the
/// controller's snapshot and every observer.
pub(crate) type Captures = HashMap<(usize, Field), Result<Option<Value>, String>>;

/// The hosted object of a domain and what is known about it.
#[derive(Default)]
pub(crate) struct Instance {
    /// The object, while instantiated.
    pub hosted: Option<Hosted>,
    /// The topology (kept across eviction, for routing and revival checks).
    pub resources: Vec<ResourceMeta>,
    /// Resource ID → index in `resources`.
    pub ids: HashMap<String, usize>,
    /// Per resource: the frozen fields of the last env mutation, or a world's dt.
    latest: Vec<Dict>,
    descriptors: DescriptorCache,
}

impl Instance {
    /// Installs a freshly built object with its (validated) topology.
    pub(crate) fn install(&mut self, hosted: Hosted, topology: Vec<ResourceMeta>) {
        self.ids = topology
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        self.latest = vec![Dict::new(); topology.len()];
        self.descriptors.clear();
        self.resources = topology;
        self.hosted = Some(hosted);
    }

    /// Takes the object away (to dispose of it); the topology stays.
    pub(crate) fn take_hosted(&mut self) -> Option<Hosted> {
        self.clear_latest();
        self.hosted.take()
    }

    /// Forgets the frozen values (an operation starts, an env mutates).
    pub(crate) fn clear_latest(&mut self) {
        for l in &mut self.latest {
            *l = Dict::new();
        }
    }

    /// Freezes the fields of a mutation's value: a world's `dt` after its
    /// `step`, or an env's return tuple after `step` / `reset` / `reload`.
    pub(crate) fn freeze(&mut self, index: usize, method: &str, value: &Value) {
        let names: &[&str] = match (self.resources[index].kind, method) {
            (ResourceKind::World, "step") => &["dt"],
            (ResourceKind::Env, "step") => {
                &["observation", "reward", "terminated", "truncated", "info"]
            }
            (ResourceKind::Env, "reset" | "reload") => &["context", "observation", "info"],
            _ => return,
        };
        let items = if names == ["dt"] {
            std::slice::from_ref(value)
        } else {
            value.as_seq().unwrap_or_default()
        };
        // The names are distinct: each entry is appended, without a search
        // and into a dict of its final size.
        let mut l = Dict::with_capacity(names.len().min(items.len()));
        for (name, v) in names.iter().zip(items) {
            l.push_unique((*name).to_string(), v.clone());
        }
        self.latest[index] = l;
    }

    /// How the domain is named in messages, from its root resource.
    pub(crate) fn scope(&self, root_id: &str) -> Scope {
        let Some(root) = self.resources.first() else {
            return Scope::Pending(root_id.to_string());
        };
        match (root.kind, root.world_id.as_deref()) {
            (ResourceKind::Env, None) => Scope::Env(root.id.clone()),
            (ResourceKind::Node, None) => Scope::Detached(root.id.clone()),
            (_, world) => Scope::World {
                world: world.unwrap_or(&root.id).to_string(),
                envs: self
                    .resources
                    .iter()
                    .filter(|r| r.kind == ResourceKind::Env)
                    .map(|r| r.id.clone())
                    .collect(),
            },
        }
    }

    /// Resource `index` as control sees it.
    pub(crate) fn target(&self, index: usize) -> Target {
        let meta = &self.resources[index];
        let detached_node = meta.kind == ResourceKind::Node && meta.world_id.is_none();
        Target {
            kind: meta.kind,
            detached_node,
            recovers: meta.kind == ResourceKind::World || (index == 0 && detached_node),
        }
    }

    fn refresh_descriptor(&mut self, index: usize, revision: u64, sequence: u64) {
        let meta = &self.resources[index];
        // With a descriptor cached, a host may say nothing changed.
        let attrs = match &mut self.hosted {
            Some(h) if self.descriptors.is_cached(index) => h.attrs_if_changed(meta),
            Some(h) => Some(h.attrs(meta)),
            None => Some(Attrs::Missing),
        };
        // The domain's ID: its world's, or its root's.
        let root = &self.resources[0];
        let stamp = Stamp {
            domain_id: root.world_id.as_deref().unwrap_or(&root.id),
            revision,
            sequence,
        };
        self.descriptors
            .refresh(index, self.resources.len(), meta, attrs, stamp);
    }

    /// Moves the up-to-date descriptors out of the cache (give them back with
    /// [`Instance::restore_descriptors`]).
    pub(crate) fn take_descriptors(&mut self, revision: u64, sequence: u64) -> Vec<Value> {
        for i in 0..self.resources.len() {
            self.refresh_descriptor(i, revision, sequence);
        }
        self.descriptors.take()
    }

    /// [`Instance::take_descriptors`] for a response: also keeps the
    /// encoded text of each descriptor whose build was already sent (see
    /// [`DescriptorCache::keep_texts`]), before any boundary snapshot is
    /// added to them; the response's encoder writes them from
    /// [`Instance::descriptor_texts`].
    pub(crate) fn take_descriptors_to_send(&mut self, revision: u64, sequence: u64) -> Vec<Value> {
        let descriptors = self.take_descriptors(revision, sequence);
        self.descriptors.keep_texts(&descriptors);
        descriptors
    }

    /// Per resource, the kept text of its taken descriptor, if any.
    pub(crate) fn descriptor_texts(&self) -> Vec<Option<&DictText>> {
        self.descriptors.texts()
    }

    /// Returns descriptors to the cache, without any boundary snapshot.
    pub(crate) fn restore_descriptors(&mut self, descriptors: Vec<Value>) {
        self.descriptors.restore(descriptors, self.resources.len());
    }

    /// A copy of every descriptor (describe, discover).
    pub(crate) fn descriptors(&mut self, revision: u64, sequence: u64) -> Vec<Value> {
        let all = self.take_descriptors(revision, sequence);
        let copy = all.clone();
        self.restore_descriptors(all);
        copy
    }

    /// The descriptor cache's generation (advances when one is rebuilt).
    pub(crate) fn descriptor_generation(&self) -> u64 {
        self.descriptors.generation()
    }

    /// Copies of every cached descriptor, if all are cached.
    pub(crate) fn cached_descriptors(&self) -> Option<Vec<Value>> {
        self.descriptors.copy_all(self.resources.len())
    }

    /// A copy of one descriptor.
    pub(crate) fn descriptor(&mut self, index: usize, revision: u64, sequence: u64) -> Value {
        self.refresh_descriptor(index, revision, sequence);
        self.descriptors.get(index)
    }

    /// A node's `remote_snapshot_fields` (`None`: no restriction).
    pub(crate) fn snapshot_fields(&mut self, index: usize) -> Option<Vec<Field>> {
        let meta = &self.resources[index];
        match meta.kind {
            ResourceKind::Node => self.hosted.as_mut().and_then(|h| h.snapshot_fields(meta)),
            _ => None,
        }
    }

    /// Reads the given fields of a resource (each at most once per boundary)
    /// into a data dict in field-name order; unavailable fields are omitted.
    pub(crate) fn capture(
        &mut self,
        index: usize,
        fields: &[Field],
        captures: &mut Captures,
    ) -> Result<Value, String> {
        let mut sorted: Vec<Field> = fields.to_vec();
        sorted.sort_by_key(|f| f.name());
        sorted.dedup();
        let mut data = Dict::with_capacity(sorted.len());
        for field in sorted {
            let captured = match captures.get(&(index, field)) {
                Some(c) => c.clone(),
                None => {
                    let c = self.read_field(index, field);
                    captures.insert((index, field), c.clone());
                    c
                }
            };
            if let Some(v) = captured? {
                data.insert(field.name(), v);
            }
        }
        Ok(Value::Dict(data))
    }

    fn read_field(&mut self, index: usize, field: Field) -> Result<Option<Value>, String> {
        let meta = &self.resources[index];
        let Some(hosted) = self.hosted.as_mut() else {
            return Ok(None);
        };
        let value = match (meta.kind, field) {
            (ResourceKind::Env, Field::Render) | (ResourceKind::Node, _) => {
                catch_unwind(AssertUnwindSafe(|| hosted.read(meta, field)))
                    .unwrap_or_else(|p| Err(HostError::new(panic_message(&p))))
            }
            (ResourceKind::Env | ResourceKind::World, f) => {
                Ok(self.latest[index].get(f.name()).cloned())
            }
        };
        match value {
            Ok(Some(v)) => match Codec::new(usize::MAX).ok().map(|c| c.measure(&v)) {
                Some(Err(e)) => Err(e.to_string()),
                _ => Ok(Some(v)),
            },
            Ok(None) => Ok(None),
            Err(e) => Err(e.message().to_string()),
        }
    }
}

/// The text of a caught panic.
pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}
