//! Server metrics in the Prometheus text format, served over HTTP by
//! [`Server::serve_metrics`](crate::server::Server::serve_metrics) (or
//! [`ServerConfig::metrics_addr`](crate::server::ServerConfig::metrics_addr),
//! `unienv-remote serve --metrics ADDR`, `RemoteServer(metrics=ADDR)`).
//!
//! Every figure is a relaxed atomic updated where it happens (a step's
//! latency: two atomic adds on the domain thread; a request: one), and
//! encoded at scrape time with the `prometheus-client` crate. The names
//! (all prefixed `unienv_`):
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `unienv_sessions` | gauge | |
//! | `unienv_sessions_opened` | counter | |
//! | `unienv_requests` | counter | `op`, `code` (`ok` or the error code) |
//! | `unienv_step_seconds` | histogram | `resource` (env `step` calls, time in the simulator) |
//! | `unienv_faults` | counter | |
//! | `unienv_evictions` | counter | |
//! | `unienv_revivals` | counter | |
//! | `unienv_received_bytes` / `unienv_sent_bytes` | counter | (whole messages) |
//! | `unienv_budget_refusals` | counter | (connections closed over a byte budget) |
//! | `unienv_queue_refusals` | counter | (requests refused past `max_queued_per_domain`) |
//! | `unienv_observers` | gauge | (live subscriptions) |
//! | `unienv_dropped_snapshots` | counter | (replaced before they were sent) |
//! | `unienv_recorded_transitions`, `unienv_recorded_episodes`, `unienv_record_queue_waits`, `unienv_record_errors` | counter | (with recording) |
//!
//! Counters carry the `_total` suffix in the exposition.

mod http;

pub use http::MetricsEndpoint;
pub(crate) use http::{serve, HostGuard};

use crate::protocol::{ErrorCode, Op};
use crate::record::RecordStats;
use parking_lot::Mutex;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Operation labels, in [`op_index`] order; the last is for requests
/// without a known operation.
const OPS: [&str; 12] = [
    "hello",
    "discover",
    "describe",
    "acquire",
    "release",
    "begin",
    "complete",
    "abort",
    "call",
    "subscribe",
    "unsubscribe",
    "other",
];
/// Codes: `ok`, the known error codes, then `other`.
const CODES: usize = ErrorCode::KNOWN.len() + 2;

/// Step latency bucket bounds, in seconds (the last, `+Inf`, is implied).
const BUCKETS: [f64; 14] = [
    1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 0.1, 1.0,
];

/// The index of an operation's label.
pub(crate) fn op_index(op: Option<&str>) -> usize {
    let Some(op) = op.and_then(Op::parse) else {
        return OPS.len() - 1;
    };
    OPS.iter()
        .position(|o| *o == op.as_str())
        .unwrap_or(OPS.len() - 1)
}

fn code_index(code: Option<&ErrorCode>) -> usize {
    match code {
        None => 0,
        Some(c) => ErrorCode::KNOWN
            .iter()
            .position(|k| k == c)
            .map_or(CODES - 1, |i| i + 1),
    }
}

fn code_label(i: usize) -> String {
    match i {
        0 => "ok".to_string(),
        i if i <= ErrorCode::KNOWN.len() => ErrorCode::KNOWN[i - 1].as_str().to_string(),
        _ => "other".to_string(),
    }
}

/// One resource's step latency: a fixed-bucket histogram of atomics.
#[derive(Debug, Default)]
pub(crate) struct StepHistogram {
    /// Per bucket (not cumulative); the last is `+Inf`.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl StepHistogram {
    /// Records one step.
    pub(crate) fn observe(&self, took: Duration) {
        let secs = took.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(
            took.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }
}

/// Everything counted by one server.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub sessions_opened: AtomicU64,
    requests: Box<[AtomicU64]>,
    pub faults: AtomicU64,
    pub evictions: AtomicU64,
    pub revivals: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub budget_refusals: AtomicU64,
    /// Requests refused because their session had `max_queued_per_domain`
    /// waiting at the domain.
    pub queue_refusals: AtomicU64,
    pub dropped_snapshots: AtomicU64,
    steps: Mutex<BTreeMap<String, Arc<StepHistogram>>>,
    pub record: Option<Arc<RecordStats>>,
}

/// Figures read from live state at scrape time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Live {
    pub sessions: u64,
    pub observers: u64,
}

impl Metrics {
    pub(crate) fn new(record: Option<Arc<RecordStats>>) -> Metrics {
        Metrics {
            sessions_opened: AtomicU64::new(0),
            requests: (0..OPS.len() * CODES).map(|_| AtomicU64::new(0)).collect(),
            faults: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            revivals: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            budget_refusals: AtomicU64::new(0),
            queue_refusals: AtomicU64::new(0),
            dropped_snapshots: AtomicU64::new(0),
            steps: Mutex::new(BTreeMap::new()),
            record,
        }
    }

    /// Counts a request answered with `code` (`None`: success).
    pub(crate) fn request(&self, op: usize, code: Option<&ErrorCode>) {
        self.requests[op.min(OPS.len() - 1) * CODES + code_index(code)]
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The step histogram of a resource (made on first use; keep it).
    pub(crate) fn step_histogram(&self, resource: &str) -> Arc<StepHistogram> {
        self.steps
            .lock()
            .entry(resource.to_string())
            .or_default()
            .clone()
    }

    /// The Prometheus text exposition.
    pub(crate) fn render(&self, live: Live) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(Snapshot {
            metrics: self.snapshot(),
            live,
        }));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }

    fn snapshot(&self) -> Frozen {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Frozen {
            counters: vec![
                (
                    "sessions_opened",
                    "Sessions opened",
                    load(&self.sessions_opened),
                ),
                (
                    "faults",
                    "Domains faulted by a failed mutation",
                    load(&self.faults),
                ),
                ("evictions", "Idle domains disposed", load(&self.evictions)),
                (
                    "revivals",
                    "Evicted domains built again",
                    load(&self.revivals),
                ),
                (
                    "received_bytes",
                    "Bytes of messages received",
                    load(&self.bytes_in),
                ),
                (
                    "sent_bytes",
                    "Bytes of messages queued for sending",
                    load(&self.bytes_out),
                ),
                (
                    "budget_refusals",
                    "Connections closed over a byte budget",
                    load(&self.budget_refusals),
                ),
                (
                    "queue_refusals",
                    "Requests refused: their session had max_queued_per_domain waiting at the domain",
                    load(&self.queue_refusals),
                ),
                (
                    "dropped_snapshots",
                    "Snapshots replaced by a newer one before they were sent",
                    load(&self.dropped_snapshots),
                ),
            ]
            .into_iter()
            .chain(self.record.iter().flat_map(|r| {
                [
                    (
                        "recorded_transitions",
                        "Transitions committed to recordings",
                        load(&r.transitions),
                    ),
                    (
                        "recorded_episodes",
                        "Episodes committed to recordings",
                        load(&r.episodes),
                    ),
                    (
                        "record_queue_waits",
                        "Times a domain waited for room in the recording queue",
                        load(&r.queue_waits),
                    ),
                    (
                        "record_errors",
                        "Calls that could not be recorded and commits that failed",
                        load(&r.errors),
                    ),
                ]
            }))
            .collect(),
            requests: self.requests.iter().map(load).collect(),
            steps: self
                .steps
                .lock()
                .iter()
                .map(|(id, h)| {
                    // Per bucket (the encoder accumulates them); the count is
                    // their sum, so that the two always agree.
                    let buckets: Vec<(f64, u64)> = BUCKETS
                        .iter()
                        .copied()
                        .chain([f64::INFINITY])
                        .zip(&h.buckets)
                        .map(|(bound, n)| (bound, load(n)))
                        .collect();
                    let count = buckets.iter().map(|(_, n)| n).sum();
                    (id.clone(), load(&h.sum_nanos) as f64 / 1e9, count, buckets)
                })
                .collect(),
        }
    }
}

/// The figures of one scrape.
#[derive(Debug)]
struct Frozen {
    counters: Vec<(&'static str, &'static str, u64)>,
    requests: Vec<u64>,
    steps: Vec<FrozenHistogram>,
}

/// (resource, sum, count, per-bucket counts).
type FrozenHistogram = (String, f64, u64, Vec<(f64, u64)>);

#[derive(Debug)]
struct Snapshot {
    metrics: Frozen,
    live: Live,
}

fn name(short: &str) -> String {
    format!("unienv_{short}")
}

impl prometheus_client::collector::Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = &self.metrics;
        for (short, help, value) in [
            ("sessions", "Connected sessions", self.live.sessions),
            ("observers", "Live subscriptions", self.live.observers),
        ] {
            let n = name(short);
            let mut e = encoder.encode_descriptor(&n, help, None, MetricType::Gauge)?;
            e.encode_gauge(&value)?;
        }
        for (short, help, value) in &m.counters {
            let n = name(short);
            let mut e = encoder.encode_descriptor(&n, help, None, MetricType::Counter)?;
            e.encode_counter::<NoLabelSet, _, u64>(value, None)?;
        }
        {
            let n = name("requests");
            let mut e = encoder.encode_descriptor(
                &n,
                "Requests answered, by operation and outcome",
                None,
                MetricType::Counter,
            )?;
            for (i, count) in m.requests.iter().enumerate() {
                if *count == 0 {
                    continue;
                }
                let labels = [
                    ("op", OPS[i / CODES].to_string()),
                    ("code", code_label(i % CODES)),
                ];
                e.encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(count, None)?;
            }
        }
        let n = name("step_seconds");
        let mut e = encoder.encode_descriptor(
            &n,
            "Time env steps took in the simulator, per resource",
            None,
            MetricType::Histogram,
        )?;
        for (id, sum, count, buckets) in &m.steps {
            let labels = [("resource", id.as_str())];
            e.encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(*sum, *count, buckets, None)?;
        }
        Ok(())
    }
}
