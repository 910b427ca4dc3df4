//! Regression tests for bugs found by the reliability work (fuzzing, fault
//! and load tests, probes), one per bug, each named after what broke.

mod common;

use common::raw::{fields, result, Raw};
use std::time::Duration;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::transport::TransportError;
use unienv_remote::{Dict, Value};

/// An observer whose negotiated limit holds its hello and subscribe answers
/// but not even a `subscription_error` (380..=400 bytes here) was sent an
/// empty frame, an invalid envelope, when a snapshot did not fit. It must
/// be disconnected instead, and nobody else affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_error_that_cannot_fit_closes_the_session() {
    let mut b = Server::builder(ServerConfig::default());
    unienv_remote::fixtures::register(&mut b).unwrap();
    let server = b.start();
    let mut controller = Raw::connect(&server).await;
    for limit in [380, 400] {
        let mut observer = Raw::new(server.connect_memory());
        result(&observer.hello(Some(limit)).await);
        let sub = fields(&[("subscription_id", Value::from("s"))]);
        result(&observer.op("subscribe", Some("counter"), sub).await);
        result(
            &controller
                .env_call("counter", "reset", vec![], Dict::new())
                .await,
        );
        let next = tokio::time::timeout(Duration::from_secs(10), observer.transport.recv())
            .await
            .expect("the observer hears something");
        match next {
            Err(TransportError::Closed) => {}
            Ok(frame) => panic!("limit {limit}: sent a frame of {} bytes", frame.len()),
            Err(e) => panic!("{e}"),
        }
    }
    result(
        &controller
            .env_call("counter", "reset", vec![], Dict::new())
            .await,
    );
    server.shutdown().await;
}
