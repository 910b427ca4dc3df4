//! The blocking facade (plain threads, no async in the test), and remote
//! proxies driven through the crate's `World` / `Node` host traits; against
//! our server and the reference server.

use crate::support;

use std::time::Duration;
use support::{floats, Target};
use unienv_remote::client::{blocking, ClientConfig, OperationKind};
use unienv_remote::host::{Node, Phase, ResetArgs, World};
use unienv_remote::{NdArray, Value};

fn blocking_scenario(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let client = blocking::Client::connect(&t.url, ClientConfig::default()).expect("connect");
    let observer = blocking::Client::connect(&t.url, ClientConfig::default()).expect("connect");
    let mut subscription = observer.subscribe("counter", None).expect("subscribe");

    let env = client.env("counter").expect("counter");
    let reset = env.reset(ResetArgs::with_seed(1)).expect("reset");
    log.push(format!("reset: {}", reset.context));
    let mut seen = 0;
    for i in 0..3 {
        let step = env
            .step(NdArray::from_vec(vec![i as f32, 1.0]))
            .expect("step");
        log.push(format!("step {i}: {} {}", step.observation, step.reward));
        let event = subscription
            .next(Some(Duration::from_secs(5)))
            .expect("event")
            .expect("open");
        // Latest wins: the event is this step's or (rarely) an earlier one's.
        assert!(event.sequence <= env.descriptor().sequence());
        seen = event.sequence;
    }
    // As an iterator, until caught up with the latest boundary.
    let last = env.descriptor().sequence();
    while seen < last {
        let event = Iterator::next(&mut subscription)
            .expect("an item")
            .expect("an event");
        seen = event.sequence;
    }
    assert_eq!(seen, last);
    subscription.unsubscribe().expect("unsubscribe");

    // Component mode with the closure form and the guard.
    let arm = client.node("arm").expect("arm");
    client
        .with_operation("arm", OperationKind::Reset, |op| {
            assert_eq!(client.current_operation("arm").as_deref(), Some(op.id()));
            arm.reset(0, &ResetArgs::with_seed(2))
        })
        .expect("reset");
    let sent = client.requests_sent();
    log.push(format!(
        "arm: {}",
        arm.get_observation().expect("observation")
    ));
    assert_eq!(client.requests_sent(), sent, "cached");
    let op = client.operation("arm", OperationKind::Step).expect("begin");
    arm.set_next_action(NdArray::from_vec(vec![0.5f32]))
        .expect("action");
    arm.post_environment_step(0.1, 0).expect("post");
    op.complete().expect("complete");
    log.push(format!(
        "arm after step: {}",
        arm.get_observation().expect("observation")
    ));
    drop(client.operation("arm", OperationKind::Step).expect("begin"));
    let faulted = client.operation("arm", OperationKind::Step).map(|_| ());
    log.push(format!(
        "after a dropped guard: {}",
        faulted.expect_err("faulted").code()
    ));
    client.close();
    assert!(client.is_closed());
    log
}

fn traits_scenario(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let client = blocking::Client::connect(&t.url, ClientConfig::default()).expect("connect");
    let mut devices = client.node("devices").expect("devices");
    // Driven through the host trait, as a composer would.
    let node: &mut dyn Node<()> = &mut devices;
    assert_eq!(node.name(), "devices");
    assert_eq!(node.child_count(), 2);
    let names: Vec<String> = (0..node.child_count())
        .filter_map(|i| node.child(i).map(|c| c.name().to_string()))
        .collect();
    assert_eq!(names, ["arm/grip", "hand"]);
    assert_eq!(node.priorities(Phase::Reset), vec![0]);
    assert!(node.priorities(Phase::PreStep).is_empty());
    assert!(node.has_reward() && node.has_termination_signal());
    assert_eq!(
        node.observation_space().and_then(|s| s.shape()),
        Some(vec![1])
    );
    let op = client
        .operation("devices", OperationKind::Reset)
        .expect("begin");
    node.reset(&mut (), 0, &ResetArgs::with_seed(3))
        .expect("reset");
    op.complete().expect("complete");
    let op = client
        .operation("devices", OperationKind::Step)
        .expect("begin");
    let grip = node.child_mut(0).expect("grip");
    grip.set_next_action(&mut (), Value::from(NdArray::from_vec(vec![1.0f32])))
        .expect("action");
    grip.post_environment_step(&mut (), Some(0.5), 0)
        .expect("post");
    let live = grip.get_observation(&mut ()).expect("live");
    op.complete().expect("complete");
    let grip = node.child_mut(0).expect("grip");
    log.push(format!(
        "grip: {live} {} {} {}",
        grip.get_reward(&mut ()).expect("reward"),
        grip.get_info(&mut ()).expect("info"),
        grip.get_termination(&mut ()).expect("termination")
    ));
    // Errors become host errors carrying the code.
    let error = grip
        .set_next_action(&mut (), Value::Float(1.0))
        .expect_err("no operation");
    log.push(format!("host error: {}", error.message()));
    assert!(error.message().contains("invalid_operation"));

    // The World trait on a remote world, where the registry has one.
    if client.descriptor("composed/world").is_some() {
        let mut world = client.world("composed/world").expect("world");
        assert_eq!(World::world_timestep(&world), Some(0.125));
        let op = client
            .operation("composed/world", OperationKind::Reset)
            .expect("begin");
        World::reset(&mut world, &ResetArgs::with_seed(1)).expect("reset");
        World::after_reset(&mut world, &ResetArgs::with_seed(1)).expect("after_reset");
        op.complete().expect("complete");
        let op = client
            .operation("composed/world", OperationKind::Step)
            .expect("begin");
        let dt = World::step(&mut world).expect("step");
        op.complete().expect("complete");
        assert_eq!(dt, 0.125);
        let sensor = client
            .env("composed")
            .expect("env")
            .get_node(["a"])
            .expect("get_node")
            .expect("a");
        let observation = sensor.get_observation().expect("observation");
        assert_eq!(floats(&observation), vec![2.0]);
    }
    client.close();
    log
}

#[test]
fn blocking_facade_matches_the_reference() {
    support::same_transcript_on_both_servers(blocking_scenario);
}

#[test]
fn remote_proxies_implement_the_host_traits() {
    support::same_transcript_on_both_servers(traits_scenario);
}

#[test]
fn blocking_over_memory_and_drop_closes() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let target = runtime.block_on(support::ours());
    let server = target.server().expect("ours").clone();
    let transport = {
        let _guard = runtime.enter();
        server.connect_memory()
    };
    let client =
        blocking::Client::over_memory(transport, ClientConfig::default()).expect("connect");
    let env = client.env("counter").expect("env");
    env.reset(ResetArgs::with_seed(4)).expect("reset");
    assert_eq!(server.session_count(), 1);
    drop(env);
    drop(client);
    // The last handle closed the session.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.session_count() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the session stayed open"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_idle_driver_services_the_connection_between_calls() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut target = runtime.block_on(support::ours());
    let client = blocking::Client::connect(&target.url, ClientConfig::default()).expect("connect");
    client.env("counter").expect("env");
    // No call is in progress when the server goes away; the idle driver
    // reads the closure.
    runtime.block_on(target.stop());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !client.is_closed() {
        assert!(
            std::time::Instant::now() < deadline,
            "closure went unnoticed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn threads_share_one_blocking_client() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let target = runtime.block_on(support::ours());
    let client = blocking::Client::connect(&target.url, ClientConfig::default()).expect("connect");
    let workers: Vec<_> = ["counter", "counter3"]
        .into_iter()
        .map(|id| {
            let client = client.clone();
            std::thread::spawn(move || {
                let env = client.env(id).expect("env");
                env.reset(ResetArgs::with_seed(0)).expect("reset");
                let action = match env.batch_size() {
                    Some(b) => {
                        NdArray::from_shape_vec(vec![b, 2], vec![1.0f32; b * 2]).expect("action")
                    }
                    None => NdArray::from_vec(vec![1.0f32, 1.0]),
                };
                let mut last = Value::Null;
                for _ in 0..50 {
                    last = env.step(action.clone()).expect("step").reward;
                }
                last
            })
        })
        .collect();
    let rewards: Vec<Value> = workers
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .collect();
    assert_eq!(rewards[0], Value::Float(100.0));
    assert_eq!(floats(&rewards[1]), vec![100.0; 3]);
    client.close();
}
