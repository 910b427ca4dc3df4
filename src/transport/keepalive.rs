//! Heartbeats: when a WebSocket peer was last heard from, and a watch that
//! pings a silent peer and reports it vanished when even the pongs stop.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// When the peer last sent a byte (any frame, data or control), updated by
/// the reader on every read.
#[derive(Debug)]
pub(crate) struct Heard {
    /// Nanoseconds after `epoch()`.
    at: AtomicU64,
    /// The reader stopped before an unread data frame (the session is busy
    /// and reads control frames only): the peer is sending, it is only not
    /// being read, so it is not silent.
    parked: AtomicBool,
    /// A heartbeat ping was sent and its pong has not arrived.
    ping_out: AtomicBool,
}

impl Heard {
    pub(crate) fn new() -> Heard {
        let heard = Heard {
            at: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            ping_out: AtomicBool::new(false),
        };
        heard.touch();
        heard
    }

    /// Records that bytes arrived now.
    pub(crate) fn touch(&self) {
        self.touch_at(Instant::now());
    }

    /// Records that bytes arrived at `now` (read from the clock by the
    /// caller).
    pub(crate) fn touch_at(&self, now: Instant) {
        let nanos = now.saturating_duration_since(epoch()).as_nanos();
        self.at
            .store(nanos.min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    /// Records that a heartbeat ping is on its way.
    pub(crate) fn ping_sent(&self) {
        self.ping_out.store(true, Ordering::Relaxed);
    }

    /// Whether a pong now received answers a heartbeat ping (and clears it).
    pub(crate) fn take_ping(&self) -> bool {
        self.ping_out.swap(false, Ordering::Relaxed)
    }

    pub(crate) fn set_parked(&self, parked: bool) {
        self.parked.store(parked, Ordering::Relaxed);
    }

    /// When the peer was last heard from (now, while its data waits unread).
    pub(crate) fn last(&self) -> Instant {
        if self.parked.load(Ordering::Relaxed) {
            return Instant::now();
        }
        epoch() + Duration::from_nanos(self.at.load(Ordering::Relaxed))
    }
}

/// A ping, written whole (never cancelled part-way while the watch runs).
pub(crate) type Ping = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Pings the peer whenever it has been silent for `interval` (at most one
/// ping per interval), and returns how long it was silent once that reaches
/// `timeout`: nothing received, not even a pong. Pending forever without an
/// interval.
pub(crate) async fn watch(
    last: impl Fn() -> Instant,
    ping: impl Fn() -> Ping,
    interval: Option<Duration>,
    timeout: Duration,
) -> Duration {
    let Some(interval) = interval else {
        return std::future::pending().await;
    };
    let mut in_flight: Option<Ping> = None;
    let mut pinged: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let heard = last();
        let quiet = now.saturating_duration_since(heard);
        if quiet >= timeout {
            return quiet;
        }
        let mut wake = heard + interval.min(timeout);
        if quiet >= interval {
            let due = pinged.is_none_or(|p| p < heard || now >= p + interval);
            if due && in_flight.is_none() {
                in_flight = Some(ping());
                pinged = Some(now);
            }
            wake = heard + timeout;
            if let Some(p) = pinged {
                if p + interval > now {
                    wake = wake.min(p + interval);
                }
            }
        }
        let sleep = tokio::time::sleep_until(wake.into());
        match in_flight.as_mut() {
            Some(p) => {
                tokio::select! {
                    _ = p => in_flight = None,
                    _ = sleep => {}
                }
            }
            None => sleep.await,
        }
    }
}
