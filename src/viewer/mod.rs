//! The browser viewer: a local web app showing any UniEnv server's resources
//! and live boundary snapshots (`unienv-remote view`, `serve --viewer`).
//!
//! The viewer is an ordinary client of the UniEnv server (ours or the
//! reference): it holds the token, and the browser talks only to the viewer.
//! It serves the page's files (embedded in the binary) over HTTP and one
//! WebSocket per open tab at `/ws`, using the crate's own WebSocket layer.
//! Like the server, it accepts only Host headers that cannot come from DNS
//! rebinding (IP literals, `localhost`, or names allowed explicitly) and, on
//! the WebSocket, only the page's own origin (or origins allowed
//! explicitly).
//!
//! Each tab gets its own upstream session. Every panel of the page is one
//! subscription, and the page grants one *credit* per panel each time it has
//! drawn a snapshot: the viewer takes the subscription's latest snapshot only
//! against a credit. The client keeps one undelivered snapshot per
//! subscription and the server one pending snapshot per subscription, so a
//! slow or paused tab drops frames and never builds a queue anywhere.
//! When a domain publishes boundaries much faster than a page can draw, a
//! panel holds its upstream subscription only while the page waits for a
//! frame, so that the viewer's reading costs the simulator's machine one
//! snapshot per drawn frame, not one per boundary (see `panel_task`).
//!
//! The wire format between the viewer and its page is in [`frame`].

pub mod frame;

use crate::client::{Client, ClientConfig, ClientError, Descriptor, Subscription};
use crate::transport::ws::{self, RequestHead};
use crate::transport::TransportError;
use frame::Frame;
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Mutex, Notify};
use tokio::task::JoinHandle;

/// The default address of the viewer's web app.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8766";

/// Largest HTTP request head the viewer reads.
const MAX_HEAD: usize = 16 * 1024;

/// Largest message the page may send (its commands are small JSON objects).
const MAX_PAGE_MESSAGE: usize = 64 * 1024;

/// How long a one-shot render waits for the next boundary.
const RENDER_WAIT: Duration = Duration::from_secs(30);

/// Between attempts to reach a lost upstream server.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// How a viewer connects and whom it serves.
#[derive(Debug, Clone)]
pub struct ViewerConfig {
    /// The UniEnv server, `ws://HOST:PORT`.
    pub upstream: String,
    /// The bearer token for the UniEnv server (never sent to the page).
    pub token: Option<String>,
    /// Timeout of the upstream connection and of each request.
    pub timeout: Option<Duration>,
    /// Host header names accepted besides IP literals and `localhost`
    /// (`*` accepts any).
    pub allowed_hosts: Vec<String>,
    /// Origins accepted on the WebSocket besides the page's own (`*`
    /// accepts any).
    pub allowed_origins: Vec<String>,
}

impl ViewerConfig {
    /// A viewer of `upstream` with the default checks and a 30 s timeout.
    pub fn new(upstream: impl Into<String>) -> ViewerConfig {
        ViewerConfig {
            upstream: upstream.into(),
            token: None,
            timeout: Some(Duration::from_secs(30)),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }

    fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::default()
            .with_timeout(self.timeout)
            .with_discover(false);
        config.token = self.token.clone();
        config
    }
}

/// Why the viewer could not start.
#[derive(Debug, thiserror::Error)]
pub enum ViewerError {
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The operating system's error.
        message: String,
    },
}

/// A running viewer; dropping it (or [`Viewer::stop`]) stops accepting.
#[derive(Debug)]
pub struct Viewer {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl Viewer {
    /// Binds `listen` and serves the viewer of `config.upstream` there
    /// (inside a tokio runtime). Connections to the upstream server are
    /// made per open tab, so a server that is not up yet is not an error.
    pub async fn start(listen: &str, config: ViewerConfig) -> Result<Viewer, ViewerError> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| ViewerError::Bind {
                addr: listen.to_string(),
                message: e.to_string(),
            })?;
        let addr = listener.local_addr().map_err(|e| ViewerError::Bind {
            addr: listen.to_string(),
            message: e.to_string(),
        })?;
        let config = Arc::new(config);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(handle_connection(stream, config.clone()));
            }
        });
        Ok(Viewer { addr, accept })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL, `http://HOST:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Stops accepting connections (open tabs keep their sessions until
    /// they close).
    pub fn stop(&self) {
        self.accept.abort();
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The page's files, embedded in the binary.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("assets/index.html"),
    ),
    (
        "/viewer.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/viewer.js"),
    ),
    (
        "/viewer.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/viewer.css"),
    ),
    (
        "/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/uPlot.iife.min.js"),
    ),
    (
        "/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/uPlot.min.css"),
    ),
    (
        "/LICENSE.uPlot.txt",
        "text/plain; charset=utf-8",
        include_bytes!("assets/LICENSE.uPlot.txt"),
    ),
];

/// Whether a Host header may be answered: IP literals and `localhost`
/// cannot come from DNS rebinding; other names must be allowed explicitly.
fn host_allowed(config: &ViewerConfig, host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = split_host(&host);
    if config
        .allowed_hosts
        .iter()
        .any(|h| h == "*" || h.eq_ignore_ascii_case(&host) || h.eq_ignore_ascii_case(name))
    {
        return true;
    }
    name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok()
}

/// Whether a WebSocket's Origin may connect: the page's own origin
/// (`http://` + the Host header) or one allowed explicitly.
fn origin_allowed(config: &ViewerConfig, origin: &str, host: &str) -> bool {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    if config
        .allowed_origins
        .iter()
        .any(|o| o == "*" || o.trim_end_matches('/').eq_ignore_ascii_case(&origin))
    {
        return true;
    }
    origin == format!("http://{}", host.trim().to_ascii_lowercase())
}

/// The host name of `host[:port]` or `[v6]:port` (brackets removed).
fn split_host(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match s.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => s,
    }
}

/// What a request head asks for.
struct Head {
    method: String,
    path: String,
    host: Option<String>,
    upgrade: bool,
}

/// Looks at the request head without consuming it, so that a WebSocket
/// upgrade can be handed whole to the WebSocket layer. Browsers send the
/// head in one segment; a head that trickles in is waited for (briefly).
async fn peek_head(stream: &TcpStream) -> Option<(Head, usize)> {
    let mut buf = vec![0u8; MAX_HEAD];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n = tokio::time::timeout_at(deadline, stream.peek(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].windows(4).position(|w| w == b"\r\n\r\n") {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            let Ok(httparse::Status::Complete(_)) = req.parse(&buf[..end + 4]) else {
                return None;
            };
            let header = |name: &str| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).into_owned())
            };
            let upgrade = header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
            let head = Head {
                method: req.method.unwrap_or_default().to_string(),
                path: req.path.unwrap_or("/").to_string(),
                host: header("host"),
                upgrade,
            };
            return Some((head, end + 4));
        }
        if n >= MAX_HEAD || tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn handle_connection(mut stream: TcpStream, config: Arc<ViewerConfig>) {
    let Some((head, head_len)) = peek_head(&stream).await else {
        return;
    };
    let path = head.path.split('?').next().unwrap_or("/").to_string();
    if head.upgrade && path == "/ws" {
        let policy = |req: &RequestHead| -> Result<(), ws::Refusal> {
            let host = req.header("host").unwrap_or("");
            if !host_allowed(&config, host) {
                return Err(ws::Refusal::new(403, "Forbidden", "Host not allowed"));
            }
            if let Some(origin) = req.header("origin") {
                if !origin_allowed(&config, origin, host) {
                    return Err(ws::Refusal::new(403, "Forbidden", "Origin not allowed"));
                }
            }
            Ok(())
        };
        if let Ok((reader, writer)) = ws::accept(stream, MAX_HEAD, MAX_PAGE_MESSAGE, policy).await {
            Tab::run(config, reader, writer).await;
        }
        return;
    }
    // A plain HTTP request: consume its head and answer it.
    let mut discard = vec![0u8; head_len];
    if tokio::io::AsyncReadExt::read_exact(&mut stream, &mut discard)
        .await
        .is_err()
    {
        return;
    }
    let response = if !head
        .host
        .as_deref()
        .is_some_and(|h| host_allowed(&config, h))
    {
        plain(403, "Forbidden", "Host not allowed")
    } else if head.method != "GET" && head.method != "HEAD" {
        plain(405, "Method Not Allowed", "only GET")
    } else {
        match ASSETS.iter().find(|(p, _, _)| *p == path) {
            Some((_, content_type, body)) => {
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nContent-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                if head.method == "GET" {
                    r.extend_from_slice(body);
                }
                r
            }
            None => plain(404, "Not Found", "not found"),
        }
    };
    let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, &response).await;
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
}

fn plain(status: u16, reason: &str, text: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}

/// The page's side of a tab: messages are written whole under the lock.
#[derive(Clone)]
struct PageWriter(Arc<Mutex<ws::WsWriter>>);

impl PageWriter {
    async fn send(&self, header: &Json, frame: Frame) -> Result<(), TransportError> {
        let (head, blob) = frame.finish(header);
        let mut w = self.0.lock().await;
        w.feed_parts(&head, &blob).await?;
        w.flush().await
    }

    async fn json(&self, header: Json) -> Result<(), TransportError> {
        self.send(&header, Frame::new()).await
    }
}

/// One page command.
#[derive(Debug)]
enum Command {
    Subscribe {
        panel: u64,
        resource: String,
        fields: Option<Vec<String>>,
    },
    Unsubscribe {
        panel: u64,
    },
    Ready {
        panel: u64,
    },
    Render {
        panel: u64,
        resource: String,
    },
    Refresh,
}

fn parse_command(message: &[u8]) -> Result<Command, String> {
    let v: Json = serde_json::from_slice(message).map_err(|e| format!("invalid JSON: {e}"))?;
    let op = v.get("op").and_then(Json::as_str).unwrap_or("");
    let panel = || {
        v.get("panel")
            .and_then(Json::as_u64)
            .ok_or_else(|| format!("{op} needs a numeric panel"))
    };
    let resource = || {
        v.get("resource")
            .and_then(Json::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("{op} needs a resource"))
    };
    Ok(match op {
        "subscribe" => Command::Subscribe {
            panel: panel()?,
            resource: resource()?,
            fields: match v.get("fields") {
                Some(Json::Array(items)) => Some(
                    items
                        .iter()
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect(),
                ),
                _ => None,
            },
        },
        "unsubscribe" => Command::Unsubscribe { panel: panel()? },
        "ready" => Command::Ready { panel: panel()? },
        "render" => Command::Render {
            panel: panel()?,
            resource: resource()?,
        },
        "refresh" => Command::Refresh,
        other => return Err(format!("unknown op {other:?}")),
    })
}

/// A subscribed panel.
struct Panel {
    resource: String,
    fields: Option<Vec<String>>,
    /// One stored permit at most: the page's credit.
    credit: Arc<Notify>,
    /// Ends the panel's task between snapshots (never inside a write).
    stop: Option<oneshot::Sender<()>>,
}

impl Panel {
    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn error_json(e: &ClientError) -> (String, String) {
    match e {
        ClientError::Remote(p) => (p.code.as_str().to_string(), p.message.clone()),
        other => (other.code().to_string(), other.to_string()),
    }
}

fn descriptor_json(frame: &mut Frame, d: &Descriptor) -> Json {
    frame.value(&crate::Value::Dict(d.raw().clone()))
}

struct Tab {
    config: Arc<ViewerConfig>,
    page: PageWriter,
    panels: HashMap<u64, Panel>,
    client: Option<Client>,
}

impl Tab {
    async fn run(config: Arc<ViewerConfig>, mut reader: ws::WsReader, writer: ws::WsWriter) {
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
                match Client::connect(&tab.config.upstream, tab.config.client_config()).await {
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
    async fn connected(&mut self) -> Result<(), TransportError> {
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

    async fn send_resources(&self) -> Result<(), TransportError> {
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
    fn offline_command(&mut self, cmd: Command) {
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

    async fn command(&mut self, cmd: Command) -> Result<(), TransportError> {
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
    async fn subscribe(
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

/// Header members of a snapshot message.
fn snapshot_header(
    kind: &str,
    panel: u64,
    event: &crate::client::SnapshotEvent,
    frame: &mut Frame,
) -> Json {
    let data = frame.value(&crate::Value::Dict(event.data.clone()));
    let descriptor = event
        .descriptor
        .as_ref()
        .map(|d| descriptor_json(frame, d))
        .unwrap_or(Json::Null);
    json!({
        "type": kind,
        "panel": panel,
        "resource": event.resource_id,
        "kind": event.kind,
        "sequence": event.sequence,
        "timestamp_ns": event.timestamp_ns,
        "revision": event.descriptor_revision,
        "operation_id": event.operation_id,
        "data": data,
        "descriptor": descriptor,
    })
}

/// Above this many boundaries per second a panel's upstream subscription is
/// held only while the page waits for a frame (see [`panel_task`]).
const GATE_ABOVE: f64 = 150.0;

/// How long a panel that subscribed again waits for a boundary before it
/// checks whether it missed the last ones (the domain went quiet).
const QUIET: Duration = Duration::from_millis(250);

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
async fn panel_task(mut task: PanelTask) {
    let mut subscription = Some(task.first);
    let mut last: Option<(u64, i64)> = None;
    let mut gated = false;
    let stop = &mut task.stop;
    loop {
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
                s = task.client.subscribe(&task.resource, names.as_deref()) => s,
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
            if let (Ok(d), Some((shown, _))) = (task.client.describe(&task.resource).await, last) {
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
                        gated = if gated {
                            rate >= UNGATE_BELOW
                        } else {
                            rate > GATE_ABOVE
                        };
                    }
                }
                last = Some((event.sequence, event.timestamp_ns));
                if gated {
                    // Dropping unsubscribes without waiting for the reply.
                    subscription = None;
                }
                let mut frame = Frame::new();
                let mut header = snapshot_header("snapshot", task.panel, &event, &mut frame);
                header["gated"] = json!(gated);
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
            let _ = s.unsubscribe().await;
        }
    }
}

/// What a panel's task needs.
struct PanelTask {
    client: Client,
    first: Subscription,
    resource: String,
    fields: Option<Vec<String>>,
    credit: Arc<Notify>,
    stop: oneshot::Receiver<()>,
    page: PageWriter,
    panel: u64,
}

/// Render on demand: a short-lived subscription to the `render` field,
/// for the next boundary only.
async fn render_once(client: Client, page: PageWriter, panel: u64, resource: String) {
    let outcome = async {
        let mut subscription = client.subscribe(&resource, Some(&["render"])).await?;
        let next = subscription.next(Some(RENDER_WAIT)).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins() {
        let mut config = ViewerConfig::new("ws://127.0.0.1:1");
        for ok in [
            "127.0.0.1:8766",
            "localhost:8766",
            "[::1]:8766",
            "LOCALHOST",
        ] {
            assert!(host_allowed(&config, ok), "{ok}");
        }
        for bad in ["evil.example:8766", "localhost.evil.example", ""] {
            assert!(!host_allowed(&config, bad), "{bad}");
        }
        config.allowed_hosts.push("viewer.lan".into());
        assert!(host_allowed(&config, "viewer.lan:8766"));
        assert!(origin_allowed(
            &config,
            "http://127.0.0.1:8766",
            "127.0.0.1:8766"
        ));
        assert!(!origin_allowed(
            &config,
            "http://127.0.0.1:9999",
            "127.0.0.1:8766"
        ));
        assert!(!origin_allowed(
            &config,
            "http://evil.example",
            "127.0.0.1:8766"
        ));
        config.allowed_origins.push("http://dash.lan".into());
        assert!(origin_allowed(
            &config,
            "http://dash.lan/",
            "127.0.0.1:8766"
        ));
    }

    #[test]
    fn commands() {
        assert!(matches!(
            parse_command(br#"{"op":"subscribe","panel":3,"resource":"pointmass","fields":["reward"]}"#),
            Ok(Command::Subscribe { panel: 3, ref resource, fields: Some(ref f) }) if resource == "pointmass" && f == &["reward"]
        ));
        assert!(matches!(
            parse_command(br#"{"op":"ready","panel":1}"#),
            Ok(Command::Ready { panel: 1 })
        ));
        assert!(parse_command(br#"{"op":"ready"}"#).is_err());
        assert!(parse_command(b"not json").is_err());
        assert!(parse_command(br#"{"op":"call"}"#).is_err());
    }
}
