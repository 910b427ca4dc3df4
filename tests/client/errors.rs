//! Timeouts and uncertainty, ownership conflicts between clients, error
//! codes, message limits and connection errors; against our server and the
//! reference server (identical transcripts).

use crate::support;

use std::time::{Duration, Instant};
use support::{assert_same, floats, ours_with, targets, Target};
use unienv_remote::client::{
    Client, ClientConfig, ClientConfigError, ClientError, ConnectFailure, Mode, OperationKind,
};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::ServerConfig;
use unienv_remote::{Dict, NdArray};

fn outcome<T: std::fmt::Debug>(r: &Result<T, ClientError>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("error {} uncertain={}", e.code(), e.is_uncertain()),
    }
}

fn status<T>(r: &Result<T, ClientError>) -> String {
    match r {
        Ok(_) => "ok".to_string(),
        Err(e) => format!("error {} uncertain={}", e.code(), e.is_uncertain()),
    }
}

fn pair(x: f32) -> NdArray {
    NdArray::from_vec(vec![x, x])
}

async fn timeout_scenario(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let config = ClientConfig::default().with_timeout(Some(Duration::from_millis(500)));
    let client = t.connect(config).await;
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let started = Instant::now();
    // An action of all 99 makes the counter sleep 1.5 s.
    let r = env.step(pair(99.0)).await;
    let elapsed = started.elapsed();
    log.push(format!("slow step: {}", outcome(&r)));
    let error = r.expect_err("timed out");
    assert!(error.is_uncertain());
    assert_eq!(error.code(), "uncertain_outcome");
    assert_eq!(error.cause().code(), "timeout");
    assert!(
        elapsed >= Duration::from_millis(450) && elapsed < Duration::from_millis(1500),
        "the timeout fired after {elapsed:?}"
    );
    assert!(client.is_closed(), "a timeout closes the connection");
    let sent = client.requests_sent();
    let r = env.step(pair(1.0)).await;
    log.push(format!("after the timeout: {}", outcome(&r)));
    assert_eq!(client.requests_sent(), sent, "nothing is sent (or retried)");

    // The mutation did execute: another client sees its effect. (Connecting
    // no longer waits for the slow step on our server, so the first
    // client's release may still be on its way: ownership_conflict until
    // the server has seen that session end.)
    let other = t.client().await;
    let env = other.env("counter").await.expect("counter");
    let deadline = Instant::now() + Duration::from_secs(10);
    let step = loop {
        match env.step(pair(0.0)).await {
            Err(e) if e.code() == "ownership_conflict" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            r => break r.expect("step"),
        }
    };
    let position = step.observation.get("position").expect("position");
    assert_eq!(floats(position), vec![99.0, 99.0]);
    log.push(format!("seen by another client: {position}"));
    other.close().await;
    log
}

async fn ownership_scenario(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let a = t.client().await;
    let b = t.client().await;
    let env_a = a.env("counter").await.expect("counter");
    let env_b = b.env("counter").await.expect("counter");
    env_a
        .reset(ResetArgs::with_seed(1))
        .await
        .expect("a claims");
    let r = env_b.reset(ResetArgs::with_seed(2)).await;
    log.push(format!("b resets a's env: {}", outcome(&r)));
    assert_eq!(r.expect_err("conflict").code(), "ownership_conflict");
    let r = b.acquire("counter", None).await;
    log.push(format!("b acquires: {}", outcome(&r)));
    let r = env_b.render().await;
    log.push(format!("b renders: {}", outcome(&r)));
    // Another mode for the same owner conflicts too.
    let r = a.operation("counter", OperationKind::Step).await;
    log.push(format!(
        "a begins a component operation on its env: {}",
        outcome(&r)
    ));
    assert_eq!(a.current_operation("counter"), None);
    // Release hands control over.
    a.release("counter", false).await.expect("release");
    let r = env_b
        .reset(ResetArgs::with_seed(2))
        .await
        .map(|r| r.context);
    log.push(format!("b resets after release: {}", outcome(&r)));
    let r = env_a.step(pair(1.0)).await;
    log.push(format!("a steps after release: {}", outcome(&r)));

    // Components mode: reads through proxies belong to the controller.
    let arm_a = a.node("arm").await.expect("arm");
    let arm_b = b.node("arm").await.expect("arm");
    a.acquire("arm", None).await.expect("a acquires arm");
    let r = arm_b.get_observation().await;
    log.push(format!("b reads a's node: {}", outcome(&r)));
    let r = b.acquire("arm", Some(Mode::Components)).await;
    log.push(format!("b acquires arm: {}", outcome(&r)));
    // Observers need no control.
    let sub = b.subscribe("arm", None).await;
    log.push(format!("b subscribes: {}", status(&sub)));
    let r = a.acquire("arm", Some(Mode::Env)).await;
    log.push(format!(
        "a acquires a detached node in env mode: {}",
        outcome(&r)
    ));
    let r = arm_a.get_observation().await;
    log.push(format!("a still controls: {}", outcome(&r)));
    // Disconnecting releases control.
    a.close().await;
    let mut ok = false;
    for _ in 0..500 {
        if b.acquire("arm", None).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    log.push(format!("b acquires after a disconnected: {ok}"));
    assert!(ok);
    drop(sub);
    b.close().await;
    log
}

async fn codes_scenario(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let client = t.client().await;
    let r = client.describe("nope").await;
    log.push(format!("describe unknown: {}", outcome(&r)));
    let r = client
        .call("counter", "reload", Vec::new(), Dict::new())
        .await;
    log.push(format!("counter reload: {}", outcome(&r)));
    let r = client.call("arm", "fly", Vec::new(), Dict::new()).await;
    log.push(format!("unknown method: {}", outcome(&r)));
    let r = client.subscribe("arm", Some(&["smell"])).await;
    log.push(format!("unknown field: {}", status(&r)));
    let r = client.env("arm").await;
    log.push(format!("arm as env: {}", status(&r)));

    let broken = client.env("broken_render").await.expect("env");
    let r = broken.render().await;
    log.push(format!("broken render: {}", outcome(&r)));
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let r = env.step(NdArray::from_vec(vec![1.0f32, 2.0, 3.0])).await;
    log.push(format!("bad action: {}", outcome(&r)));
    let error = r.expect_err("execution error");
    let remote = error.remote().expect("a server error");
    assert!(!remote.message.is_empty());
    let r = env.step(pair(1.0)).await;
    log.push(format!("step after a failed step: {}", outcome(&r)));
    let r = env.reset(ResetArgs::with_seed(0)).await.map(|_| ());
    log.push(format!("reset recovers: {}", outcome(&r)));
    let r = env.step(pair(1.0)).await.map(|s| s.reward);
    log.push(format!("step again: {}", outcome(&r)));
    assert!(!client.is_closed(), "server errors keep the connection");
    client.close().await;
    log
}

async fn limits_scenario(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let config = ClientConfig::default().with_max_message_size(100_000);
    let client = t.connect(config).await;
    assert_eq!(client.max_message_size(), 100_000, "the smaller limit wins");
    assert_eq!(client.server_info().max_message_size, 100_000);

    // Too large to send: nothing is sent, the connection stays.
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let sent = client.requests_sent();
    let huge = NdArray::from_vec(vec![0.0f32; 50_000]);
    let r = env.step(huge).await;
    log.push(format!("oversized request: {}", outcome(&r)));
    assert!(matches!(r, Err(ClientError::Codec(_))));
    assert_eq!(client.requests_sent(), sent);
    assert!(!client.is_closed());

    // Too large to receive: the server answers with an error instead.
    let large_render = client.env("large_render").await.expect("env");
    let r = large_render.render().await;
    log.push(format!("oversized render: {}", outcome(&r)));
    let large_info = client.env("large_info").await.expect("env");
    large_info
        .reset(ResetArgs::with_seed(0))
        .await
        .expect("reset");
    let r = large_info.step(pair(1.0)).await;
    log.push(format!("oversized step result: {}", outcome(&r)));
    assert!(!client.is_closed());
    client.close().await;
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_make_mutations_uncertain_and_close_the_connection() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, timeout_scenario(t).await));
    }
    assert_same(&transcripts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_conflicts_between_clients() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, ownership_scenario(t).await));
    }
    assert_same(&transcripts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_their_codes() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, codes_scenario(t).await));
    }
    assert_same(&transcripts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_limits_are_negotiated_and_enforced() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, limits_scenario(t).await));
    }
    assert_same(&transcripts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_errors_and_bearer_tokens() {
    // Nothing listens on a port that was just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let r = Client::connect(&format!("ws://127.0.0.1:{port}"), ClientConfig::default()).await;
    assert_eq!(r.expect_err("refused").code(), "connection_error");
    let r = Client::connect("not a url", ClientConfig::default()).await;
    assert_eq!(r.expect_err("bad url").code(), "connection_error");
    let r = Client::connect(
        "ws://127.0.0.1:1",
        ClientConfig::default().with_max_message_size(4),
    )
    .await;
    let error = r.expect_err("too small");
    assert_eq!(error.code(), "invalid_use");
    assert!(matches!(
        error,
        ClientError::Config(ClientConfigError::MessageSizeTooSmall { size: 4, min: 8 })
    ));

    let t = ours_with(ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    })
    .await;
    let r = Client::connect(&t.url, ClientConfig::default()).await;
    let error = r.expect_err("no token");
    assert_eq!(error.code(), "connection_error");
    assert!(error.to_string().contains("401"), "{error}");
    assert!(error.to_string().contains("--token"), "{error}");
    assert!(
        matches!(
            &error,
            ClientError::Connect(ConnectFailure::Refused { status: 401, .. })
        ),
        "{error:?}"
    );
    let ClientError::Connect(failure) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(failure.status(), Some(401));
    assert!(!failure.is_refused_by_os() && failure.io_error().is_none());
    assert!(matches!(
        failure.transport(),
        Some(unienv_remote::transport::ConnectError::Refused { status: 401, .. })
    ));
    // Nothing listens: refused by the operating system, its io::Error kept.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    match Client::connect(&format!("ws://127.0.0.1:{port}"), ClientConfig::default()).await {
        Err(ClientError::Connect(failure)) => {
            assert!(failure.is_refused_by_os(), "{failure:?}");
            assert_eq!(
                failure.io_error().map(std::io::Error::kind),
                Some(std::io::ErrorKind::ConnectionRefused)
            );
            assert!(std::error::Error::source(&failure).is_some());
        }
        other => panic!("{other:?}"),
    }
    let r = Client::connect(&t.url, ClientConfig::default().with_token("wrong")).await;
    assert_eq!(r.expect_err("wrong token").code(), "connection_error");
    let client = Client::connect(
        &t.url,
        ClientConfig::default()
            .with_token("s3cret")
            .with_header("X-Trace", "client-tests"),
    )
    .await
    .expect("with the token");
    let env = client.env("counter").await.expect("counter");
    let reset = env.reset(ResetArgs::with_seed(3)).await.expect("reset");
    assert_eq!(floats(&reset.context), vec![3.0, 3.0]);
    client.close().await;
    let r = Client::connect(
        &t.url,
        ClientConfig::default().with_header("bad header name", "x"),
    )
    .await;
    // Refused by the configuration's validation, before any connection.
    assert!(matches!(
        r.expect_err("bad header"),
        ClientError::Config(ClientConfigError::InvalidHeaderName { .. })
    ));
}
