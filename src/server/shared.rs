//! What the server's parts share: the configuration and registry that
//! domain threads read ([`Core`]), and the state sessions and listeners
//! hold ([`ServerShared`]).

use super::config::ServerConfig;
use super::jobs::DomainSender;
use super::outbound::SessionShared;
use super::suggest::unknown_name;
use super::tasks::Tasks;
use crate::budget;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use tokio::sync::watch;

/// The `server` member of the hello result.
pub const SERVER_NAME: &str = "unienv-remote";

/// What domain threads share: the configuration and the registry.
pub(crate) struct Core {
    pub config: ServerConfig,
    /// Resource ID → domain index. Grows when factories first instantiate;
    /// entries stay across eviction so requests still route.
    pub registry: RwLock<HashMap<String, usize>>,
    /// The recording writer, when [`ServerConfig::record_dir`] is set.
    pub recorder: Option<Arc<crate::record::Recorder>>,
    /// Counters for the metrics endpoint ([`crate::metrics`]).
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// State shared by sessions and listeners.
pub(crate) struct ServerShared {
    pub core: Arc<Core>,
    /// The domain senders, by index.
    pub domains: Vec<DomainSender>,
    /// Factory root IDs (for routing IDs that appear only once built).
    pub factory_roots: Vec<(String, usize)>,
    pub sessions: Mutex<HashMap<Arc<str>, Weak<SessionShared>>>,
    /// Signalled when the last session ends (shutdown waits on it).
    pub sessions_gone: tokio::sync::Notify,
    pub shutdown: watch::Sender<bool>,
    pub connections: Arc<tokio::sync::Semaphore>,
    /// Byte budgets, the decode pool, pending handshakes.
    pub guards: Arc<budget::Guards>,
    /// Every connection's and in-memory session's task (shutdown waits on
    /// them, then aborts the rest).
    pub tasks: Tasks,
    /// Turns for the reads answered from published descriptors (`discover`,
    /// and `describe` of a domain the session does not control): one at a
    /// time, first come first served. A session reads its next message only
    /// once the last is handled, so sessions flooding reads take turns, one
    /// read each, and never crowd the async workers that carry other
    /// sessions' calls (SPEC §6, "Fair queues").
    pub reads: Arc<tokio::sync::Semaphore>,
}

impl ServerShared {
    /// The `not_found` message of an unknown resource ID: what was asked,
    /// the closest known ID and the known ones.
    pub(crate) fn unknown_resource(&self, resource_id: &str) -> String {
        let registry = self.core.registry.read();
        let mut ids: Vec<&str> = registry.keys().map(String::as_str).collect();
        for (root, _) in &self.factory_roots {
            if !registry.contains_key(root) {
                ids.push(root);
            }
        }
        ids.sort_unstable();
        unknown_name("resource ID", resource_id, &ids)
    }

    /// The domain serving a resource ID.
    pub(crate) fn route(&self, resource_id: &str) -> Option<usize> {
        if let Some(&d) = self.core.registry.read().get(resource_id) {
            return Some(d);
        }
        self.factory_roots
            .iter()
            .filter(|(root, _)| {
                resource_id.len() > root.len() + 1
                    && resource_id.starts_with(root.as_str())
                    && resource_id.as_bytes()[root.len()] == b'/'
            })
            .max_by_key(|(root, _)| root.len())
            .map(|(_, d)| *d)
    }
}

/// 128 random bits as 32 lowercase hex digits (session IDs).
pub(crate) fn random_hex() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut out = String::with_capacity(32);
    for half in 0..2u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u64(half);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}
