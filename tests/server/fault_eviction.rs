//! Idle eviction racing new requests: a factory domain with a 20 ms idle
//! timeout, and requests arriving at every moment around its eviction
//! (sleeps from 0 to 40 ms in between), many iterations, mixing env calls,
//! describes, subscriptions and control claims. Every request must be
//! answered correctly, and the revision must always equal the revivals
//! plus the resets so far.

use crate::common;

use common::faults::{pair, revision_of, CountClose};
use common::raw::{fields, result, Raw};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use unienv_remote::fixtures::{CounterEnv, CounterVariant};
use unienv_remote::server::{Hosted, Server, ServerConfig};
use unienv_remote::{Dict, Value};

const ITERATIONS: u64 = 240;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_racing_idle_eviction_are_all_answered_consistently() {
    let runs = Arc::new(AtomicUsize::new(0));
    let closes = Arc::new(AtomicUsize::new(0));
    let config = ServerConfig {
        idle_timeout: Some(Duration::from_millis(20)),
        ..ServerConfig::default()
    };
    let mut b = Server::builder(config);
    let (r, c) = (runs.clone(), closes.clone());
    b.register_factory("lazy", move || {
        r.fetch_add(1, Ordering::SeqCst);
        Ok(Hosted::env(CountClose {
            inner: CounterEnv::new(None, CounterVariant::Plain),
            closes: c.clone(),
            panic_on_close: false,
        }))
    })
    .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    let mut resets = 0u64;
    let mut found_alive = 0;
    let expected_revision =
        |runs: &AtomicUsize, resets: u64| runs.load(Ordering::SeqCst) as u64 - 1 + resets;
    for i in 0..ITERATIONS {
        tokio::time::sleep(Duration::from_millis(i * 7 % 41)).await;
        let runs_before = runs.load(Ordering::SeqCst);
        match i % 4 {
            0 => {
                let seed = fields(&[("seed", Value::Int(i as i64))]);
                let r = result(&raw.env_call("lazy", "reset", vec![], seed).await);
                resets += 1;
                assert_eq!(
                    revision_of(&r, "lazy").0,
                    expected_revision(&runs, resets),
                    "iteration {i}"
                );
                let r = result(
                    &raw.env_call("lazy", "step", vec![pair(1.0)], Dict::new())
                        .await,
                );
                let obs = &r.get("value").unwrap().as_seq().unwrap()[0];
                let position = obs.get("position").and_then(Value::as_array).unwrap();
                assert_eq!(
                    position.to_f64_vec(),
                    vec![i as f64 + 1.0; 2],
                    "iteration {i}"
                );
                result(&raw.op("release", Some("lazy"), Dict::new()).await);
            }
            1 => {
                let d = result(&raw.op("describe", Some("lazy"), Dict::new()).await);
                assert_eq!(
                    revision_of(&d, "lazy").0,
                    expected_revision(&runs, resets),
                    "iteration {i}"
                );
            }
            2 => {
                let sub = fields(&[("subscription_id", Value::from(format!("s{i}")))]);
                result(&raw.op("subscribe", Some("lazy"), sub.clone()).await);
                result(&raw.op("unsubscribe", Some("lazy"), sub).await);
            }
            _ => {
                let mode = fields(&[("mode", Value::from("env"))]);
                result(&raw.op("acquire", Some("lazy"), mode).await);
                result(&raw.op("release", Some("lazy"), Dict::new()).await);
            }
        }
        if runs.load(Ordering::SeqCst) == runs_before {
            found_alive += 1;
        }
    }
    let (runs, closes) = (runs.load(Ordering::SeqCst), closes.load(Ordering::SeqCst));
    // Every revival followed an eviction; the races went both ways.
    assert!(
        closes == runs || closes + 1 == runs,
        "{closes} closes, {runs} runs"
    );
    assert!(
        runs > 10,
        "only {runs} factory runs: evictions did not race"
    );
    assert!(
        found_alive > 10,
        "only {found_alive} requests found it alive"
    );
    server.shutdown().await;
}
