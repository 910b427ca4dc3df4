//! Fairness under load (BENCHMARKS.md, "Fairness under load"): a controller
//! stepping `cartpole` through our client, alone and then while `N`
//! sessions each keep `K` `discover`s in flight against the same server;
//! prints the controller's steps/s both ways and their ratio (SPEC §6,
//! "Fair queues": the controller should keep at least half its rate).
//!
//! Everything runs in this process, over loopback WebSocket: the server on
//! a tokio runtime of its own (2 workers, as `unienv-remote serve` on a
//! 2-vCPU machine), the hammering sessions on another (2 workers), the
//! controller on our blocking client.
//!
//! Run: `cargo bench --bench fairness`. Environment:
//! `FAIRNESS_SESSIONS` (default 500), `FAIRNESS_IN_FLIGHT` (default 8),
//! `FAIRNESS_SECONDS` per measurement (default 5). A smoke run:
//! `FAIRNESS_SESSIONS=10 FAIRNESS_IN_FLIGHT=2 FAIRNESS_SECONDS=0.5 cargo bench --bench fairness`.
//! Each session uses a file descriptor at both ends: 500 sessions need an
//! open-file limit above 1,000 (`ulimit -n`).

use futures_util::{SinkExt, StreamExt};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::client::{blocking, ClientConfig};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{dict, Codec, Value};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Steps `cartpole` for `seconds`; steps per second and the 99th
/// percentile step time in ms.
fn control(client: &blocking::Client, seconds: f64) -> (f64, f64) {
    let env = client.env("cartpole").expect("cartpole");
    env.reset(Default::default()).expect("reset");
    let mut samples = Vec::new();
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(seconds);
    let mut action = 0;
    while Instant::now() < until {
        let t = Instant::now();
        let out = env.step(Value::Int(action)).expect("step");
        samples.push(t.elapsed());
        action = 1 - action;
        let done = |v: &Value| v.truthy().unwrap_or(true);
        if done(&out.terminated) || done(&out.truncated) {
            env.reset(Default::default()).expect("reset");
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    samples.sort();
    let p99 = samples
        .get((samples.len() as f64 * 0.99) as usize)
        .or(samples.last())
        .map_or(0.0, |d| d.as_secs_f64() * 1e3);
    (samples.len() as f64 / elapsed, p99)
}

/// One hammering session: hello, then `in_flight` discovers kept in flight
/// until `stop`; counts the answers.
async fn hammer(
    url: String,
    in_flight: usize,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicUsize>,
    answers: Arc<AtomicU64>,
) {
    // Hundreds of connects at once overflow the server's pending handshakes
    // (256 by default): the oldest are answered 503, to be retried.
    let mut attempt = 0u64;
    let mut ws = loop {
        match tokio_tungstenite::connect_async(url.as_str()).await {
            Ok((ws, _)) => break ws,
            Err(_) if attempt < 20 && !stop.load(Ordering::Relaxed) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(10 * attempt)).await;
            }
            Err(e) => {
                eprintln!("a hammering session could not connect: {e}");
                return;
            }
        }
    };
    let codec = Codec::default();
    let hello = dict! { "version" => 1, "type" => "request", "request_id" => "h", "session_id" => (), "op" => "hello", "resource_id" => () };
    let encoded = codec.encode(&Value::Dict(hello)).expect("hello encodes");
    if ws.send(Message::Binary(encoded.into())).await.is_err() {
        return;
    }
    let session = match ws.next().await {
        Some(Ok(m)) => codec
            .decode(m.into_data())
            .ok()
            .and_then(|r| r.get("result")?.get("session_id").cloned()),
        _ => None,
    };
    let Some(session) = session else {
        eprintln!("a hammering session got no hello answer");
        return;
    };
    let discover = dict! { "version" => 1, "type" => "request", "request_id" => "d", "session_id" => session, "op" => "discover", "resource_id" => () };
    let discover: bytes::Bytes = codec
        .encode(&Value::Dict(discover))
        .expect("discover encodes")
        .into();
    ready.fetch_add(1, Ordering::Relaxed);
    for _ in 0..in_flight {
        if ws.send(Message::Binary(discover.clone())).await.is_err() {
            return;
        }
    }
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(200), ws.next()).await {
            Ok(Some(Ok(Message::Binary(_)))) => {
                answers.fetch_add(1, Ordering::Relaxed);
                if ws.send(Message::Binary(discover.clone())).await.is_err() {
                    return;
                }
            }
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(_) => return,
        }
    }
    let _ = ws.close(None).await;
}

fn main() {
    let sessions: usize = env_or("FAIRNESS_SESSIONS", 500);
    let in_flight: usize = env_or("FAIRNESS_IN_FLIGHT", 8);
    let seconds: f64 = env_or("FAIRNESS_SECONDS", 5.0);
    println!(
        "fairness: {sessions} sessions x {in_flight} discovers in flight, {seconds} s per measurement"
    );

    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("server runtime");
    let config = ServerConfig {
        max_connections: sessions + 16,
        ..ServerConfig::default()
    };
    let mut builder = Server::builder(config);
    unienv_remote::sims::register(&mut builder).expect("the built-in simulators");
    let server = builder.start().expect("a valid configuration");
    let listener = server_rt
        .block_on(server.listen("127.0.0.1:0"))
        .expect("listen on loopback");
    let url = format!("ws://{}", listener.local_addr());

    let client = blocking::Client::connect(&url, ClientConfig::default()).expect("controller");
    // Warm-up, then the controller alone.
    control(&client, seconds.min(0.5));
    let (alone, alone_p99) = control(&client, seconds);
    println!("  controller alone:      {alone:>10.0} steps/s   p99 {alone_p99:>8.2} ms");

    let load_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("load runtime");
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let answers = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..sessions)
        .map(|_| {
            load_rt.spawn(hammer(
                url.clone(),
                in_flight,
                stop.clone(),
                ready.clone(),
                answers.clone(),
            ))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready.load(Ordering::Relaxed) < sessions && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let connected = ready.load(Ordering::Relaxed);
    let before = answers.load(Ordering::Relaxed);
    let started = Instant::now();
    let (loaded, loaded_p99) = control(&client, seconds);
    let discovers =
        (answers.load(Ordering::Relaxed) - before) as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    println!(
        "  controller under load: {loaded:>10.0} steps/s   p99 {loaded_p99:>8.2} ms   ({connected} sessions answered {discovers:.0} discovers/s)"
    );
    println!(
        "  ratio (under load / alone): {:.2}",
        loaded / alone.max(1e-9)
    );
    load_rt.block_on(async {
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    });
    drop(client);
    server_rt.block_on(server.shutdown());
}
