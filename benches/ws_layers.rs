//! The WebSocket layer alone, three implementations on the same messages:
//!
//! - `ours`: the crate's own RFC 6455 framing (`src/transport/ws.rs`), used as
//!   the server and client use it (replies written at once with one `writev`
//!   when the socket takes them, requests and snapshots gathered and flushed);
//! - `tungstenite`: tokio-tungstenite 0.28, with its default configuration and
//!   with a tuned one (a smaller `read_buffer_size`, the buffer it zero-fills
//!   before each read);
//! - `fastwebsockets`: fastwebsockets 0.10 (vectored writes, zero-copy reads),
//!   behind its `FragmentCollector` as a transport must reassemble messages.
//!
//! The messages are real: an in-process server of ours hosting the fixture
//! registry is stepped once per bench env (`bench_state`, `bench_image`,
//! `bench_batch64`) over a raw WebSocket, and the exact request envelope sent
//! and response envelope received are kept, with the snapshot an observer of
//! `bench_image` receives for that step. The server is then shut down, and
//! each implementation runs a loopback TCP server and client exchanging only
//! those messages (no decoding, no env; handshakes outside the timing):
//!
//! - (a) round trips: the client sends the step request, the server answers
//!   each request received with the step response; time per round trip;
//! - (b) fan-out: one server writes each `bench_image` snapshot to 64
//!   observer connections (one writer task per connection, as sessions have),
//!   the time from handing it to the writers until all 64 observers received
//!   it whole.
//!
//! All run on one tokio runtime (multi-thread, 2 workers, as
//! `benches/roundtrip.rs`), in rounds: each round measures every
//! implementation once per measurement, the starting implementation rotating,
//! so load drifts reach all of them. Printed: per implementation the median
//! and p99 over all rounds, the ratio of medians to ours, and the range of the
//! per-round ratios.
//!
//! Run: `cargo bench --bench ws_layers`. `WS_ROUNDS` (default 5) sets the
//! rounds, `WS_SECONDS` (default 0.3) the time per measurement per round,
//! `WS_LAYERS` the implementations (default: ours, tungstenite with
//! `read_buffer_size` 128 KiB (its default), 64, 16 and 4 KiB, and
//! fastwebsockets; written `ours,tungstenite:131072,...,fastwebsockets`).
//!
//! No single `read_buffer_size` suits every message size (a small buffer
//! zero-fills less per read but caps each read), so the summary credits
//! tungstenite with its best configuration on each measurement separately,
//! the most favourable reading for it; the decision rule (adopt a library
//! whose median is within 10 % of ours on every measurement) is applied to
//! that and to fastwebsockets.

use bytes::Bytes;
use fastwebsockets::{FragmentCollector, Frame, Payload, WebSocket};
use futures_util::{SinkExt, StreamExt};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use unienv_remote::bench_ws;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{dict, Codec, Dict, NdArray, Value};

const ENVS: [&str; 3] = ["bench_state", "bench_image", "bench_batch64"];
const OBSERVERS: usize = 64;
/// Ours, tungstenite at four read buffer sizes (128 KiB is its default), and
/// fastwebsockets.
const DEFAULT_LAYERS: &str =
    "ours,tungstenite:131072,tungstenite:65536,tungstenite:16384,tungstenite:4096,fastwebsockets";
const MAX_MESSAGE: usize = 64 << 20;

/// One implementation under test.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layer {
    Ours,
    /// tokio-tungstenite with this `read_buffer_size`.
    Tungstenite(usize),
    Fast,
}

impl Layer {
    fn name(self) -> String {
        match self {
            Layer::Ours => "ours".into(),
            Layer::Tungstenite(n) if n == WebSocketConfig::default().read_buffer_size => {
                format!("tungstenite default (read buf {} KiB)", n / 1024)
            }
            Layer::Tungstenite(n) => format!("tungstenite read buf {} KiB", n / 1024),
            Layer::Fast => "fastwebsockets".into(),
        }
    }

    fn tungstenite_config(read_buffer_size: usize) -> WebSocketConfig {
        let mut c = WebSocketConfig::default().read_buffer_size(read_buffer_size);
        c.max_message_size = Some(MAX_MESSAGE);
        c.max_frame_size = Some(MAX_MESSAGE);
        c
    }
}

fn layers() -> Vec<Layer> {
    let list = std::env::var("WS_LAYERS").unwrap_or_else(|_| DEFAULT_LAYERS.into());
    list.split(',')
        .map(|s| match s.trim() {
            "ours" => Layer::Ours,
            "fastwebsockets" => Layer::Fast,
            t => Layer::Tungstenite(
                t.strip_prefix("tungstenite:")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("unknown layer {t:?}")),
            ),
        })
        .collect()
}

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One end of a connection of any implementation.
// One per connection, moved once: its size does not matter, and boxing only
// ours would add an indirection the libraries' ends do not pay in reverse.
#[allow(clippy::large_enum_variant)]
enum Conn {
    Ours(bench_ws::Reader, bench_ws::Writer),
    Tungstenite(Box<WebSocketStream<TcpStream>>),
    Fast(Box<FragmentCollector<TcpStream>>),
}

impl Conn {
    async fn accept(layer: Layer, listener: &TcpListener) -> Conn {
        let (stream, _) = listener.accept().await.unwrap();
        stream.set_nodelay(true).unwrap();
        if layer == Layer::Ours {
            let (r, w) = bench_ws::accept(stream, MAX_MESSAGE).await.unwrap();
            return Conn::Ours(r, w);
        }
        Conn::library(layer, stream, true).await
    }

    async fn connect(layer: Layer, addr: std::net::SocketAddr) -> Conn {
        if layer == Layer::Ours {
            let (r, w) = bench_ws::connect(&format!("ws://{addr}/"), MAX_MESSAGE)
                .await
                .unwrap();
            return Conn::Ours(r, w);
        }
        let stream = TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        Conn::library(layer, stream, false).await
    }

    /// A library's end over a connected socket (no handshake).
    async fn library(layer: Layer, stream: TcpStream, server: bool) -> Conn {
        match layer {
            Layer::Tungstenite(n) => {
                let role = if server { Role::Server } else { Role::Client };
                let config = Some(Layer::tungstenite_config(n));
                Conn::Tungstenite(Box::new(
                    WebSocketStream::from_raw_socket(stream, role, config).await,
                ))
            }
            _ => {
                let role = if server {
                    fastwebsockets::Role::Server
                } else {
                    fastwebsockets::Role::Client
                };
                Conn::Fast(Box::new(fast(stream, role)))
            }
        }
    }

    /// The next binary message, or `None` once the connection ends.
    async fn recv(&mut self) -> Option<Bytes> {
        match self {
            Conn::Ours(r, _) => r.recv().await.ok(),
            Conn::Tungstenite(ws) => loop {
                match ws.next().await? {
                    Ok(Message::Binary(b)) => return Some(b),
                    Ok(Message::Close(_)) | Err(_) => return None,
                    Ok(_) => {}
                }
            },
            Conn::Fast(ws) => loop {
                let frame = ws.read_frame().await.ok()?;
                match frame.opcode {
                    fastwebsockets::OpCode::Binary => {
                        return Some(match frame.payload {
                            Payload::Bytes(b) => b.freeze(),
                            other => Bytes::from(Vec::from(other)),
                        })
                    }
                    fastwebsockets::OpCode::Close => return None,
                    _ => {}
                }
            },
        }
    }

    /// Sends one binary message; `reply` marks a server's answer to a
    /// request (ours writes those directly).
    async fn send(&mut self, message: &Bytes, reply: bool) {
        match self {
            Conn::Ours(_, w) if reply => w.send_reply(message).await.unwrap(),
            Conn::Ours(_, w) => w.send(message.clone()).await.unwrap(),
            Conn::Tungstenite(ws) => ws.send(Message::Binary(message.clone())).await.unwrap(),
            Conn::Fast(ws) => ws
                .write_frame(Frame::binary(Payload::Borrowed(message)))
                .await
                .unwrap(),
        }
    }
}

fn fast(stream: TcpStream, role: fastwebsockets::Role) -> FragmentCollector<TcpStream> {
    let mut ws = WebSocket::after_handshake(stream, role);
    ws.set_writev(true);
    ws.set_auto_pong(true);
    ws.set_auto_close(true);
    ws.set_max_message_size(MAX_MESSAGE);
    FragmentCollector::new(ws)
}

/// The step request and response of one env, as exchanged with our server.
struct Step {
    env: &'static str,
    request: Bytes,
    response: Bytes,
}

fn action(env: &str) -> Value {
    if env == "bench_batch64" {
        Value::Array(NdArray::from_shape_vec(vec![64, 4], vec![0.0f32; 256]).unwrap())
    } else {
        Value::Array(NdArray::from_vec(vec![0.0f32; 4]))
    }
}

type RawWs =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn raw_binary(ws: &mut RawWs) -> Bytes {
    loop {
        if let Message::Binary(b) = ws.next().await.unwrap().unwrap() {
            return b;
        }
    }
}

/// A raw session after hello, with its session ID.
async fn hello(url: &str) -> (RawWs, Value) {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let codec = Codec::default();
    let hello = dict! { "version" => 1, "type" => "request", "request_id" => "h", "session_id" => (), "op" => "hello", "resource_id" => () };
    let m = codec.encode(&Value::Dict(hello)).unwrap();
    ws.send(Message::Binary(Bytes::from(m))).await.unwrap();
    let reply = codec.decode(raw_binary(&mut ws).await).unwrap();
    let session = reply
        .get("result")
        .unwrap()
        .get("session_id")
        .cloned()
        .unwrap();
    (ws, session)
}

/// Steps each bench env once on an in-process server of ours (the envelopes
/// our client sends, as in `benches/roundtrip.rs`), keeping the exact bytes,
/// and the `bench_image` snapshot an observer receives for that step.
async fn capture() -> (Vec<Step>, Bytes) {
    let mut b = Server::builder(ServerConfig::default());
    unienv_remote::fixtures::register(&mut b).unwrap();
    let server = b.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    let url = listener.url();
    let codec = Codec::default();
    let (mut observer, obs_session) = hello(&url).await;
    let sub = dict! { "version" => 1, "type" => "request", "request_id" => "s", "session_id" => obs_session, "op" => "subscribe", "resource_id" => "bench_image", "subscription_id" => "obs" };
    observer
        .send(Message::Binary(Bytes::from(
            codec.encode(&Value::Dict(sub)).unwrap(),
        )))
        .await
        .unwrap();
    let ack = codec.decode(raw_binary(&mut observer).await).unwrap();
    assert_eq!(
        ack.get("type").and_then(Value::as_str),
        Some("response"),
        "subscribe"
    );
    let (mut ws, session) = hello(&url).await;
    let mut steps = Vec::new();
    for env in ENVS {
        let mut response = Bytes::new();
        let mut request = Bytes::new();
        for (i, method) in ["reset", "step"].into_iter().enumerate() {
            let req: Dict = dict! {
                "version" => 1, "type" => "request", "request_id" => format!("0123456789abcdef0123456789abcde{i}"),
                "session_id" => session.clone(), "op" => "call", "resource_id" => env,
                "method" => method,
                "args" => if method == "step" { Value::Tuple(vec![action(env)]) } else { Value::Tuple(vec![]) },
                "kwargs" => Dict::new(), "operation_id" => "0123456789abcdef0123456789abcdef",
            };
            request = Bytes::from(codec.encode(&Value::Dict(req)).unwrap());
            ws.send(Message::Binary(request.clone())).await.unwrap();
            response = raw_binary(&mut ws).await;
        }
        let decoded = codec.decode(response.clone()).unwrap();
        assert_eq!(
            decoded.get("type").and_then(Value::as_str),
            Some("response"),
            "step of {env}"
        );
        steps.push(Step {
            env,
            request,
            response,
        });
    }
    // The observer's messages so far: a snapshot for the reset and one for
    // the step of bench_image; keep the last.
    let mut snapshot = Bytes::new();
    while let Ok(Some(Ok(Message::Binary(b)))) =
        tokio::time::timeout(Duration::from_millis(300), observer.next()).await
    {
        let d = codec.decode(b.clone()).unwrap();
        if d.get("type").and_then(Value::as_str) == Some("snapshot") {
            snapshot = b;
        }
    }
    assert!(!snapshot.is_empty(), "no snapshot of bench_image received");
    let _ = ws.close(None).await;
    let _ = observer.close(None).await;
    server.shutdown().await;
    (steps, snapshot)
}

/// Decides how long a measurement runs: a warm-up of `seconds / 5` whose
/// times are dropped, then `seconds` (at least 20 samples).
struct Sampler {
    seconds: f64,
    warm_until: Instant,
    start: Option<Instant>,
    samples: Vec<Duration>,
}

impl Sampler {
    fn new(seconds: f64) -> Sampler {
        Sampler {
            seconds,
            warm_until: Instant::now() + Duration::from_secs_f64(seconds / 5.0),
            start: None,
            samples: Vec::new(),
        }
    }

    /// Whether to run once more.
    fn more(&mut self) -> bool {
        match self.start {
            None if Instant::now() < self.warm_until => true,
            None => {
                self.start = Some(Instant::now());
                true
            }
            Some(start) => start.elapsed().as_secs_f64() < self.seconds || self.samples.len() < 20,
        }
    }

    /// Keeps one time (dropped during the warm-up).
    fn record(&mut self, time: Duration) {
        if self.start.is_some() {
            self.samples.push(time);
        }
    }
}

/// Round trips of `request` → `response` for `seconds` (after a warm-up).
async fn roundtrips(layer: Layer, request: Bytes, response: Bytes, seconds: f64) -> Vec<Duration> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let expect = request.len();
    let response_len = response.len();
    let server = tokio::spawn(async move {
        let mut conn = Conn::accept(layer, &listener).await;
        while let Some(m) = conn.recv().await {
            assert_eq!(m.len(), expect);
            conn.send(&response, true).await;
        }
    });
    let expect = response_len;
    let client = tokio::spawn(async move {
        let mut conn = Conn::connect(layer, addr).await;
        let mut sampler = Sampler::new(seconds);
        while sampler.more() {
            let t = Instant::now();
            conn.send(&request, false).await;
            let m = conn.recv().await.unwrap();
            assert_eq!(m.len(), expect);
            sampler.record(t.elapsed());
        }
        sampler.samples
    });
    let samples = client.await.unwrap();
    server.await.unwrap();
    samples
}

/// Fan-out of `message` to [`OBSERVERS`] connections for `seconds`: the time
/// from handing it to the writers until every observer has it.
async fn fanout(layer: Layer, message: Bytes, seconds: f64) -> Vec<Duration> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepting = tokio::spawn(async move {
        let mut writers = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..OBSERVERS {
            let mut conn = Conn::accept(layer, &listener).await;
            let (tx, mut rx) = mpsc::channel::<Bytes>(2);
            writers.push(tx);
            tasks.push(tokio::spawn(async move {
                while let Some(m) = rx.recv().await {
                    conn.send(&m, false).await;
                }
            }));
        }
        (writers, tasks)
    });
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<()>();
    let mut readers = Vec::new();
    for _ in 0..OBSERVERS {
        let mut conn = Conn::connect(layer, addr).await;
        let done = done_tx.clone();
        let expect = message.len();
        readers.push(tokio::spawn(async move {
            while let Some(m) = conn.recv().await {
                assert_eq!(m.len(), expect);
                if done.send(()).is_err() {
                    break;
                }
            }
        }));
    }
    drop(done_tx);
    let (writers, tasks) = accepting.await.unwrap();
    let mut sampler = Sampler::new(seconds);
    while sampler.more() {
        let t = Instant::now();
        for w in &writers {
            w.send(message.clone()).await.unwrap();
        }
        for _ in 0..OBSERVERS {
            done_rx.recv().await.unwrap();
        }
        sampler.record(t.elapsed());
    }
    drop(writers);
    for t in tasks {
        t.await.unwrap();
    }
    for r in readers {
        r.await.unwrap();
    }
    sampler.samples
}

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let n = sorted.len();
    sorted[((n as f64 * q) as usize).min(n - 1)].as_secs_f64() * 1e6
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    quantile(&samples, 0.5)
}

/// All samples of one implementation on one measurement, and the median of
/// each round.
#[derive(Default, Clone)]
struct Series {
    samples: Vec<Duration>,
    round_medians: Vec<f64>,
}

impl Series {
    fn add(&mut self, samples: Vec<Duration>) {
        self.round_medians.push(median(samples.clone()));
        self.samples.extend(samples);
    }
}

fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let layers = layers();
    let ours_at = layers
        .iter()
        .position(|l| *l == Layer::Ours)
        .expect("WS_LAYERS must include ours");
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this
    // unoptimised without it: then one short round, a smoke test of every
    // implementation rather than a measurement.
    let measuring = std::env::args().any(|a| a == "--bench");
    let rounds = env_f64("WS_ROUNDS", if measuring { 5.0 } else { 1.0 }) as usize;
    let seconds = env_f64("WS_SECONDS", if measuring { 0.3 } else { 0.02 });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (steps, snapshot) = rt.block_on(capture());
    println!("messages (exact bytes from our server):");
    for s in &steps {
        println!(
            "  {:<14} request {:>9} B   response {:>9} B",
            s.env,
            s.request.len(),
            s.response.len()
        );
    }
    println!(
        "  fan-out        bench_image snapshot {} B to {OBSERVERS} observers",
        snapshot.len()
    );
    println!(
        "{rounds} rounds, {seconds} s per measurement per round; load average at start: {}",
        uptime()
    );
    // measurements: one per env, then the fan-out.
    let names: Vec<String> = steps
        .iter()
        .map(|s| format!("{} round trip", s.env))
        .chain(std::iter::once(format!("fan-out to {OBSERVERS}")))
        .collect();
    let mut series = vec![vec![Series::default(); layers.len()]; names.len()];
    for round in 0..rounds {
        for (m, row) in series.iter_mut().enumerate() {
            for k in 0..layers.len() {
                let i = (k + round) % layers.len();
                let layer = layers[i];
                let samples = rt.block_on(async {
                    match steps.get(m) {
                        Some(s) => {
                            roundtrips(layer, s.request.clone(), s.response.clone(), seconds).await
                        }
                        None => fanout(layer, snapshot.clone(), seconds).await,
                    }
                });
                row[i].add(samples);
            }
        }
        eprintln!("round {} done, load {}", round + 1, uptime());
    }
    println!("load average at end: {}", uptime());
    println!(
        "\n{:<40} {:>11} {:>11} {:>8} {:>15}",
        "", "median µs", "p99 µs", "× ours", "per-round ×"
    );
    // ratio of medians to ours, per measurement and layer
    let mut ratios = vec![vec![0.0; layers.len()]; names.len()];
    for (m, name) in names.iter().enumerate() {
        println!("{name}");
        let ours = &series[m][ours_at];
        let ours_median = median(ours.samples.clone());
        for (i, layer) in layers.iter().enumerate() {
            let s = &series[m][i];
            let mut sorted = s.samples.clone();
            sorted.sort();
            let med = quantile(&sorted, 0.5);
            let p99 = quantile(&sorted, 0.99);
            let per_round: Vec<f64> = s
                .round_medians
                .iter()
                .zip(&ours.round_medians)
                .map(|(a, b)| a / b)
                .collect();
            ratios[m][i] = med / ours_median;
            let lo = per_round.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = per_round.iter().cloned().fold(0.0, f64::max);
            println!(
                "  {:<38} {med:>11.1} {p99:>11.1} {:>8.2} {:>7.2}–{:<7.2} (n={})",
                layer.name(),
                med / ours_median,
                lo,
                hi,
                sorted.len()
            );
        }
    }
    summary(&layers, &names, &ratios);
}

/// The worst ratio over the measurements of each candidate, and whether it
/// meets the 10 % rule.
fn summary(layers: &[Layer], names: &[String], ratios: &[Vec<f64>]) {
    println!("\n10 % rule: a library is adopted if its median is within 1.10 × ours on every measurement");
    let tung: Vec<usize> = (0..layers.len())
        .filter(|&i| matches!(layers[i], Layer::Tungstenite(_)))
        .collect();
    let mut candidates: Vec<(String, Vec<f64>)> = Vec::new();
    if !tung.is_empty() {
        let mut best = Vec::new();
        for (m, name) in names.iter().enumerate() {
            let i = tung
                .iter()
                .copied()
                .min_by(|&a, &b| ratios[m][a].total_cmp(&ratios[m][b]))
                .unwrap_or(tung[0]);
            println!(
                "  tungstenite best on {name}: {} ({:.2} × ours)",
                layers[i].name(),
                ratios[m][i]
            );
            best.push(ratios[m][i]);
        }
        candidates.push(("tungstenite, best config per measurement".into(), best));
    }
    for (i, layer) in layers.iter().enumerate() {
        if *layer != Layer::Ours {
            candidates.push((layer.name(), ratios.iter().map(|r| r[i]).collect()));
        }
    }
    for (name, r) in candidates {
        let worst = r.iter().cloned().fold(0.0, f64::max);
        println!(
            "  {name:<45} worst {worst:.2} × ours -> {}",
            if worst <= 1.10 {
                "within 10 %"
            } else {
                "not within 10 %"
            }
        );
    }
}
