//! Shared helpers for integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// Whether a group of tests is skipped on purpose: `var` (e.g.
/// `UNIENV_SKIP_INTEROP`) is `1`. Says so on stderr, naming what the skip
/// gives up. On CI (`CI=true`) a skip is a failure with that reason: CI on a
/// fresh machine must run every test, never pass by leaving some out.
pub fn skipped(var: &str, what: &str) -> bool {
    if std::env::var(var).as_deref() != Ok("1") {
        return false;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{var}=1 with CI=true: CI must not skip {what}; unset {var} (scripts/test.sh sets up what these tests need)"
    );
    eprintln!("{var}=1: skipping {what}");
    true
}

/// The Python interpreter that has the reference implementation installed.
///
/// `UNIENV_REF_PYTHON` wins; otherwise `.venv-ref/bin/python` at the crate
/// root. Interop tests fail loudly when neither exists, unless
/// `UNIENV_SKIP_INTEROP=1` is set (and not `CI=true`), in which case `None`
/// is returned and the caller returns early, or (for tests run against both
/// servers) checks our server only: see [`skipped`].
pub fn ref_python() -> Option<PathBuf> {
    if skipped(
        "UNIENV_SKIP_INTEROP",
        "the comparisons with the reference implementation (the interop tests, \
         and the reference half of the tests run against both servers)",
    ) {
        return None;
    }
    let path = match std::env::var_os("UNIENV_REF_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-ref/bin/python"),
    };
    assert!(
        path.exists(),
        "the reference Python ({}) is missing: run ./scripts/test.sh, which sets it up, \
         or set UNIENV_SKIP_INTEROP=1 to skip interop tests",
        path.display()
    );
    Some(path)
}

/// Path of a file under `tests/py/`.
pub fn py_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(name)
}

/// Runs a Python script from `tests/py/` with the reference interpreter and
/// returns its standard output; panics with its standard error on failure.
pub fn run_python(
    python: &std::path::Path,
    script: &str,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Vec<u8> {
    use std::io::Write;
    let mut cmd = Command::new(python);
    cmd.arg(py_script(script)).args(args);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("start python");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input)
            .expect("write stdin");
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().expect("python output");
    assert!(
        out.status.success(),
        "python {script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

pub mod envs;
pub mod faults;
pub mod logs;
pub mod pki;
pub mod raw;

use unienv_remote::server::{Listener, RegisterError, Server, ServerBuilder, ServerConfig};

/// Our server with the conformance fixture registry, then whatever `extra`
/// registers, started (not listening: connect in memory or call `listen`).
pub fn fixture_server_with(
    config: ServerConfig,
    extra: impl FnOnce(&mut ServerBuilder) -> Result<(), RegisterError>,
) -> Server {
    let mut b = Server::builder(config);
    unienv_remote::fixtures::register(&mut b).expect("the fixture registry");
    extra(&mut b).expect("the test's own resources");
    b.start().expect("a valid server configuration")
}

/// Our server with the conformance fixture registry, default configuration.
pub fn fixture_server() -> Server {
    fixture_server_with(ServerConfig::default(), |_| Ok(()))
}

/// `server` listening on 127.0.0.1, on a port the OS picks.
pub async fn listen(server: Server) -> (Server, Listener) {
    let listener = server
        .listen("127.0.0.1:0")
        .await
        .expect("listen on loopback");
    (server, listener)
}

/// For tests that are not async (they run Python): a runtime of their own
/// and, on it, our server with what `register` adds (e.g.
/// `unienv_remote::fixtures::register` or `unienv_remote::sims::register`),
/// listening on 127.0.0.1:0.
pub fn serve_on_runtime(
    register: fn(&mut ServerBuilder) -> Result<(), RegisterError>,
) -> (tokio::runtime::Runtime, Server, Listener) {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let (server, listener) = runtime.block_on(async {
        let mut b = Server::builder(ServerConfig::default());
        register(&mut b).expect("registration");
        listen(b.start().expect("a valid server configuration")).await
    });
    (runtime, server, listener)
}

/// A reference (Python) fixture server on a free loopback port, killed on drop.
pub struct RefServer {
    child: std::process::Child,
    /// Its ws:// URL.
    pub url: String,
}

impl RefServer {
    /// Starts `tests/py/ref_fixture_server.py` and waits for its URL.
    pub fn start(python: &std::path::Path, idle_timeout: Option<f64>) -> RefServer {
        use std::io::BufRead;
        // Port 0: the server binds a port the OS picks and prints its URL.
        let mut cmd = Command::new(python);
        cmd.arg(py_script("ref_fixture_server.py")).arg("0");
        if let Some(idle) = idle_timeout {
            cmd.arg(idle.to_string());
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start the reference server");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reference server URL");
        assert!(
            line.starts_with("ws://"),
            "unexpected reference server output: {line:?}"
        );
        RefServer {
            child,
            url: line.trim().to_string(),
        }
    }
}

impl Drop for RefServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the ignored test `name` (its full path in this test binary, e.g.
/// `hostile::queued_responses_probe`) alone in a child process of this
/// binary, and asserts that it passed: for a test that changes what the
/// whole process has (its descriptor limit, tracing's cached interest).
pub fn run_alone_in_a_child(name: &str) {
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--ignored", "--exact", name, "--nocapture"])
        .output()
        .expect("the test binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}
