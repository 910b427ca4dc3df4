//! The crate's `tracing` events forwarded to Python's `logging`.
//!
//! [`PyLogLayer`] formats each enabled event (its spans' fields first, as
//! `tracing_subscriber::fmt` does: `session{id=…}:domain{root=…}: message
//! key=value`) and hands it to a bounded queue; one forwarding thread takes
//! the GIL and logs it to the logger named after the event's target
//! (`unienv_remote.server.domain` for `unienv_remote::server::domain`, all
//! under `unienv_remote`). Threads of the runtime never wait for the GIL
//! (a thread holding it may be waiting for them), and a full queue drops
//! records (counted, reported with the next one) rather than block a session.
//!
//! The level is Python's: `_native.set_log_level(levelno)` sets the most
//! verbose level forwarded (the `unienv_remote` logger's effective level,
//! read when a `RemoteServer` starts). Events below it are disabled at their
//! callsites (`max_level_hint`), so a quiet server pays one comparison per
//! event, as with no subscriber at all.

use parking_lot::{Condvar, Mutex};
use pyo3::intern;
use pyo3::prelude::*;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::OnceLock;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Records waiting for the forwarding thread at most.
const QUEUE: usize = 4096;

/// The most verbose level forwarded: 0 off, 1 error … 5 trace.
static LEVEL: AtomicU8 = AtomicU8::new(0);
/// Records dropped because the queue was full, not yet reported.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The queue to the forwarding thread (set once, with the subscriber).
static SINK: OnceLock<SyncSender<Message>> = OnceLock::new();
/// Records queued and records forwarded, for [`flush_logs`].
static PROGRESS: Mutex<(u64, u64)> = Mutex::new((0, 0));
static FORWARDED: Condvar = Condvar::new();

/// One record for Python: logger name, `logging` level number, text.
struct Message {
    logger: String,
    levelno: u8,
    text: String,
}

fn level_rank(level: Level) -> u8 {
    match level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

/// Python's level number of a tracing level.
fn levelno(level: Level) -> u8 {
    match level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// The layer forwarding events to Python's `logging`.
pub struct PyLogLayer;

/// A span's formatted fields, kept in its extensions.
struct SpanFields(String);

/// Writes `message` first and other fields as ` key=value`.
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.rest, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={:?}", field.name(), value);
        }
    }
}

impl<S> Layer<S> for PyLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn enabled(&self, metadata: &tracing::Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        level_rank(*metadata.level()) <= LEVEL.load(Ordering::Relaxed)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(match LEVEL.load(Ordering::Relaxed) {
            0 => LevelFilter::OFF,
            1 => LevelFilter::ERROR,
            2 => LevelFilter::WARN,
            3 => LevelFilter::INFO,
            4 => LevelFilter::DEBUG,
            _ => LevelFilter::TRACE,
        })
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            let text = format!("{}{{{}}}", span.name(), fields.rest.trim_start());
            span.extensions_mut().insert(SpanFields(text));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            if let Some(f) = span.extensions_mut().get_mut::<SpanFields>() {
                f.0.pop();
                if !f.0.ends_with('{') {
                    f.0.push(' ');
                }
                f.0.push_str(fields.rest.trim_start());
                f.0.push('}');
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(sink) = SINK.get() else {
            return;
        };
        let mut text = String::new();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(f) = span.extensions().get::<SpanFields>() {
                    text.push_str(&f.0);
                    text.push(':');
                }
            }
            if !text.is_empty() {
                text.push(' ');
            }
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        text.push_str(&fields.message);
        text.push_str(&fields.rest);
        let dropped = DROPPED.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let _ = write!(
                text,
                " ({dropped} earlier log records dropped: the queue was full)"
            );
        }
        let meta = event.metadata();
        let message = Message {
            logger: logger_name(meta.target()),
            levelno: levelno(*meta.level()),
            text,
        };
        let mut progress = PROGRESS.lock();
        match sink.try_send(message) {
            Ok(()) => progress.0 += 1,
            Err(TrySendError::Full(_)) => {
                DROPPED.fetch_add(dropped + 1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// Held by the forwarding thread while it takes the GIL: [`stop_logs`]
/// waits for it, so that no record is forwarded once the interpreter
/// finalizes (a thread taking the GIL then would be terminated).
static ATTACHING: Mutex<()> = Mutex::new(());

/// The Python logger of a tracing target: `unienv_remote::server::domain`
/// logs to `unienv_remote.server.domain`, and this extension's own events
/// (`unienv_remote_native::…`) to `unienv_remote.…` too.
fn logger_name(target: &str) -> String {
    let target = match target.strip_prefix("unienv_remote_native") {
        Some(rest) => format!("unienv_remote{rest}"),
        None => target.to_string(),
    };
    target.replace("::", ".")
}

/// The forwarding thread: each record logged with the GIL taken.
fn forward(queue: Receiver<Message>) {
    while let Ok(m) = queue.recv() {
        let attaching = ATTACHING.lock();
        // SAFETY: Py_IsInitialized may be called at any time.
        if unsafe { pyo3::ffi::Py_IsInitialized() } != 0 && LEVEL.load(Ordering::Relaxed) > 0 {
            Python::attach(|py| {
                let logged = py
                    .import(intern!(py, "logging"))
                    .and_then(|l| l.call_method1(intern!(py, "getLogger"), (&m.logger,)))
                    .and_then(|logger| {
                        logger.call_method1(intern!(py, "log"), (m.levelno, "%s", &m.text))
                    });
                if let Err(e) = logged {
                    e.write_unraisable(py, None);
                }
            });
        }
        drop(attaching);
        let mut progress = PROGRESS.lock();
        progress.1 += 1;
        FORWARDED.notify_all();
    }
}

/// Installs the layer as the process's global subscriber, once; `false`
/// when another subscriber was installed first (nothing is forwarded then).
fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE);
        let subscriber = tracing_subscriber::registry().with(PyLogLayer);
        if tracing::subscriber::set_global_default(subscriber).is_err() {
            return false;
        }
        let spawned = std::thread::Builder::new()
            .name("unienv-log".into())
            .spawn(move || forward(rx));
        if spawned.is_err() {
            return false;
        }
        SINK.set(tx).is_ok()
    })
}

/// `_native.set_log_level(levelno)`: forwards the crate's events at Python
/// level `levelno` and above (`logging.INFO` …; above `CRITICAL` turns
/// forwarding off), installing the forwarding on first use. Returns
/// whether events are forwarded (`False` when another tracing subscriber
/// was installed first).
#[pyfunction]
fn set_log_level(levelno: i64) -> bool {
    let rank = match levelno {
        i64::MIN..=5 => 5,
        6..=10 => 4,
        11..=20 => 3,
        21..=30 => 2,
        31..=50 => 1,
        _ => 0,
    };
    let installed = rank == 0 || install();
    if LEVEL.swap(rank, Ordering::Relaxed) != rank {
        tracing::callsite::rebuild_interest_cache();
    }
    installed && rank > 0
}

/// `_native.flush_logs(timeout)`: waits (without the GIL) until every record
/// queued so far has reached Python's `logging`, at most `timeout` seconds.
#[pyfunction]
fn flush_logs(py: Python<'_>, timeout: f64) {
    let deadline = std::time::Duration::from_secs_f64(timeout.clamp(0.0, 60.0));
    py.detach(|| {
        let start = std::time::Instant::now();
        let mut progress = PROGRESS.lock();
        let target = progress.0;
        while progress.1 < target {
            let Some(left) = deadline.checked_sub(start.elapsed()) else {
                break;
            };
            if FORWARDED.wait_for(&mut progress, left).timed_out() {
                break;
            }
        }
    });
}

/// `_native.stop_logs()` (at interpreter exit): forwards what is queued
/// (at most one second), then nothing more.
#[pyfunction]
fn stop_logs(py: Python<'_>) {
    flush_logs(py, 1.0);
    py.detach(|| {
        LEVEL.store(0, Ordering::Relaxed);
        drop(ATTACHING.lock());
    });
    tracing::callsite::rebuild_interest_cache();
}

/// Logs the exception a hosted object raised in `what` (`step() on 'id'`),
/// with its traceback, to the logger `unienv_remote.host`: at `ERROR` when
/// the call was a mutation (which faults the domain), `WARNING` otherwise.
pub(crate) fn exception(py: Python<'_>, what: &str, mutation: bool, e: &PyErr) {
    let logged = || -> PyResult<()> {
        let logger = py
            .import(intern!(py, "logging"))?
            .call_method1(intern!(py, "getLogger"), ("unienv_remote.host",))?;
        let kwargs = pyo3::types::PyDict::new(py);
        // (type, value, traceback): the traceback of the call into Python.
        let info = (e.get_type(py), e.value(py), e.traceback(py));
        kwargs.set_item(intern!(py, "exc_info"), info)?;
        let level: u8 = if mutation { 40 } else { 30 };
        logger.call_method(
            intern!(py, "log"),
            (level, "%s raised %s", what, e.get_type(py).name()?),
            Some(&kwargs),
        )?;
        Ok(())
    };
    if let Err(failed) = logged() {
        failed.write_unraisable(py, None);
    }
}

/// Registers `set_log_level`, `flush_logs` and `stop_logs`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_log_level, m)?)?;
    m.add_function(wrap_pyfunction!(flush_logs, m)?)?;
    m.add_function(wrap_pyfunction!(stop_logs, m)?)
}
