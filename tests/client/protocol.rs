//! The client against a scripted server on the other end of an in-memory
//! transport: exact request envelopes, correlation of out-of-order replies,
//! hello negotiation, forward compatibility, protocol violations, and the
//! cache rules that need a server misbehaving on purpose (observed newer
//! boundaries, older responses).

use std::time::Duration;
use unienv_remote::client::{Client, ClientConfig, ClientError, OperationKind};
use unienv_remote::codec::Codec;
use unienv_remote::protocol::{response_envelope, ErrorCode, ProtocolError};
use unienv_remote::transport::MemoryTransport;
use unienv_remote::{dict, Dict, NdArray, Value};

const SESSION: &str = "fake-session";

struct Fake {
    end: MemoryTransport,
    codec: Codec,
}

impl Fake {
    async fn recv(&mut self) -> Dict {
        let frame = tokio::time::timeout(Duration::from_secs(5), self.end.recv())
            .await
            .expect("a request in time")
            .expect("the client is connected");
        match self.codec.decode(frame).expect("a valid envelope") {
            Value::Dict(d) => d,
            other => panic!("not a dict: {other}"),
        }
    }

    async fn expect(&mut self, op: &str) -> Dict {
        let request = self.recv().await;
        assert_eq!(
            request.get("op").and_then(Value::as_str),
            Some(op),
            "{request:?}"
        );
        request
    }

    async fn send(&self, value: Value) {
        let frame = self.codec.encode(&value).expect("encode");
        self.end.send(frame.into()).await.expect("send");
    }

    async fn reply(&self, request: &Dict, result: impl Into<Value>) {
        self.send(envelope(request, Ok(result.into()))).await;
    }

    async fn fail(&self, request: &Dict, error: ProtocolError) {
        self.send(envelope(request, Err(&error))).await;
    }
}

fn envelope(request: &Dict, outcome: Result<Value, &ProtocolError>) -> Value {
    let field = |k: &str| request.get(k).cloned().unwrap_or_default();
    response_envelope(
        SESSION,
        field("request_id"),
        field("resource_id"),
        field("operation_id"),
        outcome,
    )
}

fn descriptor(id: &str, revision: u64, sequence: u64, snapshot: Option<Dict>) -> Value {
    let mut d = dict! {
        "id" => id, "kind" => "node", "world_id" => (), "node_id" => (),
        "children" => Dict::new(), "revision" => revision, "sequence" => sequence,
        "domain_id" => "n", "name" => id, "future_field" => dict! { "x" => 1 },
        "operations" => Value::list(["get_observation", "reset", "set_next_action"]),
    };
    if let Some(data) = snapshot {
        let fields: Vec<Value> = data.keys().map(Value::from).collect();
        d.insert(
            "snapshot",
            dict! { "sequence" => sequence, "revision" => revision, "fields" => Value::List(fields), "data" => data },
        );
    }
    Value::Dict(d)
}

/// A client connected to a scripted server (no discovery).
async fn connect(config: ClientConfig) -> (Client, Fake) {
    let (client_end, server_end) = MemoryTransport::pair();
    let mut fake = Fake {
        end: server_end,
        codec: Codec::default(),
    };
    let connecting = tokio::spawn(Client::over_memory(client_end, config.with_discover(false)));
    let hello = fake.expect("hello").await;
    assert_eq!(hello.get("session_id"), Some(&Value::Null));
    assert_eq!(hello.get("resource_id"), Some(&Value::Null));
    fake.reply(
        &hello,
        dict! {
            "session_id" => SESSION, "max_message_size" => 1 << 20, "server" => "fake",
            "server_version" => "0", "protocol_versions" => Value::list([1]), "extra" => true,
        },
    )
    .await;
    let client = connecting.await.expect("join").expect("connect");
    (client, fake)
}

#[tokio::test]
async fn hello_and_request_envelopes() {
    let (client_end, server_end) = MemoryTransport::pair();
    let mut fake = Fake {
        end: server_end,
        codec: Codec::default(),
    };
    let config = ClientConfig::default().with_max_message_size(4 << 20);
    let connecting = tokio::spawn(Client::over_memory(client_end, config));
    let hello = fake.expect("hello").await;
    let keys: Vec<&str> = hello.keys().collect();
    assert_eq!(
        keys,
        [
            "version",
            "type",
            "request_id",
            "session_id",
            "op",
            "resource_id",
            "max_message_size"
        ]
    );
    assert_eq!(hello.get("version"), Some(&Value::Int(1)));
    assert_eq!(hello.get("type").and_then(Value::as_str), Some("request"));
    assert_eq!(hello.get("max_message_size"), Some(&Value::Int(4 << 20)));
    fake.reply(
        &hello,
        dict! {
            "session_id" => SESSION, "max_message_size" => 1 << 20, "server" => "fake",
            "server_version" => "9", "protocol_versions" => Value::list([1]), "unknown" => "ignored",
        },
    )
    .await;
    // Discovery follows on connect by default.
    let discover = fake.expect("discover").await;
    assert_eq!(
        discover.get("session_id").and_then(Value::as_str),
        Some(SESSION)
    );
    fake.reply(&discover, Value::List(vec![descriptor("n", 0, 0, None)]))
        .await;
    let client = connecting.await.expect("join").expect("connect");
    assert_eq!(client.max_message_size(), 1 << 20, "the smaller limit wins");
    assert_eq!(client.server_info().server_version, "9");
    assert_eq!(client.session_id(), SESSION);
    let d = client.descriptor("n").expect("discovered");
    assert_eq!(
        d.get("future_field"),
        Some(&Value::Dict(dict! { "x" => 1 }))
    );

    // Node calls outside an operation carry a null operation ID.
    let node = client.node("n").await.expect("node");
    let task = tokio::spawn({
        let node = node.clone();
        async move { node.get_observation().await }
    });
    let call = fake.expect("call").await;
    let keys: Vec<&str> = call.keys().collect();
    assert_eq!(
        keys,
        [
            "version",
            "type",
            "request_id",
            "session_id",
            "op",
            "resource_id",
            "method",
            "args",
            "kwargs",
            "operation_id"
        ]
    );
    assert_eq!(
        call.get("method").and_then(Value::as_str),
        Some("get_observation")
    );
    assert_eq!(call.get("args"), Some(&Value::Tuple(vec![])));
    assert_eq!(call.get("operation_id"), Some(&Value::Null));
    fake.reply(
        &call,
        dict! { "value" => 7, "descriptors" => Value::List(vec![]), "unknown" => "ignored" },
    )
    .await;
    assert_eq!(task.await.expect("join").expect("value"), Value::Int(7));

    // Inside an operation, calls carry its ID; kwargs are as the reference sends them.
    let begin = tokio::spawn({
        let client = client.clone();
        async move { client.operation("n", OperationKind::Reset).await }
    });
    let request = fake.expect("begin").await;
    let operation_id = request
        .get("operation_id")
        .and_then(Value::as_str)
        .expect("an operation ID")
        .to_string();
    assert_eq!(operation_id.len(), 32);
    assert_eq!(request.get("kind").and_then(Value::as_str), Some("reset"));
    assert_eq!(
        request.get("resource_id").and_then(Value::as_str),
        Some("n")
    );
    fake.reply(&request, Value::Null).await;
    let op = begin.await.expect("join").expect("begin");
    assert_eq!(op.id(), operation_id);
    let task = tokio::spawn({
        let node = node.clone();
        async move {
            node.reset(2, &unienv_remote::host::ResetArgs::with_seed(5))
                .await
        }
    });
    let call = fake.expect("call").await;
    assert_eq!(
        call.get("operation_id").and_then(Value::as_str),
        Some(operation_id.as_str())
    );
    assert_eq!(
        call.get("kwargs"),
        Some(&Value::Dict(
            dict! { "priority" => 2, "seed" => 5, "mask" => () }
        ))
    );
    fake.reply(
        &call,
        dict! { "value" => (), "descriptors" => Value::List(vec![]) },
    )
    .await;
    task.await.expect("join").expect("reset");
    let completing = tokio::spawn(op.complete());
    let complete = fake.expect("complete").await;
    fake.reply(&complete, Value::List(vec![descriptor("n", 1, 1, None)]))
        .await;
    let refreshed = completing.await.expect("join").expect("complete");
    assert_eq!(refreshed[0].sequence(), 1);
    client.close().await;
}

#[tokio::test]
async fn replies_are_correlated_by_request_id() {
    let (client, mut fake) = connect(ClientConfig::default()).await;
    let first = tokio::spawn({
        let client = client.clone();
        async move { client.describe("a").await.map(|d| d.id().to_string()) }
    });
    let a = fake.expect("describe").await;
    let second = tokio::spawn({
        let client = client.clone();
        async move { client.describe("b").await.map(|d| d.id().to_string()) }
    });
    let b = fake.expect("describe").await;
    assert_ne!(
        a.get("request_id"),
        b.get("request_id"),
        "fresh request IDs"
    );
    // Answer in the opposite order.
    fake.reply(&b, Value::List(vec![descriptor("b", 0, 0, None)]))
        .await;
    fake.reply(&a, Value::List(vec![descriptor("a", 0, 0, None)]))
        .await;
    assert_eq!(first.await.expect("join").expect("a"), "a");
    assert_eq!(second.await.expect("join").expect("b"), "b");
    // A reply nobody waits for is ignored.
    fake.send(envelope(
        &dict! { "request_id" => "ffffffff" },
        Ok(Value::Null),
    ))
    .await;
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.describe("c").await }
    });
    let c = fake.expect("describe").await;
    fake.reply(&c, Value::List(vec![descriptor("c", 0, 0, None)]))
        .await;
    task.await.expect("join").expect("c");
    assert!(!client.is_closed());
    client.close().await;
}

#[tokio::test]
async fn server_errors_keep_code_message_and_uncertainty() {
    let (client, mut fake) = connect(ClientConfig::default()).await;
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.describe("x").await }
    });
    let request = fake.expect("describe").await;
    fake.fail(
        &request,
        ProtocolError::uncertain(ErrorCode::new("brand_new_code"), "details"),
    )
    .await;
    let error = task.await.expect("join").expect_err("an error");
    assert_eq!(error.code(), "brand_new_code");
    assert!(error.is_uncertain(), "the server's flag is used");
    assert_eq!(error.remote().map(|e| e.message.as_str()), Some("details"));
    assert!(!client.is_closed());
    client.close().await;
}

async fn violation(message: Value) -> ClientError {
    let (client, mut fake) = connect(ClientConfig::default()).await;
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.describe("x").await }
    });
    fake.expect("describe").await;
    fake.send(message).await;
    let error = task.await.expect("join").expect_err("closed");
    assert!(client.is_closed(), "a violation closes the connection");
    error
}

#[tokio::test]
async fn protocol_violations_close_the_connection() {
    let wrong_session = Value::Dict(dict! {
        "version" => 1, "type" => "response", "session_id" => "other", "request_id" => "1",
        "result" => (),
    });
    assert_eq!(violation(wrong_session).await.code(), "protocol_error");
    let wrong_version = Value::Dict(dict! {
        "version" => 2, "type" => "response", "session_id" => SESSION, "request_id" => "1",
    });
    assert_eq!(violation(wrong_version).await.code(), "protocol_error");
    let unknown_type = Value::Dict(dict! {
        "version" => 1, "type" => "gossip", "session_id" => SESSION,
    });
    assert_eq!(violation(unknown_type).await.code(), "protocol_error");
    assert_eq!(violation(Value::list([1])).await.code(), "protocol_error");

    // An invalid envelope.
    let (client, mut fake) = connect(ClientConfig::default()).await;
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.describe("x").await }
    });
    fake.expect("describe").await;
    fake.end
        .send(bytes::Bytes::from_static(b"\x00\x00\x00\x09not json!"))
        .await
        .expect("send");
    let error = task.await.expect("join").expect_err("closed");
    assert_eq!(error.code(), "serialization_error");
    assert!(client.is_closed());
}

#[tokio::test]
async fn lost_replies_time_out_and_make_mutations_uncertain() {
    let config = ClientConfig::default().with_timeout(Some(Duration::from_millis(150)));
    // A read that times out: an error, but not uncertain.
    let (client, mut fake) = connect(config.clone()).await;
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.describe("x").await }
    });
    let request = fake.expect("describe").await;
    let error = task.await.expect("join").expect_err("timeout");
    assert_eq!(error.code(), "timeout");
    assert!(!error.is_uncertain());
    assert!(client.is_closed());
    // The late reply reaches nobody; the client is closed anyway.
    let _ = fake
        .end
        .send(
            Codec::default()
                .encode(&envelope(&request, Ok(Value::Null)))
                .expect("encode")
                .into(),
        )
        .await;
    assert_eq!(
        client.describe("y").await.expect_err("closed").code(),
        "connection_closed"
    );

    // The peer going away during a mutation.
    let (client, mut fake) = connect(ClientConfig::default()).await;
    let acquire = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .acquire("n", Some(unienv_remote::client::Mode::Components))
                .await
        }
    });
    let describe = fake.expect("describe").await;
    fake.reply(&describe, Value::List(vec![descriptor("n", 0, 0, None)]))
        .await;
    fake.expect("acquire").await;
    drop(fake);
    let error = acquire.await.expect("join").expect_err("lost");
    assert_eq!(error.code(), "uncertain_outcome");
    assert_eq!(error.cause().code(), "connection_closed");
}

#[tokio::test]
async fn a_cancelled_mutation_closes_the_connection() {
    let (client, mut fake) = connect(ClientConfig::default()).await;
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.describe("n").await }
    });
    let describe = fake.expect("describe").await;
    fake.reply(&describe, Value::List(vec![descriptor("n", 0, 0, None)]))
        .await;
    task.await.expect("join").expect("describe");
    let node = client.node("n").await.expect("node");
    // A cancelled read is harmless.
    let read = tokio::time::timeout(Duration::from_millis(50), node.get_observation()).await;
    assert!(read.is_err());
    fake.expect("call").await;
    assert!(!client.is_closed());
    // A cancelled mutation's outcome is unknown: the connection closes.
    let write = tokio::time::timeout(
        Duration::from_millis(50),
        node.set_next_action(NdArray::from_vec(vec![1.0f32])),
    )
    .await;
    assert!(write.is_err());
    fake.expect("call").await;
    assert!(client.is_closed());
}

#[tokio::test]
async fn observed_boundaries_invalidate_but_never_fill_the_cache() {
    let (client, mut fake) = connect(ClientConfig::default()).await;
    let node = {
        let task = tokio::spawn({
            let client = client.clone();
            async move { client.node("n").await }
        });
        let describe = fake.expect("describe").await;
        fake.reply(&describe, Value::List(vec![descriptor("n", 0, 0, None)]))
            .await;
        task.await.expect("join").expect("node")
    };
    // A completed operation brings a boundary snapshot.
    let task = tokio::spawn({
        let client = client.clone();
        async move {
            let op = client.operation("n", OperationKind::Step).await?;
            op.complete().await
        }
    });
    let begin = fake.expect("begin").await;
    fake.reply(&begin, Value::Null).await;
    let complete = fake.expect("complete").await;
    let snapshot = dict! { "observation" => 1.5 };
    fake.reply(
        &complete,
        Value::List(vec![descriptor("n", 1, 1, Some(snapshot.clone()))]),
    )
    .await;
    task.await.expect("join").expect("operation");
    let sent = client.requests_sent();
    assert_eq!(
        node.get_observation().await.expect("cached"),
        Value::Float(1.5)
    );
    assert_eq!(client.requests_sent(), sent);

    // An observer event of a newer boundary drops it; its descriptor's
    // snapshot member never fills the cache.
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.subscribe("n", None).await }
    });
    let subscribe = fake.expect("subscribe").await;
    let subscription_id = subscribe.get("subscription_id").cloned().expect("id");
    fake.reply(&subscribe, subscription_id.clone()).await;
    let mut subscription = task.await.expect("join").expect("subscribed");
    fake.send(Value::Dict(dict! {
        "version" => 1, "type" => "snapshot", "session_id" => SESSION,
        "subscription_id" => subscription_id.clone(), "resource_id" => "n", "operation_id" => "op",
        "kind" => "step", "sequence" => 2, "timestamp_ns" => 1, "descriptor_revision" => 1,
        "descriptor" => descriptor("n", 1, 2, Some(dict! { "observation" => 99.0 })),
        "data" => dict! { "observation" => 2.5 },
    }))
    .await;
    let event = subscription
        .next(Some(Duration::from_secs(5)))
        .await
        .expect("event")
        .expect("open");
    assert_eq!(event.sequence, 2);
    assert_eq!(event.data.get("observation"), Some(&Value::Float(2.5)));
    assert!(
        client.boundary_snapshot("n").is_none(),
        "invalidated, not filled"
    );
    assert_eq!(client.descriptor("n").expect("descriptor").sequence(), 2);

    // An older response neither replaces the descriptor nor restores the cache.
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.describe("n").await }
    });
    let describe = fake.expect("describe").await;
    fake.reply(
        &describe,
        Value::List(vec![descriptor("n", 1, 1, Some(snapshot))]),
    )
    .await;
    let kept = task.await.expect("join").expect("describe");
    assert_eq!(kept.sequence(), 2);
    assert!(client.boundary_snapshot("n").is_none());

    // A subscription error drops the domain's fields and ends the stream.
    fake.send(Value::Dict(dict! {
        "version" => 1, "type" => "subscription_error", "session_id" => SESSION,
        "subscription_id" => subscription_id, "resource_id" => "n", "operation_id" => "op",
        "kind" => "step", "sequence" => 3, "timestamp_ns" => 1, "descriptor_revision" => 1,
        "error" => dict! { "code" => "snapshot_error", "message" => "camera unplugged" },
    }))
    .await;
    let error = subscription
        .next(Some(Duration::from_secs(5)))
        .await
        .expect_err("subscription error");
    assert_eq!(error.code(), "snapshot_error");
    assert_eq!(
        error.remote().map(|e| e.message.as_str()),
        Some("camera unplugged")
    );
    assert!(subscription.next(None).await.expect("ended").is_none());
    // Dropping it unsubscribes without waiting.
    drop(subscription);
    let unsubscribe = fake.expect("unsubscribe").await;
    assert!(unsubscribe.get("subscription_id").is_some());
    client.close().await;
}
