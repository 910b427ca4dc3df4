//! The server's `tracing` events, captured so that a test can check why
//! something happened (the `reason` of a "session closed" event), not only
//! that it did. Events are captured on the thread that installed the
//! capture: use it in a `current_thread` test, where the server's sessions
//! run on the test's own thread.
#![allow(dead_code)]

use parking_lot::Mutex;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One event: its message and its other fields, as text.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    pub message: String,
    pub fields: Vec<(String, String)>,
}

impl Captured {
    /// The value of the field `name`, if the event has it.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Visit for Captured {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.record_str(field, &format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.fields
                .push((field.name().to_string(), value.to_string()));
        }
    }
}

#[derive(Default)]
struct Shared {
    events: Mutex<Vec<Captured>>,
    added: Notify,
}

/// Captures every event on this thread while its guard lives.
pub struct Logs {
    shared: Arc<Shared>,
    _guard: tracing::subscriber::DefaultGuard,
}

struct Capture(Arc<Shared>);

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut captured = Captured::default();
        event.record(&mut captured);
        self.0.events.lock().push(captured);
        self.0.added.notify_waiters();
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Logs {
    /// Starts capturing on the current thread.
    pub fn capture() -> Logs {
        let shared = Arc::new(Shared::default());
        let guard = tracing::subscriber::set_default(Capture(shared.clone()));
        Logs {
            shared,
            _guard: guard,
        }
    }

    /// The first event with this message that `pick` accepts, waiting for it
    /// (up to 60 s: generous, for a loaded machine; an event, not a timing).
    pub async fn wait_for(&self, message: &str, pick: impl Fn(&Captured) -> bool) -> Captured {
        let found = async {
            loop {
                let added = self.shared.added.notified();
                tokio::pin!(added);
                added.as_mut().enable();
                if let Some(e) = self
                    .shared
                    .events
                    .lock()
                    .iter()
                    .find(|e| e.message == message && pick(e))
                {
                    return e.clone();
                }
                added.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), found)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no {message:?} event within 60 s; events: {:?}",
                    self.shared.events.lock()
                )
            })
    }

    /// Every event with this message so far.
    pub fn all(&self, message: &str) -> Vec<Captured> {
        self.shared
            .events
            .lock()
            .iter()
            .filter(|e| e.message == message)
            .cloned()
            .collect()
    }
}
