//! Shared helpers for integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The Python interpreter that has the reference implementation installed.
///
/// `UNIENV_REF_PYTHON` wins; otherwise `.venv-ref/bin/python` at the crate
/// root. Interop tests fail loudly when neither exists, unless
/// `UNIENV_SKIP_INTEROP=1` is set, in which case `None` is returned and the
/// caller returns early (printing why).
pub fn ref_python() -> Option<PathBuf> {
    if std::env::var("UNIENV_SKIP_INTEROP").as_deref() == Ok("1") {
        eprintln!("UNIENV_SKIP_INTEROP=1: skipping an interop test");
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
pub mod raw;

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
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let mut cmd = Command::new(python);
        cmd.arg(py_script("ref_fixture_server.py"))
            .arg(port.to_string());
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
