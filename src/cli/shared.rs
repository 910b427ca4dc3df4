//! What the client commands share: the connection options
//! ([`ClientArgs`]), running a command's body on a runtime, turning errors
//! into exit codes, and waiting for Ctrl-C.

use crate::client::{Client, ClientConfig, ClientError, Descriptor};
use clap::Args;
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The connection options every client command takes.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The server's URL, e.g. ws://127.0.0.1:8765 (ours or the Python reference).
    pub url: String,
    /// Send `Authorization: Bearer TOKEN` in the WebSocket handshake.
    #[arg(long)]
    pub token: Option<String>,
    /// Seconds to wait for the connection and for each reply (0 waits forever).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
    /// For wss:// URLs: also trust the CA certificates in FILE (PEM), e.g. a
    /// private CA's or a self-signed server certificate.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

impl ClientArgs {
    /// The client configuration these options describe; `discover` loads
    /// every descriptor on connect.
    pub fn config(&self, discover: bool) -> Result<ClientConfig, String> {
        if !(self.timeout.is_finite() && self.timeout >= 0.0) {
            return Err("--timeout must be a non-negative number of seconds".into());
        }
        let timeout = (self.timeout > 0.0).then(|| Duration::from_secs_f64(self.timeout));
        let mut config = ClientConfig::default()
            .with_timeout(timeout)
            .with_discover(discover);
        config.token = self.token.clone();
        config.ca_file = self.ca_file.clone();
        Ok(config)
    }

    /// Connects (inside a tokio runtime).
    pub async fn connect(&self, discover: bool) -> Result<Client, ClientError> {
        let config = self.config(discover).map_err(ClientError::invalid_use)?;
        Client::connect(&self.url, config).await
    }
}

/// Prints `error: MESSAGE` on stderr and returns the failure code.
pub(crate) fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

/// Prints a client error as `error: CODE: MESSAGE` (with `(outcome
/// uncertain)` when a mutation may have run) and returns the failure code.
pub fn client_fail(error: &ClientError) -> ExitCode {
    match error {
        ClientError::Remote(e) => eprintln!("error: {e}"),
        ClientError::InvalidUse(message) => eprintln!("error: {}: {message}", error.code()),
        other => {
            let uncertain = if other.is_uncertain() {
                " (outcome uncertain)"
            } else {
                ""
            };
            eprintln!("error: {}: {other}{uncertain}", other.code());
        }
    }
    ExitCode::FAILURE
}

/// Runs a client command's body on a current-thread runtime (the client's
/// reader and writer tasks run on the calling thread, which keeps round
/// trips short) and turns its error into the exit code.
pub(crate) fn run_client<F>(body: F) -> ExitCode
where
    F: Future<Output = Result<ExitCode, ClientError>>,
{
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    match runtime.block_on(body) {
        Ok(code) => code,
        Err(e) => client_fail(&e),
    }
}

/// A future that resolves on Ctrl-C (SIGINT) or, on Unix, SIGTERM. The
/// handlers are installed when this returns, so a signal that arrives
/// before the future is first polled is not lost. Must run inside a tokio
/// runtime.
pub fn interrupted() -> std::io::Result<impl Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}

/// The descriptor's space under `key` (`action_space`, ...) as a summary
/// such as `Box(float32, [4])`; `None` when absent or null. A document this
/// crate cannot parse is shown by its type name.
pub fn space_summary(descriptor: &Descriptor, key: &str) -> Option<String> {
    let parsed = match key {
        "action_space" => descriptor.action_space(),
        "observation_space" => descriptor.observation_space(),
        "context_space" => descriptor.context_space(),
        _ => None,
    };
    if let Some(space) = parsed {
        return Some(space.to_string());
    }
    let doc = descriptor.get(key).filter(|v| !v.is_null())?;
    Some(match crate::host::Space::from_value(doc) {
        Ok(space) => space.to_string(),
        Err(e) => format!(
            "{} ({e})",
            doc.get("type")
                .and_then(crate::Value::as_str)
                .unwrap_or("unknown space")
        ),
    })
}

/// Writes `text` to standard output. A closed pipe (`call … | head`) is not
/// an error of this command: the process ends quietly, with success, where
/// `print!` would panic with a backtrace.
pub(crate) fn write_out(text: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(text).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// The span of the command line's own start-up session (the banner's
/// descriptors): its sessions' events below `WARN` are not logged, so that
/// `serve` logs no session before a client comes.
pub(super) const STARTUP_SPAN: &str = "startup_describe";
