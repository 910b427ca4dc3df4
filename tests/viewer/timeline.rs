//! The page's deep links and timeline in headless Chromium: `/?watch=ID,ID`
//! opens those panels with no click; each panel keeps its last boundaries
//! (`?history=N`, bounded) and a scrubber steps back and forth through them,
//! its frames following the cursor byte for byte, then follows the latest
//! again; the stats line shows the step rate and the latency.

use crate::support;

use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::{chromium, click, panel, Browser, Hosts};
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::ServerConfig;
use unienv_remote::viewer::ViewerConfig;
use unienv_remote::{NdArray, Value};

const CAMERA: &str = "pointmass/node/camera";

async fn data(browser: &mut Browser, resource: &str, key: &str) -> String {
    let v = browser
        .eval(&format!("{}.dataset.{key} || ''", panel(resource)))
        .await;
    v.as_str().unwrap_or_default().to_string()
}

/// The RGB bytes the panel's canvas of `field` shows.
async fn canvas_rgb(browser: &mut Browser, resource: &str, field: &str) -> Vec<u8> {
    let v = browser
        .eval(&format!(
            "(() => {{ const c = {}.querySelector('canvas[data-field=\"{field}\"]');
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                const rgb = []; for (let i = 0; i < d.length; i += 4) rgb.push(d[i], d[i+1], d[i+2]);
                return rgb; }})()",
            panel(resource)
        ))
        .await;
    v.as_array()
        .expect("rgb")
        .iter()
        .map(|x| x.as_u64().unwrap_or(999) as u8)
        .collect()
}

fn camera_bytes(observation: &Value) -> Vec<u8> {
    observation
        .get("camera")
        .and_then(Value::as_array)
        .expect("a camera image")
        .as_bytes()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_link_and_scrubber_in_chromium() {
    let Some(chrome) = chromium() else { return };
    let (server, listener) = support::serve(ServerConfig::default(), Hosts::Sims).await;
    let viewer = support::viewer(ViewerConfig::new(listener.url())).await;
    let url = format!("{}?watch=pointmass,{CAMERA}&history=12", viewer.url());
    let mut browser = Browser::open(&chrome, &url).await;

    // Both panels open from the link alone, subscribed.
    browser
        .wait_for(
            "the linked panels",
            &format!(
                "document.querySelectorAll('.panel').length === 2 && !!{} && !!{} && document.querySelector('#status').textContent === 'connected'",
                panel("pointmass"),
                panel(CAMERA)
            ),
        )
        .await;
    assert_eq!(browser.eval("window.viewerState.history").await, 12);

    let controller = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .expect("controller");
    let pointmass = controller.env("pointmass").await.expect("pointmass");
    pointmass
        .reset(ResetArgs::with_seed(5))
        .await
        .expect("reset");
    // Steps one at a time, each shown before the next, so that the page's
    // history holds every boundary: sequence → the camera frame of that step.
    let mut frames: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut last = 0;
    let deadline = Instant::now() + support::DEADLINE;
    for i in 0..20 {
        let push = Value::Array(NdArray::from_vec(vec![
            0.3f32,
            if i % 2 == 0 { 0.5 } else { -0.5 },
        ]));
        let observation = pointmass.step(push).await.expect("step").observation;
        last = controller
            .descriptor("pointmass")
            .expect("descriptor")
            .sequence();
        frames.insert(last, camera_bytes(&observation));
        let shown = format!("{}.dataset.sequence === '{last}'", panel("pointmass"));
        while !browser.poll(&shown, Duration::from_secs(2)).await {
            assert!(
                Instant::now() < deadline,
                "the panel never showed boundary {last}"
            );
        }
    }
    // The history is bounded: the last 12 boundaries.
    assert_eq!(data(&mut browser, "pointmass", "history").await, "12");
    assert_eq!(data(&mut browser, "pointmass", "cursor").await, "latest");
    let stats = browser
        .eval(&format!(
            "{}.querySelector('.panel-stats').textContent",
            panel("pointmass")
        ))
        .await;
    let stats = stats.as_str().unwrap_or_default();
    assert!(stats.contains("steps") && stats.contains("/s"), "{stats}");
    assert!(stats.contains("latency") && stats.contains("ms"), "{stats}");

    // Pause, then three boundaries back: the frame is that step's, byte for byte.
    click(&mut browser, "pointmass", "pause").await;
    for _ in 0..3 {
        click(&mut browser, "pointmass", "◀").await;
    }
    let back = last - 3;
    assert_eq!(
        data(&mut browser, "pointmass", "cursor").await,
        back.to_string()
    );
    assert_eq!(
        data(&mut browser, "pointmass", "shown").await,
        back.to_string()
    );
    assert_eq!(
        canvas_rgb(&mut browser, "pointmass", "observation.camera").await,
        frames[&back],
        "the frame follows the cursor"
    );
    // One forward.
    click(&mut browser, "pointmass", "▶").await;
    assert_eq!(
        data(&mut browser, "pointmass", "cursor").await,
        (back + 1).to_string()
    );
    assert_eq!(
        canvas_rgb(&mut browser, "pointmass", "observation.camera").await,
        frames[&(back + 1)]
    );
    // The scrubber to its start: the oldest boundary kept (12 back from the last).
    browser
        .eval(&format!(
            "(() => {{ const s = {}.querySelector('input.scrub'); s.value = '0'; s.dispatchEvent(new Event('input')); return true; }})()",
            panel("pointmass")
        ))
        .await;
    let oldest = last - 11;
    assert_eq!(
        data(&mut browser, "pointmass", "cursor").await,
        oldest.to_string()
    );
    assert_eq!(
        canvas_rgb(&mut browser, "pointmass", "observation.camera").await,
        frames[&oldest]
    );
    // Back to the latest, and live again: a new step is shown.
    click(&mut browser, "pointmass", "latest").await;
    click(&mut browser, "pointmass", "resume").await;
    assert_eq!(data(&mut browser, "pointmass", "cursor").await, "latest");
    assert_eq!(
        canvas_rgb(&mut browser, "pointmass", "observation.camera").await,
        frames[&last]
    );
    let observation = pointmass
        .step(Value::Array(NdArray::from_vec(vec![-0.4f32, 0.2])))
        .await
        .expect("step")
        .observation;
    let newest = controller
        .descriptor("pointmass")
        .expect("descriptor")
        .sequence();
    browser
        .wait_for(
            "the newest boundary",
            &format!("{}.dataset.shown === '{newest}'", panel("pointmass")),
        )
        .await;
    assert_eq!(
        canvas_rgb(&mut browser, "pointmass", "observation.camera").await,
        camera_bytes(&observation)
    );
    drop(browser);
    viewer.stop();
    server.shutdown().await;
}
