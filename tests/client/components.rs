//! Component mode through the client on the detached devices (`arm`,
//! `devices` with its children `devices/arm%2Fgrip` and `devices/hand`),
//! against our server and the reference server with identical results:
//! operations, lifecycle rules, faults and recovery, nested keys.

use crate::support;

use support::{assert_same, floats, targets, Target};
use unienv_remote::client::{ClientError, NodeProxy, OperationKind};
use unienv_remote::host::{Phase, ResetArgs};
use unienv_remote::{NdArray, Value};

fn action(x: f32) -> NdArray {
    NdArray::from_vec(vec![x])
}

fn outcome<T: std::fmt::Debug>(r: &Result<T, ClientError>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("error {} uncertain={}", e.code(), e.is_uncertain()),
    }
}

use support::reset_in_operation as reset;

async fn arm_scenario(t: &Target) -> Vec<String> {
    let client = t.client().await;
    let mut log = Vec::new();
    let arm = client.node("arm").await.expect("arm");
    let d = arm.descriptor();
    assert_eq!(d.world_id(), None, "a detached node");
    assert_eq!(d.domain_id(), "arm");
    log.push(format!(
        "arm: name={} spaces={:?}/{:?}/{:?} reward={} term={} trunc={} reset={:?} pre={:?} post={:?}",
        arm.name(),
        arm.action_space().map(|s| s.to_string()),
        arm.observation_space().map(|s| s.to_string()),
        arm.context_space().map(|s| s.to_string()),
        arm.has_reward(),
        arm.has_termination_signal(),
        arm.has_truncation_signal(),
        arm.priorities(Phase::Reset),
        arm.priorities(Phase::PreStep),
        arm.priorities(Phase::PostStep),
    ));

    // A mutation needs an operation; a read outside one is a live call.
    let r = arm.set_next_action(action(1.0)).await;
    log.push(format!("set_next_action outside: {}", outcome(&r)));
    assert_eq!(r.expect_err("outside").code(), "invalid_operation");
    let sent = client.requests_sent();
    let observation = arm.get_observation().await.expect("live read");
    assert_eq!(client.requests_sent(), sent + 1);
    log.push(format!("live observation: {observation}"));

    reset(&client, &arm, 2).await;
    let d = arm.descriptor();
    log.push(format!(
        "after reset: revision={} sequence={}",
        d.revision(),
        d.sequence()
    ));
    assert_eq!(d.sequence(), 1);

    // After a completed boundary the getters send nothing.
    let sent = client.requests_sent();
    let values = [
        arm.get_observation().await.expect("observation"),
        arm.get_reward().await.expect("reward"),
        arm.get_termination().await.expect("termination"),
        arm.get_truncation().await.expect("truncation"),
        arm.get_info().await.expect("info"),
        arm.get_context().await.expect("context"),
    ];
    assert_eq!(client.requests_sent(), sent, "all six getters were cached");
    assert_eq!(floats(&values[0]), vec![2.0]);
    log.push(format!("cached: {}", Value::List(values.to_vec())));

    // A step operation; getters inside it are live.
    let op = client
        .operation("arm", OperationKind::Step)
        .await
        .expect("begin");
    assert_eq!(client.current_operation("arm").as_deref(), Some(op.id()));
    arm.set_next_action(action(1.5))
        .await
        .expect("set_next_action");
    let sent = client.requests_sent();
    let before = arm.get_observation().await.expect("observation");
    assert_eq!(client.requests_sent(), sent + 1, "live inside an operation");
    arm.post_environment_step(0.1, 0).await.expect("post step");
    let after = arm.get_observation().await.expect("observation");
    log.push(format!("inside step: {before} -> {after}"));
    assert_eq!(floats(&after), vec![3.5]);
    let descriptors = op.complete().await.expect("complete");
    assert_eq!(descriptors.len(), 1);
    assert_eq!(client.current_operation("arm"), None);
    let sent = client.requests_sent();
    let reward = arm.get_reward().await.expect("reward");
    assert_eq!(client.requests_sent(), sent);
    log.push(format!(
        "after step: reward={reward} sequence={}",
        arm.descriptor().sequence()
    ));

    // Lifecycle rules: step hooks need a step operation and vice versa; the
    // refusal happens before invocation and does not fault the domain.
    let op = client
        .operation("arm", OperationKind::Reset)
        .await
        .expect("begin reset");
    let r = arm.set_next_action(action(1.0)).await;
    log.push(format!("set_next_action in reset op: {}", outcome(&r)));
    let r = arm.reset(0, &ResetArgs::with_seed(0)).await;
    log.push(format!("reset in reset op: {}", outcome(&r)));
    op.complete().await.expect("complete reset");
    let op = client
        .operation("arm", OperationKind::Step)
        .await
        .expect("begin step");
    let r = arm.reset(0, &ResetArgs::default()).await;
    log.push(format!("reset in step op: {}", outcome(&r)));

    // Nested operations are refused locally.
    let nested = client.operation("arm", OperationKind::Step).await;
    log.push(format!("nested: {}", outcome(&nested)));
    assert_eq!(nested.expect_err("nested").code(), "invalid_use");

    // Abort faults the domain until a reset/reload operation recovers it.
    op.abort().await.expect("abort");
    let r = client.operation("arm", OperationKind::Step).await;
    log.push(format!("step after abort: {}", outcome(&r)));
    assert_eq!(r.expect_err("faulted").code(), "faulted");
    let r = arm.get_observation().await;
    log.push(format!("read while faulted: {}", outcome(&r)));

    // After-hooks alone do not recover: completion fails (and aborts).
    let op = client
        .operation("arm", OperationKind::Reset)
        .await
        .expect("begin");
    arm.after_reset(0, None).await.expect("after_reset");
    let r = op.complete().await;
    log.push(format!("complete without reset: {}", outcome(&r)));
    assert_eq!(r.expect_err("not recovered").code(), "invalid_operation");
    assert_eq!(client.current_operation("arm"), None);
    reset(&client, &arm, 1).await;

    // with_operation aborts when its body fails.
    let r: Result<(), ClientError> = client
        .with_operation("arm", OperationKind::Step, async |_| {
            arm.set_next_action(action(1.0)).await?;
            Err(ClientError::invalid_use("the body gave up"))
        })
        .await;
    log.push(format!("failing body: {}", outcome(&r)));
    let r = client.operation("arm", OperationKind::Step).await;
    log.push(format!("step after failing body: {}", outcome(&r)));
    assert_eq!(r.expect_err("faulted").code(), "faulted");
    reset(&client, &arm, 1).await;

    // Dropping an operation guard aborts it.
    {
        let _forgotten = client
            .operation("arm", OperationKind::Step)
            .await
            .expect("begin");
    }
    assert_eq!(client.current_operation("arm"), None);
    let r = client.operation("arm", OperationKind::Step).await;
    log.push(format!("step after a dropped guard: {}", outcome(&r)));
    assert_eq!(r.expect_err("faulted").code(), "faulted");
    reset(&client, &arm, 5).await;
    log.push(format!(
        "final: {} revision={} sequence={}",
        arm.get_observation().await.expect("observation"),
        arm.descriptor().revision(),
        arm.descriptor().sequence()
    ));
    client.close().await;
    log
}

async fn devices_scenario(t: &Target) -> Vec<String> {
    let client = t.client().await;
    let mut log = Vec::new();
    let devices = client.node("devices").await.expect("devices");
    let children: Vec<(String, String)> = devices.descriptor().children().to_vec();
    assert_eq!(
        children,
        vec![
            ("arm/grip".to_string(), "devices/arm%2Fgrip".to_string()),
            ("hand".to_string(), "devices/hand".to_string())
        ]
    );
    let grip = devices
        .get_node(["arm/grip"])
        .await
        .expect("get_node")
        .expect("grip");
    assert_eq!(grip.id(), "devices/arm%2Fgrip");
    assert_eq!(grip.name(), "arm/grip");
    assert_eq!(grip.descriptor().domain_id(), "devices");
    let hand = client.node("devices/hand").await.expect("hand");
    assert!(devices
        .get_node(["nope"])
        .await
        .expect("get_node")
        .is_none());
    assert!(devices
        .get_node(["hand", "x"])
        .await
        .expect("get_node")
        .is_none());
    let itself = devices
        .get_node(Vec::<String>::new())
        .await
        .expect("get_node");
    assert_eq!(
        itself.map(|n| n.id().to_string()).as_deref(),
        Some("devices")
    );
    let names: Vec<String> = devices
        .children()
        .await
        .expect("children")
        .iter()
        .map(NodeProxy::name)
        .collect();
    assert_eq!(names, vec!["arm/grip", "hand"]);

    // An operation on a child resource ID runs on the root's domain.
    client
        .with_operation("devices/hand", OperationKind::Reset, async |op| {
            assert_eq!(op.domain_id(), "devices");
            devices.reset(0, &ResetArgs::with_seed(4)).await
        })
        .await
        .expect("reset");
    let sent = client.requests_sent();
    let observed = [
        grip.get_observation().await.expect("grip"),
        hand.get_observation().await.expect("hand"),
        devices.get_observation().await.expect("devices"),
    ];
    assert_eq!(client.requests_sent(), sent, "children were captured too");
    log.push(format!("after reset: {}", Value::List(observed.to_vec())));

    client
        .with_operation("devices/arm%2Fgrip", OperationKind::Step, async |_| {
            grip.set_next_action(action(2.0)).await?;
            grip.post_environment_step(0.1, 0).await
        })
        .await
        .expect("step");
    let observed = [
        grip.get_observation().await.expect("grip"),
        hand.get_observation().await.expect("hand"),
        devices.get_info().await.expect("devices"),
        grip.get_info().await.expect("grip info"),
    ];
    assert_eq!(floats(&observed[0]), vec![6.0]);
    log.push(format!("after step: {}", Value::List(observed.to_vec())));

    // Resetting only a child does not recover a faulted detached domain.
    let op = client
        .operation("devices", OperationKind::Step)
        .await
        .expect("begin");
    op.abort().await.expect("abort");
    let op = client
        .operation("devices", OperationKind::Reset)
        .await
        .expect("begin");
    hand.reset(0, &ResetArgs::with_seed(9))
        .await
        .expect("child reset");
    let r = op.complete().await;
    log.push(format!("child-only recovery: {}", outcome(&r)));
    reset(&client, &devices, 3).await;
    log.push(format!(
        "recovered: {} {}",
        grip.get_observation().await.expect("grip"),
        hand.get_observation().await.expect("hand")
    ));
    client.close().await;
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arm_operations_match_the_reference() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, arm_scenario(t).await));
    }
    assert_same(&transcripts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_tree_matches_the_reference() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, devices_scenario(t).await));
    }
    assert_same(&transcripts);
}
