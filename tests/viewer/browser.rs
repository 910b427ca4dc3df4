//! The browser viewer in a real browser: headless Chromium, driven over the
//! DevTools protocol, opens the viewer's page while a controller steps
//! `pointmass` and `bench_image`; the page must list the resources, paint
//! the camera's and the bench image's pixels, plot rewards, show a revival's
//! new revision and a lost connection. Against our server (fixture registry
//! plus the built-in simulators) and against the Python reference server.
//!
//! Chromium is required (`./scripts/test.sh` installs it as root); a missing
//! browser fails with instructions unless `UNIENV_SKIP_BROWSER=1`.
//! `UNIENV_VIEWER_SCREENSHOT=PATH` saves a PNG of the page.
//!
//! The viewer's benchmark is the ignored test `benchmark` (run with
//! `cargo test --release --test viewer -- --ignored --nocapture browser::benchmark`).

use crate::common;
use crate::support;

use std::time::{Duration, Instant};
use support::{chromium, click, panel, watch, Browser, Hosts};
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::viewer::{Viewer, ViewerConfig};
use unienv_remote::{NdArray, Value};

const CAMERA: &str = "pointmass/node/camera";
const IDLE: Duration = Duration::from_millis(300);

/// A server with the fixtures and the simulators, listening.
async fn our_server(idle: Option<Duration>) -> (Server, Listener) {
    let config = ServerConfig {
        idle_timeout: idle,
        ..ServerConfig::default()
    };
    support::serve(config, Hosts::Both).await
}

/// JavaScript: how many points the panel's plot of `field` holds.
fn plot_points(resource: &str, field: &str) -> String {
    format!(
        "(() => {{ const p = {}; const e = p && p.querySelector('.plot[data-field=\"{field}\"]'); return e ? Number(e.dataset.points) : 0; }})()",
        panel(resource)
    )
}

/// JavaScript: the RGB bytes of the panel's image canvas of `field`, with
/// the sequence it shows.
fn canvas_rgb(resource: &str, field: &str) -> String {
    format!(
        "(() => {{ const c = {}.querySelector('canvas[data-field=\"{field}\"]');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const rgb = []; for (let i = 0; i < d.length; i += 4) rgb.push(d[i], d[i+1], d[i+2]);
            return {{ sequence: Number(c.dataset.sequence), width: c.width, height: c.height, rgb }}; }})()",
        panel(resource)
    )
}

fn image_bytes(observation: &Value, key: &str) -> (Vec<usize>, Vec<u8>) {
    let image = observation
        .get(key)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("observation has no {key} image: {observation:?}"));
    (image.shape().to_vec(), image.as_bytes().to_vec())
}

fn assert_pixels(shown: &serde_json::Value, shape: &[usize], expected: &[u8], what: &str) {
    assert_eq!(
        (shown["height"].as_u64(), shown["width"].as_u64()),
        (Some(shape[0] as u64), Some(shape[1] as u64)),
        "{what}: canvas size"
    );
    let rgb: Vec<u8> = shown["rgb"]
        .as_array()
        .expect("rgb")
        .iter()
        .map(|v| v.as_u64().unwrap_or(999) as u8)
        .collect();
    assert_eq!(rgb.len(), expected.len(), "{what}: pixel count");
    let differing = rgb.iter().zip(expected).filter(|(a, b)| a != b).count();
    assert_eq!(
        differing,
        0,
        "{what}: {differing} of {} canvas bytes differ from the frame",
        expected.len()
    );
}

/// Steps `env` with `action` in batches until `condition` holds in the page.
async fn step_until(
    browser: &mut Browser,
    client: &Client,
    env: &str,
    action: &Value,
    what: &str,
    condition: &str,
) -> Value {
    let proxy = client.env(env).await.expect("env proxy");
    let deadline = Instant::now() + support::DEADLINE;
    loop {
        let mut last = Value::Null;
        for _ in 0..5 {
            last = proxy.step(action.clone()).await.expect("step").observation;
        }
        let v = browser.eval(condition).await;
        if v.as_bool() == Some(true) {
            return last;
        }
        if Instant::now() > deadline {
            let page = browser.eval("document.body.innerText.slice(0, 3000)").await;
            panic!("timed out stepping {env} until {what}: {condition}\n{page}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Steps `env` once at a time until the panels of `shown_in` all show the
/// boundary of that very step (at high boundary rates a panel may miss the
/// last boundaries before a pause; a step after a quiet moment is shown).
/// Returns that step's observation and sequence.
async fn step_until_shown(
    browser: &mut Browser,
    client: &Client,
    env: &str,
    action: &Value,
    shown_in: &[&str],
) -> (Value, u64) {
    let proxy = client.env(env).await.expect("env proxy");
    let deadline = Instant::now() + support::DEADLINE;
    loop {
        let observation = proxy.step(action.clone()).await.expect("step").observation;
        let seq = sequence(client, env);
        let all = shown_in
            .iter()
            .map(|r| format!("{}.dataset.sequence === '{seq}'", panel(r)))
            .collect::<Vec<_>>()
            .join(" && ");
        if browser.poll(&all, Duration::from_secs(3)).await {
            return (observation, seq);
        }
        assert!(
            Instant::now() < deadline,
            "{shown_in:?} never showed the last boundary of {env}"
        );
    }
}

/// Resets `bench_image` (whose panel is open), steps it until its reward
/// plot has points, then checks that the panel's canvas shows the last
/// step's 84×84×3 image byte for byte. Returns the action it stepped with.
async fn bench_image_pixel_for_pixel(browser: &mut Browser, client: &Client, what: &str) -> Value {
    let bench = client.env("bench_image").await.expect("bench_image");
    bench.reset(ResetArgs::default()).await.expect("reset");
    let small = Value::Array(NdArray::from_vec(vec![0.1f32; 4]));
    step_until(
        browser,
        client,
        "bench_image",
        &small,
        "the bench reward plot has 2 points",
        &format!("{} >= 2", plot_points("bench_image", "reward")),
    )
    .await;
    let (last, _) =
        step_until_shown(browser, client, "bench_image", &small, &["bench_image"]).await;
    let (shape, expected) = image_bytes(&last, "image");
    assert_eq!(shape, vec![84, 84, 3], "{what}");
    let shown = browser
        .eval(&canvas_rgb("bench_image", "observation.image"))
        .await;
    assert_pixels(&shown, &shape, &expected, what);
    small
}

/// The last step's sequence, as the controller's descriptor cache has it.
fn sequence(client: &Client, id: &str) -> u64 {
    client.descriptor(id).expect("descriptor").sequence()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_frames_plots_revival_and_loss_in_chromium() {
    let Some(chrome) = chromium() else { return };
    let (server, listener) = our_server(Some(IDLE)).await;
    let viewer = support::viewer(ViewerConfig::new(listener.url())).await;
    let mut browser = Browser::open(&chrome, &viewer.url()).await;

    // The resource list appears, with the nodes under their env.
    browser
        .wait_for(
            "the resource tree",
            "Number(document.querySelector('#tree').dataset.count || 0) > 10 && document.querySelector('#status').textContent === 'connected'",
        )
        .await;
    for id in [
        "pointmass",
        CAMERA,
        "bench_image",
        "cartpole",
        "lazy",
        "gripper",
    ] {
        browser
            .wait_for(
                id,
                &format!("!!document.querySelector('li[data-id=\"{id}\"]')"),
            )
            .await;
    }
    let nested = browser
        .eval(&format!(
            "!!document.querySelector('li[data-id=\"pointmass\"] li[data-id=\"{CAMERA}\"]')"
        ))
        .await;
    assert_eq!(
        nested,
        serde_json::json!(true),
        "camera listed under pointmass"
    );

    watch(&mut browser, CAMERA).await;
    watch(&mut browser, "pointmass").await;
    watch(&mut browser, "bench_image").await;

    let controller = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .expect("controller");
    let pointmass = controller.env("pointmass").await.expect("pointmass");
    pointmass
        .reset(ResetArgs::with_seed(3))
        .await
        .expect("reset");
    let push = Value::Array(NdArray::from_vec(vec![0.6f32, -0.4]));
    // The reward plot gains points while the controller steps.
    step_until(
        &mut browser,
        &controller,
        "pointmass",
        &push,
        "the reward plot has 3 points",
        &format!("{} >= 3", plot_points("pointmass", "reward")),
    )
    .await;
    // The camera canvas shows exactly the last frame once stepping stops.
    let (last, seq) = step_until_shown(
        &mut browser,
        &controller,
        "pointmass",
        &push,
        &[CAMERA, "pointmass"],
    )
    .await;
    let (shape, expected) = image_bytes(&last, "camera");
    let shown = browser.eval(&canvas_rgb(CAMERA, "observation")).await;
    assert_eq!(shown["sequence"].as_u64(), Some(seq));
    assert_pixels(&shown, &shape, &expected, "pointmass camera");
    // The env's own panel shows the same image in its observation.
    let shown = browser
        .eval(&canvas_rgb("pointmass", "observation.camera"))
        .await;
    assert_pixels(&shown, &shape, &expected, "pointmass observation.camera");

    // bench_image: an 84×84×3 frame, pixel for pixel.
    let small = bench_image_pixel_for_pixel(&mut browser, &controller, "bench_image").await;
    let bench = controller.env("bench_image").await.expect("bench_image");

    // Pause holds the panel at its frame while boundaries pass; resume
    // brings the newest one (not the ones in between).
    click(&mut browser, "bench_image", "pause").await;
    let held = browser
        .eval(&format!("{}.dataset.sequence", panel("bench_image")))
        .await;
    for _ in 0..20 {
        bench.step(small.clone()).await.expect("step");
    }
    // Give a (wrong) redraw the chance to happen before checking.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        browser
            .eval(&format!("{}.dataset.sequence", panel("bench_image")))
            .await,
        held,
        "a paused panel changed"
    );
    click(&mut browser, "bench_image", "resume").await;
    step_until_shown(
        &mut browser,
        &controller,
        "bench_image",
        &small,
        &["bench_image"],
    )
    .await;

    // A batch of 64 images is drawn as an 8×8 grid.
    watch(&mut browser, "bench_batch64").await;
    let batch = controller
        .env("bench_batch64")
        .await
        .expect("bench_batch64");
    batch.reset(ResetArgs::default()).await.expect("reset");
    step_until(
        &mut browser,
        &controller,
        "bench_batch64",
        &small,
        "the batch grid",
        &format!(
            "(() => {{ const c = {}.querySelector('canvas[data-field=\"observation.image\"]'); return !!c && c.width === 8 * 84 && c.height === 8 * 84; }})()",
            panel("bench_batch64")
        ),
    )
    .await;
    click(&mut browser, "bench_batch64", "×").await;

    // Render on demand: the camera node's render at the next boundary.
    click(&mut browser, CAMERA, "render").await;
    step_until(
        &mut browser,
        &controller,
        "pointmass",
        &push,
        "a render image in the camera panel",
        &format!(
            "!!{}.querySelector('canvas[data-field=\"render\"]')",
            panel(CAMERA)
        ),
    )
    .await;

    if let Some(path) = std::env::var_os("UNIENV_VIEWER_SCREENSHOT") {
        let png = browser.screenshot().await;
        std::fs::write(&path, png).expect("write the screenshot");
        eprintln!("screenshot written to {}", path.to_string_lossy());
    }

    // Revival: `lazy` (a factory) is evicted when idle; the next request
    // revives it with a new revision, which the page shows after a refresh.
    let shown_revision = browser
        .eval("Number(document.querySelector('li[data-id=\"lazy\"]').dataset.revision)")
        .await
        .as_u64()
        .expect("revision of lazy");
    let mut revision = shown_revision;
    for _ in 0..40 {
        tokio::time::sleep(IDLE * 2).await;
        revision = controller
            .describe("lazy")
            .await
            .expect("describe")
            .revision();
        if revision > shown_revision {
            break;
        }
    }
    assert!(revision > shown_revision, "lazy was never revived");
    browser
        .eval("document.querySelector('#refresh').click(), true")
        .await;
    browser
        .wait_for(
            "the revived revision in the tree",
            &format!(
                "document.querySelector('li[data-id=\"lazy\"]').dataset.revision === '{revision}' && !!document.querySelector('li[data-id=\"lazy\"] .rev.changed')"
            ),
        )
        .await;

    // A lost connection is shown plainly.
    controller.close().await;
    server.shutdown().await;
    browser
        .wait_for(
            "the lost connection",
            "/lost|unreachable/.test(document.querySelector('#status').textContent) && !document.querySelector('#banner').hidden",
        )
        .await;
    browser
        .wait_for(
            "the panels' errors",
            &format!("{}.classList.contains('ended')", panel(CAMERA)),
        )
        .await;
}

/// With a token upstream, the viewer's printed URL (with its key) opens the
/// page in a real browser: the key moves into an HttpOnly cookie (out of the
/// address bar and out of the page's reach), and the page's socket, which
/// carries the cookie, gets the resources.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_in_the_printed_url_opens_the_page_in_chromium() {
    let Some(chrome) = chromium() else { return };
    let (server, listener) = support::serve(support::with_token("t0ken"), Hosts::Fixtures).await;
    let mut config = ViewerConfig::new(listener.url());
    config.client = ClientConfig::default().with_token("t0ken");
    let viewer = support::viewer(config).await;
    assert!(viewer.url().contains("?key="));
    let mut browser = Browser::open(&chrome, &viewer.url()).await;
    browser
        .wait_for(
            "the resource tree",
            "Number(document.querySelector('#tree').dataset.count || 0) > 5 && document.querySelector('#status').textContent === 'connected'",
        )
        .await;
    assert_eq!(browser.eval("location.search").await, "");
    assert_eq!(browser.eval("document.cookie").await, "");
    drop(browser);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_frames_and_plots_from_the_reference_server_in_chromium() {
    let Some(chrome) = chromium() else { return };
    let Some(python) = common::ref_python() else {
        return;
    };
    let reference = common::RefServer::start(&python, None);
    let viewer = support::viewer(ViewerConfig::new(reference.url.clone())).await;
    let mut browser = Browser::open(&chrome, &viewer.url()).await;
    browser
        .wait_for(
            "the reference server's resources",
            "!!document.querySelector('li[data-id=\"bench_image\"]') && document.querySelector('#server').textContent.includes('unienv')",
        )
        .await;
    watch(&mut browser, "bench_image").await;
    watch(&mut browser, "counter").await;
    let controller = Client::connect(&reference.url, ClientConfig::default())
        .await
        .expect("controller");
    bench_image_pixel_for_pixel(&mut browser, &controller, "bench_image from the reference").await;

    // counter: reward plotted, terminated marked once the values exceed 3.
    let counter = controller.env("counter").await.expect("counter");
    counter.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let one = Value::Array(NdArray::from_vec(vec![1.0f32, 1.0]));
    for _ in 0..4 {
        counter.step(one.clone()).await.expect("step");
    }
    step_until_shown(&mut browser, &controller, "counter", &one, &["counter"]).await;
    browser
        .wait_for(
            "the counter panel terminated",
            &format!(
                "{p}.querySelector('.panel-stats').textContent.includes('terminated') && !{p}.querySelector('.panel-stats').textContent.includes('not terminated')",
                p = panel("counter")
            ),
        )
        .await;
    controller.close().await;
}

/// JavaScript: how many snapshots the page has drawn for `resource`.
fn drawn(resource: &str) -> String {
    format!(
        "(() => {{ const p = [...window.viewerState.panels.values()].find(p => p.resource === '{resource}'); return p ? p.received : -1; }})()"
    )
}

/// How many snapshots the page has drawn for `resource` (0 before any).
async fn drawn_count(browser: &mut Browser, resource: &str) -> i64 {
    browser.eval(&drawn(resource)).await.as_i64().unwrap_or(0)
}

/// Mean step time of `env` over `steps` steps.
async fn mean_step(client: &Client, env: &str, action: &Value, steps: u32) -> Duration {
    let proxy = client.env(env).await.expect("env");
    let start = Instant::now();
    for _ in 0..steps {
        proxy.step(action.clone()).await.expect("step");
    }
    start.elapsed() / steps
}

/// Steps `env` at `hz` for `seconds`; returns (steps, snapshots drawn).
async fn paced(
    browser: &mut Browser,
    client: &Client,
    env: &str,
    panel_resource: &str,
    action: &Value,
    hz: f64,
    seconds: f64,
) -> (u64, i64) {
    let proxy = client.env(env).await.expect("env");
    let before = drawn_count(browser, panel_resource).await;
    let period = Duration::from_secs_f64(1.0 / hz);
    let start = tokio::time::Instant::now();
    let total = (hz * seconds) as u64;
    for i in 0..total {
        tokio::time::sleep_until(start + period * i as u32).await;
        proxy.step(action.clone()).await.expect("step");
    }
    // Let the last frame arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = drawn_count(browser, panel_resource).await;
    (total, after - before)
}

/// A page without a browser: subscribes a panel and grants a credit every
/// 1/60 s, counting the snapshots it receives.
struct FakePage {
    task: tokio::task::JoinHandle<u64>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl FakePage {
    async fn open(viewer: &Viewer, resource: &str) -> FakePage {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let ws = crate::support::open_page(&viewer.url())
            .await
            .expect("connect to the viewer");
        let (mut out, mut input) = ws.split();
        let command = |v: serde_json::Value| Message::binary(v.to_string().into_bytes());
        out.send(command(
            serde_json::json!({ "op": "subscribe", "panel": 1, "resource": resource }),
        ))
        .await
        .expect("subscribe");
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut taken = 0u64;
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / 60.0));
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tick.tick() => {
                        let ready = serde_json::json!({ "op": "ready", "panel": 1 });
                        if out.send(command(ready)).await.is_err() { break; }
                    }
                    m = input.next() => match m {
                        Some(Ok(Message::Binary(b))) => {
                            if support::PageMessage::decode(&b).kind() == "snapshot" {
                                taken += 1;
                            }
                        }
                        Some(Ok(_)) => {}
                        _ => break,
                    },
                }
            }
            let _ = out.close().await;
            taken
        });
        FakePage { task, stop }
    }

    async fn close(self) -> u64 {
        let _ = self.stop.send(());
        self.task.await.unwrap_or(0)
    }
}

/// The viewer's benchmark (not a timed test; figures in BENCHMARKS.md):
/// `cargo test --release --test viewer -- --ignored --nocapture browser::benchmark`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run explicitly, in release mode"]
async fn benchmark() {
    let Some(chrome) = chromium() else { return };
    let (server, listener) = our_server(None).await;
    let controller = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .expect("controller");
    let bench = controller.env("bench_image").await.expect("bench_image");
    bench.reset(ResetArgs::default()).await.expect("reset");
    let small = Value::Array(NdArray::from_vec(vec![0.1f32; 4]));
    let steps = 2000;
    mean_step(&controller, "bench_image", &small, steps).await; // warm-up

    let viewer = support::viewer(ViewerConfig::new(listener.url())).await;
    let mut browser = Browser::open(&chrome, &viewer.url()).await;
    browser
        .wait_for(
            "the resource tree",
            "!!document.querySelector('li[data-id=\"bench_image\"]')",
        )
        .await;
    // Rounds alternate between no page panel and a panel subscribed to
    // bench_image (the page open in both), so that drift of this shared
    // machine hits both alike.
    // Each round measures, in turn: no panel; a panel on bench_image in the
    // browser, live; the same panel paused (the tab idle); and a page
    // without a browser (a WebSocket client granting a credit every 1/60 s
    // and drawing nothing), which is the viewer's own cost.
    let mut rounds: [Vec<Duration>; 4] = Default::default();
    for _ in 0..9 {
        rounds[0].push(mean_step(&controller, "bench_image", &small, steps).await);
        watch(&mut browser, "bench_image").await;
        step_until(
            &mut browser,
            &controller,
            "bench_image",
            &small,
            "the first frame",
            &format!("{} > 0", drawn("bench_image")),
        )
        .await;
        let before = drawn_count(&mut browser, "bench_image").await;
        let live = mean_step(&controller, "bench_image", &small, steps).await;
        let after = drawn_count(&mut browser, "bench_image").await;
        rounds[1].push(live);
        click(&mut browser, "bench_image", "pause").await;
        rounds[2].push(mean_step(&controller, "bench_image", &small, steps).await);
        click(&mut browser, "bench_image", "×").await;
        let page = FakePage::open(&viewer, "bench_image").await;
        rounds[3].push(mean_step(&controller, "bench_image", &small, steps).await);
        let taken = page.close().await;
        eprintln!(
            "round: no panel {:?}, live {:?} (drew {} of {steps} boundaries), paused {:?}, page without browser {:?} (took {taken})",
            rounds[0].last().copied().unwrap_or_default(),
            live,
            after - before,
            rounds[2].last().copied().unwrap_or_default(),
            rounds[3].last().copied().unwrap_or_default(),
        );
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e6
    };
    let m: Vec<f64> = rounds.iter_mut().map(median).collect();
    let pct = |x: f64| (x / m[0] - 1.0) * 100.0;
    eprintln!(
        "bench_image step, median of 9 rounds of {steps}: no panel {:.1} µs; browser panel live {:.1} µs ({:+.1} %); paused {:.1} µs ({:+.1} %); viewer page without a browser {:.1} µs ({:+.1} %)",
        m[0], m[1], pct(m[1]), m[2], pct(m[2]), m[3], pct(m[3])
    );

    // The page at 60 snapshots per second.
    watch(&mut browser, "bench_image").await;
    let (sent, shown) = paced(
        &mut browser,
        &controller,
        "bench_image",
        "bench_image",
        &small,
        60.0,
        10.0,
    )
    .await;
    eprintln!("bench_image at 60 Hz for 10 s: {sent} boundaries, page drew {shown}");
    let pointmass = controller.env("pointmass").await.expect("pointmass");
    pointmass
        .reset(ResetArgs::with_seed(1))
        .await
        .expect("reset");
    watch(&mut browser, CAMERA).await;
    let push = Value::Array(NdArray::from_vec(vec![0.3f32, 0.2]));
    let (sent, shown) = paced(
        &mut browser,
        &controller,
        "pointmass",
        CAMERA,
        &push,
        60.0,
        10.0,
    )
    .await;
    eprintln!("pointmass at 60 Hz for 10 s, camera panel: {sent} boundaries, page drew {shown}");
    // pointmass as fast as the controller can step it.
    let before = drawn_count(&mut browser, CAMERA).await;
    let start = Instant::now();
    let t = mean_step(&controller, "pointmass", &push, 3000).await;
    let elapsed = start.elapsed();
    let after = drawn_count(&mut browser, CAMERA).await;
    eprintln!(
        "pointmass unpaced: {:.1} µs per step ({:.0} boundaries/s), camera panel drew {:.1} frames/s",
        t.as_secs_f64() * 1e6,
        1.0 / t.as_secs_f64(),
        (after - before) as f64 / elapsed.as_secs_f64()
    );
    controller.close().await;
    server.shutdown().await;
}
