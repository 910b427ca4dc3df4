//! Env mode through the client, against our server and the reference server
//! with identical results: `counter` and `counter3` (masked resets).

use crate::support;

use std::sync::Arc;
use support::{assert_same, floats, targets, Kind, Target};
use unienv_remote::client::ClientConfig;
use unienv_remote::host::ResetArgs;
use unienv_remote::protocol::ResourceKind;
use unienv_remote::{dict, NdArray, Value};

async fn env_scenario(t: &Target) -> Vec<String> {
    let client = t.client().await;
    let mut log = Vec::new();
    let info = client.server_info().clone();
    assert_eq!(info.protocol_versions, vec![1]);
    assert_eq!(info.max_message_size, 64 * 1024 * 1024);
    assert_eq!(info.session_id, client.session_id());
    assert_eq!(
        info.server,
        if t.kind == Kind::Reference {
            "unienv"
        } else {
            "unienv-remote"
        }
    );
    // Discovery on connect loaded every descriptor.
    for id in [
        "counter",
        "counter3",
        "arm",
        "devices",
        "devices/arm%2Fgrip",
        "devices/hand",
    ] {
        assert!(client.descriptor(id).is_some(), "{id} was not discovered");
    }
    let sent_after_connect = client.requests_sent();
    assert_eq!(sent_after_connect, 2, "hello and discover");

    let env = client.env("counter").await.expect("counter proxy");
    assert_eq!(
        client.requests_sent(),
        sent_after_connect,
        "no describe needed"
    );
    let d = env.descriptor();
    assert_eq!(d.kind(), ResourceKind::Env);
    log.push(format!(
        "counter: domain={} revision={} sequence={} world={:?} node={:?}",
        d.domain_id(),
        d.revision(),
        d.sequence(),
        d.world_id(),
        d.node_id()
    ));
    log.push(format!(
        "spaces: action={} observation={} context={}",
        env.action_space().expect("action space"),
        env.observation_space().expect("observation space"),
        env.context_space().expect("context space"),
    ));
    log.push(format!(
        "render_mode={:?} batch_size={:?} operations={:?}",
        env.render_mode(),
        env.batch_size(),
        d.operations()
    ));
    let observation_space = env.observation_space().expect("observation space");

    let reset = env.reset(ResetArgs::with_seed(1)).await.expect("reset");
    assert_eq!(floats(&reset.context), vec![1.0, 1.0]);
    log.push(format!(
        "reset: {} {} {}",
        reset.context,
        reset.observation,
        Value::Dict(reset.info.clone())
    ));
    let step = env
        .step(NdArray::from_vec(vec![1.0f32, 2.0]))
        .await
        .expect("step");
    assert_eq!(step.reward, Value::Float(5.0));
    assert_eq!(step.terminated, Value::Bool(false));
    let position = step.observation.get("position").expect("position");
    assert_eq!(floats(position), vec![2.0, 3.0]);
    log.push(format!(
        "step: {} {} {} {} {}",
        step.observation,
        step.reward,
        step.terminated,
        step.truncated,
        Value::Dict(step.info.clone())
    ));
    // The refreshed descriptor kept the parsed space (unchanged document).
    assert!(Arc::ptr_eq(
        &observation_space,
        &env.observation_space().expect("observation space")
    ));
    assert_eq!(
        env.descriptor().sequence(),
        2,
        "reset and step are boundaries"
    );

    // The env mutation's boundary snapshot came with the step result.
    let snapshot = client
        .boundary_snapshot("counter")
        .expect("boundary snapshot");
    assert_eq!(snapshot.sequence, 2);
    log.push(format!(
        "snapshot: seq={} rev={} fields={:?} data={}",
        snapshot.sequence,
        snapshot.revision,
        snapshot.fields,
        Value::Dict(snapshot.data.clone())
    ));

    let frame = env.render().await.expect("render");
    let frame = frame.as_array().expect("render array");
    assert_eq!(frame.shape(), &[3, 4, 3]);
    assert!(frame.to_f64_vec().iter().all(|&v| v == 5.0));
    log.push(format!("render: {}", Value::Array(frame.clone())));
    assert_eq!(env.descriptor().sequence(), 2, "render is no boundary");

    // `reload` is not exported by the counter.
    let error = env.reload(ResetArgs::default()).await.expect_err("reload");
    log.push(format!(
        "reload: {} uncertain={}",
        error.code(),
        error.is_uncertain()
    ));
    assert_eq!(error.code(), "unsupported_operation");
    assert!(!client.is_closed(), "a server error keeps the connection");

    // counter3: batched, with masked resets.
    let env3 = client.env("counter3").await.expect("counter3");
    assert_eq!(env3.batch_size(), Some(3));
    let reset = env3.reset(ResetArgs::with_seed(2)).await.expect("reset");
    log.push(format!("counter3 reset: {}", reset.context));
    let ones = NdArray::from_shape_vec(vec![3, 2], vec![1.0f32; 6]).expect("ones");
    let step = env3.step(ones.clone()).await.expect("step");
    assert_eq!(floats(&step.reward), vec![6.0, 6.0, 6.0]);
    log.push(format!(
        "counter3 step: {} {} {} {}",
        step.observation, step.reward, step.terminated, step.truncated
    ));
    let mask = NdArray::from_vec(vec![true, false, true]);
    let masked = env3
        .reset(ResetArgs {
            seed: Some(7),
            mask: Some(mask),
            kwargs: dict! {},
        })
        .await
        .expect("masked reset");
    let context = masked.context.as_array().expect("context array");
    assert_eq!(context.shape(), &[2, 2]);
    assert_eq!(context.to_f64_vec(), vec![7.0; 4]);
    log.push(format!(
        "counter3 masked reset: {} {} {}",
        masked.context,
        masked.observation,
        Value::Dict(masked.info.clone())
    ));
    let step = env3.step(ones).await.expect("step");
    assert_eq!(floats(&step.reward), vec![16.0, 8.0, 16.0]);
    assert_eq!(
        step.terminated.as_array().map(|a| a.to_vec::<bool>().ok()),
        Some(Some(vec![true, true, true]))
    );
    log.push(format!(
        "counter3 step: {} {} {}",
        step.observation, step.reward, step.terminated
    ));
    client.close().await;
    assert!(client.is_closed());
    assert!(
        client.boundary_snapshot("counter").is_none(),
        "close clears the cache"
    );
    let error = env.step(Value::Float(1.0)).await.expect_err("closed");
    assert_eq!(error.code(), "connection_closed");
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_mode_matches_the_reference() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, env_scenario(t).await));
    }
    assert_same(&transcripts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_discovery_resources_are_described_on_first_use() {
    for t in targets().await {
        let client = t
            .connect(ClientConfig::default().with_discover(false))
            .await;
        assert_eq!(client.requests_sent(), 1, "hello only");
        assert!(client.descriptor("counter").is_none());
        let env = client.env("counter").await.expect("counter");
        assert_eq!(client.requests_sent(), 2, "one describe");
        assert_eq!(env.descriptor().id(), "counter");
        // A node of a detached tree: describe returns the whole domain.
        let child = client.node("devices/hand").await.expect("child");
        assert_eq!(child.name(), "hand");
        assert!(client.descriptor("devices").is_some());
        assert!(client.descriptor("devices/arm%2Fgrip").is_some());
        let error = client.env("devices").await.expect_err("not an env");
        assert_eq!(error.code(), "invalid_use");
        let error = client.env("missing").await.expect_err("unknown");
        assert_eq!(error.code(), "not_found");
        assert!(!error.is_uncertain());
        client.close().await;
    }
}

/// Replies whose descriptor differs from the last one only in its
/// sequence are not parsed again (`client/known.rs`): the descriptor the
/// client holds still follows every step, its raw fields included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn descriptors_follow_every_step_when_recognised_by_their_text() {
    // Without env boundary snapshots (our server's default; the reference
    // always sends them, so its replies are decoded in full every time).
    let config = unienv_remote::server::ServerConfig {
        env_boundary_snapshots: false,
        ..Default::default()
    };
    let mut all = vec![support::ours_with(config).await];
    all.extend(targets().await);
    for t in all {
        let client = t.client().await;
        let env = client.env("counter").await.expect("counter proxy");
        env.reset(ResetArgs::with_seed(1)).await.expect("reset");
        let space = env.observation_space().expect("observation space");
        let first = env.descriptor().sequence();
        for k in 1..=5u64 {
            env.step(NdArray::from_vec(vec![1.0f32, 2.0]))
                .await
                .expect("step");
            let d = env.descriptor();
            assert_eq!(d.sequence(), first + k, "{:?}", t.kind);
            assert_eq!(
                d.get("sequence").and_then(Value::as_u64),
                Some(first + k),
                "{:?}",
                t.kind
            );
            assert_eq!(
                d.raw().get("sequence").and_then(Value::as_u64),
                Some(first + k)
            );
            assert_eq!(d.revision(), env.descriptor().revision());
            assert!(Arc::ptr_eq(
                &space,
                &env.observation_space().expect("observation space")
            ));
        }
        client.close().await;
    }
}
