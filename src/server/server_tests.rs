//! The server's entry points: `serve` on a caller's listener, and
//! configurations refused when started or listened with.

use super::*;
use crate::client::{Client, ClientConfig};
use crate::codec::Value;
use crate::fixtures::{CounterEnv, CounterVariant};

fn builder(config: ServerConfig) -> ServerBuilder {
    let mut b = Server::builder(config);
    b.register_env("counter", CounterEnv::new(None, CounterVariant::Plain))
        .expect("register");
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_accepts_on_a_listener_bound_by_the_caller() {
    let server = builder(ServerConfig::default())
        .start()
        .expect("a valid server configuration");
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let listener = server.serve(tcp).await.unwrap();
    assert_eq!(listener.local_addr(), addr);
    let client = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .unwrap();
    let ids: Vec<String> = client
        .discover()
        .await
        .unwrap()
        .iter()
        .map(|d| d.id().to_string())
        .collect();
    assert_eq!(ids, ["counter"]);
    client.close().await;
    server.shutdown().await;
    assert_eq!(server.session_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configurations_are_refused_with_their_field() {
    let config = ServerConfig {
        max_in_flight: 0,
        ..ServerConfig::default()
    };
    match builder(config).start() {
        Err(ServerConfigError::TooSmall { field, value, min }) => {
            assert_eq!((field, value, min), ("max_in_flight", 0, 1))
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("started with max_in_flight 0"),
    }
    let config = ServerConfig {
        token: Some(String::new()),
        ..ServerConfig::default()
    };
    let server = builder(config)
        .start()
        .expect("a token matters only to listeners");
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let e = server
        .serve(tcp)
        .await
        .err()
        .expect("serving with an empty token");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let source = e
        .get_ref()
        .and_then(|s| s.downcast_ref::<ServerConfigError>());
    assert_eq!(source, Some(&ServerConfigError::EmptyToken));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_address_is_a_bind_error_naming_it() {
    let server = builder(ServerConfig::default())
        .start()
        .expect("a valid server configuration");
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap();
    let e = match server.listen(addr).await {
        Ok(_) => panic!("a taken port was bound"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    match ListenError::of(&e) {
        Some(ListenError::Bind { addrs, .. }) => assert_eq!(addrs, &[addr]),
        other => panic!("not a bind error: {other:?}"),
    }
    assert!(e.to_string().contains("another server is using it"), "{e}");
    server.shutdown().await;
}

/// With `cpus`, each domain thread runs pinned to them from its start: an
/// object built on it (eagerly or by a lazy factory at its first request)
/// sees the placement as its thread's allowed set.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn domain_threads_are_pinned_to_the_configured_cpus() {
    let allowed = current_thread_cpus().expect("sched_getaffinity");
    // The last allowed CPU: a proper subset whenever there are two.
    let cpu = *allowed.last().expect("a CPU");
    let (seen_tx, seen) = std::sync::mpsc::channel::<(String, Vec<usize>)>();
    let mut b = Server::builder(ServerConfig {
        cpus: Some(vec![cpu]),
        ..ServerConfig::default()
    });
    for (id, lazy) in [("eager", false), ("lazy", true)] {
        let seen_tx = seen_tx.clone();
        let build = move || {
            let name = std::thread::current().name().unwrap_or("").to_string();
            let _ = seen_tx.send((name, current_thread_cpus().unwrap_or_default()));
            Ok(Hosted::env(CounterEnv::new(None, CounterVariant::Plain)))
        };
        if lazy {
            b.register_factory(id, build).expect("register");
        } else {
            b.register_with(id, build).expect("register");
        }
    }
    let server = b.start().expect("a valid placement");
    let (name, cpus) = seen.recv().expect("the eager build");
    assert!(name.starts_with("unienv-domain-"), "{name}");
    assert_eq!(cpus, [cpu]);
    // The lazy one is built at its first request.
    let client = Client::over_memory(server.connect_memory(), ClientConfig::default())
        .await
        .expect("in-memory session");
    let env = client.env("lazy").await.expect("the lazy env");
    env.reset(crate::host::ResetArgs::default())
        .await
        .expect("reset");
    let (name, cpus) = seen.recv().expect("the lazy build");
    assert!(name.starts_with("unienv-domain-"), "{name}");
    assert_eq!(cpus, [cpu]);
    // The caller's thread is not the server's: untouched.
    assert_eq!(current_thread_cpus().expect("sched_getaffinity"), allowed);
    client.close().await;
    server.shutdown().await;
}

/// An unusable placement is refused at start with what is wrong with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_placement_is_refused_at_start() {
    let refused = |cpus: Vec<usize>| {
        builder(ServerConfig {
            cpus: Some(cpus),
            ..ServerConfig::default()
        })
        .start()
        .err()
        .expect("started with an unusable placement")
    };
    assert_eq!(
        refused(vec![]),
        ServerConfigError::Placement(PlacementError::NoCpus)
    );
    #[cfg(target_os = "linux")]
    {
        match refused(vec![0, 1023]) {
            ServerConfigError::Placement(PlacementError::CpuOutOfRange { cpu, available }) => {
                assert_eq!(cpu, 1023);
                assert!(available < 1023);
            }
            e => panic!("another error: {e}"),
        }
        let e = refused(vec![1023]);
        assert!(e.to_string().contains("CPU 1023 does not exist"), "{e}");
    }
    #[cfg(not(target_os = "linux"))]
    assert_eq!(
        refused(vec![0]),
        ServerConfigError::Placement(PlacementError::Unsupported)
    );
}

/// What a session holds, polled until it has not changed for 10 polls
/// (its requests' frames and trees given back once answered).
async fn settled(account: &crate::budget::Account) -> usize {
    let (mut last, mut same) = (usize::MAX, 0);
    for _ in 0..500 {
        let held = account.held();
        same = if held == last { same + 1 } else { 0 };
        if same == 10 {
            return held;
        }
        last = held;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the account did not settle ({last} bytes)");
}

/// The session's kept requests are charged to its byte account: a session
/// whose budget cannot hold them steps as well (every request decoded by
/// the general decoder, no error), and the account returns to zero when the
/// session ends, as it does for a session that kept them.
///
/// The second session's account is mostly taken by the test itself before
/// it steps (more than half its cap, less than the whole), so a kept
/// request can never fit under half the cap while the messages in flight
/// (a request may arrive before the previous one's frame and reply are
/// given back) always fit under the whole of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_requests_are_charged_to_the_sessions_budget() {
    const CAP: usize = 64 << 10;
    let mut held_while_open = Vec::new();
    for taken in [0, CAP / 2 + (1 << 10)] {
        let server = builder(ServerConfig {
            max_connection_bytes: CAP,
            ..ServerConfig::default()
        })
        .start()
        .expect("a valid server configuration");
        let client = Client::over_memory(server.connect_memory(), ClientConfig::default())
            .await
            .expect("in-memory session");
        let account = {
            let sessions = server.inner.shared.sessions.lock();
            let session = sessions.values().next().and_then(|s| s.upgrade());
            session.expect("the session").account.clone()
        };
        let taken_by_test = account.charge(taken).expect("room for the test's charge");
        let env = client.env("counter").await.expect("the env");
        env.reset(crate::host::ResetArgs::default())
            .await
            .unwrap_or_else(|e| panic!("{taken} bytes taken: reset: {e:?}"));
        let mut expected = [0.0f32; 2];
        for i in 0..20 {
            let action = [i as f32, 0.5];
            let step = env
                .step(Value::Array(crate::codec::NdArray::from_vec(
                    action.to_vec(),
                )))
                .await
                .expect("step");
            expected[0] += action[0];
            expected[1] += action[1];
            let Value::Dict(obs) = &step.observation else {
                panic!("{:?}", step.observation)
            };
            let Some(Value::Array(position)) = obs.get("position") else {
                panic!("{obs:?}")
            };
            assert_eq!(
                position.to_f64_vec(),
                expected.iter().map(|&x| x as f64).collect::<Vec<_>>()
            );
        }
        held_while_open.push(settled(&account).await - taken);
        drop(taken_by_test);
        client.close().await;
        server.shutdown().await;
        assert_eq!(
            settled(&account).await,
            0,
            "{taken} bytes taken: given back at the end"
        );
    }
    // 64 KiB holds the kept step and reset requests (~2.5 KiB each); with
    // 33 KiB of it taken, the account is already over half the cap, so
    // nothing is kept, and that session stepped all the same.
    assert!(held_while_open[0] > 0, "{held_while_open:?}");
    assert_eq!(held_while_open[1], 0, "{held_while_open:?}");
}

/// The recorder's byte budget is part of the worst case when recording,
/// and only then.
#[test]
fn the_record_queue_budget_is_in_the_worst_case() {
    let config = ServerConfig::default();
    let base = config.worst_case_memory_bytes();
    let recording = ServerConfig {
        record_dir: Some("unused".into()),
        ..config.clone()
    };
    assert_eq!(
        recording.worst_case_memory_bytes(),
        base + crate::record::DEFAULT_QUEUE_BYTES as u64
    );
    let smaller = ServerConfig {
        record_queue_bytes: 1 << 20,
        ..recording
    };
    assert_eq!(smaller.worst_case_memory_bytes(), base + (1 << 20));
}
