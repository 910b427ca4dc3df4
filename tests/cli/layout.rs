//! The crate's layout, as the architecture review asked: no circle in the
//! file-level import graph of `src/` (scripts/import_cycles.py), lower
//! layers never importing higher ones (the transport, codec and protocol
//! never reach the server, client or command line), and no source file over
//! 800 lines outside tests. The Python extension's crate (`python/src`) is
//! held to the same: no circle, and its layers (`common`, then `client`,
//! then `host`) in one direction.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_import_graph_has_no_cycles() {
    let out = Command::new("python3")
        .arg(root().join("scripts/import_cycles.py"))
        .arg(root().join("src"))
        .output()
        .expect("python3 runs scripts/import_cycles.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.trim_end().ends_with("0 cycle(s)"),
        "circular imports between files of src/:\n{text}"
    );
}

/// Runs scripts/import_cycles.py on `src`: (success, stdout).
fn import_check(src: &Path) -> (bool, String) {
    let out = Command::new("python3")
        .arg(root().join("scripts/import_cycles.py"))
        .arg(src)
        .output()
        .expect("python3 runs scripts/import_cycles.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), text)
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let (ok, text) = import_check(&root().join("src"));
    assert!(
        text.lines().any(|l| l == "0 layering violation(s)") && ok,
        "a module imports one of a higher layer (LAYERS in scripts/import_cycles.py):\n{text}"
    );
}

/// The direction check finds what it is there for: a transport file that
/// imports the server (as `transport` once imported `server::budget`), in a
/// small tree written here.
#[test]
fn the_layer_check_reports_a_transport_importing_the_server() {
    let dir = std::env::temp_dir().join(format!("unienv-layout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (file, text) in [
        ("lib.rs", "pub mod server;\npub mod transport;\n"),
        (
            "server/mod.rs",
            "pub mod budget;\nuse crate::transport::Wire;\n",
        ),
        ("server/budget.rs", "pub struct Account;\n"),
        (
            "transport/mod.rs",
            "use crate::server::budget::Account;\npub struct Wire(Account);\n",
        ),
    ] {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a temp dir");
        std::fs::write(&path, text).expect("a temp file");
    }
    let (ok, text) = import_check(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "{text}");
    assert!(
        text.contains("transport may not import server")
            && text.contains("1 layering violation(s)"),
        "{text}"
    );
}

#[test]
fn the_python_extension_has_no_cycles_and_keeps_its_layers() {
    let (ok, text) = import_check(&root().join("python/src"));
    assert!(
        ok && text.lines().any(|l| l == "0 layering violation(s)")
            && text.trim_end().ends_with("0 cycle(s)"),
        "python/src: a cycle, or a layer importing a higher one (PY_LAYERS in scripts/import_cycles.py):\n{text}"
    );
}

/// The check of `python/src` finds a cycle between two host files and the
/// shared layer importing the host, in a small tree written here.
#[test]
fn the_python_check_reports_a_cycle_and_a_common_file_importing_the_host() {
    let dir = std::env::temp_dir().join(format!("unienv-pylayout-{}", std::process::id()));
    let src = dir.join("python/src");
    let _ = std::fs::remove_dir_all(&dir);
    for (file, text) in [
        ("lib.rs", "pub mod common;\npub mod host;\n"),
        ("common/mod.rs", "pub mod convert;\n"),
        (
            "common/convert.rs",
            "use crate::host::server::Server;\npub struct Value(Server);\n",
        ),
        ("host/mod.rs", "pub mod fast;\npub mod server;\n"),
        (
            "host/server.rs",
            "use crate::host::fast::Fast;\npub struct Server(Fast);\n",
        ),
        (
            "host/fast.rs",
            "use crate::host::server::Server;\npub struct Fast(Box<Server>);\n",
        ),
    ] {
        let path = src.join(file);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a temp dir");
        std::fs::write(&path, text).expect("a temp file");
    }
    let (ok, text) = import_check(&src);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "{text}");
    assert!(
        text.contains("CYCLE: ")
            && text.contains("host/fast.rs")
            && text.contains("1 cycle(s)")
            && text.contains("common may not import host")
            && text.contains("1 layering violation(s)"),
        "{text}"
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    rust_files(&root().join("python/src"), &mut files);
    assert!(files.len() > 50, "found only {} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter(|p| {
            !p.file_stem()
                .is_some_and(|s| s.to_string_lossy().ends_with("_tests"))
        })
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).expect("a source file is UTF-8");
            // Inline unit tests do not count.
            let code = text
                .split("\n#[cfg(test)]\nmod tests {")
                .next()
                .unwrap_or("");
            let lines = code.lines().count();
            (lines > 800).then(|| format!("{} ({lines} lines)", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "source files over 800 lines: {long:?}");
}
