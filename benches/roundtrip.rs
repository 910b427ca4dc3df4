//! Step round trips side by side, in one run on one machine:
//!
//! - (a) our client ↔ our server, loopback WebSocket;
//! - (b) the reference Python client ↔ our server;
//! - (c) the reference Python client ↔ the reference Python server;
//! - (d) the floor: a raw TCP ping-pong with the same request and response sizes;
//! - (e) our Python client (`unienv_remote`, the Rust client under Python) ↔ our
//!   server, when the package is installed in the venv (build it with
//!   `maturin develop --release`, see BENCHMARKS.md);
//!
//! on `bench_state`, `bench_image` and `bench_batch64`, with the ratios a/d,
//! c/b, e/a and c/e; then the controller's step with 0, 16 and 64 observers subscribed and
//! with one observer that never reads; server memory per idle session (1,000
//! sessions); and the in-memory transport's round trip.
//!
//! Run: `cargo bench --bench roundtrip` (needs `.venv-ref`, which
//! `scripts/test.sh` creates, for (b) and (c); `UNIENV_REF_PYTHON` overrides).
//! `ROUNDTRIP_SECONDS` sets the time per measurement (default 3).

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::client::{blocking, ClientConfig};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{dict, Codec, Dict, NdArray, Value};

const ENVS: [&str; 3] = ["bench_state", "bench_image", "bench_batch64"];

/// The envs to measure (`ROUNDTRIP_ENVS=bench_state,...` narrows them).
fn envs() -> Vec<&'static str> {
    match std::env::var("ROUNDTRIP_ENVS") {
        Ok(list) => ENVS
            .iter()
            .copied()
            .filter(|e| list.split(',').any(|x| x == *e))
            .collect(),
        Err(_) => ENVS.to_vec(),
    }
}

#[derive(Clone, Copy, Debug)]
struct Stats {
    median_us: f64,
    p99_us: f64,
    steps_per_s: f64,
    n: usize,
}

impl Stats {
    fn from(mut samples: Vec<Duration>, elapsed: Duration) -> Stats {
        samples.sort();
        let n = samples.len();
        let at = |q: f64| samples[((n as f64 * q) as usize).min(n - 1)].as_secs_f64() * 1e6;
        Stats {
            median_us: at(0.5),
            p99_us: at(0.99),
            steps_per_s: n as f64 / elapsed.as_secs_f64(),
            n,
        }
    }
}

/// `ROUNDTRIP_ONLY=ours` runs only (a), `ROUNDTRIP_ONLY=memory` only the
/// in-memory round trip (for profiling).
fn only_ours() -> bool {
    std::env::var("ROUNDTRIP_ONLY").as_deref() == Ok("ours")
}

/// `ROUNDTRIP_ONLY=python` runs (a)–(e) and their ratios, nothing after them.
fn only_python() -> bool {
    std::env::var("ROUNDTRIP_ONLY").as_deref() == Ok("python")
}

/// `ROUNDTRIP_ONLY=floor` runs (a) and (d) with their ratio, nothing else.
fn only_floor() -> bool {
    std::env::var("ROUNDTRIP_ONLY").as_deref() == Ok("floor")
}

fn only_memory() -> bool {
    std::env::var("ROUNDTRIP_ONLY").as_deref() == Ok("memory")
}

fn seconds() -> f64 {
    std::env::var("ROUNDTRIP_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0)
}

/// Times `step` repeatedly for the configured duration, after a warm-up
/// (or exactly `ROUNDTRIP_STEPS` times, for instruction counting).
fn measure(mut step: impl FnMut()) -> Stats {
    if let Some(n) = std::env::var("ROUNDTRIP_STEPS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
    {
        let start = Instant::now();
        let samples: Vec<Duration> = (0..n.max(1))
            .map(|_| {
                let t = Instant::now();
                step();
                t.elapsed()
            })
            .collect();
        return Stats::from(samples, start.elapsed());
    }
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(300) {
        step();
    }
    let total = Duration::from_secs_f64(seconds());
    let mut samples = Vec::new();
    let start = Instant::now();
    loop {
        let t = Instant::now();
        step();
        samples.push(t.elapsed());
        if start.elapsed() >= total && samples.len() >= 20 {
            break;
        }
    }
    Stats::from(samples, start.elapsed())
}

fn action(env: &str) -> Value {
    if env == "bench_batch64" {
        Value::Array(NdArray::from_shape_vec(vec![64, 4], vec![0.0f32; 256]).unwrap())
    } else {
        Value::Array(NdArray::from_vec(vec![0.0f32; 4]))
    }
}

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("UNIENV_REF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-ref/bin/python"));
    p.exists().then_some(p)
}

/// Runs `benches/py/ref_roundtrip.py` against `url` with the `RemoteClient`
/// of `module` (`unienv_interface.remote`, the reference, or `unienv_remote`,
/// ours). Each env's figures come with the client's own CPU time per step.
fn python_roundtrips(python: &PathBuf, url: &str, module: &str) -> Vec<(String, Stats, f64)> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/py/ref_roundtrip.py");
    let out = Command::new(python)
        .arg(script)
        .arg(url)
        .arg(seconds().to_string())
        .arg(module)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the reference client");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some((
                v["env"].as_str()?.to_string(),
                Stats {
                    median_us: v["median_us"].as_f64()?,
                    p99_us: v["p99_us"].as_f64()?,
                    steps_per_s: v["steps_per_s"].as_f64()?,
                    n: v["n"].as_u64()? as usize,
                },
                v["client_cpu_us"].as_f64().unwrap_or(f64::NAN),
            ))
        })
        .collect()
}

/// The build profile of our Python package in the venv (`release` or
/// `debug`), or `None` when it is not installed there.
fn our_python_package(python: &PathBuf) -> Option<String> {
    let out = Command::new(python)
        .args([
            "-c",
            "import unienv_remote; print(unienv_remote._native.BUILD_PROFILE)",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Starts the reference fixture server; returns the child and its URL.
fn reference_server(python: &PathBuf) -> (std::process::Child, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/ref_fixture_server.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the reference server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().to_string())
}

/// The request and response sizes of one step of `env` on our server
/// (the exact envelopes our client and server exchange).
fn message_sizes(rt: &tokio::runtime::Runtime, url: &str, env: &str) -> (usize, usize) {
    rt.block_on(async {
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let codec = Codec::default();
        let send = |d: Dict| {
            let bytes = codec.encode(&Value::Dict(d)).unwrap();
            (bytes.len(), Message::Binary(Bytes::from(bytes)))
        };
        let mut req = dict! { "version" => 1, "type" => "request", "request_id" => "h", "session_id" => (), "op" => "hello", "resource_id" => () };
        let (_, m) = send(req.clone());
        ws.send(m).await.unwrap();
        let hello = ws.next().await.unwrap().unwrap().into_data();
        let hello = codec.decode(hello).unwrap();
        let session = hello.get("result").unwrap().get("session_id").cloned().unwrap();
        for (i, method) in ["reset", "step"].iter().enumerate() {
            req = dict! {
                "version" => 1, "type" => "request", "request_id" => format!("0123456789abcdef0123456789abcde{i}"),
                "session_id" => session.clone(), "op" => "call", "resource_id" => env,
                "method" => *method,
                "args" => if *method == "step" { Value::Tuple(vec![action(env)]) } else { Value::Tuple(vec![]) },
                "kwargs" => Dict::new(), "operation_id" => "0123456789abcdef0123456789abcdef",
            };
            let (n, m) = send(req.clone());
            ws.send(m).await.unwrap();
            let resp = ws.next().await.unwrap().unwrap().into_data();
            if *method == "step" {
                let release = dict! {
                    "version" => 1, "type" => "request", "request_id" => "rel",
                    "session_id" => session.clone(), "op" => "release", "resource_id" => env,
                };
                ws.send(send(release).1).await.unwrap();
                let _ = ws.next().await;
                let _ = ws.close(None).await;
                return (n, resp.len());
            }
        }
        unreachable!()
    })
}

/// (d): a blocking TCP ping-pong on loopback with TCP_NODELAY, a 4-byte
/// length prefix and the given payload sizes each way.
fn tcp_pingpong(request: usize, response: usize) -> Stats {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        let mut req = vec![0u8; request];
        let mut resp = vec![7u8; response + 4];
        resp[..4].copy_from_slice(&(response as u32).to_be_bytes());
        let mut len = [0u8; 4];
        while s.read_exact(&mut len).is_ok() {
            if s.read_exact(&mut req).is_err() {
                break;
            }
            if s.write_all(&resp).is_err() {
                break;
            }
        }
    });
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut msg = vec![1u8; request + 4];
    msg[..4].copy_from_slice(&(request as u32).to_be_bytes());
    let mut resp = vec![0u8; response + 4];
    let stats = measure(|| {
        c.write_all(&msg).unwrap();
        c.read_exact(&mut resp).unwrap();
    });
    drop(c);
    server.join().unwrap();
    stats
}

fn our_client(url: &str) -> blocking::Client {
    blocking::Client::connect(url, ClientConfig::default()).unwrap()
}

fn our_roundtrip(client: &blocking::Client, env: &str) -> Stats {
    let proxy = client.env(env).unwrap();
    proxy.reset(Default::default()).unwrap();
    let a = action(env);
    let stats = measure(|| {
        proxy.step(a.clone()).unwrap();
    });
    client.release(env, false).unwrap();
    stats
}

/// `k` observers of `env` on one thread of their own (a dashboard process),
/// each a raw WebSocket session that decodes every snapshot it reads, either
/// as fast as it can or one every `period`. Returns the stop flag and the
/// thread, which yields (snapshots decoded, bytes decoded).
fn observers(
    url: &str,
    env: &str,
    k: usize,
    period: Option<Duration>,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<(u64, u64)>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (url, env, flag) = (url.to_string(), env.to_string(), stop.clone());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for i in 0..k {
                let (mut ws, session) = connect_hello(&url).await;
                subscribe(&mut ws, session, &env, &format!("obs{i}")).await;
                let codec = Codec::default();
                let flag = flag.clone();
                tasks.push(tokio::spawn(async move {
                    let (mut seen, mut bytes) = (0u64, 0u64);
                    while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                        if let Some(p) = period {
                            tokio::time::sleep(p).await;
                        }
                        match tokio::time::timeout(Duration::from_millis(100), ws.next()).await {
                            Ok(Some(Ok(Message::Binary(frame)))) => {
                                bytes += frame.len() as u64;
                                if codec.decode(frame).is_ok() {
                                    seen += 1;
                                }
                            }
                            Ok(None) | Ok(Some(Err(_))) => break,
                            _ => {}
                        }
                    }
                    (seen, bytes)
                }));
            }
            let _ = ready_tx.send(());
            let mut total = (0, 0);
            for t in tasks {
                if let Ok((s, b)) = t.await {
                    total.0 += s;
                    total.1 += b;
                }
            }
            total
        })
    });
    let _ = ready_rx.recv();
    (stop, handle)
}

/// An observer over a raw WebSocket that subscribes and then never reads.
fn stalled_observer(rt: &tokio::runtime::Runtime, url: &str, env: &str) -> RawWs {
    rt.block_on(async {
        let (mut ws, session) = connect_hello(url).await;
        subscribe(&mut ws, session, env, "never-read").await;
        ws
    })
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Memory of a separate server process before and after `n` idle sessions
/// (WebSocket connected, hello done).
fn memory_per_session(n: usize) -> Option<(u64, u64)> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/unienv-remote");
    if !bin.exists() {
        eprintln!("memory: build the CLI first (cargo build --release) to measure a separate server process");
        return None;
    }
    let mut child = Command::new(bin)
        .args([
            "serve",
            "--fixtures",
            "--addr",
            "127.0.0.1:0",
            "--max-connections",
            "4096",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = std::io::BufReader::new(child.stdout.take()?);
    let mut first = String::new();
    out.read_line(&mut first).ok()?;
    // Keep draining, so the server never writes into a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("ws://"))?
        .to_string();
    let pid = child.id();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let result = rt.block_on(async {
        // Settle the allocator with one connection first.
        let mut warm = Vec::new();
        for _ in 0..10 {
            warm.push(connect_hello(&url).await.0);
        }
        drop(warm);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = rss_kib(pid);
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            conns.push(connect_hello(&url).await.0);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_kib(pid);
        drop(conns);
        (before, after)
    });
    let _ = Command::new("kill")
        .arg("-INT")
        .arg(pid.to_string())
        .status();
    let _ = child.wait();
    Some(result)
}

type RawWs =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A raw WebSocket session after hello, with its session ID.
async fn connect_hello(url: &str) -> (RawWs, Value) {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let codec = Codec::default();
    let hello = dict! { "version" => 1, "type" => "request", "request_id" => "h", "session_id" => (), "op" => "hello", "resource_id" => () };
    ws.send(Message::Binary(
        codec.encode(&Value::Dict(hello)).unwrap().into(),
    ))
    .await
    .unwrap();
    let reply = codec
        .decode(ws.next().await.unwrap().unwrap().into_data())
        .unwrap();
    let session = reply
        .get("result")
        .unwrap()
        .get("session_id")
        .cloned()
        .unwrap();
    (ws, session)
}

/// Subscribes a raw session to `env` (all default fields) and waits for the
/// acknowledgement.
async fn subscribe(ws: &mut RawWs, session: Value, env: &str, subscription_id: &str) {
    let sub = dict! { "version" => 1, "type" => "request", "request_id" => "s", "session_id" => session, "op" => "subscribe", "resource_id" => env, "subscription_id" => subscription_id };
    ws.send(Message::Binary(
        Codec::default().encode(&Value::Dict(sub)).unwrap().into(),
    ))
    .await
    .unwrap();
    let _ = ws.next().await;
}

fn row(name: &str, s: &Stats) {
    println!(
        "  {name:<44} median {:>9.1} µs   p99 {:>9.1} µs   {:>8.0} steps/s   (n={})",
        s.median_us, s.p99_us, s.steps_per_s, s.n
    );
}

fn main() {
    // `cargo bench` passes --bench; anything else (e.g. a filter) is ignored.
    println!("machine: {} cores, {}", num_cpus(), cpu_model());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (server, listener) = rt.block_on(async {
        let mut b = Server::builder(ServerConfig::default());
        unienv_remote::fixtures::register(&mut b).unwrap();
        let server = b.start().expect("a valid server configuration");
        let listener = server.listen("127.0.0.1:0").await.unwrap();
        (server, listener)
    });
    let url = listener.url();
    if std::env::var("ROUNDTRIP_ONLY").as_deref() == Ok("sessions") {
        report_sessions();
        rt.block_on(server.shutdown());
        return;
    }
    let python = python().filter(|_| !only_ours() && !only_memory() && !only_floor());
    let reference = python.as_ref().map(reference_server);
    if only_memory() {
        let mem = rt.block_on(async { server.connect_memory() });
        let mem_client = blocking::Client::over_memory(mem, ClientConfig::default()).unwrap();
        for env in envs() {
            row(
                &format!("in memory: {env}"),
                &our_roundtrip(&mem_client, env),
            );
        }
        mem_client.close();
        rt.block_on(server.shutdown());
        return;
    }
    let mut ours = Vec::new();
    let mut floor = Vec::new();
    let client = our_client(&url);
    println!("\nstep round trips ({} s per measurement)", seconds());
    for env in envs() {
        println!("{env}");
        if only_ours() {
            row(
                "(a) our client <-> our server",
                &our_roundtrip(&client, env),
            );
            continue;
        }
        let (req, resp) = message_sizes(&rt, &url, env);
        let a = our_roundtrip(&client, env);
        row("(a) our client <-> our server", &a);
        let d = tcp_pingpong(req, resp);
        row(&format!("(d) raw TCP ping-pong {req} B / {resp} B"), &d);
        ours.push(a);
        floor.push(d);
    }
    client.close();
    if only_ours() {
        rt.block_on(server.shutdown());
        return;
    }
    if only_floor() {
        println!("\nratios (medians)");
        for (i, env) in envs().iter().enumerate() {
            println!(
                "  {env:<14} a/d = {:.2}",
                ours[i].median_us / floor[i].median_us
            );
        }
        rt.block_on(server.shutdown());
        return;
    }
    let (b, c) = match (&python, &reference) {
        (Some(py), Some((_, ref_url))) => (
            python_roundtrips(py, &url, "unienv_interface.remote"),
            python_roundtrips(py, ref_url, "unienv_interface.remote"),
        ),
        _ => {
            eprintln!("reference Python not found: skipping (b) and (c); run ./scripts/test.sh once to create .venv-ref");
            (Vec::new(), Vec::new())
        }
    };
    println!("\nreference Python client");
    for (env, s, cpu) in &b {
        row(&format!("(b) reference client <-> our server: {env}"), s);
        println!("    the reference client's own CPU per step: {cpu:.1} µs");
    }
    for (env, s, cpu) in &c {
        row(
            &format!("(c) reference client <-> reference server: {env}"),
            s,
        );
        println!("    the reference client's own CPU per step: {cpu:.1} µs");
    }
    let e = match &python {
        Some(py) => {
            match our_python_package(py) {
                Some(profile) => {
                    if profile != "release" {
                        eprintln!("warning: unienv_remote in the venv is a {profile} build; (e) needs `maturin develop --release -m python/Cargo.toml`");
                    }
                    python_roundtrips(py, &url, "unienv_remote")
                }
                None => {
                    eprintln!("unienv_remote is not installed in the venv: skipping (e); see BENCHMARKS.md");
                    Vec::new()
                }
            }
        }
        None => Vec::new(),
    };
    println!("\nour Python client (unienv_remote)");
    for (env, s, cpu) in &e {
        row(&format!("(e) our Python client <-> our server: {env}"), s);
        println!("    the client's own CPU per step: {cpu:.1} µs");
    }
    println!("\nratios (medians)");
    for (i, env) in envs().iter().enumerate() {
        let ad = ours[i].median_us / floor[i].median_us;
        let cb = match (
            b.iter().find(|(e, _, _)| e == env),
            c.iter().find(|(e, _, _)| e == env),
        ) {
            // The best c/b any server could give: (b) cannot be faster than
            // the reference client's own CPU time per step.
            (Some((_, b, cpu)), Some((_, c, _))) => format!(
                "{:.2}   (c / the client's own CPU per step = {:.2})",
                c.median_us / b.median_us,
                c.median_us / cpu
            ),
            _ => "n/a".into(),
        };
        println!("  {env:<14} a/d = {ad:.2}   c/b = {cb}");
    }

    println!("\nour Python client: e/a (target ≤ 1.5 for bench_state and bench_image, ≤ 2 for bench_batch64), c/e (target ≥ 10 for bench_state)");
    for (i, env) in envs().iter().enumerate() {
        let find = |v: &Vec<(String, Stats, f64)>| {
            v.iter()
                .find(|(e, _, _)| e == env)
                .map(|(_, s, _)| s.median_us)
        };
        match (find(&e), find(&c)) {
            (Some(e_us), c_us) => println!(
                "  {env:<14} e/a = {:.2}   c/e = {}",
                e_us / ours[i].median_us,
                c_us.map_or("n/a".into(), |c_us| format!("{:.2}", c_us / e_us))
            ),
            (None, _) => println!("  {env:<14} e not measured"),
        }
    }
    if only_python() {
        rt.block_on(server.shutdown());
        if let Some((mut child, _)) = reference {
            let _ = child.kill();
            let _ = child.wait();
        }
        return;
    }

    // Observer fan-out on bench_image.
    println!("\nobserver fan-out (controller steps bench_image)");
    let controller = our_client(&url);
    let base = our_roundtrip(&controller, "bench_image");
    row("0 observers", &base);
    for (k, period) in [
        (16usize, None),
        (64, None),
        (16, Some(Duration::from_micros(16_667))),
        (64, Some(Duration::from_micros(16_667))),
    ] {
        let base = our_roundtrip(&controller, "bench_image");
        let (stop, observers) = observers(&url, "bench_image", k, period);
        let s = our_roundtrip(&controller, "bench_image");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (seen, bytes) = observers.join().unwrap_or((0, 0));
        let how = match period {
            None => "reading as fast as they can".to_string(),
            Some(p) => format!("each reading every {:.1} ms", p.as_secs_f64() * 1e3),
        };
        row(&format!("{k} observers, {how}"), &s);
        println!(
            "    {seen} snapshots ({:.0} MB) decoded; vs 0 observers just before ({:.1} µs): {:+.1} %",
            bytes as f64 / 1e6,
            base.median_us,
            (s.median_us / base.median_us - 1.0) * 100.0
        );
    }
    let base = our_roundtrip(&controller, "bench_image");
    let stalled = stalled_observer(&rt, &url, "bench_image");
    let s = our_roundtrip(&controller, "bench_image");
    row("1 observer that never reads", &s);
    println!(
        "    vs 0 observers just before ({:.1} µs): {:+.1} %",
        base.median_us,
        (s.median_us / base.median_us - 1.0) * 100.0
    );
    drop(stalled);
    controller.close();

    // In-memory transport.
    println!("\nin-memory transport (embedded use)");
    let mem = rt.block_on(async { server.connect_memory() });
    let mem_client = blocking::Client::over_memory(mem, ClientConfig::default()).unwrap();
    for env in envs() {
        let s = our_roundtrip(&mem_client, env);
        row(&format!("our client <-> our server in memory: {env}"), &s);
    }
    mem_client.close();

    // Memory per idle session.
    println!("\nserver memory per idle session (1,000 sessions, separate server process)");
    match memory_per_session(1000) {
        Some((before, after)) => {
            let per = (after.saturating_sub(before)) as f64 * 1024.0 / 1000.0;
            println!(
                "  RSS before {before} KiB, after {after} KiB: {:.1} KiB per session",
                per / 1024.0
            );
        }
        None => println!("  not measured"),
    }

    rt.block_on(server.shutdown());
    if let Some((mut child, _)) = reference {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Memory per idle session.
fn report_sessions() {
    println!("\nserver memory per idle session (1,000 sessions, separate server process)");
    match memory_per_session(1000) {
        Some((before, after)) => {
            let per = after.saturating_sub(before) as f64 / 1000.0;
            println!("  RSS before {before} KiB, after {after} KiB: {per:.1} KiB per session");
        }
        None => println!("  not measured"),
    }
}

fn num_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
