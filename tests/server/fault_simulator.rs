//! Simulators that fail, panic or hang, while other sessions drive other
//! domains at the same time: only the misbehaving domain is affected.
//! Requests to a hung domain time out on the client side (our client, short
//! timeout); every other domain keeps answering; when the simulator comes
//! back, so does its domain.

use crate::common;

use common::faults::{pair, Gate, GatedEnv};
use std::time::{Duration, Instant};
use unienv_remote::client::{Client, ClientConfig, ClientError};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::ServerConfig;
use unienv_remote::Value;

fn config(timeout_ms: u64) -> ClientConfig {
    ClientConfig::default()
        .with_timeout(Some(Duration::from_millis(timeout_ms)))
        .with_discover(false)
}

/// Position of the fixture counter in a step or reset observation.
fn position(obs: &Value) -> Vec<f64> {
    obs.get("position")
        .and_then(Value::as_array)
        .map(|a| a.to_f64_vec())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_simulator_times_out_its_clients_only() {
    let gate = Gate::new();
    let server = common::fixture_server_with(ServerConfig::default(), |b| {
        b.register_env("hung", GatedEnv::new(gate.clone()))
            .map(|_| ())
    });
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    let url = listener.url();

    let x = Client::connect(&url, config(300)).await.unwrap();
    let hung = x.env("hung").await.unwrap();
    hung.reset(ResetArgs::with_seed(1)).await.unwrap();
    let started = Instant::now();
    let e = hung.step(Value::Float(5.0)).await.unwrap_err();
    assert_eq!(e.code(), "uncertain_outcome", "{e}");
    assert!(matches!(e, ClientError::Uncertain(ref cause) if cause.code() == "timeout"));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(x.is_closed(), "a timeout closes the connection");
    assert_eq!(gate.reached(), 1);

    // Another client's describe of the hung domain is answered at once,
    // from its last committed boundary (x's reset); a read queues behind
    // the hung step and times out (certain).
    let y = Client::connect(&url, config(300)).await.unwrap();
    let d = y.describe("hung").await.unwrap();
    assert_eq!(d.sequence(), 1);
    let e = y
        .call("hung", "render", vec![], Default::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "timeout", "{e}");
    let y = Client::connect(&url, config(300)).await.unwrap();

    // Meanwhile every other domain answers, over both transports.
    let z = Client::connect(&url, config(2000)).await.unwrap();
    let m = Client::over_memory(server.connect_memory(), config(2000))
        .await
        .unwrap();
    let counter = z.env("counter").await.unwrap();
    let counter3 = m.env("counter3").await.unwrap();
    counter.reset(ResetArgs::with_seed(0)).await.unwrap();
    counter3.reset(ResetArgs::with_seed(0)).await.unwrap();
    for i in 1..=50 {
        let s = counter.step(pair(1.0)).await.unwrap();
        assert_eq!(position(&s.observation), vec![i as f64; 2]);
        let s = counter3.step(pair(2.0)).await.unwrap();
        assert_eq!(position(&s.observation), vec![2.0 * i as f64; 6]);
    }
    let arm = m.node("arm").await.unwrap();
    m.with_operation(
        "arm",
        unienv_remote::client::OperationKind::Reset,
        async |_| arm.reset(0, &ResetArgs::with_seed(4)).await,
    )
    .await
    .unwrap();
    assert_eq!(
        arm.get_observation()
            .await
            .unwrap()
            .as_array()
            .unwrap()
            .to_f64_vec(),
        vec![4.0]
    );

    // The simulator comes back: its domain answers again, not faulted (the
    // step that hung did complete: 1 + 5), after the queued describe.
    gate.open();
    let w = Client::connect(&url, config(5000)).await.unwrap();
    let env = w.env("hung").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let step = loop {
        // The hung client's control is released once its session is gone.
        match env.step(Value::Float(1.0)).await {
            Ok(s) => break s,
            Err(e) if e.code() == "ownership_conflict" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(step.reward.as_f64(), Some(7.0));
    for c in [&y, &z, &m, &w] {
        c.close().await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_and_panicking_simulators_under_concurrent_load() {
    let gate = Gate::new();
    gate.open();
    let server = common::fixture_server_with(ServerConfig::default(), |b| {
        b.register_env("bad", GatedEnv::new(gate)).map(|_| ())
    });

    // Three well-behaved controllers, each on its own domain, checking
    // every result while the bad domain fails and panics next to them.
    let mut good = Vec::new();
    for id in ["counter", "counter3", "lazy"] {
        let client = Client::over_memory(server.connect_memory(), config(5000))
            .await
            .unwrap();
        good.push(tokio::spawn(async move {
            let env = client.env(id).await.unwrap();
            env.reset(ResetArgs::with_seed(0)).await.unwrap();
            for i in 1..=200 {
                let s = env.step(pair(1.0)).await.unwrap();
                let p = position(&s.observation);
                assert!(
                    !p.is_empty() && p.iter().all(|&v| v == i as f64),
                    "{id}: {p:?}"
                );
            }
            client.close().await;
        }));
    }
    let client = Client::over_memory(server.connect_memory(), config(5000))
        .await
        .unwrap();
    let bad = client.env("bad").await.unwrap();
    for round in 0..40 {
        bad.reset(ResetArgs::with_seed(round)).await.unwrap();
        let action = if round % 2 == 0 { 7.0 } else { -1.0 };
        let e = bad.step(Value::Float(action)).await.unwrap_err();
        assert_eq!(e.code(), "execution_error");
        assert!(e.is_uncertain(), "a failed mutation is uncertain");
        let e = bad.step(Value::Float(1.0)).await.unwrap_err();
        assert_eq!(e.code(), "faulted");
        assert!(!e.is_uncertain());
        // Reads are refused too until a reset, with a certain error.
        let e = bad.render().await.unwrap_err();
        assert_eq!(e.code(), "faulted");
        assert!(!e.is_uncertain());
    }
    bad.reset(ResetArgs::with_seed(2)).await.unwrap();
    assert_eq!(
        bad.step(Value::Float(1.0)).await.unwrap().reward.as_f64(),
        Some(3.0)
    );
    for g in good {
        g.await.unwrap();
    }
    client.close().await;
    server.shutdown().await;
}
