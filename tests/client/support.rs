//! Servers for the client tests: ours (in-process, WebSocket on
//! 127.0.0.1:0) and the Python reference hosting the same fixture registry
//! (`tests/py/ref_fixture_server.py`, started by `common::RefServer` on a
//! port it picks, killed on drop).
#![allow(dead_code)]

use std::time::{Duration, Instant};
use unienv_remote::client::{Client, ClientConfig, NodeProxy, OperationKind};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::Value;

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
    reference: Option<crate::common::RefServer>,
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
        // Dropping the reference server kills it.
        self.reference = None;
    }
}

/// Our server with the whole fixture registry, listening on 127.0.0.1:0.
pub async fn ours() -> Target {
    ours_with(ServerConfig::default()).await
}

/// Our server with a configuration.
pub async fn ours_with(config: ServerConfig) -> Target {
    let (server, listener) =
        crate::common::listen(crate::common::fixture_server_with(config, |_| Ok(()))).await;
    Target {
        kind: Kind::Ours,
        url: listener.url(),
        ours: Some((server, listener)),
        reference: None,
    }
}

/// The reference server, or `None` when interop tests are skipped
/// (`UNIENV_SKIP_INTEROP=1`). Panics when the reference is missing.
pub fn reference() -> Option<Target> {
    reference_with_idle(None)
}

/// The reference server with an idle timeout (seconds) for factory domains.
pub fn reference_with_idle(idle_timeout: Option<f64>) -> Option<Target> {
    let python = crate::common::ref_python()?;
    let server = crate::common::RefServer::start(&python, idle_timeout);
    Some(Target {
        kind: Kind::Reference,
        url: server.url.clone(),
        ours: None,
        reference: Some(server),
    })
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

/// Both servers for a blocking test (plain threads): ours on the returned
/// runtime (one worker), and the reference when it is available.
pub fn blocking_targets() -> (tokio::runtime::Runtime, Vec<Target>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut all = vec![runtime.block_on(ours())];
    all.extend(reference());
    (runtime, all)
}

/// Runs a blocking `scenario` against both servers and asserts that they
/// gave the same transcript.
pub fn same_transcript_on_both_servers(scenario: impl Fn(&Target) -> Vec<String>) {
    let (_runtime, targets) = blocking_targets();
    let transcripts: Vec<(Kind, Vec<String>)> =
        targets.iter().map(|t| (t.kind, scenario(t))).collect();
    assert_same(&transcripts);
}

/// Resets a node tree inside a `reset` operation of its domain.
pub async fn reset_in_operation(client: &Client, node: &NodeProxy, seed: i64) {
    client
        .with_operation(node.id(), OperationKind::Reset, async |_| {
            node.reset(0, &ResetArgs::with_seed(seed)).await
        })
        .await
        .expect("reset operation");
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
