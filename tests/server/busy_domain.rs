//! Nobody waits on someone else's simulator: while one domain's simulator
//! hangs, discover, describe and connect are answered from that domain's
//! last committed boundary, and other domains step as usual; a hosted call
//! may call back into its own server (connect, discover, step another env,
//! shut the server down) without deadlocking; a shutdown while a discover
//! waits on a hanging factory ends within its bound and leaves no task.

use crate::common;

use common::faults::{pair, Gate, GatedEnv};
use common::raw::{fields, Raw};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use unienv_remote::client::{blocking, Client, ClientConfig};
use unienv_remote::host::{Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult};
use unienv_remote::server::{Hosted, Server, ServerConfig};
use unienv_remote::{Dict, NdArray, Value};

/// A client that gives up after one second: every wait below must end
/// well within it.
fn within_a_second() -> ClientConfig {
    ClientConfig::default().with_timeout(Some(Duration::from_secs(1)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_client_connects_describes_and_steps_while_a_simulator_hangs() {
    let gate = Gate::new();
    let server = common::fixture_server_with(ServerConfig::default(), |b| {
        b.register_env("hung", GatedEnv::new(gate.clone()))
            .map(|_| ())
    });
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    let url = listener.url();

    let x = Client::connect(&url, ClientConfig::default())
        .await
        .unwrap();
    let hung = x.env("hung").await.unwrap();
    hung.reset(ResetArgs::with_seed(1)).await.unwrap();
    let stepping = tokio::spawn(async move {
        let step = hung.step(Value::Float(5.0)).await;
        (step, x)
    });
    gate.wait_reached(1).await;

    // Over WebSocket and in memory: connect (which discovers every domain,
    // the hung one included), describe the hung domain, step another.
    let ws = Client::connect(&url, within_a_second()).await.unwrap();
    let memory = Client::over_memory(server.connect_memory(), within_a_second())
        .await
        .unwrap();
    for client in [&ws, &memory] {
        let all = client.discover().await.unwrap();
        assert!(all.iter().any(|d| d.id() == "hung"));
        // As of its last committed boundary: the reset (sequence 1).
        let d = client.describe("hung").await.unwrap();
        assert_eq!(d.sequence(), 1);
        let counter = client.env("counter").await.unwrap();
        counter.reset(ResetArgs::with_seed(0)).await.unwrap();
        counter.step(pair(1.0)).await.unwrap();
        client.release("counter", false).await.unwrap();
    }
    // (Each request above has a 1 s timeout: none waited on the hung domain.)
    // The reference client too (each request with a 1 s timeout).
    if let Some(python) = common::ref_python() {
        let url = url.clone();
        let out = tokio::task::spawn_blocking(move || {
            common::run_python(&python, "connect_while_hung.py", &[&url], None)
        })
        .await
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&out).trim(), "ok");
    }
    assert_eq!(gate.reached(), 1, "nothing else reached the hung simulator");

    // The hung call completes: the next describe sees its boundary.
    gate.open();
    let (step, x) = stepping.await.unwrap();
    assert_eq!(step.unwrap().reward.as_f64(), Some(6.0));
    assert_eq!(ws.describe("hung").await.unwrap().sequence(), 2);
    for c in [&x, &ws, &memory] {
        c.close().await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discover_waiting_for_a_pending_domain_returns_once_it_is_built() {
    let (factory_gate, step_gate) = (Gate::new(), Gate::new());
    let server = common::fixture_server_with(ServerConfig::default(), |b| {
        let (f, s) = (factory_gate.clone(), step_gate.clone());
        b.register_factory("lazy_hung", move || {
            f.pass();
            Ok(Hosted::env(GatedEnv::new(s.clone())))
        })
        .map(|_| ())
    });
    // The first request builds the domain (held at the factory gate), then
    // hangs in step (at the step gate).
    let mut a = Raw::connect(&server).await;
    let step = a.request(
        "call",
        Some("lazy_hung"),
        fields(&[
            ("method", Value::from("step")),
            ("args", Value::Tuple(vec![Value::Float(5.0)])),
            ("operation_id", Value::from("op-1")),
        ]),
    );
    a.send_value(&Value::Dict(step)).await;
    factory_gate.wait_reached(1).await;
    // A discover now must wait for the domain to be built ...
    let b = Client::over_memory(
        server.connect_memory(),
        ClientConfig::default().with_discover(false),
    )
    .await
    .unwrap();
    let discovering = tokio::spawn(async move { (b.discover().await, b) });
    // ... and no longer than that: the step that follows hangs.
    factory_gate.open();
    let (all, b) = tokio::time::timeout(Duration::from_secs(5), discovering)
        .await
        .expect("discover returns once the domain is built")
        .unwrap();
    assert!(all.unwrap().iter().any(|d| d.id() == "lazy_hung"));
    step_gate.wait_reached(1).await;
    step_gate.open();
    let answer = a.recv().await.expect("the step's answer");
    assert_eq!(answer.get("type").and_then(Value::as_str), Some("response"));
    b.close().await;
    server.shutdown().await;
}

/// An env whose `step` calls back into its own server over `url`: a new
/// client connects (discovering every domain, its own busy one included),
/// describes its own env and steps `counter`; the reward is the counter's.
struct CallsBack {
    url: Arc<OnceLock<String>>,
}

impl Env for CallsBack {
    fn reset(&mut self, _: ResetArgs) -> HostResult<ResetResult> {
        Ok(ResetResult::new(
            (),
            NdArray::from_vec(vec![0.0f32]),
            Dict::new(),
        ))
    }
    fn step(&mut self, _: Value) -> HostResult<StepResult> {
        let url = self.url.get().ok_or_else(|| HostError::new("no url"))?;
        let inner = || -> Result<f64, unienv_remote::client::ClientError> {
            let client = blocking::Client::connect(url, within_a_second())?;
            let own = client.describe("caller")?;
            assert_eq!(own.id(), "caller");
            let counter = client.env("counter")?;
            counter.reset(ResetArgs::with_seed(0))?;
            let step = counter.step(pair(2.0))?;
            client.close();
            Ok(step.reward.as_f64().unwrap_or(f64::NAN))
        };
        let reward = inner().map_err(|e| HostError::new(e.to_string()))?;
        Ok(StepResult::new(
            NdArray::from_vec(vec![0.0f32]),
            reward,
            false,
            false,
            Dict::new(),
        ))
    }
    fn action_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![]))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![1]))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_call_connects_back_to_its_own_server() {
    let url = Arc::new(OnceLock::new());
    let server = common::fixture_server_with(ServerConfig::default(), |b| {
        b.register_env("caller", CallsBack { url: url.clone() })
            .map(|_| ())
    });
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    url.set(listener.url()).unwrap();
    let client = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .unwrap();
    let caller = client.env("caller").await.unwrap();
    caller.reset(ResetArgs::with_seed(0)).await.unwrap();
    for _ in 0..3 {
        let step = caller.step(Value::Float(0.0)).await.unwrap();
        // counter's reward after one step of [2, 2] from 0.
        assert!(step.reward.as_f64().is_some_and(f64::is_finite));
    }
    client.close().await;
    server.shutdown().await;
}

/// An env whose `step` shuts its own server down (from the domain thread),
/// recording how long the shutdown took; counts its closes.
struct ShutsDown {
    server: Arc<OnceLock<Server>>,
    took: Arc<OnceLock<Duration>>,
    closes: Arc<AtomicUsize>,
}

impl Env for ShutsDown {
    fn reset(&mut self, _: ResetArgs) -> HostResult<ResetResult> {
        Ok(ResetResult::new(
            (),
            NdArray::from_vec(vec![0.0f32]),
            Dict::new(),
        ))
    }
    fn step(&mut self, _: Value) -> HostResult<StepResult> {
        let server = self
            .server
            .get()
            .ok_or_else(|| HostError::new("no server"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| HostError::new(e.to_string()))?;
        assert_eq!(server.hosted_domain(), Some(server.roots().len() - 1));
        let started = Instant::now();
        runtime.block_on(server.shutdown());
        let _ = self.took.set(started.elapsed());
        Ok(StepResult::new(
            NdArray::from_vec(vec![0.0f32]),
            0.0,
            false,
            false,
            Dict::new(),
        ))
    }
    fn close(&mut self) {
        self.closes.fetch_add(1, Ordering::SeqCst);
    }
    fn action_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![]))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![1]))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_from_inside_a_hosted_call_does_not_wait_on_its_own_domain() {
    let cell = Arc::new(OnceLock::new());
    let took = Arc::new(OnceLock::new());
    let closes = Arc::new(AtomicUsize::new(0));
    // A long shutdown timeout: waiting on its own domain would show.
    let config = ServerConfig {
        shutdown_timeout: Duration::from_secs(30),
        ..ServerConfig::default()
    };
    let server = common::fixture_server_with(config, |b| {
        b.register_env(
            "closer",
            ShutsDown {
                server: cell.clone(),
                took: took.clone(),
                closes: closes.clone(),
            },
        )
        .map(|_| ())
    });
    assert_eq!(server.hosted_domain(), None);
    cell.set(server.clone()).ok().unwrap();
    let client = Client::over_memory(server.connect_memory(), ClientConfig::default())
        .await
        .unwrap();
    let closer = client.env("closer").await.unwrap();
    closer.reset(ResetArgs::with_seed(0)).await.unwrap();
    // The shutdown closes this session: the step's answer is lost.
    let e = closer.step(Value::Float(0.0)).await.unwrap_err();
    assert_eq!(e.code(), "uncertain_outcome", "{e}");
    // The domain stops when the call returns, closing its env once.
    let deadline = Instant::now() + Duration::from_secs(10);
    while closes.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the env was never closed");
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(closes.load(Ordering::SeqCst), 1);
    let took = *took.get().expect("the shutdown returned inside the call");
    assert!(took < Duration::from_secs(10), "shutdown took {took:?}");
    assert_eq!(server.live_tasks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_while_discover_waits_on_a_hanging_factory_leaves_no_task() {
    let gate = Gate::new();
    let config = ServerConfig {
        shutdown_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let server = common::fixture_server_with(config, |b| {
        let g = gate.clone();
        b.register_factory("never", move || {
            g.pass();
            Ok(Hosted::env(GatedEnv::new(Gate::new())))
        })
        .map(|_| ())
    });
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    let url = listener.url();
    let waiting = tokio::spawn(async move {
        Client::connect(&url, ClientConfig::default().with_timeout(None)).await
    });
    gate.wait_reached(1).await;
    let started = Instant::now();
    listener.stop().await;
    server.shutdown().await;
    // The documented bound: shutdown_timeout for sessions, at most 1 s of
    // grace for aborted tasks, shutdown_timeout for domain threads.
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(300 * 2 + 1000 + 500),
        "{took:?}"
    );
    assert_eq!(server.live_tasks(), 0);
    let connected = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting connect ends with the connection")
        .unwrap();
    assert!(connected.is_err());
    gate.open();
}
