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
pub mod raw;
