//! Floods against `serve --token T --viewer` (a separate process), each
//! measured against a controller stepping `bench_state` in the same run,
//! interleaved (without, with, without, with, ...): the controller must keep
//! at least half its steps per second. And the server's memory under 10,000
//! refused subscriptions. Loopback only, bounded in count and time.
//!
//! Benchmarks, not default tests (they measure rates):
//! `cargo test --release --test viewer -- --ignored --nocapture floods::`.

use crate::cli_support::Streaming;
use crate::support::{self, PageMessage, DEADLINE};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::viewer::MAX_PANELS;
use unienv_remote::{NdArray, Value};

const TOKEN: &str = "fl00d";

/// Measuring windows per side, and their length.
const ROUNDS: usize = 3;
const WINDOW: Duration = Duration::from_secs(2);

/// `serve --fixtures --token --viewer`: the process, its ws:// URL and its
/// viewer's URL (with the key).
fn serve() -> (Streaming, String, String) {
    let serve = Streaming::spawn(&[
        "serve",
        "--fixtures",
        "--addr",
        "127.0.0.1:0",
        "--token",
        TOKEN,
        "--viewer",
        "127.0.0.1:0",
    ]);
    let (mut ws, mut http) = (None, None);
    for _ in 0..200 {
        let Some(line) = serve.next_line(DEADLINE) else {
            break;
        };
        let word = |scheme: &str| {
            line.find(scheme).map(|at| {
                line[at..]
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
        };
        if ws.is_none() {
            ws = word("ws://");
        }
        if http.is_none() {
            http = word("http://");
        }
        if ws.is_some() && http.is_some() {
            break;
        }
    }
    let (Some(ws), Some(http)) = (ws, http) else {
        panic!("serve printed no URLs");
    };
    (serve, ws, http)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The controller's steps per second over `WINDOW`.
async fn steps_per_second(env: &unienv_remote::client::EnvProxy) -> f64 {
    let action = Value::Array(NdArray::from_vec(vec![0.5f32; 4]));
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < WINDOW {
        env.step(action.clone())
            .await
            .expect("the controller's step");
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Runs `attack` (on its own runtime) in every other window; returns the
/// controller's mean steps/s without and with it.
fn measure(ws_url: &str, attack: impl Fn(Arc<AtomicBool>) + Send + Sync + 'static) -> (f64, f64) {
    let controller_rt = runtime();
    let env = controller_rt.block_on(async {
        let client = Client::connect(ws_url, ClientConfig::default().with_token(TOKEN))
            .await
            .expect("the controller connects");
        let env = client.env("bench_state").await.expect("bench_state");
        env.reset(ResetArgs::default()).await.expect("reset");
        (client, env)
    });
    let attack = Arc::new(attack);
    let (mut without, mut with) = (0.0, 0.0);
    for _ in 0..ROUNDS {
        without += controller_rt.block_on(steps_per_second(&env.1));
        let stop = Arc::new(AtomicBool::new(false));
        let attacker = {
            let (attack, stop) = (attack.clone(), stop.clone());
            std::thread::spawn(move || attack(stop))
        };
        // The attack takes hold before the window opens.
        std::thread::sleep(Duration::from_millis(500));
        with += controller_rt.block_on(steps_per_second(&env.1));
        stop.store(true, Ordering::Relaxed);
        attacker.join().expect("the attacker");
    }
    controller_rt.block_on(env.0.close());
    (without / ROUNDS as f64, with / ROUNDS as f64)
}

fn report(what: &str, (without, with): (f64, f64)) {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "{what}: controller {without:.0} steps/s without, {with:.0} with ({:.0} %); load {}",
        100.0 * with / without,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(
        with >= 0.5 * without,
        "{what}: the controller kept less than half its steps/s"
    );
}

#[test]
#[ignore = "a benchmark: run with --ignored --release"]
fn tab_panel_and_render_floods_leave_the_controller_half_its_steps() {
    let (serve, ws_url, page_url) = serve();
    let result = measure(&ws_url, move |stop| {
        let page_url = page_url.clone();
        runtime().block_on(async move {
            let frames = Arc::new(AtomicU64::new(0));
            let mut tasks = Vec::new();
            // 64 tabs (the viewer keeps 16), each with every panel it may
            // have on the fastest env, credit after every frame, and
            // renders in a loop.
            for _ in 0..64 {
                let (page_url, stop, frames) = (page_url.clone(), stop.clone(), frames.clone());
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        // Refused tabs try again every second, as the page does.
                        let Ok(page) = support::open_page(&page_url).await else {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        };
                        let (mut out, mut input) = page.split();
                        let command = |v: serde_json::Value| Message::binary(v.to_string().into_bytes());
                        for panel in 0..MAX_PANELS as u64 + 8 {
                            let _ = out
                                .send(command(json!({ "op": "subscribe", "panel": panel, "resource": "bench_state" })))
                                .await;
                            let _ = out.send(command(json!({ "op": "ready", "panel": panel }))).await;
                        }
                        while !stop.load(Ordering::Relaxed) {
                            let Ok(Some(Ok(Message::Binary(b)))) =
                                tokio::time::timeout(Duration::from_millis(100), input.next()).await
                            else {
                                let _ = out.send(command(json!({ "op": "render", "panel": 0, "resource": "bench_state" }))).await;
                                continue;
                            };
                            let m = PageMessage::decode(&b);
                            if m.kind() == "snapshot" {
                                frames.fetch_add(1, Ordering::Relaxed);
                                let _ = out.send(command(json!({ "op": "ready", "panel": m.header["panel"] }))).await;
                            }
                        }
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
            eprintln!("  (the tabs received {} frames)", frames.load(Ordering::Relaxed));
        });
    });
    report("64 tabs × 40 credited panels + renders", result);
    drop(serve);
}

#[test]
#[ignore = "a benchmark: run with --ignored --release"]
fn refresh_floods_leave_the_controller_half_its_steps() {
    let (serve, ws_url, page_url) = serve();
    let result = measure(&ws_url, move |stop| {
        let page_url = page_url.clone();
        runtime().block_on(async move {
            let lists = Arc::new(AtomicU64::new(0));
            let mut tasks = Vec::new();
            // 16 tabs (all the viewer admits), each sending `refresh` as
            // fast as its socket takes it, and reading what comes back.
            for _ in 0..16 {
                let (page_url, stop, lists) = (page_url.clone(), stop.clone(), lists.clone());
                tasks.push(tokio::spawn(async move {
                    let Ok(page) = support::open_page(&page_url).await else {
                        return;
                    };
                    let (mut out, mut input) = page.split();
                    let reading = tokio::spawn(async move {
                        while let Some(Ok(Message::Binary(b))) = input.next().await {
                            if PageMessage::decode(&b).kind() == "resources" {
                                lists.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                    let refresh =
                        Message::binary(json!({ "op": "refresh" }).to_string().into_bytes());
                    while !stop.load(Ordering::Relaxed) {
                        if out.send(refresh.clone()).await.is_err() {
                            break;
                        }
                    }
                    reading.abort();
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
            eprintln!(
                "  (the tabs received {} lists)",
                lists.load(Ordering::Relaxed)
            );
        });
    });
    report("16 tabs flooding refresh", result);
    drop(serve);
}

#[test]
#[ignore = "a benchmark: run with --ignored --release"]
fn ping_floods_leave_the_controller_half_its_steps() {
    let (serve, ws_url, _) = serve();
    let closed = Arc::new(AtomicU64::new(0));
    let counted = closed.clone();
    let target = ws_url.clone();
    let result = measure(&ws_url, move |stop| {
        let (ws_url, closed) = (target.clone(), closed.clone());
        runtime().block_on(async move {
            let mut tasks = Vec::new();
            // 4 connections of a token holder, pinging as fast as they can
            // (and reading the pongs); closed ones connect again.
            for _ in 0..4 {
                let (ws_url, stop, closed) = (ws_url.clone(), stop.clone(), closed.clone());
                tasks.push(tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let mut request = ws_url.as_str().into_client_request().expect("request");
                        request.headers_mut().insert(
                            "Authorization",
                            format!("Bearer {TOKEN}").parse().expect("header"),
                        );
                        let Ok((ws, _)) = tokio_tungstenite::connect_async(request).await else {
                            continue;
                        };
                        let (mut out, mut input) = ws.split();
                        let reading =
                            tokio::spawn(
                                async move { while let Some(Ok(_)) = input.next().await {} },
                            );
                        while !stop.load(Ordering::Relaxed) {
                            if out
                                .send(Message::Ping(b"flood".to_vec().into()))
                                .await
                                .is_err()
                            {
                                break;
                            }
                        }
                        closed.fetch_add(1, Ordering::Relaxed);
                        reading.abort();
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        });
    });
    eprintln!(
        "  (flooding connections ended: {})",
        counted.load(Ordering::Relaxed)
    );
    report("4 connections flooding pings", result);
    drop(serve);
}

#[test]
#[ignore = "a benchmark: run with --ignored --release"]
fn partial_heads_on_the_viewer_leave_the_controller_half_its_steps() {
    let (serve, ws_url, page_url) = serve();
    let addr = page_url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let result = measure(&ws_url, move |stop| {
        let addr = addr.clone();
        runtime().block_on(async move {
            use tokio::io::AsyncWriteExt;
            let filler = "x".repeat(16_000);
            let mut held = Vec::new();
            // 400 connections holding 16,000-byte partial heads, topped up
            // one byte at a time.
            while !stop.load(Ordering::Relaxed) {
                if held.len() < 400 {
                    if let Ok(mut s) = tokio::net::TcpStream::connect(addr.as_str()).await {
                        let head = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Fill: {filler}");
                        if s.write_all(head.as_bytes()).await.is_ok() {
                            held.push(s);
                        }
                    }
                    continue;
                }
                for s in held.iter_mut() {
                    let _ = s.write_all(b"x").await;
                }
                held.retain(|_| true);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    });
    report("400 partial 16 KB request heads on the viewer", result);
    drop(serve);
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
#[ignore = "a benchmark: run with --ignored --release"]
fn ten_thousand_refused_subscriptions_leave_memory_bounded() {
    let (serve, _, page_url) = serve();
    let before = rss_kib(serve.pid());
    runtime().block_on(async move {
        let mut page = support::open_page(&page_url).await.expect("a tab");
        let name = "m".repeat(60_000);
        let mut refused = 0;
        for panel in 0..10_000u64 {
            let command =
                json!({ "op": "subscribe", "panel": panel, "resource": format!("{name}{panel}") });
            page.send(Message::binary(command.to_string().into_bytes()))
                .await
                .expect("send");
            // One at a time: each is answered.
            loop {
                let Ok(Some(Ok(Message::Binary(b)))) =
                    tokio::time::timeout(DEADLINE, page.next()).await
                else {
                    panic!("the viewer stopped answering after {refused} refusals");
                };
                if PageMessage::decode(&b).kind() == "subscription_error" {
                    refused += 1;
                    break;
                }
            }
        }
        assert_eq!(refused, 10_000);
    });
    let after = rss_kib(serve.pid());
    eprintln!(
        "10,000 refused 60 KB subscriptions: serve's RSS {} → {} MiB",
        before / 1024,
        after / 1024
    );
    assert!(after < before + 64 * 1024, "RSS grew by more than 64 MiB");
    drop(serve);
}
