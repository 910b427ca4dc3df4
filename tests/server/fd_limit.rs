//! A server out of file descriptors (docs/network.md, "Many sessions"):
//! when `accept` fails with EMFILE the listener says so once per interval,
//! naming the limit and how to raise it, backs off instead of spinning,
//! keeps serving the open sessions, and accepts again once descriptors are
//! free. The limit is lowered in a child process of its own (this test
//! binary again, running only the probe), so no other test shares it.
#![cfg(target_os = "linux")]

use crate::common;
use common::faults::pair;
use common::logs::Logs;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::ServerConfig;

/// The listener's warning when it is out of descriptors.
const OUT_OF_FDS: &str = "cannot accept connections: out of file descriptors";

/// The soft `RLIMIT_NOFILE` that leaves exactly `free` descriptors to open:
/// one past the `free`-th unused descriptor number.
fn limit_leaving(free: usize) -> libc::rlim_t {
    let mut left = free;
    for fd in 0..1_000_000 {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        let unused = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1;
        if unused {
            left -= 1;
            if left == 0 {
                return (fd + 1) as libc::rlim_t;
            }
        }
    }
    panic!("no free descriptor numbers")
}

fn set_soft_limit(soft: libc::rlim_t) -> libc::rlimit {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct given.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        let old = r;
        r.rlim_cur = soft;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
        old
    }
}

/// Reads a response head (up to 60 s: an event awaited, not a timing).
async fn response_head(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before answering: {got:?}");
            got.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("an answer to the handshake");
    String::from_utf8_lossy(&got).into_owned()
}

// One thread: the listener and the sessions run on the test's thread, where
// their log events are captured.
#[tokio::test(flavor = "current_thread")]
#[ignore = "run in a child process by a_server_out_of_descriptors_says_so_and_recovers"]
async fn out_of_descriptors_probe() {
    let logs = Logs::capture();
    let server = common::fixture_server_with(ServerConfig::default(), |_| Ok(()));
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    let (url, addr) = (listener.url(), listener.local_addr());
    let first = Client::connect(&url, ClientConfig::default())
        .await
        .unwrap();
    let counter = first.env("counter").await.unwrap();
    counter.reset(ResetArgs::with_seed(0)).await.unwrap();

    // One descriptor left: the next client socket takes it, and the
    // server's accept of that connection fails with EMFILE.
    let soft = limit_leaving(1);
    let old = set_soft_limit(soft);
    let mut pending = TcpStream::connect(addr).await.unwrap();
    pending
        .write_all(
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .await
        .unwrap();
    let warned = logs.wait_for(OUT_OF_FDS, |_| true).await;
    let hint = warned.field("hint").unwrap_or_default();
    assert!(
        hint.contains("ulimit -n") && hint.contains("LimitNOFILE"),
        "{warned:?}"
    );
    assert_eq!(
        warned.field("open_files_limit"),
        Some(soft.to_string().as_str()),
        "{warned:?}"
    );

    // The open session is still served while accepts fail.
    for _ in 0..5 {
        counter.step(pair(1.0)).await.unwrap();
    }
    // Backed off and retried, but said it once.
    assert_eq!(logs.all(OUT_OF_FDS).len(), 1);

    // Closing that session frees descriptors: the waiting connection is
    // accepted and upgraded.
    first.close().await;
    drop(counter);
    drop(first);
    let head = response_head(&mut pending).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let again = logs.wait_for("accepting connections again", |_| true).await;
    let failed: u64 = again.field("failed").unwrap().parse().unwrap();
    assert!(failed >= 1, "{again:?}");
    assert_eq!(logs.all(OUT_OF_FDS).len(), 1);

    // And with that one closed too, a new client connects and steps.
    drop(pending);
    let next = Client::connect(&url, ClientConfig::default())
        .await
        .unwrap();
    let counter = next.env("counter").await.unwrap();
    counter.reset(ResetArgs::with_seed(0)).await.unwrap();
    counter.step(pair(1.0)).await.unwrap();
    next.close().await;
    set_soft_limit(old.rlim_cur);
    server.shutdown().await;
}

#[test]
fn a_server_out_of_descriptors_says_so_and_recovers() {
    common::run_alone_in_a_child("fd_limit::out_of_descriptors_probe");
}
