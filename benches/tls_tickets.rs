//! What sending no TLS 1.3 session ticket costs (SPEC section 1, "TLS").
//!
//! Two servers of ours over TLS with the same certificate, one configured as
//! `ServerTls::from_pem_files` does (0 tickets), one with rustls' default of
//! 2 tickets. Per round, each measurement connects `TLS_CONNECTS` times (TLS
//! handshake, WebSocket upgrade, hello; no discover) and closes, and the
//! order rotates:
//!
//! - `fresh`: our client as it is configured by default (a rustls
//!   configuration per connection, so never resuming): what tickets cost
//!   every client that does not resume (ours, and the reference's
//!   `websockets` with an `ssl.SSLContext`, which reuses no session);
//! - `shared`: one rustls client configuration for all connections
//!   (`ClientConfig::tls`), so that with tickets every connection after the
//!   first resumes: what 0 tickets cost a client that would resume.
//!
//! Printed: the mean time per connection of each, and the ratios 0/2. With
//! `UNIENV_REF_PYTHON` set, `tests/py/wss_many.py` then opens
//! `TLS_REF_CONNECTS` TLS 1.3 connections with the reference's transport to
//! each server and the connections that never got their upgrade answered
//! are counted.
//!
//! Run: `cargo bench --bench tls_tickets` (`TLS_ROUNDS`, default 5).

use std::sync::Arc;
use std::time::{Duration, Instant};
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::transport::ServerTls;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Pki {
    dir: std::path::PathBuf,
}

fn make_pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let dir = std::env::temp_dir().join(format!("unienv-tls-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "unienv tls_tickets bench CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    Pki { dir }
}

async fn server(pki: &Pki, tickets: usize) -> (Server, Listener) {
    let tls = ServerTls::from_pem_files(pki.dir.join("cert.pem"), pki.dir.join("key.pem")).unwrap();
    let mut rustls = (**tls.rustls_config()).clone();
    rustls.send_tls13_tickets = tickets;
    let config = ServerConfig {
        tls: Some(ServerTls::from_rustls(Arc::new(rustls))),
        ..ServerConfig::default()
    };
    let mut builder = Server::builder(config);
    unienv_remote::fixtures::register(&mut builder).unwrap();
    let server = builder.start().unwrap();
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    (server, listener)
}

/// Mean time per connection over `n` connects.
async fn connects(url: &str, config: &ClientConfig, n: usize) -> Duration {
    let started = Instant::now();
    for _ in 0..n {
        let client = Client::connect(url, config.clone()).await.unwrap();
        client.close().await;
    }
    started.elapsed() / n as u32
}

fn main() {
    let rounds = env_usize("TLS_ROUNDS", 5);
    let n = env_usize("TLS_CONNECTS", 100);
    let pki = make_pki();
    let ca = pki.dir.join("ca.pem");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (s0, l0) = runtime.block_on(server(&pki, 0));
    let (s2, l2) = runtime.block_on(server(&pki, 2));
    let fresh = ClientConfig::default()
        .with_discover(false)
        .with_ca_file(&ca);
    let mut shared = fresh.clone();
    shared.tls = Some(unienv_remote::transport::tls::client_config(Some(&ca)).unwrap());
    let names = ["fresh/0", "fresh/2", "shared/0", "shared/2"];
    let mut totals = [Duration::ZERO; 4];
    for round in 0..rounds {
        for k in 0..4 {
            let which = (k + round) % 4;
            let url = if which % 2 == 0 { l0.url() } else { l2.url() };
            let config = if which < 2 { &fresh } else { &shared };
            totals[which] += runtime.block_on(connects(&url, config, n));
        }
    }
    println!("TLS connect + upgrade + hello, mean per connection over {rounds} rounds of {n}:");
    for (name, total) in names.iter().zip(totals) {
        println!(
            "  {name:>9} tickets: {:8.1} us",
            total.as_secs_f64() * 1e6 / rounds as f64
        );
    }
    let ratio = |a: usize, b: usize| totals[a].as_secs_f64() / totals[b].as_secs_f64();
    println!("  0/2 tickets, fresh (no resumption): {:.3}", ratio(0, 1));
    println!(
        "  0/2 tickets, shared (2 tickets resume): {:.3}",
        ratio(2, 3)
    );
    if let Ok(python) = std::env::var("UNIENV_REF_PYTHON") {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/wss_many.py");
        let count = env_usize("TLS_REF_CONNECTS", 300).to_string();
        for (name, listener) in [("0 tickets", &l0), ("2 tickets", &l2)] {
            let started = Instant::now();
            let out = std::process::Command::new(&python)
                .args([script, &listener.url(), ca.to_str().unwrap(), &count, "0"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            if let Some(first) = text.lines().nth(1) {
                println!("    first failure: {first}");
            }
            println!(
                "  reference transport, {name}: {} of {count} TLS 1.3 upgrades lost ({:.1} s)",
                text.lines().next().unwrap_or("?"),
                started.elapsed().as_secs_f64()
            );
        }
    }
    runtime.block_on(async {
        s0.shutdown().await;
        s2.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(&pki.dir);
}
