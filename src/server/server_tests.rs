//! The server's entry points: `serve` on a caller's listener, and
//! configurations refused when started or listened with.

use super::*;
use crate::client::{Client, ClientConfig};
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
