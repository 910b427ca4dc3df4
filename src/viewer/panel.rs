//! One panel's task: the latest snapshot against each of the page's
//! credits, with the upstream subscription gated at high boundary rates;
//! and render on demand.

use super::frame::Frame;
use super::page::{error_json, snapshot_header, PageWriter};
use super::ViewerState;
use crate::client::{Client, ClientError, Subscription};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// Most frames per second one panel is sent.
const PANEL_FPS: f64 = 30.0;

/// Most frames per second one tab's panels are sent together.
const TAB_FPS: f64 = 120.0;

/// Most frames per second all tabs' panels are sent together: each open tab
/// has an equal share.
const VIEWER_FPS: f64 = 240.0;

/// A tab's frame pacing: its panels share the tab's frame rate, and the
/// tabs share the viewer's, so that however many panels and tabs are open
/// (and however fast their pages grant credit) the viewer asks the
/// upstream server for at most [`VIEWER_FPS`] snapshots per second.
#[derive(Clone)]
pub(super) struct Pace {
    pub(super) state: Arc<ViewerState>,
    panels: Arc<AtomicUsize>,
}

impl Pace {
    pub(super) fn new(state: Arc<ViewerState>) -> Pace {
        Pace {
            state,
            panels: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The tab now has `n` panels.
    pub(super) fn set_panels(&self, n: usize) {
        self.panels.store(n, Ordering::Relaxed);
    }

    /// The least time between two frames of one panel of this tab.
    pub(super) fn interval(&self) -> Duration {
        let tabs = self.state.open_tabs.load(Ordering::Relaxed).max(1) as f64;
        let panels = self.panels.load(Ordering::Relaxed).max(1) as f64;
        let tab_fps = TAB_FPS.min(VIEWER_FPS / tabs);
        Duration::from_secs_f64((1.0 / PANEL_FPS).max(panels / tab_fps))
    }
}

/// How long a one-shot render waits for the next boundary.
const RENDER_WAIT: Duration = Duration::from_secs(30);

/// Above this many boundaries per second a panel's upstream subscription is
/// held only while the page waits for a frame (see [`panel_task`]).
const GATE_ABOVE: f64 = 150.0;

/// How long a panel that subscribed again waits for a boundary before it
/// checks whether it missed the last ones (the domain went quiet).
const QUIET: Duration = Duration::from_millis(250);

/// A panel allowed fewer frames than one per this time is gated from its
/// first frame, and keeps its subscription only for domains no faster than
/// its frames.
const SLOW_PACE: Duration = Duration::from_millis(100);

/// Below this many boundaries per second the subscription is kept between
/// frames again.
const UNGATE_BELOW: f64 = 100.0;

/// One panel: against each credit, the subscription's latest snapshot goes
/// to the page. Without credit nothing is taken, so the client's single
/// slot (and the server's) keep only the newest snapshot.
///
/// The client still reads every snapshot the server sends; for an env
/// stepping thousands of times per second that alone would cost the
/// controller's machine real CPU. So when the domain's boundary rate
/// (sequence over timestamp between delivered snapshots) exceeds
/// [`GATE_ABOVE`], the panel unsubscribes after each snapshot and subscribes
/// again at the next credit: the upstream then sends at most one snapshot
/// per frame the page draws. At low rates (below [`UNGATE_BELOW`]) the
/// subscription stays, so that no boundary is missed between frames.
/// When a domain stops while a panel is between frames, the boundaries it
/// missed cannot be fetched (observers only receive boundaries); the page is
/// told how far behind its frame is (`stale`), and the subscription is kept
/// from then on.
pub(super) async fn panel_task(mut task: PanelTask) {
    let mut subscription = Some(task.first);
    let mut last: Option<(u64, i64)> = None;
    // A panel paced below SLOW_PACE (many panels or tabs) is gated from its
    // first frame: its subscription would otherwise be read at the
    // domain's full rate while it waits its turn.
    let mut gated = task.pace.interval() > SLOW_PACE;
    let stop = &mut task.stop;
    let mut not_before = tokio::time::Instant::now();
    loop {
        // The panel's share of the frame rate first, then the page's credit.
        tokio::select! {
            _ = &mut *stop => break,
            _ = tokio::time::sleep_until(not_before) => {}
        }
        tokio::select! {
            _ = &mut *stop => break,
            _ = task.credit.notified() => {}
        }
        let resubscribed = subscription.is_none();
        if resubscribed {
            let names: Option<Vec<&str>> = task
                .fields
                .as_ref()
                .map(|f| f.iter().map(String::as_str).collect());
            let subscribed = tokio::select! {
                _ = &mut *stop => break,
                s = async {
                    let _permit = task.pace.state.upstream.request().await;
                    task.client.subscribe(&task.resource, names.as_deref()).await
                } => s,
            };
            match subscribed {
                Ok(s) => subscription = Some(s),
                Err(e) => {
                    let (code, message) = error_json(&e);
                    let _ = task
                        .page
                        .json(json!({ "type": "subscription_error", "panel": task.panel,
                            "resource": task.resource, "code": code, "message": message }))
                        .await;
                    break;
                }
            }
        }
        let Some(current) = subscription.as_mut() else {
            break;
        };
        let mut next = tokio::select! {
            _ = &mut *stop => break,
            next = current.next(resubscribed.then_some(QUIET)) => next,
        };
        if matches!(next, Err(ClientError::Timeout(_))) {
            // The domain went quiet while this panel was unsubscribed
            // between frames: keep the subscription from now on, and tell
            // the page when boundaries passed that it did not get.
            gated = false;
            let described = {
                let _permit = task.pace.state.upstream.request().await;
                task.client.describe(&task.resource).await
            };
            if let (Ok(d), Some((shown, _))) = (described, last) {
                if d.sequence() > shown {
                    let _ = task
                        .page
                        .json(json!({ "type": "stale", "panel": task.panel,
                            "sequence": d.sequence(), "shown": shown }))
                        .await;
                }
            }
            next = tokio::select! {
                _ = &mut *stop => break,
                next = current.next(None) => next,
            };
        }
        let sent = match next {
            Ok(Some(event)) => {
                if let Some((sequence, timestamp)) = last {
                    let seconds = (event.timestamp_ns - timestamp) as f64 / 1e9;
                    if seconds > 0.0 {
                        let rate = event.sequence.saturating_sub(sequence) as f64 / seconds;
                        // When slowly paced, the subscription is kept only
                        // for a domain no faster than the panel's frames.
                        let interval = task.pace.interval();
                        let (above, below) = if interval > SLOW_PACE {
                            let allowed = 1.0 / interval.as_secs_f64();
                            (1.5 * allowed, allowed)
                        } else {
                            (GATE_ABOVE, UNGATE_BELOW)
                        };
                        gated = if gated { rate >= below } else { rate > above };
                    }
                }
                last = Some((event.sequence, event.timestamp_ns));
                if let Some(s) = subscription.take_if(|_| gated) {
                    // Its reply is waited for, so that the viewer's
                    // outstanding requests stay bounded.
                    let _permit = task.pace.state.upstream.request().await;
                    let _ = s.unsubscribe().await;
                }
                let mut frame = Frame::new();
                let mut header = snapshot_header("snapshot", task.panel, &event, &mut frame);
                header["gated"] = json!(gated);
                not_before = tokio::time::Instant::now() + task.pace.interval();
                task.page.send(&header, frame).await
            }
            Ok(None) => {
                let _ = task
                    .page
                    .json(json!({ "type": "ended", "panel": task.panel,
                        "message": "the subscription ended" }))
                    .await;
                break;
            }
            Err(e) => {
                let (code, message) = error_json(&e);
                let _ = task
                    .page
                    .json(json!({ "type": "subscription_error", "panel": task.panel,
                        "resource": task.resource, "code": code, "message": message }))
                    .await;
                break;
            }
        };
        if sent.is_err() {
            break;
        }
    }
    if let Some(s) = subscription {
        if !s.is_closed() {
            let _permit = task.pace.state.upstream.request().await;
            let _ = s.unsubscribe().await;
        }
    }
}

/// What a panel's task needs.
pub(super) struct PanelTask {
    pub(super) client: Client,
    pub(super) first: Subscription,
    pub(super) resource: String,
    pub(super) fields: Option<Vec<String>>,
    pub(super) credit: Arc<Notify>,
    pub(super) stop: oneshot::Receiver<()>,
    pub(super) page: PageWriter,
    pub(super) panel: u64,
    pub(super) pace: Pace,
}

/// Render on demand: a short-lived subscription to the `render` field,
/// for the next boundary only.
pub(super) async fn render_once(
    client: Client,
    state: &ViewerState,
    page: PageWriter,
    panel: u64,
    resource: String,
) {
    let outcome = async {
        let permit = state.upstream.request().await;
        let mut subscription = client.subscribe(&resource, Some(&["render"])).await?;
        drop(permit);
        let next = subscription.next(Some(RENDER_WAIT)).await;
        let _permit = state.upstream.request().await;
        let _ = subscription.unsubscribe().await;
        next
    }
    .await;
    let _ = match outcome {
        Ok(Some(event)) => {
            let mut frame = Frame::new();
            let header = snapshot_header("render", panel, &event, &mut frame);
            page.send(&header, frame).await
        }
        Ok(None) => {
            page.json(json!({ "type": "render_error", "panel": panel,
                "message": "the render subscription ended" }))
                .await
        }
        Err(e) => {
            let (code, message) = error_json(&e);
            page.json(json!({ "type": "render_error", "panel": panel,
                "code": code, "message": message }))
                .await
        }
    };
}
