//! The learning test: our server hosts the built-in simulators, and the
//! reference Python client finds a linear `cartpole` policy by random search
//! that is far better than a random policy measured in the same run.

use crate::common;

/// The `key=value` figures of the script's `ok ...` line.
fn figure(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no figure {key} in {line:?}"))
}

#[test]
fn reference_client_learns_cartpole_by_random_search() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let (rt, server, listener) = common::serve_on_runtime(unienv_remote::sims::register);
    let out = common::run_python(&python, "train_cartpole.py", &[&listener.url()], None);
    let line = String::from_utf8_lossy(&out).trim().to_string();
    println!("{line}");
    assert!(line.starts_with("ok "), "{line}");
    let (random, trained) = (figure(&line, "random_mean"), figure(&line, "final_mean"));
    assert!(
        random > 5.0 && random < 60.0,
        "a random policy scored {random}"
    );
    assert!(trained >= 150.0 && trained >= 5.0 * random, "{line}");
    rt.block_on(server.shutdown());
}
