//! Helpers for the viewer tests: a server and a viewer of it on loopback,
//! a page's side of the viewer's WebSocket (decoding its messages), and
//! headless Chromium driven over the DevTools protocol, with the page's
//! panels and tree in JavaScript.
#![allow(dead_code)]

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Mutex};
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::server::{Listener, Server, ServerBuilder, ServerConfig};
use unienv_remote::viewer::{Viewer, ViewerConfig};

/// The generous deadline of every wait.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// What a test server hosts besides what a test registers itself.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Hosts {
    /// The fixture registry (`unienv_remote::fixtures`).
    Fixtures,
    /// The built-in simulators (`unienv_remote::sims`).
    Sims,
    /// Both.
    Both,
    /// Nothing: the test registers its resources.
    Nothing,
}

/// A server builder with `config`, holding `hosts`.
pub fn builder(config: ServerConfig, hosts: Hosts) -> ServerBuilder {
    let mut builder = Server::builder(config);
    if matches!(hosts, Hosts::Fixtures | Hosts::Both) {
        unienv_remote::fixtures::register(&mut builder).expect("fixtures");
    }
    if matches!(hosts, Hosts::Sims | Hosts::Both) {
        unienv_remote::sims::register(&mut builder).expect("sims");
    }
    builder
}

/// Starts `builder`'s server and listens on a free loopback port.
pub async fn listening(builder: ServerBuilder) -> (Server, Listener) {
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    (server, listener)
}

/// A server with `config` holding `hosts`, listening on a free loopback port.
pub async fn serve(config: ServerConfig, hosts: Hosts) -> (Server, Listener) {
    listening(builder(config, hosts)).await
}

/// The default server configuration with `token` required of clients.
pub fn with_token(token: &str) -> ServerConfig {
    ServerConfig {
        token: Some(token.into()),
        ..ServerConfig::default()
    }
}

/// A viewer with `config` on a free loopback port.
pub async fn viewer(config: ViewerConfig) -> Viewer {
    Viewer::start("127.0.0.1:0", config).await.expect("viewer")
}

/// The configuration of a viewer in `server`'s process, upstream `listener`.
pub fn in_process(server: &Server, listener: &Listener) -> ViewerConfig {
    let mut config = ViewerConfig::new(listener.url());
    config.in_process = Some(server.clone());
    config
}

/// JavaScript: the panel element of a resource.
pub fn panel(resource: &str) -> String {
    format!("document.querySelector('.panel[data-resource=\"{resource}\"]')")
}

/// Clicks a resource in the page's tree (subscribing a panel to it).
pub async fn watch(browser: &mut Browser, id: &str) {
    browser
        .wait_for(
            &format!("{id} in the resource tree"),
            &format!("!!document.querySelector('li[data-id=\"{id}\"] .name')"),
        )
        .await;
    browser
        .eval(&format!(
            "document.querySelector('li[data-id=\"{id}\"] .name').click(), true"
        ))
        .await;
}

/// Clicks the button labelled `label` of `resource`'s panel.
pub async fn click(browser: &mut Browser, resource: &str, label: &str) {
    browser
        .eval(&format!(
            "[...{}.querySelectorAll('button')].find(b => b.textContent === '{label}').click(), true",
            panel(resource)
        ))
        .await;
}

/// A decoded viewer message: the header and the blob.
pub struct PageMessage {
    pub header: Json,
    pub blob: Vec<u8>,
}

impl PageMessage {
    pub fn decode(bytes: &[u8]) -> PageMessage {
        let n = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        let header: Json = serde_json::from_slice(&bytes[4..4 + n]).expect("header JSON");
        let start = (4 + n).div_ceil(8) * 8;
        PageMessage {
            header,
            blob: bytes[start..].to_vec(),
        }
    }

    pub fn kind(&self) -> &str {
        self.header["type"].as_str().unwrap_or("")
    }
}

/// Chromium's path: `UNIENV_CHROMIUM`, else `chromium` (Debian) or
/// `chromium-browser`/`google-chrome` on the PATH. `None` only when
/// `UNIENV_SKIP_BROWSER=1` (a failure with `CI=true`); otherwise a missing browser fails the test with
/// instructions.
pub fn chromium() -> Option<PathBuf> {
    if crate::common::skipped("UNIENV_SKIP_BROWSER", "the viewer's browser tests") {
        return None;
    }
    if let Some(p) = std::env::var_os("UNIENV_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    panic!(
        "Chromium is missing: the viewer's browser tests need it. Run ./scripts/test.sh \
         (as root it installs Debian's `chromium`), or `sudo apt-get install -y chromium`, \
         or point UNIENV_CHROMIUM at a Chromium/Chrome binary; UNIENV_SKIP_BROWSER=1 skips \
         these tests"
    );
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Json>>>>;

/// A headless Chromium with one page, driven over the DevTools protocol.
pub struct Browser {
    child: Child,
    profile: PathBuf,
    out: futures_util::stream::SplitSink<
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
        Message,
    >,
    pending: Pending,
    next_id: u64,
    session: Option<String>,
    reader: tokio::task::JoinHandle<()>,
}

impl Browser {
    /// Starts Chromium headless and opens `url` in a 1280×860 page.
    pub async fn open(binary: &std::path::Path, url: &str) -> Browser {
        let profile = std::env::temp_dir().join(format!(
            "unienv-viewer-chromium-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&profile).expect("profile dir");
        let mut child = Command::new(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--remote-debugging-port=0",
                "--window-size=1280,860",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start Chromium");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.find("ws://") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(line[at..].trim().to_string());
                    }
                }
            }
        });
        let devtools = tokio::task::spawn_blocking(move || rx.recv_timeout(DEADLINE))
            .await
            .expect("join")
            .expect("Chromium printed no DevTools URL");
        let (ws, _) = tokio_tungstenite::connect_async(devtools.as_str())
            .await
            .expect("connect to DevTools");
        let (out, mut input) = ws.split();
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let map = pending.clone();
        let reader = tokio::spawn(async move {
            while let Some(Ok(message)) = input.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let Ok(v) = serde_json::from_str::<Json>(text.as_str()) else {
                    continue;
                };
                if let Some(id) = v.get("id").and_then(Json::as_u64) {
                    if let Some(tx) = map.lock().await.remove(&id) {
                        let _ = tx.send(v);
                    }
                }
            }
        });
        let mut browser = Browser {
            child,
            profile,
            out,
            pending,
            next_id: 1,
            session: None,
            reader,
        };
        let target = browser
            .call("Target.createTarget", json!({ "url": "about:blank" }))
            .await;
        let target_id = target["targetId"].as_str().expect("targetId").to_string();
        let attached = browser
            .call(
                "Target.attachToTarget",
                json!({ "targetId": target_id, "flatten": true }),
            )
            .await;
        browser.session = Some(
            attached["sessionId"]
                .as_str()
                .expect("sessionId")
                .to_string(),
        );
        browser
            .call(
                "Emulation.setDeviceMetricsOverride",
                json!({ "width": 1280, "height": 860, "deviceScaleFactor": 1, "mobile": false }),
            )
            .await;
        browser.call("Page.enable", json!({})).await;
        browser.call("Page.navigate", json!({ "url": url })).await;
        browser
    }

    /// One DevTools command on the page's session; panics on an error.
    pub async fn call(&mut self, method: &str, params: Json) -> Json {
        let id = self.next_id;
        self.next_id += 1;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = &self.session {
            message["sessionId"] = json!(s);
        }
        let (tx, rx) = oneshot::channel();
        self.pending.lock().await.insert(id, tx);
        self.out
            .send(Message::text(message.to_string()))
            .await
            .expect("send to DevTools");
        let reply = tokio::time::timeout(DEADLINE, rx)
            .await
            .unwrap_or_else(|_| panic!("DevTools did not answer {method}"))
            .expect("DevTools reply");
        if let Some(error) = reply.get("error") {
            panic!("DevTools {method} failed: {error}");
        }
        reply["result"].clone()
    }

    /// Evaluates a JavaScript expression in the page (promises awaited)
    /// and returns its value; panics on an exception.
    pub async fn eval(&mut self, expression: &str) -> Json {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            )
            .await;
        if let Some(e) = r.get("exceptionDetails") {
            panic!("JavaScript failed: {expression}\n{e}");
        }
        r["result"]["value"].clone()
    }

    /// Waits (with [`DEADLINE`]) until `expression` is truthy; returns its value.
    pub async fn wait_for(&mut self, what: &str, expression: &str) -> Json {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let mut last = Json::Null;
        while tokio::time::Instant::now() < deadline {
            let r = self
                .call(
                    "Runtime.evaluate",
                    json!({ "expression": expression, "returnByValue": true }),
                )
                .await;
            last = r["result"]["value"].clone();
            let truthy = match &last {
                Json::Null => false,
                Json::Bool(b) => *b,
                Json::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
                Json::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let page = self
            .eval("document.body ? document.body.innerText.slice(0, 3000) : ''")
            .await;
        panic!(
            "timed out waiting for {what}: {expression} (last value {last})\npage text:\n{page}"
        );
    }

    /// Whether `expression` becomes true within `within` (polled).
    pub async fn poll(&mut self, expression: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self.eval(expression).await == Json::Bool(true) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A PNG screenshot of the page.
    pub async fn screenshot(&mut self) -> Vec<u8> {
        let r = self
            .call("Page.captureScreenshot", json!({ "format": "png" }))
            .await;
        unienv_remote::cli::base64_decode(r["data"].as_str().expect("screenshot data"))
            .expect("base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.reader.abort();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// A page's socket to the viewer.
pub type PageSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the viewer's page socket as its page does: `/ws` with the page's
/// own Origin, and the key in `page_url` (the URL the viewer prints,
/// `http://HOST:PORT/` or `http://HOST:PORT/?key=KEY`) when it has one.
pub async fn open_page(
    page_url: &str,
) -> Result<PageSocket, tokio_tungstenite::tungstenite::Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let rest = page_url.trim_start_matches("http://");
    let host = rest.split(['/', '?']).next().unwrap_or(rest);
    let key = rest
        .split_once("key=")
        .map(|(_, k)| k.split('&').next().unwrap_or(k));
    let url = match key {
        Some(k) => format!("ws://{host}/ws?key={k}"),
        None => format!("ws://{host}/ws"),
    };
    let mut request = url.into_client_request()?;
    request.headers_mut().insert(
        "Origin",
        format!("http://{host}").parse().expect("an origin header"),
    );
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(ws, _)| ws)
}
