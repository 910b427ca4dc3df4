//! The relay and hosts that dial out (SPEC.md, "Relay and dial-out hosts"):
//! the same transcripts through the relay as direct (our client and the
//! reference client), a relay restart, a host that stops or is killed,
//! name collisions and re-dials, tokens on both sides, a host that never
//! opens its tunnel, the bounds on waiting clients, and the listing.

#[path = "../common/mod.rs"]
mod common;
mod limits;
mod viewer;

use futures_util::{SinkExt, StreamExt};
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::client::{Client, ClientConfig, ClientError, ClientErrorCode};
use unienv_remote::host::ResetArgs;
use unienv_remote::relay::{Relay, RelayConfig};
use unienv_remote::server::{DialHandle, DialOptions, DialState, Server, ServerConfig};
use unienv_remote::{NdArray, Value};

/// Generous bound for things that must happen (never a timing assertion:
/// only a hang guard).
const PATIENCE: Duration = Duration::from_secs(60);

async fn relay_with(config: RelayConfig) -> Relay {
    Relay::start("127.0.0.1:0", config).await.expect("relay")
}

async fn relay() -> Relay {
    relay_with(RelayConfig::default()).await
}

/// Dial options that re-dial quickly (tests wait for re-dials).
fn quick(name: &str) -> DialOptions {
    DialOptions {
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        ..DialOptions::new(name)
    }
}

/// A fixture server dialing `relay` as `name`, registered.
async fn dialing_host(relay: &Relay, name: &str) -> (Server, DialHandle) {
    let server = common::fixture_server();
    let handle = server.dial(&relay.url(), quick(name)).expect("dial");
    assert!(
        handle.wait_registered(PATIENCE).await,
        "{:?}",
        handle.status()
    );
    (server, handle)
}

async fn connect(url: &str) -> Result<Client, ClientError> {
    Client::connect(url, ClientConfig::default()).await
}

/// The protocol's connection-lost outcome: a step sent as (or after) the
/// connection closed is uncertain, with the close as its cause; never a
/// timeout.
fn assert_connection_lost(e: &ClientError) {
    assert!(
        matches!(
            e.code(),
            ClientErrorCode::ConnectionClosed | ClientErrorCode::UncertainOutcome
        ) && e.to_string().contains("connection closed"),
        "{e}"
    );
}

fn action() -> NdArray {
    NdArray::from_vec(vec![1.0f32, 2.0])
}

/// Discovery, a reset and steps, a refusal, an ownership conflict with a
/// second client, and a disconnect followed by a new session, as text.
async fn transcript(url: &str) -> Vec<String> {
    let client = connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    let mut log = Vec::new();
    let ids: Vec<String> = client
        .discover()
        .await
        .expect("discover")
        .iter()
        .map(|d| format!("{} {} rev {}", d.id(), d.kind().as_str(), d.revision()))
        .collect();
    log.push(ids.join("; "));
    let env = client.env("counter").await.expect("counter");
    let reset = env.reset(ResetArgs::with_seed(3)).await.expect("reset");
    log.push(format!("reset {} {}", reset.context, reset.observation));
    for _ in 0..2 {
        let step = env.step(action()).await.expect("step");
        log.push(format!(
            "step {} {} {} {}",
            step.observation,
            step.reward,
            step.terminated,
            Value::Dict(step.info)
        ));
    }
    match client.env("no_such_env").await {
        Ok(_) => log.push("no_such_env found".into()),
        Err(e) => log.push(format!("missing: {:?} {}", e.code(), e.is_uncertain())),
    }
    let other = connect(url).await.expect("a second client");
    let contested = other.env("counter").await.expect("counter again");
    match contested.step(action()).await {
        Ok(s) => log.push(format!("second client stepped: {}", s.observation)),
        Err(e) => log.push(format!(
            "second client: {:?} {}",
            e.code(),
            e.is_uncertain()
        )),
    }
    other.close().await;
    env.close().await.expect("release");
    client.close().await;
    let again = connect(url).await.expect("a new session");
    let env = again.env("counter").await.expect("counter");
    let reset = env.reset(ResetArgs::with_seed(4)).await.expect("reset");
    log.push(format!("new session reset {}", reset.observation));
    env.close().await.expect("release");
    again.close().await;
    log
}

#[tokio::test]
async fn our_client_sees_through_the_relay_what_it_sees_direct() {
    let relay = relay().await;
    let (host, dial) = dialing_host(&relay, "fx").await;
    let (direct, listener) = common::listen(common::fixture_server()).await;
    let through = transcript(&relay.host_url("fx")).await;
    assert_eq!(through, transcript(&listener.url()).await);
    assert!(through.iter().any(|l| l.starts_with("second client")));
    assert_eq!(dial.status().state, DialState::Registered);
    assert!(dial.status().tunnels >= 3, "{:?}", dial.status());
    host.shutdown().await;
    direct.shutdown().await;
    relay.shutdown().await;
}

#[test]
fn the_reference_client_sees_through_the_relay_what_it_sees_direct() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (relay, host, direct, listener) = rt.block_on(async {
        let relay = relay().await;
        let (host, dial) = dialing_host(&relay, "fx").await;
        let (direct, listener) = common::listen(common::fixture_server()).await;
        (relay, (host, dial), direct, listener)
    });
    // The shared conformance transcript (python/tests/transcript.py) with
    // the reference client, through the relay and direct.
    let out = common::run_python(
        &python,
        "compare_fixtures.py",
        &[&relay.host_url("fx"), &listener.url()],
        None,
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("results compared"), "{text}");
    rt.block_on(async {
        host.0.shutdown().await;
        direct.shutdown().await;
        relay.shutdown().await;
    });
}

#[tokio::test]
async fn after_a_relay_restart_the_host_redials_and_clients_reconnect() {
    let first = relay().await;
    let addr = first.local_addr();
    let (host, dial) = dialing_host(&first, "fx").await;
    let client = connect(&first.host_url("fx")).await.expect("connect");
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(1)).await.expect("reset");
    first.shutdown().await;
    // The client's connection is gone: the protocol's connection-lost outcome.
    let e = env.step(action()).await.expect_err("the relay is gone");
    assert_connection_lost(&e);
    // The same port again (bound as soon as the old listener let it go).
    let second = loop {
        match Relay::start(addr, RelayConfig::default()).await {
            Ok(r) => break r,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    assert!(second.wait_for(1, PATIENCE).await.is_some());
    assert!(dial.wait_registered(PATIENCE).await);
    assert!(dial.status().registrations >= 2, "{:?}", dial.status());
    let client = connect(&second.host_url("fx")).await.expect("reconnect");
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(1)).await.expect("reset");
    env.step(action()).await.expect("a step after the restart");
    client.close().await;
    host.shutdown().await;
    second.shutdown().await;
}

#[tokio::test]
async fn a_host_that_leaves_has_its_clients_closed_at_once() {
    let relay = relay().await;
    let (host, dial) = dialing_host(&relay, "fx").await;
    // The client's own timeout is long: the error must come from the
    // relay closing the connection, not from a timeout.
    let config = ClientConfig::default().with_timeout(Some(PATIENCE * 2));
    let client = Client::connect(&relay.host_url("fx"), config)
        .await
        .expect("connect");
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(1)).await.expect("reset");
    assert_eq!(relay.hosts()[0].clients, 1);
    // The host's control connection ends (its tunnels stay open at the
    // host): the relay closes the client's connection.
    dial.stop();
    let e = env.step(action()).await.expect_err("the host left");
    assert_connection_lost(&e);
    assert!(relay.wait_for(1, Duration::ZERO).await.is_none());
    // A new client is refused with the reason.
    let e = connect(&relay.host_url("fx")).await.expect_err("gone");
    assert!(e.to_string().contains("no host named 'fx'"), "{e}");
    host.shutdown().await;
    relay.shutdown().await;
}

#[test]
fn a_killed_host_process_closes_its_clients() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let relay = rt.block_on(relay());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_unienv-remote"))
        .args([
            "serve",
            "--fixtures",
            "--no-listen",
            "--name",
            "k",
            "--dial",
        ])
        .arg(relay.url())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start a host");
    rt.block_on(async {
        assert!(relay.wait_for(1, PATIENCE).await.is_some());
        assert_eq!(relay.hosts()[0].identity.name, "k");
        let config = ClientConfig::default().with_timeout(Some(PATIENCE * 2));
        let client = Client::connect(&relay.host_url("k"), config)
            .await
            .expect("connect");
        let env = client.env("counter").await.expect("counter");
        env.reset(ResetArgs::with_seed(1)).await.expect("reset");
        child.kill().expect("kill the host");
        let _ = child.wait();
        let e = env.step(action()).await.expect_err("the host is dead");
        assert_connection_lost(&e);
        relay.shutdown().await;
    });
}

/// A host speaking the control protocol by hand.
struct RawHost {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl RawHost {
    async fn connect(relay: &Relay, token: Option<&str>) -> Result<RawHost, String> {
        let mut request = format!("{}/relay/control", relay.url())
            .into_client_request()
            .expect("request");
        if let Some(t) = token {
            request.headers_mut().insert(
                "Authorization",
                format!("Bearer {t}").parse().expect("header"),
            );
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((ws, _)) => Ok(RawHost { ws }),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn send(&mut self, json: serde_json::Value) {
        self.ws
            .send(Message::Binary(json.to_string().into()))
            .await
            .expect("send");
    }

    /// The next control message; `None` once closed.
    async fn recv(&mut self) -> Option<serde_json::Value> {
        loop {
            match self.ws.next().await? {
                Ok(Message::Binary(b)) => return serde_json::from_slice(&b).ok(),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            }
        }
    }

    async fn register(&mut self, name: &str, instance: &str) -> serde_json::Value {
        self.send(serde_json::json!({
            "type": "register", "protocol": unienv_remote::relay::wire::RELAY_PROTOCOL, "name": name, "server": "raw",
            "version": "0", "resources": ["counter"], "instance": instance,
        }))
        .await;
        self.recv().await.expect("an answer")
    }
}

#[tokio::test]
async fn a_live_name_is_refused_and_a_redial_gets_it_back() {
    let relay = relay().await;
    let mut first = RawHost::connect(&relay, None).await.expect("first");
    assert_eq!(first.register("sim", "i1").await["type"], "registered");
    let mut other = RawHost::connect(&relay, None).await.expect("other");
    let refused = other.register("sim", "i2").await;
    assert_eq!(refused["type"], "refused");
    assert_eq!(refused["code"], "name_taken");
    assert!(
        refused["message"].as_str().unwrap().contains("taken"),
        "{refused}"
    );
    assert!(other.recv().await.is_none(), "closed after the refusal");
    // The same dialing host re-dials (its old connection not yet seen
    // gone): it takes its name over, and the old connection is closed.
    let mut again = RawHost::connect(&relay, None).await.expect("again");
    assert_eq!(again.register("sim", "i1").await["type"], "registered");
    assert!(first.recv().await.is_none(), "the old registration ends");
    assert_eq!(relay.hosts().len(), 1);
    // Through Server::dial: a second server asking for a live name is told
    // so in its status, and gets the name once the holder leaves.
    drop(again);
    let (_a, holder) = dialing_host(&relay, "dup").await;
    let server = common::fixture_server();
    let late = server.dial(&relay.url(), quick("dup")).expect("dial");
    let mut changed = false;
    for _ in 0..3000 {
        let s = late.status();
        if s.last_error
            .as_deref()
            .is_some_and(|e| e.contains("name_taken"))
        {
            changed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(changed, "{:?}", late.status());
    assert_ne!(late.status().state, DialState::Registered);
    holder.stop();
    assert!(late.wait_registered(PATIENCE).await, "{:?}", late.status());
    server.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_host_of_another_relay_protocol_is_refused_with_the_reason() {
    let relay = relay().await;
    let mut old = RawHost::connect(&relay, None).await.expect("raw");
    old.send(serde_json::json!({
        "type": "register", "protocol": 1, "name": "old", "server": "raw",
        "version": "0", "resources": [], "instance": "i",
    }))
    .await;
    let answer = old.recv().await.expect("an answer");
    assert_eq!(answer["type"], "refused", "{answer}");
    assert_eq!(answer["code"], "bad_request", "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|m| m.contains("different unienv-remote versions")),
        "{answer}"
    );
    assert!(relay.hosts().is_empty());
    relay.shutdown().await;
}

#[tokio::test]
async fn names_are_validated() {
    let relay = relay().await;
    let server = common::fixture_server();
    for bad in ["", "a/b", "../x", "sp ace", &"n".repeat(65)] {
        let e = server.dial(&relay.url(), quick(bad)).expect_err(bad);
        assert!(e.to_string().contains("invalid host name"), "{e}");
    }
    let e = server
        .dial("http://127.0.0.1:1", quick("ok"))
        .expect_err("scheme");
    assert!(e.to_string().contains("invalid relay URL"), "{e}");
    let mut raw = RawHost::connect(&relay, None).await.expect("raw");
    let refused = raw.register("a/b", "i").await;
    assert_eq!(refused["code"], "invalid_name", "{refused}");
    // A client asking for an invalid name is told so.
    let e = connect(&format!("{}/hosts/a%2Fb", relay.url()))
        .await
        .expect_err("invalid");
    assert!(e.to_string().contains("invalid host name"), "{e}");
    server.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn tokens_are_checked_on_both_sides() {
    let relay = relay_with(RelayConfig {
        listen: ServerConfig {
            token: Some("client-secret".into()),
            ..ServerConfig::default()
        },
        host_token: Some("host-secret".into()),
        ..RelayConfig::default()
    })
    .await;
    // A host without the host token, or with the client's: refused, told why.
    let e = RawHost::connect(&relay, None).await.err().expect("refused");
    assert!(e.contains("401"), "{e}");
    let e = RawHost::connect(&relay, Some("client-secret"))
        .await
        .err()
        .expect("refused");
    assert!(e.contains("401"), "{e}");
    let server = common::fixture_server();
    let wrong = server
        .dial(&relay.url(), quick("fx").with_token("client-secret"))
        .expect("dial");
    let mut told = false;
    for _ in 0..3000 {
        if wrong
            .status()
            .last_error
            .is_some_and(|e| e.contains("401") && e.contains("bearer token"))
        {
            told = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(told, "{:?}", wrong.status());
    wrong.stop();
    let good = server
        .dial(&relay.url(), quick("fx").with_token("host-secret"))
        .expect("dial");
    assert!(good.wait_registered(PATIENCE).await, "{:?}", good.status());
    // Clients: the client token, not the host's.
    for token in [None, Some("host-secret")] {
        let config = ClientConfig {
            token: token.map(String::from),
            ..ClientConfig::default()
        };
        let e = Client::connect(&relay.host_url("fx"), config)
            .await
            .expect_err("refused");
        assert!(e.to_string().contains("401"), "{e}");
    }
    let config = ClientConfig {
        token: Some("client-secret".into()),
        ..ClientConfig::default()
    };
    let client = Client::connect(&relay.host_url("fx"), config)
        .await
        .expect("the client token");
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(2)).await.expect("reset");
    client.close().await;
    // The listing needs the client token too.
    let e = unienv_remote::relay::list_hosts(&relay.url(), None, None, PATIENCE)
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("401"), "{e}");
    let hosts =
        unienv_remote::relay::list_hosts(&relay.url(), Some("client-secret"), None, PATIENCE)
            .await
            .expect("listing");
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].identity.name, "fx");
    server.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_host_that_never_opens_its_tunnel_gives_the_client_a_clear_error() {
    let relay = relay_with(RelayConfig {
        open_timeout: Duration::from_millis(200),
        max_pending_opens_per_host: 2,
        ..RelayConfig::default()
    })
    .await;
    let mut mute = RawHost::connect(&relay, None).await.expect("raw");
    assert_eq!(mute.register("mute", "i").await["type"], "registered");
    let e = connect(&relay.host_url("mute"))
        .await
        .expect_err("no tunnel");
    let text = e.to_string();
    assert!(
        text.contains("504") && text.contains("did not open a tunnel"),
        "{text}"
    );
    // The host was asked (an open request with a tunnel ID) and ignored it.
    let open = mute.recv().await.expect("an open request");
    assert_eq!(open["type"], "open");
    // Its tunnel ID is expired now: claiming it is refused.
    let id = open["tunnel"].as_str().expect("id").to_string();
    let late = tokio_tungstenite::connect_async(format!("{}/relay/tunnel/{id}", relay.url())).await;
    assert!(
        late.as_ref()
            .err()
            .is_some_and(|e| e.to_string().contains("404")),
        "{late:?}"
    );
    // A host that declines: the client is told why, at once.
    let url = relay.host_url("mute");
    let waiting = tokio::spawn(async move { connect(&url).await.map(|_| ()) });
    let open = mute.recv().await.expect("an open request");
    mute.send(serde_json::json!({"type": "decline", "tunnel": open["tunnel"], "message": "busy rendering"}))
        .await;
    let e = waiting.await.expect("task").expect_err("declined");
    assert!(e.to_string().contains("busy rendering"), "{e}");
    relay.shutdown().await;
}

#[tokio::test]
async fn clients_waiting_for_one_host_are_bounded() {
    let relay = relay_with(RelayConfig {
        open_timeout: Duration::from_secs(30),
        max_pending_opens_per_host: 2,
        ..RelayConfig::default()
    })
    .await;
    let mut mute = RawHost::connect(&relay, None).await.expect("raw");
    assert_eq!(mute.register("mute", "i").await["type"], "registered");
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let url = relay.host_url("mute");
        waiting.push(tokio::spawn(async move { connect(&url).await.map(|_| ()) }));
        // Each is asked for before the next client comes.
        assert_eq!(mute.recv().await.expect("open")["type"], "open");
    }
    let e = connect(&relay.host_url("mute"))
        .await
        .expect_err("over the bound");
    assert!(
        e.to_string().contains("503") && e.to_string().contains("waiting"),
        "{e}"
    );
    // The host leaves: the waiting clients are told at once.
    drop(mute);
    for w in waiting {
        let e = w.await.expect("task").expect_err("host gone");
        assert!(e.to_string().contains("disconnected"), "{e}");
    }
    relay.shutdown().await;
}

#[tokio::test]
async fn unknown_tunnels_and_the_root_are_refused() {
    let relay = relay().await;
    for path in [
        "/relay/tunnel/00000000000000000000000000000000",
        "/relay/tunnel/x",
    ] {
        let e = tokio_tungstenite::connect_async(format!("{}{path}", relay.url()))
            .await
            .expect_err("refused");
        assert!(e.to_string().contains("404"), "{path}: {e}");
    }
    // A client given the relay's own URL is told what it is.
    let e = connect(&relay.url()).await.expect_err("the root");
    assert!(e.to_string().contains("unienv-remote relay"), "{e}");
    relay.shutdown().await;
}

#[test]
fn discover_lists_a_relays_hosts_and_a_hosts_resources() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (relay, host, dial) = rt.block_on(async {
        let relay = relay().await;
        let (host, dial) = dialing_host(&relay, "fx").await;
        (relay, host, dial)
    });
    let run = |url: String, json: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_unienv-remote"));
        cmd.arg("discover").arg(url);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().expect("discover");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let listing = run(format!("{}/", relay.url()), false);
    assert!(listing.contains("1 host connected"), "{listing}");
    assert!(listing.contains(&relay.host_url("fx")), "{listing}");
    assert!(listing.contains("counter"), "{listing}");
    let json: serde_json::Value = serde_json::from_str(&run(relay.url(), true)).expect("JSON");
    assert_eq!(json[0]["name"], "fx");
    assert_eq!(json[0]["url"], relay.host_url("fx"));
    let resources = run(relay.host_url("fx"), false);
    assert!(
        resources.contains("counter") && resources.contains("resources"),
        "{resources}"
    );
    // Plain HTTP: GET /hosts.
    let body = rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(relay.local_addr())
            .await
            .expect("tcp");
        s.write_all(b"GET /hosts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    });
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("\"name\":\"fx\""), "{body}");
    rt.block_on(async {
        dial.stop();
        host.shutdown().await;
        relay.shutdown().await;
    });
}

/// Raises this process's soft limit of open files to `want` (at most the
/// hard limit): 1,000 hosts and the relay's ends of their connections
/// are 2,000 sockets in this one process.
#[cfg(target_os = "linux")]
fn allow_open_files(want: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid, initialised struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < want {
            limit.rlim_cur = want.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn allow_open_files(_want: u64) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_hosts_register_on_one_relay() {
    allow_open_files(4096);
    let relay = relay_with(RelayConfig {
        listen: ServerConfig {
            max_connections: 1100,
            ..ServerConfig::default()
        },
        ..RelayConfig::default()
    })
    .await;
    let mut raw = Vec::with_capacity(999);
    for chunk in 0..9 {
        let batch: Vec<_> = (0..111)
            .map(|i| {
                let relay = relay.clone();
                tokio::spawn(async move {
                    let mut host = RawHost::connect(&relay, None).await.expect("connect");
                    let name = format!("sim-{}", chunk * 111 + i);
                    let answer = host.register(&name, &name).await;
                    assert_eq!(answer["type"], "registered", "{answer}");
                    host
                })
            })
            .collect();
        for h in batch {
            raw.push(h.await.expect("task"));
        }
    }
    let (real, dial) = dialing_host(&relay, "real").await;
    let hosts = relay.wait_for(1000, PATIENCE).await.expect("1,000 hosts");
    assert_eq!(hosts.len(), 1000);
    assert_eq!(relay.addresses().len(), 1000);
    // The listing and a session on one of them work with all registered.
    let listed = unienv_remote::relay::list_hosts(&relay.url(), None, None, PATIENCE)
        .await
        .expect("listing");
    assert_eq!(listed.len(), 1000);
    let client = connect(&relay.host_url("real")).await.expect("connect");
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(5)).await.expect("reset");
    env.step(action()).await.expect("step");
    client.close().await;
    dial.stop();
    drop(raw);
    real.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_tls_relay_serves_hosts_and_clients_over_wss() {
    let pki = common::pki::make_pki("relay");
    let relay = relay_with(RelayConfig {
        listen: ServerConfig {
            tls: Some(
                unienv_remote::transport::ServerTls::from_pem_files(&pki.cert, &pki.key)
                    .expect("tls"),
            ),
            ..ServerConfig::default()
        },
        ..RelayConfig::default()
    })
    .await;
    assert!(relay.url().starts_with("wss://"), "{}", relay.url());
    let server = common::fixture_server();
    let dial = server
        .dial(
            &relay.url(),
            DialOptions {
                ca_file: Some(pki.ca.clone()),
                ..quick("secure")
            },
        )
        .expect("dial");
    assert!(dial.wait_registered(PATIENCE).await, "{:?}", dial.status());
    let client = Client::connect(
        &relay.host_url("secure"),
        ClientConfig::default().with_ca_file(&pki.ca),
    )
    .await
    .expect("wss client");
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(1)).await.expect("reset");
    env.step(action()).await.expect("step");
    client.close().await;
    // A plain ws:// client is told to use wss://.
    let plain = relay.host_url("secure").replacen("wss://", "ws://", 1);
    let e = connect(&plain).await.expect_err("plain on TLS");
    assert!(e.to_string().contains("wss://"), "{e}");
    // A host that does not trust the relay's certificate is told why.
    let untrusting = common::fixture_server();
    let refused = untrusting
        .dial(&relay.url(), quick("untrusting"))
        .expect("dial");
    let mut told = false;
    for _ in 0..3000 {
        if refused
            .status()
            .last_error
            .is_some_and(|e| e.contains("certificate"))
        {
            told = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(told, "{:?}", refused.status());
    refused.stop();
    dial.stop();
    untrusting.shutdown().await;
    server.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_host_at_its_connection_cap_declines_and_the_client_is_told() {
    let relay = relay().await;
    let server = common::fixture_server_with(
        ServerConfig {
            max_connections: 1,
            ..ServerConfig::default()
        },
        |_| Ok(()),
    );
    let dial = server.dial(&relay.url(), quick("small")).expect("dial");
    assert!(dial.wait_registered(PATIENCE).await);
    let first = connect(&relay.host_url("small")).await.expect("first");
    let e = connect(&relay.host_url("small"))
        .await
        .expect_err("over the host's cap");
    let text = e.to_string();
    assert!(
        text.contains("503") && text.contains("too many connections"),
        "{text}"
    );
    first.close().await;
    dial.stop();
    server.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn forwarded_messages_are_held_to_the_relays_size_limit() {
    let relay = relay_with(RelayConfig {
        listen: ServerConfig {
            max_message_size: 64 * 1024,
            ..ServerConfig::default()
        },
        ..RelayConfig::default()
    })
    .await;
    let (host, dial) = dialing_host(&relay, "fx").await;
    let (mut ws, _) = tokio_tungstenite::connect_async(relay.host_url("fx"))
        .await
        .expect("a raw client");
    ws.send(Message::Binary(vec![0u8; 100 * 1024].into()))
        .await
        .expect("send");
    let mut code = None;
    while let Some(m) = ws.next().await {
        match m {
            Ok(Message::Close(Some(frame))) => {
                code = Some(u16::from(frame.code));
                break;
            }
            Ok(_) => continue,
            Err(_) => break,
        }
    }
    assert_eq!(code, Some(1009), "too large, refused by the relay itself");
    // The host's session was closed with the client's, never sent the message.
    assert!(dial.wait_registered(Duration::ZERO).await);
    dial.stop();
    host.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test]
async fn a_silent_host_is_dropped_after_the_heartbeat_timeout() {
    let relay = relay_with(RelayConfig {
        listen: ServerConfig {
            heartbeat_interval: Some(Duration::from_millis(50)),
            heartbeat_timeout: Duration::from_millis(300),
            ..ServerConfig::default()
        },
        ..RelayConfig::default()
    })
    .await;
    // Registers, then never reads again: the relay's pings go unanswered.
    let mut silent = RawHost::connect(&relay, None).await.expect("raw");
    assert_eq!(silent.register("quiet", "i").await["type"], "registered");
    assert_eq!(relay.hosts().len(), 1);
    let mut dropped = false;
    for _ in 0..6000 {
        if relay.hosts().is_empty() {
            dropped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(dropped, "the silent host is still listed");
    drop(silent);
    relay.shutdown().await;
}

#[test]
fn serve_dial_refuses_bad_options_before_starting() {
    for (args, said) in [
        (
            &["--dial", "ws://127.0.0.1:9", "--name", "a/b"][..],
            "--name: invalid host name",
        ),
        (
            &["--dial", "http://127.0.0.1:9", "--name", "ok"][..],
            "ws://HOST:PORT",
        ),
        (
            &[
                "--dial",
                "ws://127.0.0.1:9",
                "--name",
                "ok",
                "--host-token",
                " ",
            ][..],
            "--host-token is empty",
        ),
        (&["--dial", "ws://127.0.0.1:9"][..], "--name"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_unienv-remote"))
            .arg("serve")
            .args(args)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(said),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "nothing started: {args:?}");
    }
}

async fn next(
    sub: &mut unienv_remote::client::Subscription,
) -> unienv_remote::client::SnapshotEvent {
    sub.next(Some(PATIENCE))
        .await
        .expect("a snapshot")
        .expect("the stream is open")
}

#[tokio::test]
async fn an_observer_through_the_relay_sees_every_boundary() {
    let relay = relay().await;
    let (host, dial) = dialing_host(&relay, "fx").await;
    let url = relay.host_url("fx");
    let controller = connect(&url).await.expect("controller");
    let observer = connect(&url).await.expect("observer");
    let mut sub = observer
        .subscribe("counter", None)
        .await
        .expect("subscribe");
    let env = controller.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let first = next(&mut sub).await;
    for i in 1..=3u64 {
        env.step(action()).await.expect("step");
        let event = next(&mut sub).await;
        assert_eq!(event.sequence, first.sequence + i, "consecutive");
        assert_eq!(event.kind, "step");
    }
    controller.close().await;
    observer.close().await;
    dial.stop();
    host.shutdown().await;
    relay.shutdown().await;
}
