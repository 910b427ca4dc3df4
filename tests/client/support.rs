//! Servers for the client tests: ours (in-process, WebSocket on
//! 127.0.0.1:0) and the Python reference hosting the same fixture registry
//! (`tests/py/ref_fixture_server.py`, spawned on a free port and killed on
//! drop).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::{fixtures, Value};

/// Which implementation a target runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// This crate's server.
    Ours,
    /// The Python reference server.
    Reference,
}

/// A running server the tests connect to.
pub struct Target {
    pub kind: Kind,
    pub url: String,
    ours: Option<(Server, Listener)>,
    child: Option<Child>,
}

impl Target {
    /// Connects a client with the given configuration.
    pub async fn connect(&self, config: ClientConfig) -> Client {
        Client::connect(&self.url, config)
            .await
            .unwrap_or_else(|e| panic!("connect to {:?} at {}: {e}", self.kind, self.url))
    }

    /// Connects a client with the default configuration.
    pub async fn client(&self) -> Client {
        self.connect(ClientConfig::default()).await
    }

    /// Our server, when this is ours.
    pub fn server(&self) -> Option<&Server> {
        self.ours.as_ref().map(|(s, _)| s)
    }

    /// Stops the server (ours: shutdown; reference: kill).
    pub async fn stop(&mut self) {
        if let Some((server, listener)) = self.ours.take() {
            listener.stop().await;
            server.shutdown().await;
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Our server with the whole fixture registry, listening on 127.0.0.1:0.
pub async fn ours() -> Target {
    ours_with(ServerConfig::default()).await
}

/// Our server with a configuration.
pub async fn ours_with(config: ServerConfig) -> Target {
    let mut builder = Server::builder(config);
    fixtures::register(&mut builder).expect("register fixtures");
    let server = builder.start();
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    Target {
        kind: Kind::Ours,
        url: listener.url(),
        ours: Some((server, listener)),
        child: None,
    }
}

/// A free TCP port on 127.0.0.1 (bound once to choose it).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// The reference server, or `None` when interop tests are skipped
/// (`UNIENV_SKIP_INTEROP=1`). Panics when the reference is missing.
pub fn reference() -> Option<Target> {
    reference_with_idle(None)
}

/// The reference server with an idle timeout (seconds) for factory domains.
pub fn reference_with_idle(idle_timeout: Option<f64>) -> Option<Target> {
    let python = crate::common::ref_python()?;
    let script = crate::common::py_script("ref_fixture_server.py");
    for _attempt in 0..3 {
        let port = free_port();
        let mut child = Command::new(&python)
            .arg("-u")
            .arg(&script)
            .arg(port.to_string())
            .args(idle_timeout.map(|t| t.to_string()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the reference server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line.trim().starts_with("ws://") => {
                return Some(Target {
                    kind: Kind::Reference,
                    url: line.trim().to_string(),
                    ours: None,
                    child: Some(child),
                });
            }
            _ => {
                // The port may have been taken in between: try another.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    panic!("the reference server did not start");
}

/// Both servers (the reference only when interop tests run).
pub async fn targets() -> Vec<Target> {
    let mut all = Vec::with_capacity(2);
    // Start the slower one first; its startup overlaps nothing else here.
    let reference = tokio::task::spawn_blocking(reference)
        .await
        .expect("reference startup");
    // Transcripts are compared with the reference's, which always repeats an
    // env's fields in its own boundary snapshot: ask our server to do the same.
    all.push(
        ours_with(ServerConfig {
            env_boundary_snapshots: true,
            ..ServerConfig::default()
        })
        .await,
    );
    all.extend(reference);
    all
}

/// Asserts that every target produced the same transcript.
/// Set `UNIENV_PRINT_TRANSCRIPTS=1` to print them.
pub fn assert_same(transcripts: &[(Kind, Vec<String>)]) {
    if std::env::var_os("UNIENV_PRINT_TRANSCRIPTS").is_some() {
        for (kind, lines) in transcripts {
            eprintln!("--- {kind:?}");
            for line in lines {
                eprintln!("{line}");
            }
        }
    }
    if let Some((first_kind, first)) = transcripts.first() {
        for (kind, other) in &transcripts[1..] {
            for (i, (a, b)) in first.iter().zip(other).enumerate() {
                assert_eq!(a, b, "line {i} differs between {first_kind:?} and {kind:?}");
            }
            assert_eq!(
                first.len(),
                other.len(),
                "transcripts of {first_kind:?} and {kind:?} differ in length"
            );
        }
    }
}

/// The f64 elements of an array value (panics otherwise).
pub fn floats(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.to_f64_vec(),
        other => panic!("expected an array, got {other}"),
    }
}

/// Waits until `f` holds (polling every 5 ms) or panics after `limit`.
pub async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < limit,
            "condition not met within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
