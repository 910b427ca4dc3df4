//! Lossless recording of env transitions into `unienv_data` replay buffers.
//!
//! With [`ServerConfig::record_dir`](crate::server::ServerConfig::record_dir)
//! set, every env-mode transition (`reset`/`reload`, then `step`) of every
//! env resource is recorded into `DIR/<resource_id>/` (the ID
//! percent-quoted as the reference quotes names in URLs: `arm/grip` becomes
//! `arm%2Fgrip`): a `unienv_data` `ReplayBuffer` that
//! `ReplayBuffer.load_from(path, backend=NumpyComputeBackend)` opens with
//! nothing of ours (`unienv`, and pyarrow for the default format), one
//! segment per episode, each element the transition
//! dict of `ReplayBufferCollectionWrapper`'s default builder (`obs`,
//! `action`, `reward`, `terminated`, `truncated`, `next_obs`, and `context`
//! when the env has a context space). A batched env records one buffer per
//! sub-env, `DIR/<resource_id>/<i>/`. See [`buffer`](self) for the files.
//! Its storages are `ParquetStorage`s by default ([`RecordFormat::parquet`],
//! [`ParquetFormat`], written at each episode's end; loading them needs
//! pyarrow); with
//! [`ServerConfig::record_format`](crate::server::ServerConfig::record_format)
//! [`RecordFormat::Npz`] they are `NPZStorage`s (a file per transition,
//! loadable with `unienv` alone), or any [`RecordFormat::External`] writer's.
//!
//! # Where the work happens
//! The domain thread only clones the call's action and result (arrays are
//! shared, not copied) and appends them to a queue under a lock; one writer
//! thread per server splits batches, converts and writes the files. The
//! writer is woken by an episode's end (or a reset, flush or close), by
//! `WAKE_EVENTS` waiting events, or after `BATCH_WAIT` (50 ms) at
//! the latest, not by each event (see the `queue` module). The queue holds
//! [`QUEUE_EVENTS`] events and at most
//! [`ServerConfig::record_queue_bytes`](crate::server::ServerConfig::record_queue_bytes)
//! bytes (default [`DEFAULT_QUEUE_BYTES`]), counted until the writer is
//! done with each event. **When it is full, the domain thread waits**
//! for room: the recording stays lossless and the simulator slows to the
//! disk's pace (each wait is counted, the first logged at `warn`). After a
//! burst the writer gives the memory back (see the `queue` module).
//!
//! # Episodes and durability
//! An episode ends when a (sub-)env reports `terminated` or `truncated`, or
//! when it is reset before that; its segment is then committed by one
//! atomic rename of `metadata.json`. A process that dies loses only the
//! episodes still open. Stopping the server ([`Server::shutdown`](crate::server::Server::shutdown),
//! or disposal of a domain) commits the open episodes as they stand. A
//! recording left in `DIR/<resource_id>/` by an earlier run of the same env
//! (same transition space) is continued; one of another space is left
//! alone and that env is not recorded (logged at `error`). Files are not
//! `fsync`ed: a crash of the process loses nothing committed, a crash of
//! the machine may.
//!
//! Envs whose spaces hold other leaves than `BoxSpace` and `BinarySpace`
//! (text, graphs, tuples: what `NPZStorage` cannot hold) are not recorded
//! (logged at `warn`).

mod buffer;
mod format;
mod json;
mod npz;
mod parquet;
mod queue;
mod slot;
mod stats;
mod straight;
mod swap;
mod transition;
mod vector;

pub use buffer::RESERVED_LENGTH;
pub use format::{Column, ExternalBuffer, ExternalFormat, RecordFormat, Staged};
pub use parquet::{piece_size, ParquetFormat, PIECE_BYTES, STORAGE_CLASS};
pub use queue::{DEFAULT_QUEUE_BYTES, QUEUE_EVENTS};
pub use stats::RecordStats;
pub use vector::{RowKind, VectorRecord};

use slot::{end_episode, Slot};

use crate::codec::Value;
use crate::host::Space;
use buffer::BufferDir;
use parking_lot::Mutex;
use queue::{Pushed, Queue, Urgent};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use transition::{Layout, Transition};

/// An env's spaces as its descriptor declares them.
#[derive(Debug, Clone)]
pub(crate) struct EnvSpaces {
    pub observation: Space,
    pub action: Space,
    pub context: Option<Space>,
    pub batch_size: Option<usize>,
}

/// What a domain thread tells the writer.
pub(crate) enum Event {
    /// An env resource starts being recorded (once per instantiation).
    Open {
        id: Arc<str>,
        spaces: Box<EnvSpaces>,
    },
    /// `reset` / `reload` returned `(context, obs, info)`.
    Reset {
        id: Arc<str>,
        result: Value,
        mask: Option<Value>,
    },
    /// `step(action)` returned `(obs, reward, terminated, truncated, info)`.
    Step {
        id: Arc<str>,
        action: Value,
        result: Value,
    },
    /// The env's domain was disposed: commit its open episodes.
    Close { id: Arc<str> },
    /// Answered once everything queued before it is written.
    Flush(mpsc::Sender<()>),
    /// The learner side's recording ([`VectorRecorder`]).
    Vector(Box<vector::VectorEvent>),
    /// [`Recorder::stop`]: commit every open episode and end the thread.
    Stop,
}

impl Urgent for Event {
    /// Whether the writer is woken for it at once (see [`queue`]): what
    /// ends an episode (a step that terminates or truncates, a reset, a
    /// sub-env that failed) is committed without waiting for more events,
    /// and so are flushes, closes and the stop.
    fn is_urgent(&self) -> bool {
        match self {
            Event::Open { .. } => false,
            Event::Step { result, .. } => match result.as_seq() {
                Some(items) if items.len() >= 4 => any_true(&items[2]) || any_true(&items[3]),
                _ => true,
            },
            Event::Vector(v) => match &**v {
                vector::VectorEvent::Open(_) => false,
                vector::VectorEvent::Record(r) => r.ends_episodes(),
            },
            Event::Reset { .. } | Event::Close { .. } | Event::Flush(_) | Event::Stop => true,
        }
    }

    fn bytes(&self) -> usize {
        let small = std::mem::size_of::<Event>();
        small
            + match self {
                Event::Open { .. } | Event::Close { .. } | Event::Flush(_) | Event::Stop => 0,
                Event::Reset { result, mask, .. } => {
                    value_bytes(result) + mask.as_ref().map_or(0, value_bytes)
                }
                Event::Step { action, result, .. } => value_bytes(action) + value_bytes(result),
                Event::Vector(v) => match &**v {
                    vector::VectorEvent::Open(_) => 0,
                    vector::VectorEvent::Record(r) => record_bytes(r),
                },
            }
    }
}

/// The bytes a value holds: arrays and byte strings by their data,
/// strings by their length, containers by their items, each node by its
/// size in memory. Arrays shared with the caller are counted as if they
/// were the queue's own (an upper bound on what the queue keeps alive).
fn value_bytes(v: &Value) -> usize {
    let node = std::mem::size_of::<Value>();
    node + match v {
        Value::Str(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::Array(a) => a.as_bytes().len(),
        Value::BigInt(_) => 32,
        Value::List(items) | Value::Tuple(items) => items.iter().map(value_bytes).sum(),
        Value::Dict(d) => d.iter().map(|(k, v)| k.len() + value_bytes(v)).sum(),
        Value::ObjectArray(o) => o.values().iter().map(value_bytes).sum(),
        Value::Graph(g) => [
            &g.n_nodes,
            &g.n_edges,
            &g.nodes_features,
            &g.edges_features,
            &g.edges,
        ]
        .into_iter()
        .map(value_bytes)
        .sum(),
        Value::Null | Value::Bool(_) | Value::Int(_) | Value::UInt(_) | Value::Float(_) => 0,
    }
}

/// The bytes of one learner-side record (the stacked actions, shared by
/// its rows, counted once).
fn record_bytes(r: &VectorRecord) -> usize {
    let rows = r.env_id.len();
    let mut bytes = value_bytes(&r.observation)
        + rows * (std::mem::size_of::<usize>() + std::mem::size_of::<f64>() + 2)
        + r.kind.len() * std::mem::size_of::<RowKind>();
    let mut actions = false;
    for kind in &r.kind {
        match kind {
            RowKind::Step { actions: a, .. } => {
                if !actions {
                    bytes += value_bytes(a);
                    actions = true;
                }
            }
            RowKind::StepFinal {
                actions: a,
                final_obs,
                ..
            } => {
                if !actions {
                    bytes += value_bytes(a);
                    actions = true;
                }
                bytes += value_bytes(final_obs);
            }
            RowKind::Skip | RowKind::Reset | RowKind::Failed => {}
        }
    }
    bytes
}

/// Whether a `terminated`/`truncated` value (a bool, or an array of them
/// for a batched env) holds a true.
fn any_true(v: &Value) -> bool {
    match v {
        Value::Array(a) => (0..a.len()).any(|i| a.get_f64(i).is_some_and(|x| x != 0.0)),
        other => other.truthy().unwrap_or(true),
    }
}

/// The writer thread and the queue to it.
///
/// A push appends under the queue's lock and wakes the writer only now and
/// then (see [`queue`]). [`Recorder::stop`] queues [`Event::Stop`]; events
/// queued after it are dropped when the thread ends.
pub(crate) struct Recorder {
    queue: Arc<Queue<Event>>,
    /// Whether [`Recorder::stop`] was called.
    stopped: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    pub stats: Arc<RecordStats>,
}

impl Recorder {
    /// Creates `dir` and starts the writer thread, which writes `format`,
    /// with a queue of at most [`DEFAULT_QUEUE_BYTES`].
    pub(crate) fn start(dir: &Path, format: RecordFormat) -> std::io::Result<Recorder> {
        Recorder::start_with(dir, format, DEFAULT_QUEUE_BYTES)
    }

    /// [`Recorder::start`] with a queue of at most `queue_bytes`.
    pub(crate) fn start_with(
        dir: &Path,
        format: RecordFormat,
        queue_bytes: usize,
    ) -> std::io::Result<Recorder> {
        std::fs::create_dir_all(dir)?;
        let queue = Arc::new(Queue::new(queue_bytes));
        let stats = Arc::new(RecordStats::default());
        let mut writer = Writer {
            dir: dir.to_path_buf(),
            envs: HashMap::new(),
            vector: None,
            format,
            stats: stats.clone(),
        };
        let theirs = queue.clone();
        let thread = std::thread::Builder::new()
            .name("unienv-recorder".into())
            .spawn(move || {
                // Closes the queue however the thread ends (callers waiting
                // for room must not wait for ever).
                struct Closing(Arc<Queue<Event>>);
                impl Drop for Closing {
                    fn drop(&mut self) {
                        self.0.close();
                    }
                }
                let closing = Closing(theirs);
                writer.run(&closing.0);
            })?;
        Ok(Recorder {
            queue,
            stopped: AtomicBool::new(false),
            thread: Mutex::new(Some(thread)),
            stats,
        })
    }

    /// Queues an event; waits while the queue is full.
    pub(crate) fn send(&self, event: Event) {
        if let Pushed::Waited = self.queue.push(event) {
            if self.stats.queue_waits.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    events = QUEUE_EVENTS,
                    "the recording queue is full (events or bytes): the simulator waits for the disk"
                );
            }
        }
    }

    /// Queues an event if there is room; gives it back when the queue is
    /// full (dropped when the writer is gone).
    pub(crate) fn try_send(&self, event: Event) -> Option<Event> {
        match self.queue.try_push(event) {
            Pushed::Full(event) => Some(event),
            _ => None,
        }
    }

    /// Waits until every event queued before is written.
    pub(crate) fn flush(&self) {
        let (done, wait) = mpsc::channel();
        self.send(Event::Flush(done));
        let _ = wait.recv();
    }

    /// Commits every open episode and stops the writer (idempotent).
    pub(crate) fn stop(&self) {
        if !self.stopped.swap(true, Ordering::AcqRel) {
            // Lossless as any event: waits for room (the writer drains).
            self.queue.push(Event::Stop);
        }
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Recorder {
    /// Stops the writer (commits every open episode; waits for it).
    fn drop(&mut self) {
        self.stop();
    }
}

/// A learner-side recorder (`RemoteVectorEnv(..., record_dir=DIR)`): one
/// buffer per sub-env, `DIR/<index>/`, a writer thread and the queue to it
/// (see [`VectorRecord`]).
pub struct VectorRecorder {
    recorder: Recorder,
}

impl VectorRecorder {
    /// Creates (or continues, for the same transition space and format)
    /// one buffer per sub-env under `dir` and starts the writer thread.
    /// `observation` and `action` are one sub-env's spaces.
    pub fn start(
        dir: &Path,
        observation: Space,
        action: Space,
        num_envs: usize,
        format: RecordFormat,
    ) -> Result<VectorRecorder, String> {
        let recording = vector::VectorRecording::open(dir, observation, action, num_envs, &format)?;
        let recorder =
            Recorder::start(dir, format).map_err(|e| format!("{}: {e}", dir.display()))?;
        recorder.send(Event::Vector(Box::new(vector::VectorEvent::Open(
            Box::new(recording),
        ))));
        Ok(VectorRecorder { recorder })
    }

    /// Queues one call's results; waits while the queue ([`QUEUE_EVENTS`]
    /// calls) is full.
    pub fn record(&self, record: VectorRecord) {
        self.recorder
            .send(Event::Vector(Box::new(vector::VectorEvent::Record(record))));
    }

    /// Queues one call's results if the queue has room; gives them back
    /// otherwise (for [`VectorRecorder::record`] to wait with, for
    /// example, a lock released).
    pub fn try_record(&self, record: VectorRecord) -> Option<VectorRecord> {
        let event = Event::Vector(Box::new(vector::VectorEvent::Record(record)));
        match self.recorder.try_send(event)? {
            Event::Vector(event) => match *event {
                vector::VectorEvent::Record(record) => Some(record),
                vector::VectorEvent::Open(_) => None,
            },
            _ => None,
        }
    }

    /// Waits until everything queued before is written.
    pub fn flush(&self) {
        self.recorder.flush();
    }

    /// Commits every open episode and stops the writer thread (idempotent).
    pub fn close(&self) {
        self.recorder.stop();
    }

    /// The counters.
    pub fn stats(&self) -> Arc<RecordStats> {
        self.recorder.stats.clone()
    }
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    envs: HashMap<Arc<str>, EnvRecording>,
    /// The learner side's recording, when this writer is a
    /// [`VectorRecorder`]'s.
    vector: Option<vector::VectorRecording>,
    /// The storage format of the buffers it opens.
    format: RecordFormat,
    stats: Arc<RecordStats>,
}

/// One env resource being recorded.
struct EnvRecording {
    /// The batched spaces, when the env is batched.
    batched: Option<EnvSpaces>,
    layout: Vec<Layout>,
    slots: Vec<Slot>,
    /// Whether a failure was already logged.
    failed: bool,
}

impl Writer {
    fn run(&mut self, queue: &Queue<Event>) {
        let mut batch = VecDeque::new();
        let mut busy = false;
        'run: loop {
            busy = queue.take(&mut batch, busy);
            while let Some(event) = batch.pop_front() {
                if let Event::Stop = event {
                    break 'run;
                }
                let bytes = event.bytes();
                self.handle(event);
                queue.release(bytes);
            }
            // The episodes that ended in this batch are committed together
            // (one call into an external writer for all of them).
            self.commit_staged();
            queue.give_back(&mut batch);
        }
        for (id, env) in &mut self.envs {
            close(id, env, &self.stats);
        }
        if let Some(v) = &mut self.vector {
            v.close(&self.stats);
        }
        self.commit_staged();
    }

    /// Commits the episodes staged since the last call (external formats;
    /// NPZ commits each episode as it ends), in one
    /// [`ExternalFormat::commit_many`] call.
    fn commit_staged(&mut self) {
        if !self.stats.staged.swap(false, Ordering::Relaxed) {
            return;
        }
        let RecordFormat::External(format) = &self.format else {
            return;
        };
        let hosts = self
            .envs
            .values_mut()
            .flat_map(|env| env.slots.iter_mut().map(|slot| &mut slot.buffer));
        let learner = self.vector.iter_mut().flat_map(|v| v.buffers());
        buffer::commit_staged(format.as_ref(), hosts.chain(learner), &self.stats);
    }

    fn handle(&mut self, event: Event) {
        match event {
            // Handled by `run`.
            Event::Stop => {}
            Event::Flush(done) => {
                self.commit_staged();
                let _ = done.send(());
            }
            Event::Vector(event) => match *event {
                vector::VectorEvent::Open(v) => self.vector = Some(*v),
                vector::VectorEvent::Record(r) => {
                    if let Some(v) = &mut self.vector {
                        v.record(&r, &self.stats);
                    }
                }
            },
            Event::Open { id, spaces } => {
                if let Some(env) = self.envs.get_mut(&id) {
                    // Revived after eviction: continue in the same buffers.
                    for slot in &mut env.slots {
                        slot.obs = None;
                        slot.context = None;
                    }
                    return;
                }
                match open(&self.dir, &id, &spaces, &self.format) {
                    Ok(env) => {
                        self.envs.insert(id, env);
                    }
                    Err(e) => {
                        self.stats.fail(&format!("{id}: not recorded: {e}"));
                        tracing::warn!(resource = %id, error = %e, "this env is not recorded");
                    }
                }
            }
            Event::Reset { id, result, mask } => {
                if let Some(env) = self.envs.get_mut(&id) {
                    let outcome = env.reset(&result, mask.as_ref(), &self.stats);
                    env.report(&id, outcome, &self.stats);
                }
            }
            Event::Step { id, action, result } => {
                if let Some(env) = self.envs.get_mut(&id) {
                    let outcome = env.step(&action, &result, &self.stats);
                    env.report(&id, outcome, &self.stats);
                }
            }
            Event::Close { id } => {
                if let Some(env) = self.envs.get_mut(&id) {
                    close(&id, env, &self.stats);
                }
            }
        }
    }
}

fn close(id: &str, env: &mut EnvRecording, stats: &RecordStats) {
    for slot in &mut env.slots {
        slot.obs = None;
        slot.context = None;
        if let Err(e) = end_episode(slot, stats) {
            stats.fail(&format!("{id}: commit failed: {e}"));
            tracing::error!(resource = %id, error = %e, "recording: commit failed");
        }
    }
}

/// A resource ID as a directory name: percent-encoded as Python's
/// `urllib.parse.quote(id, safe="")` (everything but ASCII letters, digits
/// and `-._~`), as the reference quotes names.
fn dir_name(id: &str) -> String {
    if id.bytes().all(|b| b == b'.') {
        // `.` and `..` name no directory of their own.
        return "%2E".repeat(id.len());
    }
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn open(
    dir: &Path,
    id: &str,
    spaces: &EnvSpaces,
    format: &RecordFormat,
) -> Result<EnvRecording, String> {
    let root = dir.join(dir_name(id));
    let mut layout = Vec::new();
    let mut slots = Vec::new();
    let subs: Vec<(Option<usize>, PathBuf)> = match spaces.batch_size {
        None => vec![(None, root)],
        Some(b) => (0..b)
            .map(|i| (Some(i), root.join(i.to_string())))
            .collect(),
    };
    for (i, path) in subs {
        let l = match i {
            None => Layout::new(
                spaces.observation.clone(),
                spaces.action.clone(),
                spaces.context.clone(),
            )?,
            Some(i) => Layout::new(
                transition::unbatch_space(&spaces.observation, i)?,
                transition::unbatch_space(&spaces.action, i)?,
                spaces
                    .context
                    .as_ref()
                    .map(|c| transition::unbatch_space(c, i))
                    .transpose()?,
            )?,
        };
        let space_json = json::to_string(&l.space.to_value());
        let buffer = BufferDir::open(&path, &l.keys, &l.leaf_specs(), space_json, l.flat, format)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        layout.push(l);
        slots.push(Slot {
            buffer,
            obs: None,
            context: None,
        });
    }
    Ok(EnvRecording {
        batched: spaces.batch_size.map(|_| spaces.clone()),
        layout,
        slots,
        failed: false,
    })
}

impl EnvRecording {
    fn report(&mut self, id: &str, outcome: Result<(), String>, stats: &RecordStats) {
        if let Err(e) = outcome {
            stats.fail(&format!("{id}: a call could not be recorded: {e}"));
            if !self.failed {
                self.failed = true;
                tracing::warn!(resource = %id, error = %e, "recording: a call could not be recorded");
            }
        }
    }

    fn reset(
        &mut self,
        result: &Value,
        mask: Option<&Value>,
        stats: &RecordStats,
    ) -> Result<(), String> {
        let items = result
            .as_seq()
            .filter(|s| s.len() >= 2)
            .ok_or("reset returned no (context, obs, info)")?;
        let (context, obs) = (&items[0], &items[1]);
        let Some(batched) = &self.batched else {
            end_episode(&mut self.slots[0], stats)?;
            self.slots[0].obs = Some(obs.clone());
            self.slots[0].context = self.layout[0].context.as_ref().map(|_| context.clone());
            return Ok(());
        };
        let n = self.slots.len();
        let selected: Vec<usize> = match mask.and_then(|m| mask_bits(m, n)) {
            Some(bits) => (0..n).filter(|&i| bits[i]).collect(),
            None => (0..n).collect(),
        };
        // A compact result holds only the masked rows, in order.
        let rows = leading_rows(&batched.observation, obs).unwrap_or(n);
        for (k, &i) in selected.iter().enumerate() {
            let r = if rows == n { i } else { k };
            let slot = &mut self.slots[i];
            end_episode(slot, stats)?;
            slot.obs = Some(transition::row(&batched.observation, obs, r, "obs")?);
            slot.context = match &batched.context {
                Some(c) => Some(transition::row(c, context, r, "context")?),
                None => None,
            };
        }
        Ok(())
    }

    fn step(&mut self, action: &Value, result: &Value, stats: &RecordStats) -> Result<(), String> {
        let items = result
            .as_seq()
            .filter(|s| s.len() >= 4)
            .ok_or("step returned no (obs, reward, terminated, truncated, info)")?;
        let (obs, reward, terminated, truncated) = (&items[0], &items[1], &items[2], &items[3]);
        let n = self.slots.len();
        for i in 0..n {
            let t = match &self.batched {
                None => Transition {
                    obs: Value::Null,
                    action: action.clone(),
                    reward: reward.clone(),
                    terminated: terminated.clone(),
                    truncated: truncated.clone(),
                    next_obs: obs.clone(),
                    context: None,
                },
                Some(b) => Transition {
                    obs: Value::Null,
                    action: transition::row(&b.action, action, i, "action")?,
                    reward: Value::Array(transition::array_row(reward, i, "reward")?),
                    terminated: Value::Array(transition::array_row(terminated, i, "terminated")?),
                    truncated: Value::Array(transition::array_row(truncated, i, "truncated")?),
                    next_obs: transition::row(&b.observation, obs, i, "obs")?,
                    context: None,
                },
            };
            let slot = &mut self.slots[i];
            let Some(prev) = slot.obs.take() else {
                return Err("a step without a reset before it".into());
            };
            let t = Transition {
                obs: prev,
                context: slot.context.clone(),
                ..t
            };
            let done = truthy(&t.terminated) || truthy(&t.truncated);
            let appended = slot::append(slot, &self.layout[i], &t, stats);
            slot.obs = Some(t.next_obs);
            appended?;
            if done {
                end_episode(slot, stats)?;
            }
        }
        Ok(())
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.get_f64(0).is_some_and(|x| x != 0.0),
        other => other.truthy().unwrap_or(false),
    }
}

/// A mask as `n` booleans.
fn mask_bits(mask: &Value, n: usize) -> Option<Vec<bool>> {
    let bits: Vec<bool> = match mask {
        Value::Array(a) => a.to_f64_vec().into_iter().map(|x| x != 0.0).collect(),
        Value::List(items) | Value::Tuple(items) => items.iter().map(truthy).collect(),
        _ => return None,
    };
    (bits.len() == n).then_some(bits)
}

/// The rows of a batched value: the first leaf array's leading dimension.
fn leading_rows(space: &Space, value: &Value) -> Option<usize> {
    match (space, value) {
        (Space::Dict(d), Value::Dict(v)) => {
            let (k, s) = d.entries().first()?;
            leading_rows(s, v.get(k)?)
        }
        (_, Value::Array(a)) => a.shape().first().copied(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::NdArray;

    fn step(terminated: Value, truncated: Value) -> Event {
        Event::Step {
            id: Arc::from("env"),
            action: Value::Null,
            result: Value::Tuple(vec![Value::Null, Value::Float(0.0), terminated, truncated]),
        }
    }

    /// What wakes the writer: a step that ends an episode (a flag, or a
    /// batched env's flags holding one), a reset, the stop; not other steps.
    #[test]
    fn what_is_urgent() {
        let f = || Value::Bool(false);
        assert!(!step(f(), f()).is_urgent());
        assert!(step(Value::Bool(true), f()).is_urgent());
        assert!(step(f(), Value::Bool(true)).is_urgent());
        let flags = |bits: Vec<bool>| Value::Array(NdArray::from_vec(bits));
        assert!(!step(flags(vec![false; 3]), flags(vec![false; 3])).is_urgent());
        assert!(step(flags(vec![false, true, false]), flags(vec![false; 3])).is_urgent());
        let reset = Event::Reset {
            id: Arc::from("env"),
            result: Value::Null,
            mask: None,
        };
        assert!(reset.is_urgent());
        assert!(Event::Stop.is_urgent());
        // The learner's records: stepped rows that end nothing, or not.
        let record = |truncated: bool, kind: RowKind| {
            Event::Vector(Box::new(vector::VectorEvent::Record(VectorRecord {
                env_id: vec![0, 1],
                observation: Value::Null,
                reward: vec![0.0; 2],
                terminated: vec![false; 2],
                truncated: vec![false, truncated],
                kind: vec![
                    RowKind::Step {
                        actions: Value::Null,
                        row: 0,
                    },
                    kind,
                ],
            })))
        };
        let stepped = || RowKind::Step {
            actions: Value::Null,
            row: 1,
        };
        assert!(!record(false, stepped()).is_urgent());
        assert!(record(true, stepped()).is_urgent());
        assert!(record(false, RowKind::Reset).is_urgent());
        assert!(record(false, RowKind::Failed).is_urgent());
    }
}
