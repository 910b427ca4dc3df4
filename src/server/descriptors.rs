//! The descriptor cache of one domain: a resource's descriptor is rebuilt
//! only when its attributes change; identity, revision and sequence are
//! updated in place.

use super::hosted::{Attrs, ResourceMeta};
use crate::codec::{Dict, Value};

/// Per resource: the attributes its descriptor was built from, and the
/// descriptor (`Null` when it must be rebuilt).
#[derive(Default)]
pub(crate) struct DescriptorCache {
    attrs: Vec<Option<Attrs>>,
    values: Vec<Value>,
    /// Advances whenever a descriptor is rebuilt or the cache cleared (the
    /// domain republishes its committed descriptors only then).
    generation: u64,
}

/// Where the descriptors being built stand: the domain's ID, revision and
/// the sequence to stamp.
#[derive(Clone, Copy)]
pub(crate) struct Stamp<'a> {
    pub domain_id: &'a str,
    pub revision: u64,
    pub sequence: u64,
}

impl DescriptorCache {
    /// Forgets everything (a new instance).
    pub(crate) fn clear(&mut self) {
        self.attrs.clear();
        self.values.clear();
        self.generation += 1;
    }

    /// Advances whenever a descriptor is rebuilt or the cache cleared.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Copies of all `count` descriptors, if every one is in the cache.
    pub(crate) fn copy_all(&self, count: usize) -> Option<Vec<Value>> {
        (self.values.len() == count && !self.values.iter().any(Value::is_null))
            .then(|| self.values.clone())
    }

    /// Whether resource `index` has a descriptor (which
    /// [`DescriptorCache::refresh`] can restamp without attributes).
    pub(crate) fn is_cached(&self, index: usize) -> bool {
        self.values.get(index).is_some_and(|v| !v.is_null())
            && self.attrs.get(index).is_some_and(Option::is_some)
    }

    /// Brings the descriptor of resource `index` (of `count`) up to date
    /// with its current attributes (`None`: unchanged, and cached).
    pub(crate) fn refresh(
        &mut self,
        index: usize,
        count: usize,
        meta: &ResourceMeta,
        attrs: Option<Attrs>,
        stamp: Stamp<'_>,
    ) {
        let stale = attrs.as_ref().is_some_and(|attrs| {
            self.values.get(index).is_none_or(Value::is_null)
                || self
                    .attrs
                    .get(index)
                    .is_none_or(|a| a.as_ref() != Some(attrs))
        });
        if let Some(attrs) = attrs.filter(|_| stale) {
            let mut d = Dict::with_capacity(32);
            d.insert("id", meta.id.as_str());
            d.insert("kind", meta.kind.as_str());
            d.insert("world_id", meta.world_id.as_deref());
            d.insert("node_id", meta.node_id.as_deref());
            d.insert(
                "children",
                Value::Dict(
                    meta.children
                        .iter()
                        .map(|(n, id)| (n.clone(), Value::from(id)))
                        .collect(),
                ),
            );
            d.insert("revision", stamp.revision);
            d.insert("sequence", stamp.sequence);
            d.insert("domain_id", stamp.domain_id);
            attrs.write(meta.kind, &mut d);
            self.values.resize(count, Value::Null);
            self.attrs.resize(count, None);
            self.values[index] = Value::Dict(d);
            self.attrs[index] = Some(attrs);
            self.generation += 1;
        }
        if let Some(d) = self.values[index].as_dict_mut() {
            if let Some(v) = d.get_mut("revision") {
                *v = Value::from(stamp.revision);
            }
            if let Some(v) = d.get_mut("sequence") {
                *v = Value::from(stamp.sequence);
            }
        }
    }

    /// A copy of one (refreshed) descriptor.
    pub(crate) fn get(&self, index: usize) -> Value {
        self.values.get(index).cloned().unwrap_or_default()
    }

    /// Moves every descriptor out (give them back with
    /// [`DescriptorCache::restore`]; if not, they are rebuilt next time).
    pub(crate) fn take(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.values)
    }

    /// Returns the descriptors of `count` resources to the cache, without
    /// any boundary snapshot.
    pub(crate) fn restore(&mut self, mut descriptors: Vec<Value>, count: usize) {
        if descriptors.len() != count {
            return;
        }
        for d in &mut descriptors {
            if let Some(d) = d.as_dict_mut() {
                d.remove("snapshot");
            }
        }
        self.values = descriptors;
    }
}
