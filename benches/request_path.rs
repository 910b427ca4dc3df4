//! The request path and Unix domain sockets, in one run on one machine:
//!
//! - a single-env step round trip, our Rust client ↔ our server, over
//!   loopback TCP (`ws://`) and over a Unix domain socket (`ws+unix://`),
//!   measured in alternating rounds so that both see the same load; the
//!   ratio Unix / TCP (target ≤ 0.8);
//! - the floors: a raw ping-pong of the same sizes over TCP and over a Unix
//!   socket;
//! - the server's CPU per step (user + system time of a separate
//!   `unienv-remote serve --fixtures` process over many steps, from
//!   `/proc/PID/stat`), over TCP and over a Unix socket; needs
//!   `target/release/unienv-remote` (`cargo build --release`).
//!
//! Run: `cargo bench --bench request_path`. `REQUEST_PATH_SECONDS` sets the
//! time per measurement (default 2), `REQUEST_PATH_ROUNDS` the rounds
//! (default 3), `REQUEST_PATH_ENV` the env (default `bench_state`).

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use unienv_remote::client::{blocking, ClientConfig};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{Codec, NdArray, Value};

fn seconds() -> f64 {
    std::env::var("REQUEST_PATH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0)
}

fn rounds() -> usize {
    std::env::var("REQUEST_PATH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn env_id() -> String {
    std::env::var("REQUEST_PATH_ENV").unwrap_or_else(|_| "bench_state".into())
}

/// Median of per-step times over the configured duration, after a warm-up.
fn median_us(mut step: impl FnMut()) -> f64 {
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(200) {
        step();
    }
    let total = Duration::from_secs_f64(seconds());
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < total || samples.len() < 20 {
        let t = Instant::now();
        step();
        samples.push(t.elapsed());
    }
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

fn action() -> Value {
    Value::Array(NdArray::from_vec(vec![0.0f32; 4]))
}

/// A stepping loop on `env` of a connected client.
struct Stepper {
    client: blocking::Client,
    env: String,
}

impl Stepper {
    fn new(url: &str, env: &str) -> Stepper {
        let client = blocking::Client::connect(url, ClientConfig::default())
            .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
        let proxy = client.env(env).expect("the env");
        proxy.reset(Default::default()).expect("reset");
        Stepper {
            client,
            env: env.to_string(),
        }
    }

    fn step(&self) {
        let proxy = self.client.env(&self.env).expect("the env");
        proxy.step(action()).expect("step");
    }

    fn steps(&self, n: usize) {
        let proxy = self.client.env(&self.env).expect("the env");
        let a = action();
        for _ in 0..n {
            proxy.step(a.clone()).expect("step");
        }
    }

    fn median_us(&self) -> f64 {
        let proxy = self.client.env(&self.env).expect("the env");
        let a = action();
        median_us(|| {
            proxy.step(a.clone()).expect("step");
        })
    }

    fn close(self) {
        let _ = self.client.release(&self.env, false);
        self.client.close();
    }
}

/// The request and response sizes of one step of `env` on our server: the
/// envelopes exchanged over a raw WebSocket session (as `roundtrip` does).
fn message_sizes(rt: &tokio::runtime::Runtime, url: &str, env: &str) -> (usize, usize) {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use unienv_remote::{dict, Dict};
    rt.block_on(async {
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let codec = Codec::default();
        let encode = |d: Dict| codec.encode(&Value::Dict(d)).unwrap();
        let hello = dict! { "version" => 1, "type" => "request", "request_id" => "h", "session_id" => (), "op" => "hello", "resource_id" => () };
        ws.send(Message::Binary(encode(hello).into())).await.unwrap();
        let hello = codec.decode(ws.next().await.unwrap().unwrap().into_data()).unwrap();
        let session = hello.get("result").unwrap().get("session_id").cloned().unwrap();
        let mut sizes = (0, 0);
        for (i, method) in ["reset", "step"].iter().enumerate() {
            let args = if *method == "step" { vec![action()] } else { Vec::new() };
            let req = dict! {
                "version" => 1, "type" => "request", "request_id" => format!("0123456789abcdef0123456789abcde{i}"),
                "session_id" => session.clone(), "op" => "call", "resource_id" => env,
                "method" => *method, "args" => Value::Tuple(args),
                "kwargs" => Dict::new(), "operation_id" => "0123456789abcdef0123456789abcdef",
            };
            let bytes = encode(req);
            let n = bytes.len();
            ws.send(Message::Binary(bytes.into())).await.unwrap();
            let resp = ws.next().await.unwrap().unwrap().into_data();
            sizes = (n, resp.len());
        }
        let release = dict! { "version" => 1, "type" => "request", "request_id" => "rel", "session_id" => session, "op" => "release", "resource_id" => env };
        ws.send(Message::Binary(encode(release).into())).await.unwrap();
        let _ = ws.next().await;
        let _ = ws.close(None).await;
        sizes
    })
}

/// A blocking ping-pong of `request`/`response` bytes (4-byte length
/// prefix) over a connected pair of streams.
fn pingpong<S: Read + Write + Send + 'static>(
    mut server: S,
    mut client: S,
    request: usize,
    response: usize,
) -> f64 {
    let echo = std::thread::spawn(move || {
        let mut req = vec![0u8; request];
        let mut resp = vec![7u8; response + 4];
        resp[..4].copy_from_slice(&(response as u32).to_be_bytes());
        let mut len = [0u8; 4];
        while server.read_exact(&mut len).is_ok() {
            if server.read_exact(&mut req).is_err() || server.write_all(&resp).is_err() {
                break;
            }
        }
    });
    let mut msg = vec![1u8; request + 4];
    msg[..4].copy_from_slice(&(request as u32).to_be_bytes());
    let mut resp = vec![0u8; response + 4];
    let m = median_us(|| {
        client.write_all(&msg).unwrap();
        client.read_exact(&mut resp).unwrap();
    });
    drop(client);
    let _ = echo.join();
    m
}

fn tcp_floor(request: usize, response: usize) -> f64 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    client.set_nodelay(true).unwrap();
    server.set_nodelay(true).unwrap();
    pingpong(server, client, request, response)
}

fn unix_floor(dir: &Path, request: usize, response: usize) -> f64 {
    let path = dir.join("floor.sock");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let client = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let (server, _) = listener.accept().unwrap();
    pingpong(server, client, request, response)
}

/// User + system CPU time of a process, in seconds (all its threads).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 (1-based): 11 and 12 here.
    (ticks(11) + ticks(12)) / 100.0
}

/// A separate `unienv-remote serve --fixtures` process.
struct ServeProcess {
    child: std::process::Child,
    url: String,
}

impl ServeProcess {
    fn start(args: &[&str]) -> Option<ServeProcess> {
        let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/unienv-remote");
        if !bin.exists() {
            eprintln!("server CPU: build the CLI first (cargo build --release)");
            return None;
        }
        let mut child = Command::new(bin)
            .arg("serve")
            .arg("--fixtures")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut out = std::io::BufReader::new(child.stdout.take()?);
        let mut first = String::new();
        out.read_line(&mut first).ok()?;
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("ws://") || w.starts_with("ws+unix://"))?
            .to_string();
        Some(ServeProcess { child, url })
    }

    /// The server's CPU time per step over `n` steps, in µs.
    fn cpu_per_step_us(&self, env: &str, n: usize) -> f64 {
        let stepper = Stepper::new(&self.url, env);
        stepper.steps(200);
        let before = cpu_seconds(self.child.id());
        stepper.steps(n);
        let after = cpu_seconds(self.child.id());
        stepper.close();
        (after - before) * 1e6 / n as f64
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-INT")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let env = env_id();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("machine: {cores} cores, load average {}", load());
    let dir = std::env::temp_dir().join(format!("unienv-request-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (server, tcp, unix) = rt.block_on(async {
        let mut b = Server::builder(ServerConfig::default());
        unienv_remote::fixtures::register(&mut b).unwrap();
        let server = b.start().expect("a valid server configuration");
        let tcp = server.listen("127.0.0.1:0").await.unwrap();
        let unix = server.listen_unix(dir.join("sim.sock")).await.unwrap();
        (server, tcp, unix)
    });
    println!(
        "\nsingle-env step round trip on {env}, our Rust client <-> our server ({} s per measurement, {} rounds, alternating)",
        seconds(),
        rounds()
    );
    let (req, resp) = message_sizes(&rt, &tcp.url(), &env);
    println!("  (a step: request {req} B, response {resp} B)");
    // One session at a time: a session controls the env while it steps it.
    let measure = |url: &str| {
        let stepper = Stepper::new(url, &env);
        stepper.step();
        let m = stepper.median_us();
        stepper.close();
        m
    };
    let (mut ratios, mut floor_ratios) = (Vec::new(), Vec::new());
    for round in 1..=rounds() {
        let t = measure(&tcp.url());
        let u = measure(&unix.url());
        let ft = tcp_floor(req, resp);
        let fu = unix_floor(&dir, req, resp);
        println!(
            "  round {round}: ws:// {t:>7.1} µs   ws+unix:// {u:>7.1} µs   unix/tcp {:.2}   |   raw TCP {ft:>6.1} µs   raw Unix {fu:>6.1} µs   ws:// / raw TCP {:.2}   ws+unix:// / raw Unix {:.2}   (load {})",
            u / t,
            t / ft,
            u / fu,
            load()
        );
        ratios.push(u / t);
        floor_ratios.push(fu / ft);
    }
    ratios.sort_by(f64::total_cmp);
    floor_ratios.sort_by(f64::total_cmp);
    println!(
        "  median over rounds: ws+unix:// / ws:// = {:.2} (target <= 0.8); raw Unix / raw TCP = {:.2}",
        ratios[ratios.len() / 2],
        floor_ratios[floor_ratios.len() / 2]
    );

    println!(
        "\nserver CPU per step (separate `unienv-remote serve --fixtures` process, user + system)"
    );
    let n: usize = std::env::var("REQUEST_PATH_CPU_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let sock = dir.join("cpu.sock");
    let sock_arg = sock.to_string_lossy().into_owned();
    for (name, args) in [
        ("ws://", vec!["--addr", "127.0.0.1:0"]),
        ("ws+unix://", vec!["--unix", sock_arg.as_str()]),
    ] {
        match ServeProcess::start(&args) {
            Some(p) => println!(
                "  {name:<11} {:>6.1} µs per step ({n} steps of {env})",
                p.cpu_per_step_us(&env, n)
            ),
            None => println!("  {name:<11} not measured"),
        }
    }
    rt.block_on(async {
        unix.stop().await;
        tcp.stop().await;
        server.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
