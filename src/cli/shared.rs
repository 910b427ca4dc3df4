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
    /// Send `Authorization: Bearer TOKEN` in the WebSocket handshake. A
    /// token on the command line is visible to every local user (`ps`):
    /// prefer --token-file or the UNIENV_TOKEN environment variable.
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the bearer token from FILE (its first line; keep the file
    /// readable by you only). Without --token or --token-file, the token is
    /// taken from the UNIENV_TOKEN environment variable when it is set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
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
        config.token = resolve_token(self.token.as_deref(), self.token_file.as_deref())?;
        config.ca_file = self.ca_file.clone();
        Ok(config)
    }

    /// Connects (inside a tokio runtime).
    pub async fn connect(&self, discover: bool) -> Result<Client, ClientError> {
        let config = self.config(discover).map_err(ClientError::invalid_use)?;
        Client::connect(&self.url, config).await
    }
}

/// The environment variable a bearer token is taken from when neither
/// `--token` nor `--token-file` is given.
pub const TOKEN_ENV: &str = "UNIENV_TOKEN";

/// The environment variable a relay's host token is taken from when neither
/// `--host-token` nor `--host-token-file` is given (`relay`, `serve --dial`).
pub const HOST_TOKEN_ENV: &str = "UNIENV_HOST_TOKEN";

/// Where one kind of token may come from: its flag, the flag of a file
/// holding it, and an environment variable.
#[derive(Debug, Clone, Copy)]
pub struct TokenSources {
    /// The flag giving the token itself (`--token`).
    pub flag: &'static str,
    /// The flag naming a file whose first line is the token (`--token-file`).
    pub file_flag: &'static str,
    /// The environment variable read when neither flag is given.
    pub env: &'static str,
}

/// A client's (or a server's) bearer token.
pub const CLIENT_TOKEN: TokenSources = TokenSources {
    flag: "--token",
    file_flag: "--token-file",
    env: TOKEN_ENV,
};

/// A relay's host token.
pub const HOST_TOKEN: TokenSources = TokenSources {
    flag: "--host-token",
    file_flag: "--host-token-file",
    env: HOST_TOKEN_ENV,
};

/// The bearer token of a command: `--token`, else the first line of
/// `--token-file`, else `UNIENV_TOKEN` when set; `None` when none is given.
/// A token that is empty once trimmed (an empty file, `UNIENV_TOKEN=`)
/// is an error naming where it came from: it would turn authentication
/// off (a server) or always be refused (a client).
pub fn resolve_token(
    flag: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<Option<String>, String> {
    resolve_token_of(&CLIENT_TOKEN, flag, file)
}

/// [`resolve_token`] for the token kind `sources` names.
pub fn resolve_token_of(
    sources: &TokenSources,
    flag: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<Option<String>, String> {
    let env = || std::env::var(sources.env).ok();
    resolve_token_from(sources, flag, file, env)
}

/// [`resolve_token_of`] with the environment variable's value given.
pub(crate) fn resolve_token_from(
    sources: &TokenSources,
    flag: Option<&str>,
    file: Option<&std::path::Path>,
    env: impl FnOnce() -> Option<String>,
) -> Result<Option<String>, String> {
    let (token, source) = if let Some(t) = flag {
        (t.to_string(), sources.flag.to_string())
    } else if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{} {}: {e}", sources.file_flag, path.display()))?;
        warn_if_shared(path);
        let first = text.lines().next().unwrap_or_default().to_string();
        (first, format!("{} {}", sources.file_flag, path.display()))
    } else if let Some(t) = env() {
        (t, sources.env.to_string())
    } else {
        return Ok(None);
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(format!(
            "the token from {source} is empty: give a non-empty token, or none"
        ));
    }
    Ok(Some(token.to_string()))
}

/// Warns when a token file can be read by other users.
fn warn_if_shared(path: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                eprintln!(
                    "warning: --token-file {} can be read by other users (chmod 600 it)",
                    path.display()
                );
            }
        }
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

/// Whether a client's connection was refused by a relay's root (a relay's
/// URL given where a server's was expected).
pub(crate) fn is_relay_root(e: &ClientError) -> bool {
    use crate::client::ConnectFailure;
    matches!(e, ClientError::Connect(ConnectFailure::Refused { source, .. })
        if crate::relay::ListError::is_relay_root(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--token` first, then the file's first line, then the environment;
    /// empty tokens are errors naming their source.
    #[test]
    fn token_sources_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "from-file\nignored\n").unwrap();
        let env = || Some("from-env".to_string());
        let none = || None;
        assert_eq!(
            resolve_token_from(&CLIENT_TOKEN, Some("flag"), Some(&file), env).unwrap(),
            Some("flag".into())
        );
        assert_eq!(
            resolve_token_from(&CLIENT_TOKEN, None, Some(&file), env).unwrap(),
            Some("from-file".into())
        );
        assert_eq!(
            resolve_token_from(&CLIENT_TOKEN, None, None, env).unwrap(),
            Some("from-env".into())
        );
        assert_eq!(
            resolve_token_from(&CLIENT_TOKEN, None, None, none).unwrap(),
            None
        );
        std::fs::write(&file, "\n").unwrap();
        let e = resolve_token_from(&CLIENT_TOKEN, None, Some(&file), none).unwrap_err();
        assert!(e.contains("--token-file") && e.contains("empty"), "{e}");
        let e = resolve_token_from(&CLIENT_TOKEN, None, None, || Some(" ".into())).unwrap_err();
        assert!(e.contains(TOKEN_ENV), "{e}");
        let missing = dir.path().join("missing");
        let e = resolve_token_from(&CLIENT_TOKEN, None, Some(&missing), none).unwrap_err();
        assert!(e.contains("missing"), "{e}");
        // A relay's host token names its own flags and variable.
        let e = resolve_token_from(&HOST_TOKEN, None, Some(&file), none).unwrap_err();
        assert!(e.contains("--host-token-file"), "{e}");
        let e = resolve_token_from(&HOST_TOKEN, None, None, || Some("".into())).unwrap_err();
        assert!(e.contains(HOST_TOKEN_ENV), "{e}");
        assert_eq!(
            resolve_token_from(&HOST_TOKEN, None, None, env).unwrap(),
            Some("from-env".into())
        );
    }
}
