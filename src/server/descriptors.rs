//! The descriptor cache of one domain: a resource's descriptor is rebuilt
//! only when its attributes change; identity, revision and sequence are
//! updated in place. Each build also keeps, once it has been sent twice,
//! its encoded text with holes for the revision and sequence, which
//! responses write instead of encoding the descriptor again.

use super::hosted::{Attrs, ResourceMeta};
use crate::codec::{Dict, DictText, Value};

/// How deep a descriptor sits in the deepest response that carries it: the
/// envelope (0), its `result` (1), the result's `descriptors` list (2), the
/// descriptor (3). Its text is checked to encode there.
const DESCRIPTOR_DEPTH: usize = 3;

/// The members of a descriptor that change without a rebuild: the holes of
/// its kept text.
const STAMPS: [&str; 2] = ["revision", "sequence"];

/// The encoded text of one build of a descriptor, made when that build is
/// sent a second time (a descriptor rebuilt at every response never pays
/// for it).
#[derive(Clone)]
enum Kept {
    /// The build was sent once.
    Seen(u64),
    /// The build's text (`None`: it cannot be kept as text).
    Made(u64, Option<DictText>),
}

/// Per resource: the attributes its descriptor was built from, and the
/// descriptor (`Null` when it must be rebuilt).
#[derive(Default)]
pub(crate) struct DescriptorCache {
    attrs: Vec<Option<Attrs>>,
    values: Vec<Value>,
    /// Per resource: the `generation` its descriptor was built at (`0`:
    /// unknown), which its kept text must match.
    built: Vec<u64>,
    /// Per resource: the encoded text of a build of its descriptor.
    texts: Vec<Option<Kept>>,
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
        self.built.clear();
        self.texts.clear();
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
            self.built.resize(count, 0);
            self.values[index] = Value::Dict(d);
            self.attrs[index] = Some(attrs);
            self.generation += 1;
            self.built[index] = self.generation;
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
    /// Until they are back, nothing but a boundary `snapshot` member may be
    /// added to them, nothing changed: their kept texts stand for them.
    pub(crate) fn take(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.values)
    }

    /// Keeps the encoded text of the descriptors just taken (with
    /// [`DescriptorCache::take`], before anything but a boundary snapshot
    /// is added to them) whose build was already sent once.
    pub(crate) fn keep_texts(&mut self, descriptors: &[Value]) {
        if descriptors.len() != self.built.len() {
            return;
        }
        self.texts.resize(descriptors.len(), None);
        for ((d, &built), kept) in descriptors.iter().zip(&self.built).zip(&mut self.texts) {
            // A boundary snapshot is never part of a kept text (it is
            // stripped when the descriptors come back).
            if built == 0 || d.as_dict().is_none_or(|d| d.contains_key("snapshot")) {
                continue;
            }
            *kept = match kept.take() {
                Some(Kept::Seen(v)) if v == built => Some(Kept::Made(
                    built,
                    DictText::new(d, &STAMPS, DESCRIPTOR_DEPTH),
                )),
                Some(Kept::Made(v, text)) if v == built => Some(Kept::Made(v, text)),
                _ => Some(Kept::Seen(built)),
            };
        }
    }

    /// Per resource, the kept text of its current build, if any: what a
    /// response may write for the descriptor taken from the cache (the
    /// encoder checks that the revision and sequence are still integers at
    /// their places and that no member was added).
    pub(crate) fn texts(&self) -> Vec<Option<&DictText>> {
        self.built
            .iter()
            .enumerate()
            .map(|(i, &built)| match self.texts.get(i) {
                Some(Some(Kept::Made(v, Some(t)))) if *v == built && built != 0 => Some(t),
                _ => None,
            })
            .collect()
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

#[cfg(test)]
#[path = "descriptors_tests.rs"]
mod tests;
