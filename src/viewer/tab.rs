//! One open tab: the shared upstream session (made again when lost), its
//! commands, and its panels (at most [`MAX_PANELS`]; renders share the
//! viewer's [`MAX_RENDERS`] places).

use super::frame::Frame;
use super::page::{descriptor_json, error_json, parse_command, Command, PageWriter};
use super::panel::{panel_task, render_now, render_once, Pace, PanelTask, IDLE_RENDER};
use super::upstream::{RECONNECT_DELAY, REFRESH_SPACING};
use super::{ViewerState, MAX_PANELS, MAX_RENDERS, RENDER_SPACING};
use crate::client::{Client, ClientError};
use crate::transport::ws;
use crate::transport::TransportError;
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Mutex, Notify};
use tokio::time::Instant;

/// Commands a page may send per second, sustained (its `ready` credits
/// come at most at the tab's frame rate, 120 a second).
const COMMANDS_PER_SECOND: f64 = 250.0;

/// Commands a page may send at once beyond the sustained rate (its panels
/// subscribing at load, [`MAX_PANELS`] of them with their credits).
const COMMAND_BURST: f64 = 2.0 * MAX_PANELS as f64 + 16.0;

/// A page's command budget (a token bucket): a page flooding commands
/// (`refresh`, `ready`, `subscribe`…) is read at [`COMMANDS_PER_SECOND`],
/// so that it costs the viewer's process (the server's, with `serve
/// --viewer`) a bounded share of a CPU.
struct CommandBudget {
    tokens: f64,
    at: Instant,
}

impl CommandBudget {
    fn new() -> CommandBudget {
        CommandBudget {
            tokens: COMMAND_BURST,
            at: Instant::now(),
        }
    }

    /// Spends one command; returns how long to wait before reading the
    /// next when the budget is spent.
    fn spend(&mut self) -> Option<Duration> {
        let now = Instant::now();
        let earned = now.duration_since(self.at).as_secs_f64() * COMMANDS_PER_SECOND;
        self.tokens = (self.tokens + earned).min(COMMAND_BURST) - 1.0;
        self.at = now;
        (self.tokens < 0.0).then(|| Duration::from_secs_f64(-self.tokens / COMMANDS_PER_SECOND))
    }
}

/// A subscribed panel.
pub(super) struct Panel {
    pub(super) resource: String,
    pub(super) fields: Option<Vec<String>>,
    /// One stored permit at most: the page's credit.
    pub(super) credit: Arc<Notify>,
    /// Ends the panel's task between snapshots (never inside a write).
    pub(super) stop: Option<oneshot::Sender<()>>,
}

impl Panel {
    pub(super) fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub(super) struct Tab {
    pub(super) state: Arc<ViewerState>,
    pub(super) page: PageWriter,
    pub(super) panels: HashMap<u64, Panel>,
    pub(super) client: Option<Client>,
    /// The tab's panels' frame pacing (their number, shared with them).
    pub(super) pace: Pace,
    /// When the page was last sent the resources.
    pub(super) listed_at: Option<Instant>,
    /// A `refresh` came within [`REFRESH_SPACING`] of that: it is answered
    /// when the spacing has passed.
    pub(super) refresh_due: bool,
}

impl Tab {
    pub(super) async fn run(
        state: Arc<ViewerState>,
        mut reader: ws::WsReader,
        writer: ws::WsWriter,
    ) {
        let page = PageWriter(Arc::new(Mutex::new(writer)));
        // Commands are tiny; a bounded channel makes a flooding page wait.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Command, String>>(64);
        // The page socket's heartbeat: a silent page is pinged, and one
        // from which nothing arrives for the timeout has vanished (the
        // tab ends, its panels unsubscribe).
        let keepalive = reader.keepalive();
        let (interval, timeout) = (
            state.config.heartbeat_interval,
            state.config.heartbeat_timeout,
        );
        let reading = tokio::spawn(async move {
            let vanished = keepalive.watch(interval, timeout);
            tokio::pin!(vanished);
            let mut budget = CommandBudget::new();
            loop {
                tokio::select! {
                    message = reader.recv() => {
                        let Ok(message) = message else { break };
                        if tx.send(parse_command(&message)).await.is_err() {
                            break;
                        }
                        // Over its budget, the page waits (nothing is read
                        // meanwhile: its socket's buffers fill and its
                        // sends stop).
                        if let Some(wait) = budget.spend() {
                            tokio::time::sleep(wait).await;
                        }
                    }
                    quiet = &mut vanished => {
                        tracing::debug!(silent_s = quiet.as_secs_f64(), "viewer: a page vanished (heartbeat)");
                        break;
                    }
                }
            }
        });
        state.upstream.tab_opened().await;
        state.open_tabs.fetch_add(1, Ordering::Relaxed);
        let mut tab = Tab {
            pace: Pace::new(state.clone()),
            state: state.clone(),
            page,
            panels: HashMap::new(),
            client: None,
            listed_at: None,
            refresh_due: false,
        };
        let mut was_connected = false;
        'session: loop {
            // (Re)connect to the upstream server.
            if tab.client.as_ref().is_none_or(Client::is_closed) {
                tab.client = None;
                if was_connected {
                    let _ = tab
                        .page
                        .json(json!({ "type": "upstream", "state": "lost",
                            "message": "the connection to the UniEnv server was lost; reconnecting" }))
                        .await;
                }
                match tab.state.upstream.client(&tab.state.config).await {
                    Ok(client) => {
                        was_connected = true;
                        tab.client = Some(client);
                        if tab.connected().await.is_err() {
                            break 'session;
                        }
                    }
                    Err((code, message)) => {
                        let _ = tab
                            .page
                            .json(json!({ "type": "upstream", "state": "unreachable",
                                "code": code, "message": message }))
                            .await;
                        // Keep reading commands while waiting to retry.
                        let wait = tokio::time::sleep(RECONNECT_DELAY);
                        tokio::pin!(wait);
                        loop {
                            tokio::select! {
                                _ = &mut wait => continue 'session,
                                cmd = rx.recv() => match cmd {
                                    None => break 'session,
                                    Some(Ok(cmd)) => tab.offline_command(cmd),
                                    Some(Err(_)) => {}
                                }
                            }
                        }
                    }
                }
            }
            let wake = match tab.listed_at.filter(|_| tab.refresh_due) {
                Some(at) => at + REFRESH_SPACING,
                None => Instant::now() + Duration::from_millis(250),
            };
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    None => break 'session,
                    Some(Ok(cmd)) => {
                        if tab.command(cmd).await.is_err() {
                            break 'session;
                        }
                    }
                    Some(Err(message)) => {
                        let _ = tab.page.json(json!({ "type": "error", "message": message })).await;
                    }
                },
                _ = tokio::time::sleep_until(wake) => {
                    if tab.refresh_due && tab.list().await.is_err() {
                        break 'session;
                    }
                }
            }
        }
        reading.abort();
        for panel in tab.panels.values_mut() {
            panel.stop();
        }
        tab.client = None;
        state.open_tabs.fetch_sub(1, Ordering::Relaxed);
        state.upstream.tab_closed().await;
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            tab.page.0.lock().await.close(None).await;
        })
        .await;
    }

    /// A fresh upstream session: tell the page, list the resources, and
    /// subscribe the page's panels again.
    pub(super) async fn connected(&mut self) -> Result<(), TransportError> {
        let Some(client) = self.client.clone() else {
            return Ok(());
        };
        let info = client.server_info();
        self.page
            .json(json!({ "type": "upstream", "state": "connected",
                "in_process": self.state.config.in_process.is_some(),
                "url": self.state.config.upstream, "server": info.server,
                "server_version": info.server_version, "session_id": info.session_id }))
            .await?;
        self.list().await?;
        let panels: Vec<(u64, String, Option<Vec<String>>)> = self
            .panels
            .iter()
            .map(|(id, p)| (*id, p.resource.clone(), p.fields.clone()))
            .collect();
        for (panel, resource, fields) in panels {
            self.subscribe(panel, resource, fields).await?;
            if let Some(p) = self.panels.get(&panel) {
                p.credit.notify_one();
            }
        }
        Ok(())
    }

    /// Sends the page the resources (see [`Tab::send_resources`]) and
    /// notes when.
    async fn list(&mut self) -> Result<(), TransportError> {
        self.listed_at = Some(Instant::now());
        self.refresh_due = false;
        self.send_resources().await
    }

    /// The page's `refresh`: answered at once, or (within
    /// [`REFRESH_SPACING`] of the last list) once the spacing has passed,
    /// however many came meanwhile.
    async fn refresh(&mut self) -> Result<(), TransportError> {
        match self.listed_at {
            Some(at) if at.elapsed() < REFRESH_SPACING => {
                self.refresh_due = true;
                Ok(())
            }
            _ => self.list().await,
        }
    }

    pub(super) async fn send_resources(&self) -> Result<(), TransportError> {
        let Some(client) = &self.client else {
            return Ok(());
        };
        let listed = self.state.upstream.discover(client).await;
        match listed {
            Ok(list) => {
                let mut frame = Frame::new();
                let descriptors: Vec<Json> = list
                    .iter()
                    .map(|d| descriptor_json(&mut frame, d))
                    .collect();
                self.page
                    .send(
                        &json!({ "type": "resources", "descriptors": descriptors }),
                        frame,
                    )
                    .await
            }
            Err(e) => {
                let (code, message) = error_json(&e);
                self.page
                    .json(json!({ "type": "error", "code": code,
                        "message": format!("discover failed: {message}") }))
                    .await
            }
        }
    }

    /// Commands while the upstream server is unreachable: remember the
    /// panels (they are subscribed on reconnection).
    pub(super) fn offline_command(&mut self, cmd: Command) {
        match cmd {
            Command::Subscribe {
                panel,
                resource,
                fields,
            } => {
                if !self.panels.contains_key(&panel) && self.panels.len() >= MAX_PANELS {
                    return;
                }
                self.panels.insert(
                    panel,
                    Panel {
                        resource,
                        fields,
                        credit: Arc::new(Notify::new()),
                        stop: None,
                    },
                );
                self.pace.set_panels(self.panels.len());
            }
            Command::Unsubscribe { panel } => {
                if let Some(mut p) = self.panels.remove(&panel) {
                    p.stop();
                }
                self.pace.set_panels(self.panels.len());
            }
            Command::Ready { panel } => {
                if let Some(p) = self.panels.get(&panel) {
                    p.credit.notify_one();
                }
            }
            Command::Render { .. } | Command::Refresh => {}
        }
    }

    pub(super) async fn command(&mut self, cmd: Command) -> Result<(), TransportError> {
        match cmd {
            Command::Subscribe {
                panel,
                resource,
                fields,
            } => {
                if let Some(mut old) = self.panels.remove(&panel) {
                    old.stop();
                }
                if self.panels.len() >= MAX_PANELS {
                    self.pace.set_panels(self.panels.len());
                    return self
                        .page
                        .json(json!({ "type": "subscription_error", "panel": panel,
                            "resource": resource, "code": "too_many_panels",
                            "message": format!("at most {MAX_PANELS} panels per tab") }))
                        .await;
                }
                self.subscribe(panel, resource, fields).await
            }
            Command::Unsubscribe { panel } => {
                if let Some(mut p) = self.panels.remove(&panel) {
                    p.stop();
                }
                self.pace.set_panels(self.panels.len());
                Ok(())
            }
            Command::Ready { panel } => {
                if let Some(p) = self.panels.get(&panel) {
                    p.credit.notify_one();
                }
                Ok(())
            }
            Command::Render { panel, resource } => {
                let Some(client) = self.client.clone() else {
                    return Ok(());
                };
                let Ok(permit) = self.state.renders.clone().try_acquire_owned() else {
                    return self
                        .page
                        .json(json!({ "type": "render_error", "panel": panel,
                            "code": "too_many_renders",
                            "message": format!("at most {MAX_RENDERS} renders may be pending (all tabs), one per place per {} s; try again", RENDER_SPACING.as_secs()) }))
                        .await;
                };
                let page = self.page.clone();
                let state = self.state.clone();
                // In process, an idle resource renders now.
                let idle = state
                    .watcher
                    .as_ref()
                    .and_then(|w| w.get(&resource))
                    .filter(|w| w.idle_for().is_none_or(|d| d >= IDLE_RENDER))
                    .map(|w| w.sequence);
                tokio::spawn(async move {
                    let spaced = tokio::time::sleep(RENDER_SPACING);
                    match idle {
                        Some(sequence) => {
                            render_now(client, &state, page, panel, resource, sequence).await
                        }
                        None => render_once(client, &state, page, panel, resource).await,
                    }
                    spaced.await;
                    drop(permit);
                });
                Ok(())
            }
            Command::Refresh => self.refresh().await,
        }
    }

    /// Subscribes a panel and starts its task (the page's first credit
    /// arrives as a `ready` command). A refused subscription is reported
    /// to the page and the panel dropped (a page that wants it again
    /// subscribes again); while the upstream server is unreachable the
    /// panel is kept, so that the reconnection subscribes it.
    pub(super) async fn subscribe(
        &mut self,
        panel: u64,
        resource: String,
        fields: Option<Vec<String>>,
    ) -> Result<(), TransportError> {
        let credit = self
            .panels
            .get(&panel)
            .map(|p| p.credit.clone())
            .unwrap_or_else(|| Arc::new(Notify::new()));
        if let Some(p) = self.panels.get_mut(&panel) {
            p.stop();
        }
        let mut entry = Panel {
            resource: resource.clone(),
            fields: fields.clone(),
            credit: credit.clone(),
            stop: None,
        };
        if let Some(client) = self.client.clone() {
            let names: Option<Vec<&str>> = fields
                .as_ref()
                .map(|f| f.iter().map(String::as_str).collect());
            let permit = self.state.upstream.request().await;
            let subscribed = client.subscribe(&resource, names.as_deref()).await;
            drop(permit);
            match subscribed {
                Ok(subscription) => {
                    let (stop_tx, stop_rx) = oneshot::channel();
                    entry.stop = Some(stop_tx);
                    let descriptor = client.descriptor(&resource);
                    let mut frame = Frame::new();
                    let d = descriptor
                        .as_ref()
                        .map(|d| descriptor_json(&mut frame, d))
                        .unwrap_or(Json::Null);
                    self.page
                        .send(
                            &json!({ "type": "subscribed", "panel": panel,
                                "resource": resource, "descriptor": d }),
                            frame,
                        )
                        .await?;
                    tokio::spawn(panel_task(PanelTask {
                        client: client.clone(),
                        first: subscription,
                        resource,
                        fields,
                        credit,
                        stop: stop_rx,
                        page: self.page.clone(),
                        panel,
                        pace: self.pace.clone(),
                    }));
                }
                Err(e) => {
                    let (code, message) = error_json(&e);
                    // Refused by the server: dropped. Lost with the
                    // connection: kept for the reconnection.
                    if matches!(e, ClientError::Remote(_)) {
                        self.panels.remove(&panel);
                    } else {
                        self.panels.insert(panel, entry);
                    }
                    self.pace.set_panels(self.panels.len());
                    return self
                        .page
                        .json(json!({ "type": "subscription_error", "panel": panel,
                            "resource": resource, "code": code, "message": message }))
                        .await;
                }
            }
        }
        self.panels.insert(panel, entry);
        self.pace.set_panels(self.panels.len());
        Ok(())
    }
}
