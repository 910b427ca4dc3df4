//! The reference Python client against our server, for what only our test
//! server hosts: a panicking simulator (it faults only its own domain), and
//! a bearer token sent through the client's `additional_headers`.

use crate::common;

use common::envs::{log, RecordingEnv};
use unienv_remote::server::{Server, ServerConfig};

#[test]
fn reference_client_survives_a_panicking_simulator_and_authenticates() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let events = log();
    let (server, listener) = rt.block_on(async {
        let config = ServerConfig {
            token: Some("s3cret-token".into()),
            ..ServerConfig::default()
        };
        let mut b = Server::builder(config);
        b.register_env("good", RecordingEnv::new("good", events.clone()))
            .unwrap();
        b.register_env("bad", RecordingEnv::new("bad", events.clone()))
            .unwrap();
        let server = b.start().expect("a valid server configuration");
        let listener = server.listen("127.0.0.1:0").await.unwrap();
        (server, listener)
    });
    let out = common::run_python(
        &python,
        "drive_our_server.py",
        &[&listener.url(), "s3cret-token"],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&out).trim(), "ok");
    rt.block_on(server.shutdown());
    assert!(events.lock().iter().any(|e| e == "bad.step(7)"));
}
