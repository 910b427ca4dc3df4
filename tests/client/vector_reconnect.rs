//! `VectorEnv::reconnect`: after one server dies and a replacement starts at
//! a new URL, its envs are pointed there and reset, while the other envs
//! keep their episodes; bad reconnects change nothing.

use crate::vector::counters;
use unienv_remote::client::vector::{AutoresetMode, EnvAddress, VectorEnv, VectorError};
use unienv_remote::client::ClientConfig;
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{NdArray, Value};

fn ones(n: usize) -> Vec<Value> {
    vec![Value::from(NdArray::from_vec(vec![1.0f32, 1.0])); n]
}

fn row(stacked: &Value, i: usize) -> Vec<f64> {
    let a = stacked
        .get("position")
        .and_then(Value::as_array)
        .expect("stacked positions");
    a.to_f64_vec()[i * 2..i * 2 + 2].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_takes_its_envs_back() {
    let (s1, l1) = counters(1).await;
    let (s2, l2) = counters(2).await;
    let addresses = vec![
        EnvAddress::new(l1.url(), "c0"),
        EnvAddress::new(l2.url(), "c0"),
        EnvAddress::new(l2.url(), "c1"),
    ];
    let mut v = VectorEnv::connect(&addresses, ClientConfig::default(), AutoresetMode::NextStep)
        .await
        .expect("connect");
    v.reset(VectorEnv::seeded(Some(0), 3)).await.expect("reset");
    v.step(ones(3)).await.expect("step");

    // Server 2 goes away; its envs fail, env 0 goes on.
    s2.shutdown().await;
    let step = v.step(ones(3)).await.expect("step");
    assert!(step.errors[0].is_none());
    assert!(step.errors[1].is_some() && step.errors[2].is_some());
    assert_eq!(row(&step.observation, 0), vec![2.0, 2.0]);

    // Misuse changes nothing.
    let (s3, l3) = counters(2).await;
    let e = v
        .reconnect(
            &[(5, EnvAddress::new(l3.url(), "c0"))],
            ClientConfig::default(),
        )
        .await
        .expect_err("no env 5");
    assert!(matches!(e, VectorError::InvalidUse(_)), "{e}");
    let e = v
        .reconnect(
            &[(1, EnvAddress::new(l3.url(), "nope"))],
            ClientConfig::default(),
        )
        .await
        .expect_err("no such env");
    assert!(matches!(e, VectorError::Connect { .. }), "{e}");
    let e = v
        .reconnect(
            &[
                (1, EnvAddress::new(l3.url(), "c0")),
                (1, EnvAddress::new(l3.url(), "c1")),
            ],
            ClientConfig::default(),
        )
        .await
        .expect_err("twice");
    assert!(matches!(e, VectorError::InvalidUse(_)), "{e}");

    // A replacement at a new URL.
    v.reconnect(
        &[
            (1, EnvAddress::new(l3.url(), "c0")),
            (2, EnvAddress::new(l3.url(), "c1")),
        ],
        ClientConfig::default(),
    )
    .await
    .expect("reconnect");
    assert_eq!(v.failed(), vec![false, true, true]);
    // Until reset, nothing is sent to the reconnected envs.
    let step = v.step(ones(3)).await.expect("step");
    assert!(matches!(
        step.errors[1],
        Some(VectorError::NeedsReset { index: 1, .. })
    ));
    assert_eq!(row(&step.observation, 0), vec![3.0, 3.0]);
    let args = vec![
        ResetArgs::default(),
        ResetArgs::with_seed(10),
        ResetArgs::with_seed(20),
    ];
    let (r, _) = v
        .reset_masked(args, Some(&[false, true, true]))
        .await
        .expect("reset");
    assert!(r.errors.iter().all(Option::is_none), "{:?}", r.errors);
    assert_eq!(
        row(&r.observation, 0),
        vec![3.0, 3.0],
        "env 0 kept its episode"
    );
    assert_eq!(row(&r.observation, 1), vec![10.0, 10.0]);
    let step = v.step(ones(3)).await.expect("step");
    assert!(step.errors.iter().all(Option::is_none), "{:?}", step.errors);
    assert_eq!(row(&step.observation, 0), vec![4.0, 4.0]);
    assert_eq!(row(&step.observation, 2), vec![21.0, 21.0]);
    v.close().await;
    s1.shutdown().await;
    s3.shutdown().await;
}

/// A replacement must offer the same spaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_with_other_spaces_is_refused() {
    let mut builder = Server::builder(ServerConfig::default());
    unienv_remote::fixtures::register(&mut builder).expect("fixtures");
    let server = builder.start().expect("a valid server configuration");
    let l = server.listen("127.0.0.1:0").await.expect("listen");
    let mut v = VectorEnv::connect(
        &[EnvAddress::new(l.url(), "counter")],
        ClientConfig::default(),
        AutoresetMode::NextStep,
    )
    .await
    .expect("connect");
    let e = v
        .reconnect(
            &[(0, EnvAddress::new(l.url(), "counter3"))],
            ClientConfig::default(),
        )
        .await
        .expect_err("other spaces");
    assert!(e.to_string().contains("counter3"), "{e}");
    assert_eq!(v.failed(), vec![false], "nothing changed");
    v.close().await;
    server.shutdown().await;
}
