//! TLS (`wss://`): our client and the reference client against our server
//! over TLS, with certificates made here by rcgen (never checked in).

use crate::common;

use common::pki::{make_pki, tls_server};

use std::path::Path;
use std::time::Duration;
use unienv_remote::client::{Client, ClientConfig, ClientError};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::transport::ServerTls;
use unienv_remote::{NdArray, Value};

fn trusting(ca: &Path) -> ClientConfig {
    ClientConfig::default()
        .with_discover(false)
        .with_ca_file(ca)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_steps_over_wss_with_a_large_image() {
    let pki = make_pki("roundtrip");
    let (server, listener) = tls_server(&pki).await;
    let url = listener.url();
    assert!(url.starts_with("wss://127.0.0.1:"), "{url}");
    assert!(listener.is_tls());
    // By IP address and by name: the certificate names both.
    for url in [url.clone(), url.replace("127.0.0.1", "localhost")] {
        let client = Client::connect(&url, trusting(&pki.ca)).await.unwrap();
        let env = client.env("counter").await.unwrap();
        env.reset(ResetArgs::with_seed(1)).await.unwrap();
        let step = env
            .step(NdArray::from_vec(vec![1.0f32, 2.0]))
            .await
            .unwrap();
        assert_eq!(step.reward.as_f64(), Some(5.0));
        client.close().await;
    }
    // 64 × 84 × 84 × 3 bytes of image per step: many TLS records a message.
    let client = Client::connect(&url, trusting(&pki.ca)).await.unwrap();
    let env = client.env("bench_batch64").await.unwrap();
    env.reset(ResetArgs::default()).await.unwrap();
    for _ in 0..3 {
        let step = env
            .step(Value::Array(NdArray::from_vec(vec![1.0f32; 4])))
            .await
            .unwrap();
        let image = step
            .observation
            .get("image")
            .and_then(Value::as_array)
            .expect("an image");
        assert_eq!(image.shape(), &[64, 84, 84, 3]);
        let bytes = image.as_bytes();
        assert_eq!(bytes.len(), 64 * 84 * 84 * 3);
        assert!(
            bytes
                .iter()
                .enumerate()
                .all(|(i, &b)| b as usize == i % 251),
            "the image arrived corrupted"
        );
    }
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_an_unknown_ca_is_refused_naming_ca_file() {
    let pki = make_pki("server");
    let other = make_pki("other");
    let (server, listener) = tls_server(&pki).await;
    for config in [
        // System roots only.
        ClientConfig::default(),
        // Another CA.
        trusting(&other.ca),
    ] {
        let err = match Client::connect(&listener.url(), config).await {
            Ok(_) => panic!("connected to a server whose CA is not trusted"),
            Err(e) => e,
        };
        match &err {
            ClientError::Connect(failure) => {
                assert!(failure.needs_ca_file(), "{failure:?}");
                assert!(!failure.is_refused_by_os() && !failure.is_timeout());
            }
            other => panic!("not a connect failure: {other:?}"),
        }
        let text = err.to_string();
        eprintln!("refused: {text}");
        assert!(text.contains("certificate"), "{text}");
        assert!(text.contains("--ca-file"), "{text}");
    }
    // A CA file that does not exist is named.
    let missing = pki.dir.join("missing.pem");
    let err = match Client::connect(&listener.url(), trusting(&missing)).await {
        Ok(_) => panic!("connected with a missing CA file"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("missing.pem"), "{err}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_and_tls_mismatches_fail_cleanly() {
    let pki = make_pki("mismatch");
    let (server, listener) = tls_server(&pki).await;
    // ws:// to a TLS server: a clear error, no hang.
    let plain_url = listener.url().replacen("wss://", "ws://", 1);
    let err = match Client::connect(&plain_url, ClientConfig::default()).await {
        Ok(_) => panic!("a plain client connected to a TLS server"),
        Err(e) => e.to_string(),
    };
    eprintln!("ws to wss: {err}");
    assert!(err.contains("wss://"), "{err}");
    // The server still serves TLS clients afterwards.
    let client = Client::connect(&listener.url(), trusting(&pki.ca))
        .await
        .unwrap();
    client.close().await;
    server.shutdown().await;

    // wss:// to a plain server: a clear error, no hang.
    let mut builder = Server::builder(ServerConfig::default());
    unienv_remote::fixtures::register(&mut builder).unwrap();
    let plain = builder.start().expect("a valid server configuration");
    let plain_listener = plain.listen("127.0.0.1:0").await.unwrap();
    let tls_url = plain_listener.url().replacen("ws://", "wss://", 1);
    let err = match Client::connect(&tls_url, trusting(&pki.ca)).await {
        Ok(_) => panic!("a TLS client connected to a plain server"),
        Err(e) => e.to_string(),
    };
    eprintln!("wss to ws: {err}");
    assert!(err.contains("ws://"), "{err}");
    plain.shutdown().await;
}

#[test]
fn bad_pem_files_are_named() {
    let pki = make_pki("pem");
    let err = ServerTls::from_pem_files(&pki.key, &pki.key).unwrap_err();
    assert!(err.to_string().contains("key.pem"), "{err}");
    let err = ServerTls::from_pem_files(&pki.cert, &pki.cert).unwrap_err();
    assert!(err.to_string().contains("cert.pem"), "{err}");
    let err = ServerTls::from_pem_files(pki.dir.join("none.pem"), &pki.key).unwrap_err();
    assert!(err.to_string().contains("none.pem"), "{err}");
}

#[test]
fn the_reference_client_steps_over_wss() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let pki = make_pki("interop");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (server, listener) = rt.block_on(tls_server(&pki));
    let ca = pki.ca.to_string_lossy().into_owned();
    let out = common::run_python(&python, "drive_wss.py", &[&listener.url(), &ca], None);
    assert_eq!(String::from_utf8_lossy(&out).trim(), "ok");
    rt.block_on(server.shutdown());
}

/// Several hundred connections, each a full TLS handshake and upgrade, by
/// the reference's transport (TLS 1.3, then TLS 1.2) and by our client:
/// every upgrade is answered (the server sends no TLS 1.3 session ticket
/// that could race the reference client's request; SPEC "TLS").
#[test]
fn hundreds_of_wss_connections_all_complete() {
    let pki = make_pki("many");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (server, listener) = rt.block_on(tls_server(&pki));
    rt.block_on(async {
        for i in 0..300 {
            let client = tokio::time::timeout(
                Duration::from_secs(5),
                Client::connect(&listener.url(), trusting(&pki.ca)),
            )
            .await
            .unwrap_or_else(|_| panic!("connection {i} hung"))
            .unwrap();
            client.close().await;
        }
    });
    if let Some(python) = common::ref_python() {
        let ca = pki.ca.to_string_lossy().into_owned();
        let out = common::run_python(
            &python,
            "wss_many.py",
            &[&listener.url(), &ca, "300", "50"],
            None,
        );
        let out = String::from_utf8_lossy(&out);
        assert_eq!(out.lines().next(), Some("0"), "failed connections:\n{out}");
    }
    rt.block_on(server.shutdown());
}

/// A plain HTTP request (a ws:// client) on the TLS port is answered in
/// plain HTTP: 400, and a body saying to use wss://.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_request_on_the_tls_port_gets_a_400_naming_wss() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = make_pki("plain400");
    let (server, listener) = tls_server(&pki).await;
    let mut tcp = tokio::net::TcpStream::connect(listener.local_addr())
        .await
        .unwrap();
    tcp.write_all(
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer))
        .await
        .expect("answered at once")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("wss://"), "{answer}");
    server.shutdown().await;
}

/// The command line end to end: `serve --tls-cert --tls-key` announces a
/// wss:// URL; `discover --ca-file` reaches it; without the CA the error
/// names `--ca-file`.
#[cfg(unix)]
#[test]
fn serve_with_tls_flags_and_discover_with_ca_file() {
    use crate::support::{run, Streaming};
    let pki = make_pki("cli");
    let cert = pki.cert.to_string_lossy().into_owned();
    let key = pki.key.to_string_lossy().into_owned();
    let ca = pki.ca.to_string_lossy().into_owned();
    let serve = Streaming::spawn(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--fixtures",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ]);
    let first = serve
        .next_line(Duration::from_secs(60))
        .expect("the serve banner");
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("wss://"))
        .unwrap_or_else(|| panic!("no wss:// URL in {first:?}"))
        .to_string();
    let found = run(&["discover", &url, "--ca-file", &ca]);
    assert!(found.ok().contains("counter"), "{}", found.stdout);
    let refused = run(&["discover", &url]);
    assert!(!refused.status.success());
    assert!(refused.stderr.contains("--ca-file"), "{}", refused.stderr);
    let status = std::process::Command::new("kill")
        .args(["-INT", &serve.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let (status, _, _) = serve.wait(Duration::from_secs(60));
    assert!(status.success());
    // A key file that is not a key is named.
    let bad = run(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &cert,
    ]);
    assert!(!bad.status.success());
    assert!(bad.stderr.contains("cert.pem"), "{}", bad.stderr);
}
