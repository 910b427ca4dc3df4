//! The relay's limits on forwarded traffic (SPEC.md, "Relay and dial-out
//! hosts", "Forwarding"): each session's byte budget and the relay's pool,
//! the message size limit over a fragmented message's frames, each ending
//! the one session that broke it with its close code while the host (its
//! registration, its other sessions) goes on; and a client that stops
//! answering the relay's heartbeats, whose session is closed the same way.

use super::{action, connect, dialing_host, relay_with, PATIENCE};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::host::ResetArgs;
use unienv_remote::relay::{Relay, RelayConfig};
use unienv_remote::server::{DialHandle, Server, ServerConfig};

type RawClient =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The close code the relay sends `ws` (the messages before it skipped);
/// `None` if the connection ends without one.
async fn close_code(ws: &mut RawClient) -> Option<(u16, String)> {
    let wait = async {
        while let Some(m) = ws.next().await {
            match m {
                Ok(Message::Close(Some(frame))) => {
                    return Some((u16::from(frame.code), frame.reason.to_string()))
                }
                Ok(Message::Close(None)) | Err(_) => return None,
                Ok(_) => continue,
            }
        }
        None
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .expect("a close within the patience")
}

/// The host still serves: registered, listed with its `clients` other
/// sessions only (the closed one gone), and a new session through the relay
/// steps.
async fn host_unaffected(relay: &Relay, dial: &DialHandle, clients: usize) {
    assert!(dial.wait_registered(std::time::Duration::ZERO).await);
    let mut gone = false;
    for _ in 0..12_000 {
        if relay.hosts().first().is_some_and(|h| h.clients == clients) {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(
        gone,
        "the closed session is still forwarded: {:?}",
        relay.hosts()
    );
    let client = connect(&relay.host_url("fx")).await.expect("a new client");
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(1)).await.expect("reset");
    env.step(action()).await.expect("step");
    env.close().await.expect("release");
    client.close().await;
}

async fn setup(listen: ServerConfig) -> (Relay, Server, DialHandle) {
    let relay = relay_with(RelayConfig {
        listen,
        ..RelayConfig::default()
    })
    .await;
    let (host, dial) = dialing_host(&relay, "fx").await;
    (relay, host, dial)
}

async fn raw_client(relay: &Relay) -> RawClient {
    tokio_tungstenite::connect_async(relay.host_url("fx"))
        .await
        .expect("a raw client")
        .0
}

async fn teardown(relay: Relay, host: Server, dial: DialHandle) {
    dial.stop();
    host.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_message_past_the_session_budget_closes_that_session_only() {
    let (relay, host, dial) = setup(ServerConfig {
        max_connection_bytes: 64 * 1024,
        ..ServerConfig::default()
    })
    .await;
    // A session in use meanwhile, to show the host unaffected.
    let bystander = connect(&relay.host_url("fx")).await.expect("bystander");
    let env = bystander.env("counter3").await.expect("counter3");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let mut ws = raw_client(&relay).await;
    // Larger than the session may hold: refused from its frame header.
    ws.send(Message::Binary(vec![0u8; 100 * 1024].into()))
        .await
        .expect("send");
    let (code, reason) = close_code(&mut ws).await.expect("a close frame");
    assert_eq!(code, 1008, "the session's budget: {reason}");
    assert!(reason.contains("budget"), "{reason}");
    env.reset(ResetArgs::with_seed(1))
        .await
        .expect("the bystander goes on");
    host_unaffected(&relay, &dial, 1).await;
    env.close().await.expect("release");
    bystander.close().await;
    teardown(relay, host, dial).await;
}

#[tokio::test]
async fn a_message_the_relays_pool_cannot_hold_closes_that_session_only() {
    // Beyond each session's free first MiB, bytes come from the pool.
    let (relay, host, dial) = setup(ServerConfig {
        max_server_bytes: 256 * 1024,
        ..ServerConfig::default()
    })
    .await;
    let mut ws = raw_client(&relay).await;
    ws.send(Message::Binary(vec![0u8; (1 << 20) + 512 * 1024].into()))
        .await
        .expect("send");
    let (code, reason) = close_code(&mut ws).await.expect("a close frame");
    assert_eq!(code, 1013, "the relay's pool: {reason}");
    host_unaffected(&relay, &dial, 0).await;
    teardown(relay, host, dial).await;
}

#[tokio::test]
async fn a_fragmented_message_is_held_to_the_size_limit_over_its_frames() {
    let (relay, host, dial) = setup(ServerConfig {
        max_message_size: 64 * 1024,
        ..ServerConfig::default()
    })
    .await;
    let mut ws = raw_client(&relay).await;
    // Three frames of 30 KiB: each within the limit, the message not.
    let frame = |opcode, fin| Message::Frame(Frame::message(vec![7u8; 30 * 1024], opcode, fin));
    ws.send(frame(OpCode::Data(Data::Binary), false))
        .await
        .expect("first frame");
    ws.send(frame(OpCode::Data(Data::Continue), false))
        .await
        .expect("second frame");
    ws.send(frame(OpCode::Data(Data::Continue), true))
        .await
        .expect("last frame");
    let (code, reason) = close_code(&mut ws).await.expect("a close frame");
    assert_eq!(code, 1009, "too large over its frames: {reason}");
    host_unaffected(&relay, &dial, 0).await;
    teardown(relay, host, dial).await;
}

#[tokio::test]
async fn a_silent_client_is_closed_after_the_heartbeat_timeout() {
    let (relay, host, dial) = setup(ServerConfig {
        heartbeat_interval: Some(std::time::Duration::from_millis(50)),
        heartbeat_timeout: std::time::Duration::from_millis(300),
        ..ServerConfig::default()
    })
    .await;
    // Connected, then never read: the relay's pings go unanswered.
    let ws = raw_client(&relay).await;
    let mut forwarded = false;
    for _ in 0..12_000 {
        if relay.hosts().first().is_some_and(|h| h.clients == 1) {
            forwarded = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(forwarded, "the session was never forwarded");
    // Its session ends (the host's side too), and the host serves on.
    host_unaffected(&relay, &dial, 0).await;
    drop(ws);
    teardown(relay, host, dial).await;
}
