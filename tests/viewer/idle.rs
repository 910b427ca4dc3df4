//! A run seen after the fact, in headless Chromium: with the viewer in the
//! server's process, a panel opened on an idle `cartpole` shows its last
//! boundary at once, its episodes (every termination and truncation marked
//! on the timeline, the resets quietly, no message for them) and renders on
//! demand; a page paused while episodes end still marks every one of them
//! when it resumes (its frames skipped); a viewer of a remote server says
//! why an idle panel is empty and what will fill it; a reset's revision
//! change is a mark, a descriptor change a message.
//!
//! `UNIENV_VIEWER_SCREENSHOT_IDLE=PATH` saves a PNG of the in-process page.

use crate::support::{self, chromium, click, panel, watch, Browser, Hosts};

use std::time::{Duration, Instant};
use unienv_remote::client::{Client, ClientConfig, EnvProxy};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::viewer::ViewerConfig;
use unienv_remote::Value;

/// The server's live observer subscriptions (its metrics).
fn observers(server: &Server) -> u64 {
    server
        .metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix("unienv_observers "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// Waits until the in-process viewer watches `cartpole` (its subscriptions
/// are made when it starts, before any page is open).
async fn until_watched(server: &Server) {
    let deadline = Instant::now() + support::DEADLINE;
    // The viewer watches every resource but the factory ones: more than 10
    // with the fixtures and the simulators.
    while observers(server) < 10 {
        assert!(
            Instant::now() < deadline,
            "the viewer never subscribed to the resources"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Balances the pole (from the observation).
fn balance(observation: &Value) -> i64 {
    let Some(a) = observation.as_array() else {
        return 0;
    };
    let x: Vec<f64> = (0..4)
        .map(|i| a.get_complex(i).map_or(0.0, |(re, _)| re))
        .collect();
    i64::from(x[2] + 0.5 * x[3] + 0.01 * x[0] + 0.1 * x[1] > 0.0)
}

/// One step every 10 ms: the ordinary loop of a first run (tens of steps a
/// second), which the viewer's watch reads whole (it is gated above 150
/// boundaries a second).
async fn step(env: &EnvProxy, action: i64) -> unienv_remote::host::StepResult {
    tokio::time::sleep(Duration::from_millis(10)).await;
    env.step(Value::Int(action)).await.expect("step")
}

/// Episodes of `cartpole`: `pushed` ones pushed right until they terminate,
/// then (when `balanced`) one balanced until truncation at 500 steps (seeds
/// that terminate first are counted as terminations and another is tried).
/// Returns (terminations, truncations, resets).
async fn episodes(env: &EnvProxy, pushed: u64, first_seed: i64, balanced: bool) -> (u64, u64, u64) {
    let (mut terminated, mut truncated, mut resets) = (0, 0, 0);
    for e in 0..pushed {
        env.reset(ResetArgs::with_seed(first_seed + e as i64))
            .await
            .expect("reset");
        resets += 1;
        loop {
            if step(env, 1).await.terminated.truthy() == Some(true) {
                terminated += 1;
                break;
            }
        }
    }
    let mut seed = 1000 + first_seed;
    while balanced && truncated == 0 {
        let mut observation = env
            .reset(ResetArgs::with_seed(seed))
            .await
            .expect("reset")
            .observation;
        resets += 1;
        seed += 1;
        loop {
            let step = step(env, balance(&observation)).await;
            observation = step.observation;
            if step.terminated.truthy() == Some(true) {
                terminated += 1;
                break;
            }
            if step.truncated.truthy() == Some(true) {
                truncated += 1;
                break;
            }
        }
        assert!(seed < 1000 + first_seed + 20, "no seed balanced 500 steps");
    }
    (terminated, truncated, resets)
}

/// JavaScript: whether the cartpole panel shows boundary `seq` with these
/// episode ends and resets marked. Exactly, when the viewer read every
/// boundary; when it fell behind (latest wins: `gaps` boundaries unread),
/// no more than these and at most `gaps` fewer.
fn counts(seq: u64, terminated: u64, truncated: u64, resets: u64) -> String {
    format!(
        "(() => {{ const p = {}; if (!p || p.dataset.sequence !== '{seq}' || p.dataset.gaps === undefined) return false;
            const gaps = Number(p.dataset.gaps), ends = Number(p.dataset.endMarks || 0), r = Number(p.dataset.resetMarks || 0);
            if (gaps === 0) return ends === {ends} && r === {resets}
                && p.querySelector('.panel-stats').textContent.includes('episodes: {terminated} terminated, {truncated} truncated');
            return ends <= {ends} && ends >= {ends} - gaps && r <= {resets} && r >= {resets} - gaps; }})()",
        panel("cartpole"),
        ends = terminated + truncated
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_is_shown_at_once_with_its_episodes_in_chromium() {
    let Some(chrome) = chromium() else { return };
    let (server, listener) = support::serve(ServerConfig::default(), Hosts::Both).await;
    let viewer = support::viewer(support::in_process(&server, &listener)).await;
    until_watched(&server).await;

    // A run, finished before any page opens.
    let controller = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .expect("controller");
    let cartpole = controller.env("cartpole").await.expect("cartpole");
    let (terminated, truncated, resets) = episodes(&cartpole, 5, 0, true).await;
    assert_eq!(truncated, 1);
    let last = controller
        .describe("cartpole")
        .await
        .expect("describe")
        .sequence();
    controller.close().await;

    // The panel shows the last boundary at once, every episode end and
    // reset marked, and no message but the note that it is the last one.
    let mut browser = Browser::open(&chrome, &viewer.url()).await;
    watch(&mut browser, "cartpole").await;
    browser
        .wait_for(
            "the last boundary and the run's episodes",
            &counts(last, terminated, truncated, resets),
        )
        .await;
    let shown = browser
        .eval(&format!(
            "(() => {{ const p = {}; return {{ cached: p.dataset.cached,
                warn: [...p.querySelectorAll('.msg.warn, .msg.bad')].map(m => m.textContent),
                points: Number((p.querySelector('.plot[data-field=\"observation\"]') || {{dataset: {{points: 0}}}}).dataset.points) }}; }})()",
            panel("cartpole")
        ))
        .await;
    assert_eq!(
        shown["cached"],
        serde_json::json!(last.to_string()),
        "{shown}"
    );
    assert_eq!(
        shown["warn"],
        serde_json::json!([]),
        "resets are not messages"
    );
    assert!(shown["points"].as_u64() >= Some(1), "{shown}");

    // Render on demand, although nothing steps.
    click(&mut browser, "cartpole", "render").await;
    browser
        .wait_for(
            "the idle cartpole's render",
            &format!(
                "(() => {{ const p = {}; const c = p.querySelector('canvas[data-field=\"render\"]');
                    return !!c && c.width > 0 && /render \\(now/.test(p.textContent); }})()",
                panel("cartpole")
            ),
        )
        .await;

    // Paused while six more episodes end (its frames are skipped): on
    // resume, every end is marked (the page drew at most two frames of
    // them: the one pending at the pause, and the last).
    let ends = |b: serde_json::Value| b.as_str().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    let before = ends(
        browser
            .eval(&format!("{}.dataset.endMarks", panel("cartpole")))
            .await,
    );
    click(&mut browser, "cartpole", "pause").await;
    let controller = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .expect("controller");
    let cartpole = controller.env("cartpole").await.expect("cartpole");
    let (more_terminated, more_truncated, more_resets) = episodes(&cartpole, 6, 50, false).await;
    let last = controller
        .describe("cartpole")
        .await
        .expect("describe")
        .sequence();
    click(&mut browser, "cartpole", "resume").await;
    browser
        .wait_for(
            "every episode end after the pause",
            &counts(
                last,
                terminated + more_terminated,
                truncated + more_truncated,
                resets + more_resets,
            ),
        )
        .await;
    let skipped = browser
        .eval(&format!("Number({}.dataset.skipped)", panel("cartpole")))
        .await;
    assert!(
        skipped.as_u64() > Some(30),
        "the page skipped the frames: {skipped}"
    );
    let gaps = browser
        .eval(&format!("{}.dataset.gaps", panel("cartpole")))
        .await;
    eprintln!("boundaries the viewer's watch did not read: {gaps}");
    // However many the watch missed (latest wins), more ends are marked
    // than the page drew frames.
    let after = ends(
        browser
            .eval(&format!("{}.dataset.endMarks", panel("cartpole")))
            .await,
    );
    assert!(
        after >= before + 3,
        "{before} ends marked before the pause, {after} after ({gaps} gaps)"
    );
    let warn = browser
        .eval(&format!(
            "{}.querySelectorAll('.msg.warn, .msg.bad').length",
            panel("cartpole")
        ))
        .await;
    assert_eq!(warn, serde_json::json!(0), "resets are not messages");

    watch(&mut browser, "pointmass/node/camera").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    if let Some(path) = std::env::var_os("UNIENV_VIEWER_SCREENSHOT_IDLE") {
        let png = browser.screenshot().await;
        std::fs::write(&path, png).expect("write the screenshot");
    }
    controller.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_viewer_says_why_an_idle_panel_is_empty_in_chromium() {
    let Some(chrome) = chromium() else { return };
    let (server, listener) = support::serve(ServerConfig::default(), Hosts::Both).await;
    let viewer = support::viewer(ViewerConfig::new(listener.url())).await;
    let controller = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .expect("controller");
    let cartpole = controller.env("cartpole").await.expect("cartpole");
    cartpole
        .reset(ResetArgs::with_seed(1))
        .await
        .expect("reset");
    cartpole.step(Value::Int(1)).await.expect("step");

    let mut browser = Browser::open(&chrome, &viewer.url()).await;
    watch(&mut browser, "cartpole").await;
    browser
        .wait_for(
            "the reason the panel is empty",
            &format!(
                "(() => {{ const p = {}; return !!p && p.dataset.waiting === 'true'
                    && /receives only the boundaries made after it subscribed/.test(p.textContent)
                    && /fills at its next step or reset/.test(p.textContent); }})()",
                panel("cartpole")
            ),
        )
        .await;
    // The next step fills it, and the note goes.
    let deadline = Instant::now() + support::DEADLINE;
    loop {
        cartpole.step(Value::Int(0)).await.expect("step");
        let filled = browser
            .poll(
                &format!(
                    "(() => {{ const p = {}; return p.dataset.sequence !== undefined && p.dataset.waiting === undefined
                        && !/receives only the boundaries/.test(p.textContent); }})()",
                    panel("cartpole")
                ),
                Duration::from_millis(500),
            )
            .await;
        if filled {
            break;
        }
        assert!(Instant::now() < deadline, "the step never filled the panel");
    }
    controller.close().await;
    server.shutdown().await;
}

/// An env whose observation has `2 + seed` components: a seeded reset with
/// a new seed changes its observation space (a descriptor change), one
/// with the same seed only its revision.
struct ShapeShifter {
    size: usize,
}

impl unienv_remote::host::Env for ShapeShifter {
    fn reset(
        &mut self,
        args: ResetArgs,
    ) -> unienv_remote::host::HostResult<unienv_remote::host::ResetResult> {
        self.size = 2 + args.seed.unwrap_or(0).clamp(0, 8) as usize;
        Ok(unienv_remote::host::ResetResult::new(
            Value::Null,
            unienv_remote::NdArray::from_vec(vec![0.0f32; self.size]),
            unienv_remote::Dict::new(),
        ))
    }

    fn step(
        &mut self,
        _action: Value,
    ) -> unienv_remote::host::HostResult<unienv_remote::host::StepResult> {
        Ok(unienv_remote::host::StepResult::new(
            unienv_remote::NdArray::from_vec(vec![1.0f32; self.size]),
            1.0,
            false,
            false,
            unienv_remote::Dict::new(),
        ))
    }

    fn action_space(&self) -> Option<unienv_remote::host::Space> {
        Some(unienv_remote::host::Space::unbounded_f32(vec![]))
    }

    fn observation_space(&self) -> Option<unienv_remote::host::Space> {
        Some(unienv_remote::host::Space::unbounded_f32(vec![self.size]))
    }
}

/// The page's rule for messages: a reset's revision change is a quiet mark
/// on the timeline, a changed descriptor (here the observation space) is a
/// message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_are_marks_and_descriptor_changes_messages_in_chromium() {
    let Some(chrome) = chromium() else { return };
    let mut builder = support::builder(ServerConfig::default(), Hosts::Nothing);
    builder
        .register_env("shifter", ShapeShifter { size: 2 })
        .expect("register");
    let (server, listener) = support::listening(builder).await;
    let viewer = support::viewer(support::in_process(&server, &listener)).await;
    let controller = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .expect("controller");
    let env = controller.env("shifter").await.expect("shifter");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    env.step(Value::Float(0.0)).await.expect("step");

    let mut browser = Browser::open(&chrome, &viewer.url()).await;
    watch(&mut browser, "shifter").await;
    let shifter = panel("shifter");
    browser
        .wait_for(
            "the shifter's last boundary",
            &format!("!!{shifter} && {shifter}.dataset.sequence === '2'"),
        )
        .await;
    // Each boundary is waited for before the next one is made: the viewer's
    // subscription keeps only the latest snapshot not yet sent (SPEC 8.4),
    // so boundaries made faster than it reads would reach it as one.
    let seen = |sequence: u64| format!("{shifter}.dataset.sequence === '{sequence}'");
    // Resets with the same seed, stepped between: marks, no message.
    for k in 0..3 {
        env.reset(ResetArgs::with_seed(0)).await.expect("reset");
        browser
            .wait_for("a reset's boundary", &seen(3 + 2 * k))
            .await;
        env.step(Value::Float(0.0)).await.expect("step");
        browser
            .wait_for("a step's boundary", &seen(4 + 2 * k))
            .await;
    }
    browser
        .wait_for(
            "three reset marks",
            &format!(
                "{shifter}.dataset.sequence === '8' && Number({shifter}.dataset.resetMarks) >= 3"
            ),
        )
        .await;
    let messages =
        format!("[...{shifter}.querySelectorAll('.msg.warn, .msg.bad')].map(m => m.textContent)");
    assert_eq!(browser.eval(&messages).await, serde_json::json!([]));
    // A new observation space: a message naming it.
    env.reset(ResetArgs::with_seed(3)).await.expect("reset");
    browser.wait_for("the new space's boundary", &seen(9)).await;
    env.step(Value::Float(0.0)).await.expect("step");
    browser
        .wait_for(
            "the descriptor change message",
            &format!(
                "[...{shifter}.querySelectorAll('.msg.warn')].some(m => /descriptor changed at #9 .*observation_space/.test(m.textContent))"
            ),
        )
        .await;
    controller.close().await;
    server.shutdown().await;
}
