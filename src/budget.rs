//! Byte budgets against hostile peers: what a connection may hold in memory
//! (messages being received, requests waiting at domains with their decoded
//! trees, responses queued for a peer that does not read), per connection and
//! for the whole server, plus the other server-wide guards (the pool of large
//! decodes, the pending handshakes).
//!
//! Every connection has a free allowance ([`ACCOUNT_ALLOWANCE`]) that is not
//! drawn from the server's pool, so a well-behaved session (small messages,
//! reading its answers) never waits on, or is refused by, a pool that hostile
//! peers have drained. Beyond the allowance, bytes come from the server's
//! pool (`ServerConfig::max_server_bytes`), and a connection may never hold
//! more than `ServerConfig::max_connection_bytes` in all.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{Notify, Semaphore};

/// Bytes of every connection's budget that do not come from the server's
/// pool (1 MiB).
pub(crate) const ACCOUNT_ALLOWANCE: usize = 1 << 20;

/// Why bytes could not be charged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BudgetError {
    /// This connection would hold more than its cap.
    #[error(
        "connection memory budget exceeded: {wanted} more bytes with {held} held, at most {cap}"
    )]
    Connection {
        wanted: usize,
        held: usize,
        cap: usize,
    },
    /// The server's pool is exhausted by all connections together.
    #[error("server memory budget exhausted: {wanted} bytes wanted, {used} of {limit} in use")]
    Server {
        wanted: usize,
        used: usize,
        limit: usize,
    },
}

/// The server's pool of bytes shared by all connections.
pub(crate) struct Pool {
    limit: usize,
    used: AtomicUsize,
}

impl Pool {
    pub(crate) fn new(limit: usize) -> Arc<Pool> {
        Arc::new(Pool {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes currently drawn from the pool.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn take(&self, n: usize) -> Result<(), BudgetError> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let next =
                used.checked_add(n)
                    .filter(|&t| t <= self.limit)
                    .ok_or(BudgetError::Server {
                        wanted: n,
                        used,
                        limit: self.limit,
                    })?;
            match self
                .used
                .compare_exchange_weak(used, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => used = now,
            }
        }
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// One connection's budget.
pub(crate) struct Account {
    pool: Arc<Pool>,
    cap: usize,
    /// Bytes held by this connection (allowance and pool together).
    held: Mutex<usize>,
}

impl Account {
    pub(crate) fn new(pool: Arc<Pool>, cap: usize) -> Arc<Account> {
        Arc::new(Account {
            pool,
            cap,
            held: Mutex::new(0),
        })
    }

    /// Bytes this connection holds.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        *self.held.lock()
    }

    /// Charges `n` bytes; they are given back when the [`Charge`] drops.
    pub(crate) fn charge(self: &Arc<Account>, n: usize) -> Result<Charge, BudgetError> {
        let mut held = self.held.lock();
        let next = held.saturating_add(n);
        if next > self.cap {
            return Err(BudgetError::Connection {
                wanted: n,
                held: *held,
                cap: self.cap,
            });
        }
        let pooled =
            next.saturating_sub(ACCOUNT_ALLOWANCE) - held.saturating_sub(ACCOUNT_ALLOWANCE);
        if pooled > 0 {
            self.pool.take(pooled)?;
        }
        *held = next;
        Ok(Charge {
            account: Some(self.clone()),
            bytes: n,
        })
    }

    /// Charges `n` bytes as [`Account::charge`] does, but only if this
    /// connection then holds at most half its cap: for what a connection
    /// keeps by choice (a cache, such as its kept requests), which must
    /// leave room for the messages it is sent.
    pub(crate) fn charge_within_half(self: &Arc<Account>, n: usize) -> Result<Charge, BudgetError> {
        let half = self.cap / 2;
        let held = *self.held.lock();
        if held.saturating_add(n) > half {
            return Err(BudgetError::Connection {
                wanted: n,
                held,
                cap: half,
            });
        }
        // (Another charge between the check and this one can only make it
        // fail against the full cap, as any charge.)
        self.charge(n)
    }

    fn release(&self, n: usize) {
        let mut held = self.held.lock();
        let next = held.saturating_sub(n);
        let pooled =
            held.saturating_sub(ACCOUNT_ALLOWANCE) - next.saturating_sub(ACCOUNT_ALLOWANCE);
        if pooled > 0 {
            self.pool.give(pooled);
        }
        *held = next;
    }
}

/// Bytes charged to an account, given back on drop.
#[derive(Default)]
pub(crate) struct Charge {
    account: Option<Arc<Account>>,
    bytes: usize,
}

impl Charge {
    /// Bytes this charge holds.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds another charge of the same account to this one.
    pub(crate) fn absorb(&mut self, mut other: Charge) {
        if other.bytes == 0 {
            return;
        }
        match &self.account {
            Some(_) => {
                self.bytes += other.bytes;
                other.bytes = 0;
            }
            None => std::mem::swap(self, &mut other),
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(account) = &self.account {
            if self.bytes > 0 {
                account.release(self.bytes);
            }
        }
    }
}

impl std::fmt::Debug for Charge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Charge({} bytes)", self.bytes)
    }
}

/// Handshakes in progress, oldest first. When full, admitting a newcomer
/// aborts the oldest: a peer that opens sockets and sends nothing cannot
/// keep a peer that completes its handshake at once (a token holder) out.
pub(crate) struct Handshakes {
    max: usize,
    next_id: AtomicU64,
    pending: Mutex<VecDeque<(u64, Arc<Notify>)>>,
}

/// A handshake's place; leaves the queue when dropped.
pub(crate) struct HandshakeSlot<'a> {
    owner: &'a Handshakes,
    id: u64,
    /// Notified when a newer handshake evicts this one.
    pub(crate) evicted: Arc<Notify>,
}

impl Handshakes {
    pub(crate) fn new(max: usize) -> Handshakes {
        Handshakes {
            max: max.max(1),
            next_id: AtomicU64::new(0),
            pending: Mutex::new(VecDeque::new()),
        }
    }

    /// Admits a handshake, evicting the oldest pending one if full.
    pub(crate) fn admit(&self) -> HandshakeSlot<'_> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let evicted = Arc::new(Notify::new());
        let mut pending = self.pending.lock();
        while pending.len() >= self.max {
            if let Some((_, oldest)) = pending.pop_front() {
                // `notify_one` stores a permit: an eviction before the
                // handshake starts waiting is not lost.
                oldest.notify_one();
            }
        }
        pending.push_back((id, evicted.clone()));
        HandshakeSlot {
            owner: self,
            id,
            evicted,
        }
    }

    /// Handshakes in progress.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pending.lock().len()
    }
}

impl Drop for HandshakeSlot<'_> {
    fn drop(&mut self) {
        let mut pending = self.owner.pending.lock();
        if let Some(i) = pending.iter().position(|(id, _)| *id == self.id) {
            pending.remove(i);
        }
    }
}

/// The server-wide guards.
pub(crate) struct Guards {
    /// The server's byte pool.
    pub(crate) pool: Arc<Pool>,
    /// Decodes of large messages run on tokio's blocking pool, at most this
    /// many at once; the async workers keep serving every other connection.
    pub(crate) decodes: Arc<Semaphore>,
    /// WebSocket handshakes in progress.
    pub(crate) handshakes: Handshakes,
}

impl Guards {
    /// Guards for a server pool of `server_bytes`, at most
    /// `parallel_decodes` large decodes and `pending_handshakes` handshakes.
    pub(crate) fn new(
        server_bytes: usize,
        parallel_decodes: usize,
        pending_handshakes: usize,
    ) -> Arc<Guards> {
        Arc::new(Guards {
            pool: Pool::new(server_bytes),
            decodes: Arc::new(Semaphore::new(parallel_decodes.max(1))),
            handshakes: Handshakes::new(pending_handshakes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults keep a 24 GiB machine alive with 1,024 connections all
    /// misbehaving at once, with room for the OS, its socket buffers and
    /// the simulators.
    #[test]
    fn default_worst_case_fits_a_24_gib_machine() {
        let config = crate::server::ServerConfig::default();
        let worst = config.worst_case_memory_bytes();
        assert_eq!(config.max_connections, 1024);
        assert!(
            worst <= 12 << 30,
            "{:.1} GiB",
            worst as f64 / (1u64 << 30) as f64
        );
        // Each term counts: raising a limit raises the bound.
        let more = crate::server::ServerConfig {
            max_server_bytes: config.max_server_bytes + (1 << 30),
            ..config.clone()
        };
        assert_eq!(more.worst_case_memory_bytes(), worst + (1 << 30));
    }

    #[test]
    fn allowance_then_pool_then_caps() {
        let pool = Pool::new(3 << 20);
        let a = Account::new(pool.clone(), 4 << 20);
        let b = Account::new(pool.clone(), 4 << 20);
        // Within the allowance: nothing drawn from the pool.
        let small = a.charge(1 << 20).unwrap();
        assert_eq!(pool.used(), 0);
        let big = a.charge(3 << 20).unwrap();
        assert_eq!(pool.used(), 3 << 20);
        assert!(matches!(a.charge(1), Err(BudgetError::Connection { .. })));
        // The pool is drained; b still has its allowance.
        let b_small = b.charge(1 << 20).unwrap();
        assert!(matches!(b.charge(1), Err(BudgetError::Server { .. })));
        drop(big);
        assert_eq!(pool.used(), 0);
        let mut c = b.charge(10).unwrap();
        c.absorb(b.charge(20).unwrap());
        assert_eq!(c.bytes(), 30);
        assert_eq!(b.held(), (1 << 20) + 30);
        assert_eq!(pool.used(), 30);
        drop((small, b_small, c));
        assert_eq!((a.held(), b.held(), pool.used()), (0, 0, 0));
    }

    #[test]
    fn charges_within_half_leave_half_the_cap_free() {
        let pool = Pool::new(usize::MAX);
        let account = Account::new(pool, 1000);
        let first = account.charge_within_half(400).expect("400 of 500");
        assert!(matches!(
            account.charge_within_half(101),
            Err(BudgetError::Connection {
                wanted: 101,
                held: 400,
                cap: 500
            })
        ));
        let second = account.charge_within_half(100).expect("up to half exactly");
        // Ordinary charges still reach the full cap.
        let rest = account.charge(500).expect("the other half");
        assert_eq!(account.held(), 1000);
        drop((first, second, rest));
        assert_eq!(account.held(), 0);
    }

    #[test]
    fn a_full_handshake_queue_evicts_the_oldest() {
        let h = Handshakes::new(2);
        let first = h.admit();
        let second = h.admit();
        let third = h.admit();
        assert_eq!(h.len(), 2);
        // The first was told (a stored permit) and left the queue.
        let told = first.evicted.clone();
        let waiter = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        waiter.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), told.notified())
                .await
                .expect("the oldest handshake was not evicted");
        });
        drop((first, second));
        assert_eq!(h.len(), 1);
        drop(third);
        assert_eq!(h.len(), 0);
    }
}
