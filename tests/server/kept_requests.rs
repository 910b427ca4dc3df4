//! A session's repeated step requests (decoded from the session's kept
//! request tree, `codec::decode::request`) reach the env with their own
//! action bytes and are answered under their own request IDs, over TCP, a
//! Unix socket and in memory, with other requests between them.

use crate::common;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::{NdArray, Value};

/// Steps `counter` (its position is the running sum of its actions) with a
/// different action each time; every observation must be the running sum.
async fn steps_reach_the_env(client: Client) {
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let mut sum = [0.0f32; 2];
    for i in 0..300u32 {
        let action = [i as f32 * 0.5, -(i as f32) - 0.25];
        let step = env
            .step(NdArray::from_vec(action.to_vec()))
            .await
            .expect("step");
        sum[0] += action[0];
        sum[1] += action[1];
        let expected = Value::Array(NdArray::from_vec(sum.to_vec()));
        let position = step.observation.get("position").expect("position");
        assert!(
            *position == expected,
            "step {i}: {position:?} != {expected:?}"
        );
        if i % 50 == 7 {
            // Another request between steps (not in the kept layout).
            client.describe("counter").await.expect("describe");
        }
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_steps_carry_their_own_actions_over_every_transport() {
    let server = common::fixture_server();
    let tcp = server.listen("127.0.0.1:0").await.expect("listen");
    let dir = std::env::temp_dir().join(format!("unienv-kept-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let unix = server
        .listen_unix(dir.join("s.sock"))
        .await
        .expect("listen_unix");
    for url in [tcp.url(), unix.url()] {
        let client = Client::connect(&url, ClientConfig::default())
            .await
            .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
        steps_reach_the_env(client).await;
    }
    let memory = server.connect_memory();
    let client = Client::over_memory(memory, ClientConfig::default())
        .await
        .expect("in-memory client");
    steps_reach_the_env(client).await;
    let _ = std::fs::remove_dir_all(&dir);
}
