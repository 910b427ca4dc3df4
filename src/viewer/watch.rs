//! In the server's process (`serve --viewer`), the viewer watches every
//! resource from its start, whether a page is open or not, so that a page
//! opened after a run can show it:
//!
//! - the last boundary of each resource (all default fields), sent to a
//!   panel at once when it opens, instead of waiting for a boundary that a
//!   paused or finished run never makes (observers receive only future
//!   boundaries);
//! - every episode end (terminated, truncated) and every reset where it
//!   happens, with their sequence numbers, which the panels pass to the
//!   page with their frames, so that the page's timeline marks them even
//!   when it skipped those frames (latest wins).
//!
//! Each resource has one subscription on the viewer's own in-memory
//! session. Reading every boundary costs the server more than the step of
//! a small env itself (a snapshot encoded and sent, whatever its fields:
//! under callgrind, a debug build's `bench_state` step went from 322k
//! instructions to 1.1M), so above [`GATE_ABOVE`] boundaries a
//! second the watch is gated as a panel is: it subscribes for one boundary
//! every [`GATED_EVERY`], and stays subscribed again once the rate falls
//! below [`UNGATE_BELOW`] or the domain goes quiet. The ordinary loop of the
//! first hour (tens of steps a second) is read whole; a resource stepped
//! faster has its ends counted only at the boundaries read, and its last
//! boundary is the last one read, which the page is told. Subscriptions
//! are latest-wins (SPEC §8) too: boundaries between two read ones are
//! counted (`gaps`, from the sequence numbers; a domain of several
//! resources has gaps of its own), and the page says its counts may be
//! short. Factory resources (built on first use, evicted when idle) are
//! not watched: a subscription would keep them built.

use super::config::ViewerConfig;
use super::upstream::RECONNECT_DELAY;
use crate::client::{ClientError, SnapshotEvent};
use crate::codec::Value;
use crate::protocol::ResourceKind;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Above this many boundaries per second a panel's upstream subscription is
/// held only while the page waits for a frame (`panel::panel_task`), and the
/// watch reads only some boundaries.
pub(super) const GATE_ABOVE: f64 = 150.0;

/// How long a subscription taken again waits for a boundary before it
/// checks whether it missed the last ones (the domain went quiet).
pub(super) const QUIET: Duration = Duration::from_millis(250);

/// Below this many boundaries per second the subscription is kept between
/// frames (and every boundary read) again.
pub(super) const UNGATE_BELOW: f64 = 100.0;

/// Marks (episode ends, resets) remembered per resource, the most recent.
pub(super) const MAX_MARKS: usize = 2000;

/// A gated watch reads one boundary per this.
pub(super) const GATED_EVERY: Duration = Duration::from_millis(250);

/// A boundary the page's timeline marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    /// The boundary's sequence.
    pub(super) sequence: u64,
    /// What happened there.
    pub(super) kind: MarkKind,
}

/// What a [`Mark`] marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MarkKind {
    /// An episode terminated (for a batch: at least one of its envs).
    Terminated,
    /// An episode was truncated.
    Truncated,
    /// A reset or reload boundary (its revision change is expected).
    Reset,
}

impl MarkKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            MarkKind::Terminated => "terminated",
            MarkKind::Truncated => "truncated",
            MarkKind::Reset => "reset",
        }
    }
}

/// What the viewer knows of one resource's boundaries.
#[derive(Debug, Clone, Default)]
pub(super) struct Watched {
    /// The latest boundary seen with all default fields.
    pub(super) last: Option<Arc<SnapshotEvent>>,
    /// The latest boundary's sequence (seen narrowed or not; 0: none yet).
    pub(super) sequence: u64,
    /// When the viewer saw it (`None`: no boundary since the viewer
    /// started).
    pub(super) seen: Option<Instant>,
    /// Recent episode ends and resets, oldest first.
    pub(super) marks: VecDeque<Mark>,
    /// Episode ends counted since the viewer started (each env of a batch
    /// counts).
    pub(super) terminated: u64,
    /// Truncations, likewise.
    pub(super) truncated: u64,
    /// Reset and reload boundaries.
    pub(super) resets: u64,
    /// Boundaries between two read ones (by sequence): not read in time,
    /// or another resource's of the same domain.
    pub(super) gaps: u64,
}

impl Watched {
    /// The marks in `(after, upto]`.
    pub(super) fn marks_between(&self, after: u64, upto: u64) -> Vec<Mark> {
        self.marks
            .iter()
            .filter(|m| m.sequence > after && m.sequence <= upto)
            .copied()
            .collect()
    }

    /// How long the resource has made no boundary (`None`: none seen since
    /// the viewer started).
    pub(super) fn idle_for(&self) -> Option<Duration> {
        self.seen.map(|at| at.elapsed())
    }
}

type Board = Arc<Mutex<HashMap<String, Watched>>>;

/// The watch of every resource (see the module's documentation).
pub(super) struct Watcher {
    board: Board,
    task: JoinHandle<()>,
}

impl Watcher {
    /// Starts watching (inside a tokio runtime); only for a viewer in the
    /// server's process.
    pub(super) fn start(config: ViewerConfig) -> Watcher {
        let board = Board::default();
        let task = tokio::spawn(run(config, board.clone()));
        Watcher { board, task }
    }

    /// What is known of `resource` (`None`: not watched).
    pub(super) fn get(&self, resource: &str) -> Option<Watched> {
        self.board.lock().get(resource).cloned()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches every resource on a session of its own, made again when lost.
async fn run(config: ViewerConfig, board: Board) {
    loop {
        let client = match config.connect().await {
            Ok(client) => client,
            Err(e) => {
                tracing::debug!(error = %e, "viewer: cannot open the watching session");
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
        };
        let listed = match client.discover().await {
            Ok(list) => list,
            Err(e) => {
                tracing::debug!(error = %e, "viewer: the watching session's discover failed");
                client.close().await;
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
        };
        let server = config.in_process.as_ref();
        let mut tasks = tokio::task::JoinSet::new();
        for d in &listed {
            let lazy = server.is_some_and(|s| {
                s.is_lazy(d.id())
                    || s.roots()
                        .iter()
                        .any(|root| s.is_lazy(root) && d.id().starts_with(&format!("{root}/")))
            });
            if lazy {
                continue;
            }
            board.lock().entry(d.id().to_string()).or_default();
            tasks.spawn(watch_one(
                client.clone(),
                d.id().to_string(),
                d.kind(),
                board.clone(),
            ));
        }
        // Until every watch ended (the session was lost, or the server is
        // shutting down).
        while tasks.join_next().await.is_some() {}
        let lost = client.is_closed();
        client.close().await;
        if !lost {
            return;
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// Watches one resource until its subscription ends.
async fn watch_one(client: crate::client::Client, id: String, kind: ResourceKind, board: Board) {
    let Ok(mut subscription) = client.subscribe(&id, None).await else {
        return;
    };
    loop {
        // Subscribed: every boundary, until the rate (over windows of at
        // least half a second) exceeds GATE_ABOVE.
        let mut window: Option<(u64, i64)> = None;
        loop {
            match subscription.next(None).await {
                Ok(Some(event)) => {
                    let (sequence, timestamp) = (event.sequence, event.timestamp_ns);
                    record(&board, &id, event);
                    let Some((from_sequence, from_timestamp)) = window else {
                        window = Some((sequence, timestamp));
                        continue;
                    };
                    let seconds = (timestamp - from_timestamp) as f64 / 1e9;
                    if seconds < 0.5 {
                        continue;
                    }
                    window = Some((sequence, timestamp));
                    let rate = sequence.saturating_sub(from_sequence) as f64 / seconds;
                    if rate > GATE_ABOVE && kind != ResourceKind::World {
                        break;
                    }
                }
                Ok(None) | Err(_) => return,
            }
        }
        // Gated: one boundary per GATED_EVERY, until the rate falls or
        // the domain goes quiet (then the subscription is kept).
        let _ = subscription.unsubscribe().await;
        let mut last: Option<(u64, i64)> = None;
        subscription = loop {
            tokio::time::sleep(GATED_EVERY).await;
            let Ok(mut s) = client.subscribe(&id, None).await else {
                return;
            };
            match s.next(Some(QUIET)).await {
                Ok(Some(event)) => {
                    let (sequence, timestamp) = (event.sequence, event.timestamp_ns);
                    record(&board, &id, event);
                    let slow = last.is_some_and(|(from_sequence, from_timestamp)| {
                        let seconds = (timestamp - from_timestamp) as f64 / 1e9;
                        seconds > 0.0
                            && (sequence.saturating_sub(from_sequence) as f64 / seconds)
                                < UNGATE_BELOW
                    });
                    last = Some((sequence, timestamp));
                    if slow {
                        break s;
                    }
                    let _ = s.unsubscribe().await;
                }
                Err(ClientError::Timeout(_)) => break s,
                Ok(None) | Err(_) => return,
            }
        };
    }
}

/// Notes a boundary of `id`.
fn record(board: &Board, id: &str, event: SnapshotEvent) {
    let mut board = board.lock();
    let w = board.entry(id.to_string()).or_default();
    if event.sequence <= w.sequence {
        return;
    }
    if w.sequence > 0 {
        w.gaps += event.sequence - w.sequence - 1;
    }
    w.sequence = event.sequence;
    w.seen = Some(Instant::now());
    let mut marks = Vec::new();
    if event.kind == "reset" || event.kind == "reload" {
        w.resets += 1;
        marks.push(MarkKind::Reset);
    }
    let ended = |name: &str| event.data.get(name).map_or(0, count_true);
    let (terminated, truncated) = (ended("terminated"), ended("truncated"));
    if terminated > 0 {
        w.terminated += terminated;
        marks.push(MarkKind::Terminated);
    }
    if truncated > 0 {
        w.truncated += truncated;
        marks.push(MarkKind::Truncated);
    }
    for kind in marks {
        w.marks.push_back(Mark {
            sequence: event.sequence,
            kind,
        });
    }
    while w.marks.len() > MAX_MARKS {
        w.marks.pop_front();
    }
    w.last = Some(Arc::new(event));
}

/// How many of a signal's values are true (a flag: 0 or 1; a batch's
/// array: each element).
fn count_true(v: &Value) -> u64 {
    match v {
        Value::Array(a) => (0..a.len())
            .filter(|&i| {
                a.get_complex(i)
                    .is_some_and(|(re, im)| re != 0.0 || im != 0.0)
            })
            .count() as u64,
        Value::List(items) | Value::Tuple(items) => items.iter().map(count_true).sum(),
        other => u64::from(other.truthy().unwrap_or(false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::NdArray;

    #[test]
    fn episode_ends_count_each_env_of_a_batch() {
        assert_eq!(count_true(&Value::Bool(true)), 1);
        assert_eq!(count_true(&Value::Bool(false)), 0);
        assert_eq!(
            count_true(&Value::Array(NdArray::from_vec(vec![true, false, true]))),
            2
        );
        assert_eq!(
            count_true(&Value::List(vec![Value::Bool(true), Value::Bool(true)])),
            2
        );
    }
}
