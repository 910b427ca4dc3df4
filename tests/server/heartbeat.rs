//! Heartbeats: a peer that stops answering (a loopback TCP proxy that stops
//! forwarding, its sockets left open) is noticed by WebSocket pings, on the
//! client (connection loss, in-flight mutations uncertain) and on the server
//! (the session is dropped and its control released). Intervals are short
//! here; the bounds are generous and nothing is timed more precisely. An
//! idle connection is shown alive by the pongs that keep it so: the proxy
//! counts what it forwards, and the tests wait for enough of them to span
//! twice the timeout, never for a fixed time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::NdArray;

/// Generous: "eventually", not a timing assertion.
const EVENTUALLY: Duration = Duration::from_secs(30);

/// Heartbeat settings of these tests: a ping after 100 ms of silence, the
/// peer given up after 1.5 s without a byte.
const INTERVAL: Duration = Duration::from_millis(100);
const TIMEOUT: Duration = Duration::from_millis(1500);

/// Pongs that span twice [`TIMEOUT`]: a ping is sent only after [`INTERVAL`]
/// of silence, so this many answered pings take at least 3 s, and a
/// connection still open after them was kept open by them.
const PONGS: usize = 2 * (TIMEOUT.as_millis() / INTERVAL.as_millis()) as usize;

/// A loopback proxy to `target`; `pause` makes every connection through it
/// stop forwarding in both directions, its sockets staying open (a peer
/// that vanished without closing: a paused process, a cut network). It
/// counts the reads it forwards each way: on an idle connection, each is one
/// heartbeat frame.
struct Proxy {
    addr: SocketAddr,
    paused: Arc<AtomicBool>,
    /// Reads forwarded towards the server (the client's frames).
    to_server: watch::Receiver<usize>,
    /// Reads forwarded towards the client (the server's frames).
    to_client: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let paused = Arc::new(AtomicBool::new(false));
        let flag = paused.clone();
        let (up, to_server) = watch::channel(0);
        let (down, to_client) = watch::channel(0);
        let (up, down) = (Arc::new(up), Arc::new(down));
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect(target).await else {
                    continue;
                };
                let (ir, iw) = inbound.into_split();
                let (or, ow) = outbound.into_split();
                tokio::spawn(pump(ir, ow, flag.clone(), up.clone()));
                tokio::spawn(pump(or, iw, flag.clone(), down.clone()));
            }
        });
        Proxy {
            addr,
            paused,
            to_server,
            to_client,
            task,
        }
    }

    fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    fn pause(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }
}

/// Waits until `count` more reads than now have been forwarded: the event,
/// not a time (the bound is only "eventually").
async fn forwarded(counter: &watch::Receiver<usize>, count: usize, what: &str) {
    let mut counter = counter.clone();
    let target = *counter.borrow_and_update() + count;
    tokio::time::timeout(EVENTUALLY, counter.wait_for(|n| *n >= target))
        .await
        .unwrap_or_else(|_| panic!("fewer than {count} {what} within {EVENTUALLY:?}"))
        .expect("the proxy is running");
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    paused: Arc<AtomicBool>,
    count: Arc<watch::Sender<usize>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if paused.load(Ordering::SeqCst) {
            // Hold everything, forever: the sockets stay open.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        count.send_modify(|c| *c += 1);
    }
}

async fn fixture_server(config: ServerConfig) -> (Server, Listener, SocketAddr) {
    let mut builder = Server::builder(config);
    unienv_remote::fixtures::register(&mut builder).unwrap();
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr();
    (server, listener, addr)
}

fn quiet_server() -> ServerConfig {
    // The server's own heartbeat off: the client's alone is tested.
    ServerConfig {
        heartbeat_interval: None,
        ..ServerConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_notices_a_vanished_server_and_reports_uncertainty() {
    let (server, _listener, addr) = fixture_server(quiet_server()).await;
    let proxy = Proxy::start(addr).await;
    let config = ClientConfig::default()
        .with_discover(false)
        .with_heartbeat(Some(INTERVAL), TIMEOUT);
    let client = Client::connect(&proxy.url(), config).await.unwrap();
    let env = client.env("counter").await.unwrap();
    env.reset(ResetArgs::with_seed(1)).await.unwrap();
    proxy.pause();
    // A step in flight when the server vanishes: its outcome is unknown.
    // The request timeout (30 s by default) is not what ends it.
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(EVENTUALLY, env.step(NdArray::from_vec(vec![1.0f32, 2.0])))
        .await
        .expect("the heartbeat never noticed the vanished server")
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(25));
    assert!(err.is_uncertain(), "{err:?}");
    assert_eq!(err.code(), "uncertain_outcome");
    assert!(err.to_string().contains("heartbeat"), "{err}");
    assert!(client.is_closed());
    // Later calls fail at once, naming the cause.
    let later = env.reset(ResetArgs::default()).await.unwrap_err();
    assert!(later.to_string().contains("heartbeat"), "{later}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_with_a_live_server_stays_open() {
    let (server, _listener, addr) = fixture_server(quiet_server()).await;
    let proxy = Proxy::start(addr).await;
    let config = ClientConfig::default()
        .with_discover(false)
        .with_heartbeat(Some(INTERVAL), TIMEOUT);
    let client = Client::connect(&proxy.url(), config).await.unwrap();
    let env = client.env("counter").await.unwrap();
    // Idle for two timeouts: the server's pongs (its only frames, its own
    // heartbeat is off) keep it alive.
    forwarded(&proxy.to_client, PONGS, "pongs from the server").await;
    assert!(!client.is_closed());
    env.reset(ResetArgs::with_seed(1)).await.unwrap();
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_drops_a_vanished_peer_and_releases_its_control() {
    let config = ServerConfig {
        heartbeat_interval: Some(INTERVAL),
        heartbeat_timeout: TIMEOUT,
        ..ServerConfig::default()
    };
    let (server, _listener, addr) = fixture_server(config).await;
    let proxy = Proxy::start(addr).await;
    // The vanishing client sends no pings of its own.
    let gone = Client::connect(
        &proxy.url(),
        ClientConfig::default()
            .with_discover(false)
            .with_heartbeat(None, Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let env = gone.env("counter").await.unwrap();
    env.reset(ResetArgs::with_seed(1)).await.unwrap();

    let other = Client::connect(
        &format!("ws://{addr}"),
        ClientConfig::default().with_discover(false),
    )
    .await
    .unwrap();
    let contender = other.env("counter").await.unwrap();
    let refused = contender.reset(ResetArgs::with_seed(2)).await.unwrap_err();
    assert_eq!(refused.code(), "ownership_conflict");

    // Idle but alive: the server's pings are answered (the client's pongs,
    // its only frames), nothing is dropped.
    forwarded(&proxy.to_server, PONGS, "pongs from the client").await;
    assert_eq!(server.session_count(), 2);

    proxy.pause();
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        match contender.reset(ResetArgs::with_seed(2)).await {
            Ok(_) => break,
            Err(e) if e.code() == "ownership_conflict" => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the vanished peer's control was never released"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(server.session_count(), 1);
    drop(gone);
    other.close().await;
    server.shutdown().await;
}
