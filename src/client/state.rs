//! The client's view of the server ([`State`]): descriptors, boundary
//! versions and the snapshot cache, open operations, subscriptions and the
//! requests awaiting replies, all under the connection's one lock.

use super::descriptor::{BoundarySnapshot, Descriptor};
use super::error::{ClientError, CloseReason};
use super::pending::Pending;
use super::sub_queue::SubShared;
use std::collections::HashMap;
use std::sync::Arc;

/// The client's view of the server, guarded by one lock. Its maps are
/// looked up on every request and reply (by resource or domain ID): FxHash,
/// as the pending replies' map.
#[derive(Default)]
pub(crate) struct State {
    pub descriptors: HashMap<String, Arc<Descriptor>, rustc_hash::FxBuildHasher>,
    /// Latest boundary version `(revision, sequence)` seen per domain.
    pub(super) versions: HashMap<String, (u64, u64), rustc_hash::FxBuildHasher>,
    /// The boundary snapshot cache, per resource.
    pub snapshots: HashMap<String, BoundarySnapshot, rustc_hash::FxBuildHasher>,
    /// Open component operations, per domain.
    pub operations: HashMap<String, Arc<str>>,
    pub subscriptions: HashMap<Arc<str>, Arc<SubShared>>,
    /// Requests awaiting replies.
    pub(crate) pending: Pending,
    /// Why the connection closed.
    pub(super) failure: Option<ClientError>,
}

impl State {
    /// The domain of a resource: its descriptor's `domain_id` when known,
    /// else the ID itself.
    pub fn domain_of<'a>(&'a self, resource_id: &'a str) -> &'a str {
        self.descriptors
            .get(resource_id)
            .map_or(resource_id, |d| d.domain_id())
    }

    /// Drops the cached fields of a resource's whole domain (of every
    /// domain when `resource_id` is `None`).
    pub fn drop_snapshots(&mut self, resource_id: Option<&str>) {
        match resource_id {
            None => self.snapshots.clear(),
            // Nothing cached (the usual case of a step): nothing to look up.
            Some(_) if self.snapshots.is_empty() => {}
            Some(id) => {
                let domain = self.domain_of(id).to_string();
                self.drop_domain(&domain);
            }
        }
    }

    fn drop_domain(&mut self, domain: &str) {
        if self.snapshots.is_empty() {
            return;
        }
        let descriptors = &self.descriptors;
        self.snapshots.retain(|id, _| {
            descriptors
                .get(id.as_str())
                .map_or(id.as_str(), |d| d.domain_id())
                != domain
        });
    }

    /// Records a boundary version seen for a domain. An older version is
    /// refused (`false`); a different one drops the domain's cached fields.
    pub fn observe_boundary(&mut self, domain: &str, version: (u64, u64)) -> bool {
        match self.versions.get(domain) {
            Some(previous) if *previous > version => false,
            Some(previous) if *previous == version => true,
            _ => {
                self.drop_domain(domain);
                // The domain's entry is updated in place when there is one
                // (every step's reply: no key allocated).
                match self.versions.get_mut(domain) {
                    Some(v) => *v = version,
                    None => {
                        self.versions.insert(domain.to_string(), version);
                    }
                }
                true
            }
        }
    }

    /// Stores a descriptor unless an older boundary version than what was
    /// already seen; keeps its snapshot when `snapshot` is given.
    /// Returns the descriptor and whether it was stored.
    pub(super) fn accept(
        &mut self,
        descriptor: Descriptor,
        snapshot: Option<BoundarySnapshot>,
    ) -> (Arc<Descriptor>, bool) {
        let fresh = self.observe_boundary(descriptor.domain_id(), descriptor.version());
        let descriptor = Arc::new(descriptor);
        if fresh {
            if let Some(s) = snapshot {
                self.snapshots.insert(descriptor.id().to_string(), s);
            }
            match self.descriptors.get_mut(descriptor.id()) {
                Some(slot) => *slot = descriptor.clone(),
                None => {
                    self.descriptors
                        .insert(descriptor.id().to_string(), descriptor.clone());
                }
            }
        }
        (descriptor, fresh)
    }

    /// The reason for refusing requests once closed.
    pub(super) fn closed_error(&self) -> ClientError {
        match &self.failure {
            Some(ClientError::Closed(reason)) => ClientError::Closed(reason.clone()),
            Some(other) => ClientError::Closed(CloseReason::Failed {
                source: Box::new(other.clone()),
            }),
            None => ClientError::Closed(CloseReason::Unknown),
        }
    }
}
