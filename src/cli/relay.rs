//! `relay` (hosts that dial out register at it; clients reach them through
//! it), `serve --dial` (a host dialing a relay), and `discover` given a
//! relay's URL (its connected hosts instead of a server's resources).

use super::shared::{
    fail, interrupted, resolve_token_of, write_out, ClientArgs, CLIENT_TOKEN, HOST_TOKEN,
};
use crate::codec::DEFAULT_MAX_MESSAGE_SIZE;
use crate::relay::{Relay, RelayConfig};
use crate::server::{DialHandle, DialOptions, Server, ServerConfig};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The default address of `relay`.
pub const DEFAULT_RELAY_ADDR: &str = "127.0.0.1:8770";

/// Options of `relay`.
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address to listen on (hosts and clients alike).
    #[arg(long, default_value = DEFAULT_RELAY_ADDR)]
    pub addr: String,
    /// Require `Authorization: Bearer TOKEN` from clients (and for the listing).
    /// A token on the command line is visible to every local user (`ps`):
    /// prefer --token-file or the UNIENV_TOKEN environment variable.
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the client token from FILE (its first line; keep the file
    /// readable by you only). Without --token or --token-file, the token is
    /// taken from UNIENV_TOKEN when set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Require `Authorization: Bearer TOKEN` from hosts (`serve --dial … --host-token TOKEN`).
    /// Visible to every local user too: prefer --host-token-file or UNIENV_HOST_TOKEN.
    #[arg(long, value_name = "TOKEN", conflicts_with = "host_token_file")]
    pub host_token: Option<String>,
    /// Read the host token from FILE (its first line). Without --host-token
    /// or --host-token-file, it is taken from UNIENV_HOST_TOKEN when set.
    #[arg(long, value_name = "FILE")]
    pub host_token_file: Option<PathBuf>,
    /// Largest forwarded message in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MESSAGE_SIZE)]
    pub max_message_size: usize,
    /// Also accept this browser origin (repeatable; `*` allows any).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Also accept this Host header name (repeatable), e.g. when relaying on a LAN name.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Most simultaneous connections (hosts' control and tunnel connections, and clients).
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Most registered hosts.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub max_hosts: usize,
    /// Most clients waiting for a tunnel of one host.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_pending_per_host: usize,
    /// Seconds a client waits for its host to open the tunnel (then HTTP 504).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub open_timeout: f64,
    /// Serve TLS (wss://) with the certificate chain in FILE (PEM, leaf first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Also serve the browser viewer of the relay's hosts, on ADDR (default
    /// 127.0.0.1:8766): its page lists the connected hosts, each watched
    /// through the relay (as `unienv-remote view ws://RELAY/`).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = crate::viewer::DEFAULT_LISTEN)]
    pub viewer: Option<String>,
}

/// The options of `serve` that make it dial a relay.
#[derive(Debug, Clone, Args)]
pub struct DialArgs {
    /// Dial the relay at URL (ws:// or wss://) and serve the clients it
    /// forwards, re-dialing after any loss; `serve` listens too unless --no-listen.
    #[arg(long, value_name = "URL", requires = "name")]
    pub dial: Option<String>,
    /// The name to register at the relay (clients connect to URL/hosts/NAME).
    #[arg(long, value_name = "NAME", requires = "dial")]
    pub name: Option<String>,
    /// The relay's host token (its --host-token). Visible to every local
    /// user (`ps`): prefer --host-token-file or UNIENV_HOST_TOKEN.
    #[arg(
        long,
        value_name = "TOKEN",
        requires = "dial",
        conflicts_with = "host_token_file"
    )]
    pub host_token: Option<String>,
    /// Read the relay's host token from FILE (its first line). Without
    /// --host-token or --host-token-file, it is taken from UNIENV_HOST_TOKEN when set.
    #[arg(long, value_name = "FILE", requires = "dial")]
    pub host_token_file: Option<PathBuf>,
    /// For a wss:// relay: also trust the CA certificates in FILE (PEM).
    #[arg(long, value_name = "FILE", requires = "dial")]
    pub relay_ca_file: Option<PathBuf>,
    /// With --dial: do not listen; the host makes outbound connections only.
    #[arg(long, requires = "dial", conflicts_with_all = ["viewer", "unix"])]
    pub no_listen: bool,
}

fn positive_seconds(value: f64, flag: &str) -> Result<Duration, String> {
    if value.is_finite() && value > 0.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(format!("{flag} must be a positive number of seconds"))
    }
}

/// The host token of `serve --dial`: --host-token, --host-token-file or
/// UNIENV_HOST_TOKEN.
fn dial_host_token(args: &DialArgs) -> Result<Option<String>, String> {
    resolve_token_of(
        &HOST_TOKEN,
        args.host_token.as_deref(),
        args.host_token_file.as_deref(),
    )
}

/// The relay's configuration from its options.
pub fn relay_config(args: &RelayArgs) -> Result<RelayConfig, String> {
    let token = resolve_token_of(
        &CLIENT_TOKEN,
        args.token.as_deref(),
        args.token_file.as_deref(),
    )?;
    let host_token = resolve_token_of(
        &HOST_TOKEN,
        args.host_token.as_deref(),
        args.host_token_file.as_deref(),
    )?;
    if args.max_message_size < crate::codec::MIN_MAX_MESSAGE_SIZE {
        return Err("--max-message-size must be at least 8".into());
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(
            crate::transport::ServerTls::from_pem_files(cert, key)
                .map_err(|e| format!("--tls-cert/--tls-key: {e}"))?,
        ),
        _ => None,
    };
    let config = RelayConfig {
        listen: ServerConfig {
            tls,
            max_message_size: args.max_message_size,
            max_connections: args.max_connections,
            token,
            allowed_origins: args.allow_origin.clone(),
            allowed_hosts: args.allow_host.clone(),
            ..ServerConfig::default()
        },
        host_token,
        max_hosts: args.max_hosts,
        max_pending_opens_per_host: args.max_pending_per_host,
        open_timeout: positive_seconds(args.open_timeout, "--open-timeout")?,
        ..RelayConfig::default()
    };
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

/// `relay`: listens, prints where hosts dial and clients connect, and
/// relays until Ctrl-C.
pub fn relay(args: RelayArgs) -> ExitCode {
    let config = match relay_config(&args) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let (has_token, has_host_token) = (config.listen.token.is_some(), config.host_token.is_some());
    let client_token = config.listen.token.clone();
    runtime.block_on(async move {
        let relay = match Relay::start(args.addr.as_str(), config).await {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
        let stop = match interrupted() {
            Ok(stop) => stop,
            Err(e) => return fail(format!("cannot install the Ctrl-C handler: {e}")),
        };
        let url = relay.url();
        say!(
            "unienv-remote {} relay on {url}",
            env!("CARGO_PKG_VERSION")
        );
        say!("  hosts dial it:       unienv-remote serve --dial {url} --name NAME");
        say!("  clients connect to:  {url}/hosts/NAME");
        say!("  connected hosts:     unienv-remote discover {url}/   (or GET {}/hosts)", url.replacen("ws", "http", 1));
        if !has_token {
            say!("warning: no --token: anyone who can reach this port can reach the hosts' simulators");
        }
        if !has_host_token {
            say!("warning: no --host-token: anyone who can reach this port can register a host");
        }
        let _viewer = match &args.viewer {
            Some(addr) => {
                // A client of the relay like any other: its client token,
                // and for TLS its own certificate as the CA to trust.
                let mut config = crate::viewer::ViewerConfig::new(&url);
                config.relay = true;
                config.client.token = client_token;
                config.client.ca_file = args.tls_cert.clone();
                config.allowed_hosts = args.allow_host.clone();
                config.allowed_origins = args.allow_origin.clone();
                match crate::viewer::Viewer::start(addr, config).await {
                    Ok(v) => {
                        say!("Viewer of the relay's hosts: open {} in a browser", v.url());
                        super::view::warn_beyond_loopback(&v);
                        Some(v)
                    }
                    Err(e) => return fail(e),
                }
            }
            None => None,
        };
        stop.await;
        eprintln!("\nshutting down the relay…");
        relay.shutdown().await;
        eprintln!("stopped");
        ExitCode::SUCCESS
    })
}

/// Checks `serve --dial`'s options before anything starts: the name, the
/// URL's scheme, a non-empty host token.
pub fn check_dial(args: &DialArgs) -> Result<(), String> {
    let (Some(url), Some(name)) = (&args.dial, &args.name) else {
        return Ok(());
    };
    crate::relay::validate_name(name).map_err(|e| format!("--name: {e}"))?;
    if !(url.starts_with("ws://") || url.starts_with("wss://")) {
        return Err(format!(
            "--dial {url}: a relay's URL is ws://HOST:PORT or wss://HOST:PORT"
        ));
    }
    dial_host_token(args).map(|_| ())
}

/// Starts dialing the relay of `args` (`serve --dial`), when given.
pub fn start_dial(server: &Server, args: &DialArgs) -> Result<Option<DialHandle>, String> {
    let (Some(url), Some(name)) = (&args.dial, &args.name) else {
        return Ok(None);
    };
    let mut options = DialOptions::new(name.clone());
    options.token = dial_host_token(args)?;
    options.ca_file = args.relay_ca_file.clone();
    let handle = server
        .dial(url, options)
        .map_err(|e| format!("--dial: {e}"))?;
    say!(
        "Dialing the relay {url} as '{name}': clients connect to {}/hosts/{name}",
        url.trim_end_matches('/')
    );
    Ok(Some(handle))
}

/// `serve --dial URL --name NAME --no-listen`: dials only, until Ctrl-C.
pub async fn serve_dial_only(server: Server, args: &DialArgs) -> ExitCode {
    let stop = match interrupted() {
        Ok(stop) => stop,
        Err(e) => return fail(format!("cannot install the Ctrl-C handler: {e}")),
    };
    say!(
        "unienv-remote {} serving {} resources through a relay (not listening)",
        env!("CARGO_PKG_VERSION"),
        server.roots().len()
    );
    let _dial = match start_dial(&server, args) {
        Ok(d) => d,
        Err(e) => {
            server.shutdown().await;
            return fail(e);
        }
    };
    stop.await;
    eprintln!("\nshutting down: closing simulators…");
    server.shutdown().await;
    eprintln!("stopped");
    ExitCode::SUCCESS
}

/// `discover` given a relay's URL: the connected hosts (name, version,
/// clients, time connected, URL, resources), or with `--json` the same as
/// a JSON array.
pub(super) async fn discover_hosts(client: &ClientArgs, json: bool) -> ExitCode {
    let timeout = if client.timeout.is_finite() && client.timeout > 0.0 {
        Duration::from_secs_f64(client.timeout)
    } else {
        Duration::from_secs(3600)
    };
    let url = &client.url;
    let tls = if url.starts_with("wss://") {
        match crate::transport::tls::client_config(client.ca_file.as_deref()) {
            Ok(t) => Some(t),
            Err(e) => return fail(e),
        }
    } else {
        None
    };
    let hosts = match crate::relay::list_hosts(url, client.token.as_deref(), tls, timeout).await {
        Ok(h) => h,
        Err(e) => return fail(format!("cannot list the relay's hosts: {e}")),
    };
    if json {
        let list: Vec<serde_json::Value> = hosts
            .iter()
            .map(|h| {
                serde_json::json!({
                    "name": h.identity.name,
                    "url": format!("{}/hosts/{}", url.trim_end_matches('/'), h.identity.name),
                    "server": h.identity.server,
                    "version": h.identity.version,
                    "resources": h.identity.resources,
                    "clients": h.clients,
                    "connected_s": h.connected_for.as_secs_f64(),
                })
            })
            .collect();
        write_out(format_args!("{}\n", serde_json::Value::Array(list)));
        return ExitCode::SUCCESS;
    }
    write_out(format_args!(
        "unienv-remote relay at {url}: {} host{} connected\n",
        hosts.len(),
        if hosts.len() == 1 { "" } else { "s" }
    ));
    write_out(format_args!("{}", host_table(url, &hosts)));
    ExitCode::SUCCESS
}

/// The relay's `discover` table: one row per host.
fn host_table(url: &str, hosts: &[crate::relay::HostInfo]) -> String {
    let header = ["NAME", "VERSION", "CLIENTS", "UP", "URL", "RESOURCES"];
    let rows: Vec<[String; 6]> = hosts
        .iter()
        .map(|h| {
            [
                h.identity.name.clone(),
                format!("{} {}", h.identity.server, h.identity.version),
                h.clients.to_string(),
                format!("{:.0}s", h.connected_for.as_secs_f64()),
                format!("{}/hosts/{}", url.trim_end_matches('/'), h.identity.name),
                h.identity.resources.join(", "),
            ]
        })
        .collect();
    super::pretty::table(header, &rows, [false, false, true, true, false, false])
}
