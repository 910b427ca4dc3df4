//! The controller's boundary snapshot cache, against our server and the
//! reference server: what is served without a request, and every rule that
//! drops it. Requests are counted with `Client::requests_sent`.

use crate::support;

use std::time::Duration;
use support::{floats, ours_with, targets, Target};
use unienv_remote::client::{Client, NodeProxy, OperationKind};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::ServerConfig;
use unienv_remote::{Dict, NdArray, Value};

use support::reset_in_operation as reset;

async fn step(client: &Client, node: &NodeProxy, action: f32) {
    client
        .with_operation(node.id(), OperationKind::Step, async |_| {
            node.set_next_action(NdArray::from_vec(vec![action]))
                .await?;
            node.post_environment_step(0.1, 0).await
        })
        .await
        .expect("step operation");
}

/// Reads all six getters and returns how many requests that sent.
async fn requests_for_getters(client: &Client, node: &NodeProxy) -> u64 {
    let before = client.requests_sent();
    node.get_context().await.expect("context");
    node.get_observation().await.expect("observation");
    node.get_reward().await.expect("reward");
    node.get_termination().await.expect("termination");
    node.get_truncation().await.expect("truncation");
    node.get_info().await.expect("info");
    client.requests_sent() - before
}

async fn served_and_live(t: &Target) {
    let client = t.client().await;
    let arm = client.node("arm").await.expect("arm");
    assert!(
        client.boundary_snapshot("arm").is_none(),
        "nothing before a boundary"
    );
    assert_eq!(
        requests_for_getters(&client, &arm).await,
        6,
        "live before a boundary"
    );
    reset(&client, &arm, 2).await;
    let snapshot = client.boundary_snapshot("arm").expect("snapshot");
    assert_eq!(
        snapshot.fields,
        [
            "context",
            "info",
            "observation",
            "reward",
            "terminated",
            "truncated"
        ]
    );
    assert_eq!(snapshot.sequence, arm.descriptor().sequence());
    assert_eq!(snapshot.revision, arm.descriptor().revision());
    assert_eq!(
        requests_for_getters(&client, &arm).await,
        0,
        "served from the cache"
    );

    // render and explicit calls are always live.
    let before = client.requests_sent();
    arm.render().await.expect("render");
    let live = client
        .call("arm", "get_observation", Vec::new(), Dict::new())
        .await
        .expect("explicit call");
    assert_eq!(floats(&live), vec![2.0]);
    assert_eq!(client.requests_sent(), before + 2);

    // A describe of the same boundary keeps the cache.
    client.describe("arm").await.expect("describe");
    assert!(client.boundary_snapshot("arm").is_some());

    // Inside an operation every getter is live, and the cache was dropped
    // when the operation began.
    let op = client
        .operation("arm", OperationKind::Step)
        .await
        .expect("begin");
    assert!(
        client.boundary_snapshot("arm").is_none(),
        "dropped at begin"
    );
    assert_eq!(requests_for_getters(&client, &arm).await, 6, "live inside");
    arm.set_next_action(NdArray::from_vec(vec![1.0f32]))
        .await
        .expect("action");
    arm.post_environment_step(0.1, 0).await.expect("post");
    op.complete().await.expect("complete");
    assert_eq!(requests_for_getters(&client, &arm).await, 0);
    assert_eq!(
        floats(&arm.get_observation().await.expect("observation")),
        vec![3.0]
    );

    // Abort drops it too (and faults the domain).
    let op = client
        .operation("arm", OperationKind::Step)
        .await
        .expect("begin");
    op.abort().await.expect("abort");
    assert!(client.boundary_snapshot("arm").is_none());
    reset(&client, &arm, 4).await;
    assert!(client.boundary_snapshot("arm").is_some());
    client.close().await;
}

async fn invalidation(t: &Target) {
    let client = t.client().await;
    let arm = client.node("arm").await.expect("arm");
    let devices = client.node("devices").await.expect("devices");
    let hand = client.node("devices/hand").await.expect("hand");
    reset(&client, &arm, 1).await;
    reset(&client, &devices, 1).await;
    for id in ["arm", "devices", "devices/hand", "devices/arm%2Fgrip"] {
        assert!(client.boundary_snapshot(id).is_some(), "{id} captured");
    }

    // A request error drops the failing resource's whole domain, only.
    let error = client
        .call("devices/hand", "get_nothing", Vec::new(), Dict::new())
        .await
        .expect_err("not exported");
    assert_eq!(error.code(), "unsupported_operation");
    for id in ["devices", "devices/hand", "devices/arm%2Fgrip"] {
        assert!(client.boundary_snapshot(id).is_none(), "{id} dropped");
    }
    assert!(client.boundary_snapshot("arm").is_some(), "another domain");
    assert_eq!(requests_for_getters(&client, &hand).await, 6);

    // Release and acquire drop the domain's fields.
    reset(&client, &devices, 2).await;
    assert!(client.boundary_snapshot("devices/hand").is_some());
    client.release("devices", false).await.expect("release");
    assert!(client.boundary_snapshot("devices/hand").is_none());
    reset(&client, &devices, 2).await;
    client.acquire("devices/hand", None).await.expect("acquire");
    assert!(client.boundary_snapshot("devices").is_none());
    assert!(client.boundary_snapshot("arm").is_some());

    // A new boundary replaces, never merges: with the controller's own
    // subscription selecting only `reward`, the next boundary captures only
    // that, and the observation is read live again (and is the new one).
    reset(&client, &arm, 1).await;
    assert!(client.boundary_snapshot("arm").is_some());
    let subscription = client
        .subscribe("arm", Some(&["reward"]))
        .await
        .expect("subscribe");
    step(&client, &arm, 2.0).await;
    let snapshot = client.boundary_snapshot("arm").expect("snapshot");
    assert_eq!(snapshot.fields, ["reward"]);
    assert_eq!(snapshot.data.keys().collect::<Vec<_>>(), ["reward"]);
    let before = client.requests_sent();
    assert_eq!(arm.get_reward().await.expect("reward"), Value::Float(3.0));
    assert_eq!(client.requests_sent(), before, "reward is cached");
    assert_eq!(
        floats(&arm.get_observation().await.expect("observation")),
        vec![3.0]
    );
    assert_eq!(client.requests_sent(), before + 1, "observation is live");
    subscription.unsubscribe().await.expect("unsubscribe");
    step(&client, &arm, 1.0).await;
    assert_eq!(
        client
            .boundary_snapshot("arm")
            .expect("snapshot")
            .fields
            .len(),
        6,
        "the default selection again"
    );

    // Values handed out are independent of the cache.
    let mut info = arm.get_info().await.expect("info");
    if let Some(d) = info.as_dict_mut() {
        d.insert("name", "changed by the caller");
        d.insert("extra", 1);
    }
    let again = arm.get_info().await.expect("info");
    assert_eq!(again, Value::Dict(unienv_remote::dict! { "name" => "arm" }));

    // Closing the session clears everything.
    client.close().await;
    assert!(client.boundary_snapshot("arm").is_none());
}

async fn env_and_observers(t: &Target) {
    let controller = t.client().await;
    let observer = t.client().await;
    let env = controller.env("counter").await.expect("counter");
    let mut subscription = observer
        .subscribe("counter", None)
        .await
        .expect("subscribe");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let all = [
        "context",
        "info",
        "observation",
        "reward",
        "terminated",
        "truncated",
    ];
    let snapshot = controller.boundary_snapshot("counter").expect("snapshot");
    assert_eq!(snapshot.fields, all, "the selection");
    let captured: Vec<&str> = snapshot.data.keys().collect();
    assert_eq!(
        captured,
        ["context", "info", "observation"],
        "what reset returned"
    );
    env.step(NdArray::from_vec(vec![1.0f32, 1.0]))
        .await
        .expect("step");
    let snapshot = controller.boundary_snapshot("counter").expect("snapshot");
    assert_eq!(snapshot.fields, all);
    let captured: Vec<&str> = snapshot.data.keys().collect();
    assert_eq!(
        captured,
        ["info", "observation", "reward", "terminated", "truncated"]
    );
    assert_eq!(snapshot.data.get("reward"), Some(&Value::Float(2.0)));

    // A failing env mutation drops the env's fields.
    let error = env
        .step(NdArray::from_vec(vec![1.0f32, 2.0, 3.0]))
        .await
        .expect_err("bad action shape");
    assert_eq!(error.code(), "execution_error");
    assert!(error.is_uncertain(), "the step had started");
    assert!(controller.boundary_snapshot("counter").is_none());

    // Observer events refresh the observer's descriptors but never fill its
    // cache.
    env.reset(ResetArgs::with_seed(1)).await.expect("reset");
    let target = env.descriptor().sequence();
    let event = loop {
        // Latest wins: earlier boundaries may or may not be seen.
        let event = subscription
            .next(Some(Duration::from_secs(5)))
            .await
            .expect("event")
            .expect("open");
        if event.sequence >= target {
            break event;
        }
    };
    assert_eq!(event.sequence, target);
    assert_eq!(event.kind, "reset");
    let descriptor = observer.descriptor("counter").expect("descriptor");
    assert_eq!(descriptor.sequence(), event.sequence);
    assert!(observer.boundary_snapshot("counter").is_none());
    // A former controller has no cache either.
    controller.release("counter", false).await.expect("release");
    assert!(controller.boundary_snapshot("counter").is_none());
    controller.close().await;
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getters_are_served_from_completed_boundaries_only() {
    for t in targets().await {
        served_and_live(&t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidation_rules() {
    for t in targets().await {
        invalidation(&t).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_boundaries_and_observers() {
    // `targets()` configures our server to repeat an env's own fields in its
    // boundary snapshot, as the reference always does.
    for t in targets().await {
        env_and_observers(&t).await;
    }
    // By default it does not.
    env_default_omits_own_snapshot(&ours_with(ServerConfig::default()).await).await;
}

async fn env_default_omits_own_snapshot(t: &Target) {
    let controller = t.client().await;
    let env = controller.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    assert!(controller.boundary_snapshot("counter").is_none());
    env.step(NdArray::from_vec(vec![1.0f32, 1.0]))
        .await
        .expect("step");
    assert!(controller.boundary_snapshot("counter").is_none());
}
