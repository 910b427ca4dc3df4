//! Factory domains evicted when idle and revived on next access: the
//! revival's new revision refreshes descriptors (new spaces are parsed anew)
//! and invalidates older boundary state; against our server and the
//! reference server (both with a short idle timeout).

use crate::support;

use std::sync::Arc;
use std::time::Duration;
use support::{assert_same, ours_with, reference_with_idle, Target};
use unienv_remote::client::Client;
use unienv_remote::server::ServerConfig;

const IDLE: Duration = Duration::from_millis(300);

/// Describes `id` until its revision exceeds `revision` (the domain was
/// evicted and revived), waiting past the idle timeout between attempts.
async fn revived(client: &Client, id: &str, revision: u64) -> u64 {
    for _ in 0..40 {
        tokio::time::sleep(IDLE * 2).await;
        let d = client.describe(id).await.expect("describe");
        if d.revision() > revision {
            return d.revision();
        }
    }
    panic!("{id} was never revived");
}

async fn scenario(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let client = t.client().await;
    // Discovery instantiated the factory once: the first child is box((1,)).
    let node = "lazy_composed/node/a%2Fb";
    let before = client.descriptor(node).expect("discovered");
    let space = before.observation_space().expect("space");
    assert_eq!(space.shape(), Some(vec![1]));
    // A describe of the same instance keeps the parsed space.
    let again = client.describe(node).await.expect("describe");
    assert!(Arc::ptr_eq(
        &space,
        &again.observation_space().expect("space")
    ));
    let revision = revived(&client, node, before.revision()).await;
    let after = client.descriptor(node).expect("refreshed");
    assert_eq!(after.revision(), revision);
    let new_space = after.observation_space().expect("space");
    assert!(
        !Arc::ptr_eq(&space, &new_space),
        "a changed space is parsed anew"
    );
    log.push(format!(
        "revived: revision {} -> {}, space {} -> {}",
        before.revision(),
        after.revision(),
        space,
        new_space
    ));
    // The proxy sees the new descriptor.
    let proxy = client.node(node).await.expect("proxy");
    assert_eq!(
        proxy.observation_space().and_then(|s| s.shape()),
        Some(vec![2])
    );
    client.close().await;
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revival_refreshes_descriptors() {
    let reference = tokio::task::spawn_blocking(|| reference_with_idle(Some(IDLE.as_secs_f64())))
        .await
        .expect("reference");
    let ours = ours_with(ServerConfig {
        idle_timeout: Some(IDLE),
        ..ServerConfig::default()
    })
    .await;
    let mut transcripts = vec![(ours.kind, scenario(&ours).await)];
    if let Some(reference) = reference {
        transcripts.push((reference.kind, scenario(&reference).await));
    }
    assert_same(&transcripts);
}
