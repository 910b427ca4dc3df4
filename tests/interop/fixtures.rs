//! The fixture registry hosted by our server gives the same results as the
//! same registry hosted by the reference Python server, call by call, through
//! the reference Python client: env mode (batched and unbatched), the
//! reference's RemoteWorldEnv in component mode, detached devices, ownership
//! conflicts, abort/fault/recovery, a disconnect mid-operation, a client
//! timeout (UncertainOutcomeError), serialization errors, observers and
//! factories.

use crate::common;

use unienv_remote::fixtures;
use unienv_remote::server::{Server, ServerConfig};

#[test]
fn fixture_registry_matches_the_reference_server() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let reference = common::RefServer::start(&python, None);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (server, listener) = rt.block_on(async {
        let mut b = Server::builder(ServerConfig::default());
        fixtures::register(&mut b).unwrap();
        let server = b.start();
        let listener = server.listen("127.0.0.1:0").await.unwrap();
        (server, listener)
    });
    let out = common::run_python(
        &python,
        "compare_fixtures.py",
        &[&listener.url(), &reference.url],
        None,
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("results compared"), "{text}");
    rt.block_on(server.shutdown());
}
