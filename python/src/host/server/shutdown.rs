//! Shutting a `_native.Server` down: `close()`'s helpers and the drop of a
//! server whose `RemoteServer` was collected without `close()`.

use pyo3::intern;
use pyo3::prelude::*;
use std::time::Duration;
use unienv_remote::server::{Listener, Server};

/// Stops the listeners, shuts the server down and stops its runtime.
pub(super) fn shut_down(
    runtime: tokio::runtime::Runtime,
    listeners: Vec<Listener>,
    server: Server,
) {
    runtime.block_on(async move {
        for l in listeners {
            l.stop().await;
        }
        server.shutdown().await;
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// Shuts a server dropped without `close()` down on a thread of its own,
/// not waiting here (the drop runs with the interpreter attached, which the
/// domain threads need to dispose of their objects).
pub(super) fn shut_down_in_background(
    runtime: tokio::runtime::Runtime,
    listeners: Vec<Listener>,
    server: Server,
) {
    let closing = std::thread::Builder::new()
        .name("unienv-server-drop".into())
        .spawn(move || shut_down(runtime, listeners, server));
    if let Err(e) = closing {
        tracing::error!(target: "unienv_remote_native::server::shutdown", error = %e, "cannot close a dropped server");
    }
}

/// Logs a warning through Python's `logging` (logger `unienv_remote.server`).
pub(super) fn log_warning(py: Python<'_>, message: &str) {
    let logged = py
        .import(intern!(py, "logging"))
        .and_then(|m| m.call_method1(intern!(py, "getLogger"), ("unienv_remote.server",)))
        .and_then(|l| l.call_method1(intern!(py, "warning"), (message,)));
    if logged.is_err() {
        tracing::warn!(target: "unienv_remote_native::server::shutdown", "{message}");
    }
}
