//! A factory that fails (with an error, then with a panic) and later
//! succeeds, at first use and again at revival after idle eviction: each
//! failure is an `execution_error` for the requests that needed the object,
//! leaves nothing behind (a refused subscription ID can be used again), and
//! never disturbs other domains or sessions.

use crate::common;

use common::faults::{pair, revision_of, CountClose};
use common::raw::{code, fields, result, Raw};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use unienv_remote::fixtures::{CounterEnv, CounterVariant};
use unienv_remote::host::HostError;
use unienv_remote::server::{Hosted, Server, ServerConfig};
use unienv_remote::{Dict, Value};

const OK: u8 = 0;
const FAILS: u8 = 1;
const PANICS: u8 = 2;

struct Flaky {
    mode: Arc<AtomicU8>,
    runs: Arc<AtomicUsize>,
    closes: Arc<AtomicUsize>,
}

fn message(m: &Dict) -> String {
    m.get("error")
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn server(idle: Duration) -> (Server, Flaky) {
    let flaky = Flaky {
        mode: Arc::new(AtomicU8::new(FAILS)),
        runs: Arc::new(AtomicUsize::new(0)),
        closes: Arc::new(AtomicUsize::new(0)),
    };
    let config = ServerConfig {
        idle_timeout: Some(idle),
        ..ServerConfig::default()
    };
    let mut b = Server::builder(config);
    unienv_remote::fixtures::register(&mut b).unwrap();
    let (mode, runs, closes) = (flaky.mode.clone(), flaky.runs.clone(), flaky.closes.clone());
    b.register_factory("flaky", move || {
        runs.fetch_add(1, Ordering::SeqCst);
        match mode.load(Ordering::SeqCst) {
            FAILS => Err(HostError::new("GPU not ready")),
            PANICS => panic!("driver crashed"),
            _ => Ok(Hosted::env(CountClose {
                inner: CounterEnv::new(None, CounterVariant::Plain),
                closes: closes.clone(),
                panic_on_close: false,
            })),
        }
    })
    .unwrap();
    (b.start().expect("a valid server configuration"), flaky)
}

/// Another session on other domains: must keep working throughout.
async fn bystander_works(raw: &mut Raw, step: &mut f32) {
    *step += 1.0;
    let r = result(
        &raw.env_call("counter", "step", vec![pair(1.0)], Dict::new())
            .await,
    );
    let obs = &r.get("value").unwrap().as_seq().unwrap()[0];
    let position = obs.get("position").and_then(Value::as_array).unwrap();
    assert_eq!(position.to_f64_vec(), vec![*step as f64; 2]);
    result(&raw.op("describe", Some("composed"), Dict::new()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_factory_that_fails_then_succeeds_at_first_use_and_at_revival() {
    let (server, flaky) = server(Duration::from_millis(100));
    let mut bystander = Raw::connect(&server).await;
    result(
        &bystander
            .env_call("counter", "reset", vec![], Dict::new())
            .await,
    );
    let mut steps = 0.0;
    let mut raw = Raw::connect(&server).await;
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 0, "hello builds nothing");

    // Failing: every request that needs the object says why; nothing sticks.
    let r = raw.op("describe", Some("flaky"), Dict::new()).await;
    assert_eq!(code(&r), "execution_error");
    assert!(message(&r).contains("GPU not ready"), "{r:?}");
    let r = raw.env_call("flaky", "reset", vec![], Dict::new()).await;
    assert_eq!(code(&r), "execution_error");
    let sub = fields(&[("subscription_id", Value::from("s1"))]);
    assert_eq!(
        code(&raw.op("subscribe", Some("flaky"), sub.clone()).await),
        "execution_error"
    );
    assert_eq!(
        code(&raw.op("discover", None, Dict::new()).await),
        "execution_error"
    );
    bystander_works(&mut bystander, &mut steps).await;
    // Panicking: the same, and the server carries on.
    flaky.mode.store(PANICS, Ordering::SeqCst);
    let r = raw.op("describe", Some("flaky"), Dict::new()).await;
    assert_eq!(code(&r), "execution_error");
    assert!(message(&r).contains("driver crashed"), "{r:?}");
    bystander_works(&mut bystander, &mut steps).await;
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 5);
    assert_eq!(flaky.closes.load(Ordering::SeqCst), 0);

    // Fixed: the refused subscription ID is free, the env works.
    flaky.mode.store(OK, Ordering::SeqCst);
    result(&raw.op("subscribe", Some("flaky"), sub.clone()).await);
    let r = result(
        &raw.env_call("flaky", "reset", vec![], fields(&[("seed", Value::Int(2))]))
            .await,
    );
    assert_eq!(revision_of(&r, "flaky"), (1, 1));
    let snapshot = loop {
        let m = raw.recv().await.unwrap();
        if m.get("type").and_then(Value::as_str) == Some("snapshot") {
            break m;
        }
    };
    assert_eq!(snapshot.get("sequence").and_then(Value::as_u64), Some(1));
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 6);
    result(&raw.op("unsubscribe", Some("flaky"), sub).await);
    result(&raw.op("release", Some("flaky"), Dict::new()).await);

    // Evicted when idle, then the revival fails, then succeeds.
    let deadline = Instant::now() + Duration::from_secs(10);
    while flaky.closes.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "not evicted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    flaky.mode.store(FAILS, Ordering::SeqCst);
    let r = raw.op("describe", Some("flaky"), Dict::new()).await;
    assert_eq!(code(&r), "execution_error");
    bystander_works(&mut bystander, &mut steps).await;
    flaky.mode.store(OK, Ordering::SeqCst);
    let d = result(&raw.op("describe", Some("flaky"), Dict::new()).await);
    // Revival advances the revision once (1 → 2); the sequence stays.
    assert_eq!(revision_of(&d, "flaky"), (2, 1));
    let r = result(
        &raw.env_call("flaky", "step", vec![pair(1.0)], Dict::new())
            .await,
    );
    // A fresh object: the position starts from 0 again.
    let obs = &r.get("value").unwrap().as_seq().unwrap()[0];
    assert_eq!(
        obs.get("position")
            .and_then(Value::as_array)
            .unwrap()
            .to_f64_vec(),
        vec![1.0, 1.0]
    );
    assert_eq!(flaky.runs.load(Ordering::SeqCst), 8);
    bystander_works(&mut bystander, &mut steps).await;
    server.shutdown().await;
    assert_eq!(flaky.closes.load(Ordering::SeqCst), 2);
}
