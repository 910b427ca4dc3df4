//! The fixture registry hosted by our server gives the same results as the
//! same registry hosted by the reference Python server, call by call, through
//! the reference Python client: env mode (batched and unbatched), the
//! reference's RemoteWorldEnv in component mode, detached devices, ownership
//! conflicts, abort/fault/recovery, a disconnect mid-operation, a client
//! timeout (UncertainOutcomeError), serialization errors, observers and
//! factories.

use crate::common;

#[test]
fn fixture_registry_matches_the_reference_server() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let reference = common::RefServer::start(&python, None);
    let (rt, server, listener) = common::serve_on_runtime(unienv_remote::fixtures::register);
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
