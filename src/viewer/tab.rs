//! One open tab: its upstream session (reconnected when lost), its
//! commands, and its panels.

use super::config::ViewerConfig;
use super::frame::Frame;
use super::page::{descriptor_json, error_json, parse_command, Command, PageWriter};
use super::panel::{panel_task, render_once, PanelTask};
use crate::client::Client;
use crate::transport::ws;
use crate::transport::TransportError;
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Mutex, Notify};

/// Between attempts to reach a lost upstream server.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

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
    pub(super) config: Arc<ViewerConfig>,
    pub(super) page: PageWriter,
    pub(super) panels: HashMap<u64, Panel>,
    pub(super) client: Option<Client>,
}

impl Tab {
    pub(super) async fn run(
        config: Arc<ViewerConfig>,
        mut reader: ws::WsReader,
        writer: ws::WsWriter,
    ) {
        let page = PageWriter(Arc::new(Mutex::new(writer)));
        // Commands are tiny; a bounded channel makes a flooding page wait.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Command, String>>(64);
        let reading = tokio::spawn(async move {
            while let Ok(message) = reader.recv().await {
                if tx.send(parse_command(&message)).await.is_err() {
                    break;
                }
            }
        });
        let mut tab = Tab {
            config,
            page,
            panels: HashMap::new(),
            client: None,
        };
        let mut was_connected = false;
        'session: loop {
            // (Re)connect to the upstream server.
            if tab.client.as_ref().is_none_or(Client::is_closed) {
                if let Some(old) = tab.client.take() {
                    old.close().await;
                }
                if was_connected {
                    let _ = tab
                        .page
                        .json(json!({ "type": "upstream", "state": "lost",
                            "message": "the connection to the UniEnv server was lost; reconnecting" }))
                        .await;
                }
                match tab.config.connect().await {
                    Ok(client) => {
                        was_connected = true;
                        tab.client = Some(client);
                        if tab.connected().await.is_err() {
                            break 'session;
                        }
                    }
                    Err(e) => {
                        let (code, message) = error_json(&e);
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
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
        reading.abort();
        for panel in tab.panels.values_mut() {
            panel.stop();
        }
        if let Some(client) = tab.client.take() {
            client.close().await;
        }
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
                "url": self.config.upstream, "server": info.server,
                "server_version": info.server_version, "session_id": info.session_id }))
            .await?;
        self.send_resources().await?;
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

    pub(super) async fn send_resources(&self) -> Result<(), TransportError> {
        let Some(client) = &self.client else {
            return Ok(());
        };
        match client.discover().await {
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
                self.panels.insert(
                    panel,
                    Panel {
                        resource,
                        fields,
                        credit: Arc::new(Notify::new()),
                        stop: None,
                    },
                );
            }
            Command::Unsubscribe { panel } => {
                if let Some(mut p) = self.panels.remove(&panel) {
                    p.stop();
                }
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
                self.subscribe(panel, resource, fields).await
            }
            Command::Unsubscribe { panel } => {
                if let Some(mut p) = self.panels.remove(&panel) {
                    p.stop();
                }
                Ok(())
            }
            Command::Ready { panel } => {
                if let Some(p) = self.panels.get(&panel) {
                    p.credit.notify_one();
                }
                Ok(())
            }
            Command::Render { panel, resource } => {
                if let Some(client) = self.client.clone() {
                    tokio::spawn(render_once(client, self.page.clone(), panel, resource));
                }
                Ok(())
            }
            Command::Refresh => self.send_resources().await,
        }
    }

    /// Subscribes a panel and starts its task (the page's first credit
    /// arrives as a `ready` command). A refused subscription is reported
    /// to the page and the panel kept, so that a reconnection retries it.
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
            match client.subscribe(&resource, names.as_deref()).await {
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
                    }));
                }
                Err(e) => {
                    let (code, message) = error_json(&e);
                    self.page
                        .json(json!({ "type": "subscription_error", "panel": panel,
                            "resource": resource, "code": code, "message": message }))
                        .await?;
                }
            }
        }
        self.panels.insert(panel, entry);
        Ok(())
    }
}
