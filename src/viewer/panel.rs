//! One panel's task: the latest snapshot against each of the page's
//! credits, with the upstream subscription gated at high boundary rates;
//! and render on demand.

use super::frame::Frame;
use super::page::{error_json, snapshot_header, PageWriter};
use super::watch::{Watched, GATE_ABOVE, QUIET, UNGATE_BELOW};
use super::ViewerState;
use crate::client::{Client, ClientError, Subscription};
use serde_json::{json, Value as Json};
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

/// A panel allowed fewer frames than one per this time is gated from its
/// first frame, and keeps its subscription only for domains no faster than
/// its frames.
const SLOW_PACE: Duration = Duration::from_millis(100);

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
///
/// In the server's process, the viewer's watch of every resource
/// (`watch.rs`) adds to this: the panel's first frame is the last boundary
/// the viewer saw (at once, for an idle resource too), a domain that went
/// quiet between frames is shown at its last boundary, and every frame
/// carries the episode ends and resets since the previous one (`marks`)
/// with their totals (`episodes`).
pub(super) async fn panel_task(mut task: PanelTask) {
    let mut subscription = Some(task.first);
    let mut last: Option<(u64, i64)> = None;
    // A panel paced below SLOW_PACE (many panels or tabs) is gated from its
    // first frame: its subscription would otherwise be read at the
    // domain's full rate while it waits its turn.
    let mut gated = task.pace.interval() > SLOW_PACE;
    let state = task.pace.state.clone();
    let watched = || state.watcher.as_ref().and_then(|w| w.get(&task.resource));
    // The last boundary sent to the page, and the one up to which its
    // marks were sent.
    let mut shown = 0u64;
    let mut marked = 0u64;
    let stop = &mut task.stop;
    let mut not_before = tokio::time::Instant::now();
    // The last boundary the viewer saw, against the page's first credit.
    // (A panel of chosen fields only when the boundary has them all.)
    let cached = watched()
        .and_then(|w| w.last.clone().map(|e| (w, e)))
        .filter(|(_, e)| {
            task.fields
                .as_ref()
                .is_none_or(|f| f.iter().all(|k| e.data.contains_key(k)))
        });
    if let Some((w, event)) = cached {
        tokio::select! {
            _ = &mut *stop => return unsubscribe(&state, subscription).await,
            _ = task.credit.notified() => {}
        }
        let mut frame = Frame::new();
        let mut header = snapshot_header("snapshot", task.panel, &event, &mut frame);
        header["cached"] = json!(true);
        header["idle_ms"] = json!(w.idle_for().map(|d| d.as_millis() as u64));
        // (Every mark the viewer has: a resource that went quiet while the
        // watch read only its episode signals has some after this frame.)
        marked = annotate(&mut header, &w, 0, w.sequence);
        if w.sequence > event.sequence {
            header["latest"] = json!(w.sequence);
        }
        header["gated"] = json!(gated);
        shown = event.sequence;
        last = Some((event.sequence, event.timestamp_ns));
        not_before = tokio::time::Instant::now() + task.pace.interval();
        if task.page.send(&header, frame).await.is_err() {
            return unsubscribe(&state, subscription).await;
        }
    }
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
            next = async {
                loop {
                    let next = current.next(resubscribed.then_some(QUIET)).await;
                    // Shown already (the viewer's watch saw it first).
                    if !matches!(&next, Ok(Some(e)) if e.sequence <= shown) {
                        return next;
                    }
                }
            } => next,
        };
        // In process: a domain that went quiet between frames is shown at
        // the last boundary the viewer saw.
        if matches!(next, Err(ClientError::Timeout(_))) {
            if let Some(event) = watched()
                .and_then(|w| w.last)
                .filter(|e| e.sequence > shown)
            {
                next = Ok(Some((*event).clone()));
            }
        }
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
                if let Some(mut w) = watched() {
                    // The watch reads the same boundaries on a session of
                    // its own: let it catch up (briefly) with this one.
                    for _ in 0..40 {
                        if w.sequence >= event.sequence {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        w = watched().unwrap_or(w);
                    }
                    marked = annotate(&mut header, &w, marked, event.sequence);
                }
                shown = event.sequence;
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
    unsubscribe(&state, subscription).await;
}

/// Ends a panel's subscription (its reply waited for, within the viewer's
/// bound on outstanding requests).
async fn unsubscribe(state: &ViewerState, subscription: Option<Subscription>) {
    if let Some(s) = subscription {
        if !s.is_closed() {
            let _permit = state.upstream.request().await;
            let _ = s.unsubscribe().await;
        }
    }
}

/// Adds the viewer's marks in `(after, upto]` (up to the last boundary it
/// saw) and its totals to a frame's header (the page's timeline marks them
/// even for frames it never got); returns up to where marks were sent.
fn annotate(header: &mut Json, w: &Watched, after: u64, upto: u64) -> u64 {
    let upto = upto.min(w.sequence).max(after);
    let marks: Vec<Json> = w
        .marks_between(after, upto)
        .iter()
        .map(|m| json!([m.sequence, m.kind.as_str()]))
        .collect();
    header["marks"] = Json::Array(marks);
    header["episodes"] = json!({ "terminated": w.terminated, "truncated": w.truncated,
        "resets": w.resets, "gaps": w.gaps });
    upto
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

/// A resource the viewer saw no boundary of for this long (or none since
/// it started) is idle: in the server's process, its render is asked for
/// at once ([`render_now`]) rather than at its next boundary.
pub(super) const IDLE_RENDER: Duration = Duration::from_secs(1);

/// Render on demand for an idle resource (in the server's process): the
/// viewer's session calls the resource's `render` itself and releases the
/// control that took. A session holding the resource's control (a paused
/// run) refuses it (`ownership_conflict`): the render then comes at the
/// resource's next boundary ([`render_once`]), as the page is told.
pub(super) async fn render_now(
    client: Client,
    state: &ViewerState,
    page: PageWriter,
    panel: u64,
    resource: String,
    sequence: u64,
) {
    let called = {
        let _permit = state.upstream.request().await;
        client
            .call(&resource, "render", Vec::new(), crate::codec::Dict::new())
            .await
    };
    if !matches!(&called, Err(ClientError::Remote(e)) if e.code == crate::protocol::ErrorCode::OwnershipConflict)
    {
        // The call took the resource's control (or tried): give it back.
        let _permit = state.upstream.request().await;
        let _ = client.release(&resource, false).await;
    }
    let _ = match called {
        Ok(value) => {
            let mut frame = Frame::new();
            let mut data = crate::codec::Dict::new();
            data.insert("render", value);
            let data = frame.value(&crate::codec::Value::Dict(data));
            let header = json!({ "type": "render", "panel": panel, "resource": resource,
                "now": true, "sequence": (sequence > 0).then_some(sequence), "data": data });
            page.send(&header, frame).await
        }
        Err(ClientError::Remote(e)) if e.code == crate::protocol::ErrorCode::OwnershipConflict => {
            let _ = page
                .json(json!({ "type": "render_wait", "panel": panel,
                    "message": "a session controls this resource without stepping it (a paused run): the render comes with its next step or reset" }))
                .await;
            render_once(client, state, page, panel, resource).await;
            Ok(())
        }
        Err(e) => {
            let (code, message) = error_json(&e);
            page.json(json!({ "type": "render_error", "panel": panel,
                "code": code, "message": message }))
                .await
        }
    };
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
