//! Observer streams: a second client subscribes while a controller drives
//! the fixtures; against our server and the reference server (identical
//! transcripts where both behave the same).

use crate::support;

use futures_util::StreamExt;
use std::time::Duration;
use support::{assert_same, floats, targets, Target};
use unienv_remote::client::{OperationKind, SnapshotEvent, Subscription};
use unienv_remote::host::ResetArgs;
use unienv_remote::{NdArray, Value};

const WAIT: Option<Duration> = Some(Duration::from_secs(5));

async fn next(sub: &mut Subscription) -> SnapshotEvent {
    sub.next(WAIT)
        .await
        .expect("a snapshot")
        .expect("the stream is open")
}

fn describe(e: &SnapshotEvent) -> String {
    format!(
        "{} {} seq={} rev={} data={}",
        e.resource_id,
        e.kind,
        e.sequence,
        e.descriptor_revision,
        Value::Dict(e.data.clone())
    )
}

async fn env_stream(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let controller = t.client().await;
    let observer = t.client().await;
    let mut sub = observer
        .subscribe("counter", None)
        .await
        .expect("subscribe");
    let env = controller.env("counter").await.expect("counter");

    // One event per boundary when the observer keeps up: no gaps.
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let first = next(&mut sub).await;
    assert_eq!(first.sequence, env.descriptor().sequence());
    log.push(describe(&first));
    for i in 1..=3 {
        env.step(NdArray::from_vec(vec![i as f32, 0.0]))
            .await
            .expect("step");
        let event = next(&mut sub).await;
        assert_eq!(event.sequence, first.sequence + i, "consecutive");
        assert_eq!(event.kind, "step");
        assert!(event.operation_id.is_some());
        let descriptor = event.descriptor.clone().expect("descriptor");
        assert_eq!(descriptor.sequence(), event.sequence);
        assert_eq!(
            observer
                .descriptor("counter")
                .expect("refreshed")
                .sequence(),
            event.sequence,
            "events refresh the observer's descriptors"
        );
        assert!(event.timestamp_ns > 1_600_000_000_000_000_000);
        log.push(describe(&event));
    }

    // Latest wins: a slow observer sees only the newest boundary. `sub` is
    // not read during five steps; `probe`, subscribed after it, is read until
    // it has the last one. Both servers publish a boundary to a domain's
    // subscriptions in the order they were made, so `sub`'s snapshot of the
    // last boundary was queued before `probe`'s was sent: what `sub` has not
    // received by then is that one snapshot at most. Its reader then gets at
    // most two events (one older boundary, then the last) where a queue
    // would give all five.
    let mut probe = observer
        .subscribe("counter", Some(&["reward"]))
        .await
        .expect("subscribe");
    for _ in 0..5 {
        env.step(NdArray::from_vec(vec![1.0f32, 1.0]))
            .await
            .expect("step");
    }
    let last = env.descriptor().sequence();
    while next(&mut probe).await.sequence != last {}
    probe.unsubscribe().await.expect("unsubscribe");
    let mut received = 0;
    let event = loop {
        let event = next(&mut sub).await;
        received += 1;
        if event.sequence == last {
            break event;
        }
    };
    assert!(
        received <= 2,
        "latest wins: older boundaries were replaced ({received} events)"
    );
    log.push(describe(&event));
    let nothing = sub.next(Some(Duration::from_millis(100))).await;
    assert_eq!(nothing.expect_err("nothing pending").code(), "timeout");

    // Unsubscribing ends the stream; another subscription keeps going.
    let mut other = observer
        .subscribe("counter", Some(&["reward"]))
        .await
        .expect("subscribe");
    sub.unsubscribe().await.expect("unsubscribe");
    env.step(NdArray::from_vec(vec![1.0f32, 1.0]))
        .await
        .expect("step");
    let event = next(&mut other).await;
    assert_eq!(event.data.keys().collect::<Vec<_>>(), ["reward"]);
    log.push(describe(&event));

    // release(close_subscriptions) ends this client's streams of the domain,
    // as a Stream too.
    observer.release("counter", true).await.expect("release");
    assert!(other.is_closed());
    assert!(
        StreamExt::next(&mut other).await.is_none(),
        "the stream ended"
    );
    controller.close().await;
    observer.close().await;
    log
}

async fn node_stream(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let controller = t.client().await;
    let observer = t.client().await;
    let mut sub = observer
        .subscribe("devices/hand", Some(&["observation", "reward"]))
        .await
        .expect("subscribe");
    let devices = controller.node("devices").await.expect("devices");
    let hand = controller.node("devices/hand").await.expect("hand");
    let op = controller
        .operation("devices", OperationKind::Reset)
        .await
        .expect("begin");
    let op_id = op.id().to_string();
    devices
        .reset(0, &ResetArgs::with_seed(2))
        .await
        .expect("reset");
    // Nothing is published before completion.
    let early = sub.next(Some(Duration::from_millis(100))).await;
    assert_eq!(early.expect_err("no event yet").code(), "timeout");
    op.complete().await.expect("complete");
    let event = next(&mut sub).await;
    assert_eq!(event.operation_id.as_deref(), Some(op_id.as_str()));
    assert_eq!(event.resource_id, "devices/hand");
    assert_eq!(
        floats(event.data.get("observation").expect("observation")),
        vec![2.0]
    );
    log.push(describe(&event));
    controller
        .with_operation("devices", OperationKind::Step, async |_| {
            hand.set_next_action(NdArray::from_vec(vec![0.5f32]))
                .await?;
            hand.post_environment_step(0.1, 0).await
        })
        .await
        .expect("step");
    let event = next(&mut sub).await;
    assert_eq!(event.kind, "step");
    log.push(describe(&event));
    // A subscription on a resource of another domain sees nothing of this one.
    let mut arm = observer
        .subscribe("arm", None)
        .await
        .expect("subscribe arm");
    controller
        .with_operation("devices", OperationKind::Step, async |_| {
            hand.post_environment_step(0.1, 0).await
        })
        .await
        .expect("step");
    log.push(describe(&next(&mut sub).await));
    let none = arm.next(Some(Duration::from_millis(100))).await;
    assert_eq!(none.expect_err("other domain").code(), "timeout");
    controller.close().await;
    observer.close().await;
    log
}

async fn ending(t: &mut Target) -> Vec<String> {
    let mut log = Vec::new();
    let controller = t.client().await;
    let observer = t.client().await;
    // A capture failure ends the subscription with a subscription error.
    let mut broken = observer
        .subscribe("broken_render", Some(&["render"]))
        .await
        .expect("subscribe");
    let env = controller.env("broken_render").await.expect("env");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let error = broken.next(WAIT).await.expect_err("subscription error");
    log.push(format!(
        "subscription error: {} uncertain={}",
        error.code(),
        error.is_uncertain()
    ));
    assert_eq!(error.code(), "snapshot_error");
    assert!(broken.next(WAIT).await.expect("ended").is_none());
    assert!(broken.is_closed());

    // Closing the session ends its streams, with the reason first.
    let mut sub = observer
        .subscribe("counter", None)
        .await
        .expect("subscribe");
    observer.close().await;
    let error = sub.next(WAIT).await.expect_err("closed");
    log.push(format!("after close: {}", error.code()));
    assert!(sub.next(WAIT).await.expect("ended").is_none());

    // The server going away ends them too.
    let observer = t.client().await;
    let mut sub = observer
        .subscribe("counter", None)
        .await
        .expect("subscribe");
    controller.close().await;
    t.stop().await;
    let error = sub.next(WAIT).await.expect_err("server gone");
    log.push(format!("after server stop: {}", error.code()));
    assert!(observer.is_closed());
    assert!(sub.next(WAIT).await.expect("ended").is_none());
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_streams_match_the_reference() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, env_stream(t).await));
    }
    assert_same(&transcripts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_streams_match_the_reference() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, node_stream(t).await));
    }
    assert_same(&transcripts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_with_errors_and_closing() {
    let mut targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &mut targets {
        transcripts.push((t.kind, ending(t).await));
    }
    assert_same(&transcripts);
}

async fn release_keeps(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let a = t.client().await;
    let b = t.client().await;
    let env_a = a.env("counter").await.expect("counter");
    env_a
        .reset(ResetArgs::with_seed(0))
        .await
        .expect("a controls");
    let mut sub = a
        .subscribe("counter", Some(&["reward"]))
        .await
        .expect("subscribe");
    // Releasing keeps the former controller's subscriptions.
    a.release("counter", false).await.expect("release");
    assert!(!sub.is_closed());
    let env_b = b.env("counter").await.expect("counter");
    env_b
        .reset(ResetArgs::with_seed(1))
        .await
        .expect("b controls");
    env_b
        .step(NdArray::from_vec(vec![1.0f32, 1.0]))
        .await
        .expect("step");
    let target = env_b.descriptor().sequence();
    let event = loop {
        let event = next(&mut sub).await;
        if event.sequence >= target {
            break event;
        }
    };
    log.push(describe(&event));
    assert!(
        a.boundary_snapshot("counter").is_none(),
        "observers never fill it"
    );
    a.close().await;
    b.close().await;
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_keeps_subscriptions_unless_asked() {
    let targets = targets().await;
    let mut transcripts = Vec::new();
    for t in &targets {
        transcripts.push((t.kind, release_keeps(t).await));
    }
    assert_same(&transcripts);
}
