//! `serve`: its options, hosting the built-in simulators (or the
//! conformance fixtures), the banner of how to connect, and `--batch`.

use super::placement;
use super::shared::{fail, interrupted, STARTUP_SPAN};
use super::view;
use crate::codec::{Codec, DEFAULT_MAX_MESSAGE_SIZE};
use crate::server::{ListenError, Server, ServerConfig};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The default address of `serve`.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8765";

/// `serve --record-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordFormatArg {
    /// `NPZStorage`: one file per transition (loads with unienv alone).
    Npz,
    /// `ParquetStorage`: pieces of many transitions (the default; loading needs pyarrow).
    Parquet,
}

/// Options of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = DEFAULT_ADDR)]
    pub addr: String,
    /// Require `Authorization: Bearer TOKEN` from clients. A token on the
    /// command line is visible to every local user (`ps`): prefer
    /// --token-file or the UNIENV_TOKEN environment variable.
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// Read the token from FILE (its first line; keep the file readable by
    /// you only). Without --token or --token-file, the token is taken from
    /// the UNIENV_TOKEN environment variable when it is set.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Dispose idle factory-built simulators after SECONDS (0 disables).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub idle_timeout: f64,
    /// Largest message in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MESSAGE_SIZE)]
    pub max_message_size: usize,
    /// Hold a response up to MICROSECONDS for the same session's other
    /// requests still at simulators, to write them together (0 writes each
    /// at once; SPEC.md section 8.4).
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 500)]
    pub reply_hold_us: u64,
    /// Also accept this browser origin (repeatable; `*` allows any).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Also accept this Host header name (repeatable), e.g. when serving on a LAN name.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Most simultaneous connections.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Host the conformance fixture registry instead of the built-in simulators.
    #[arg(long)]
    pub fixtures: bool,
    /// Host N independent instances of each built-in simulator, as ID-0 …
    /// ID-(N-1) (cartpole-0, cartpole-1, …): one per trainer, or per env of a vector client.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub copies: usize,
    /// Host each built-in env simulator (cartpole, pointmass) as one batched
    /// env of N instances (batch_size N: one request steps all N; pointmass's
    /// world and nodes are then not exported). The gripper stays as it is.
    #[arg(long, value_name = "N")]
    pub batch: Option<usize>,
    /// Pass actions to the simulators unchecked. By default `serve` checks each
    /// action against the action space (dtype, shape, bounds, finiteness) and
    /// refuses a bad one with a message naming the element and the bound.
    #[arg(long)]
    pub no_validate_actions: bool,
    /// Also serve the browser viewer of this server, on ADDR (default 127.0.0.1:8766).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = crate::viewer::DEFAULT_LISTEN)]
    pub viewer: Option<String>,
    /// Serve TLS (wss://) with the certificate chain in FILE (PEM, leaf first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Record every env transition into DIR/<resource_id>/: a unienv_data
    /// ReplayBuffer per env (per sub-env of a batched env), one segment per episode,
    /// in the format of --record-format.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// The storage of --record's buffers: parquet (the default: unienv_data's
    /// ParquetStorage, pieces of many transitions; loading it needs pyarrow
    /// beside unienv, `pip install pyarrow`) or npz (one file per transition,
    /// far dearer to write; loads with unienv alone).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        default_value = "parquet",
        requires = "record"
    )]
    pub record_format: RecordFormatArg,
    /// With --record: the most bytes of transitions waiting for the writer
    /// (the simulators wait for the disk beyond it; SPEC section 10.2).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = crate::record::DEFAULT_QUEUE_BYTES,
        requires = "record"
    )]
    pub record_queue_bytes: usize,
    /// Serve metrics in the Prometheus text format at http://ADDR/metrics
    /// (no authentication: keep ADDR on loopback or a monitoring network).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Listen on the Unix domain socket PATH instead of --addr (clients on
    /// this machine connect to ws+unix://PATH); the socket file is made
    /// owner-only and removed at exit, a stale one replaced.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["addr", "tls_cert"])]
    pub unix: Option<PathBuf>,
    /// Run the server's threads on these CPUs only (0, 0,1 or 0-3). With several server
    /// processes beside a learner on one machine, one server process per vCPU (learner unpinned)
    /// steps faster, the more so the busier the machine (BENCHMARKS.md, "Vector envs and throughput").
    #[arg(long, value_name = "LIST", value_parser = placement::parse_cpus)]
    pub cpus: Option<placement::CpuList>,
    /// Dialing a relay (--dial, --name, --host-token, --no-listen); boxed,
    /// as the largest subcommand's options.
    #[command(flatten)]
    pub dial: Box<super::relay::DialArgs>,
}

/// `serve`: registers the simulators, listens, prints how to connect, and
/// shuts down cleanly on Ctrl-C (simulators closed, threads joined).
pub fn serve(args: ServeArgs) -> ExitCode {
    if !(args.idle_timeout.is_finite() && args.idle_timeout >= 0.0) {
        return fail("--idle-timeout must be a non-negative number of seconds");
    }
    if args.max_message_size < crate::codec::MIN_MAX_MESSAGE_SIZE {
        return fail("--max-message-size must be at least 8");
    }
    if args.copies == 0 {
        return fail("--copies must be at least 1");
    }
    if args.fixtures && args.copies != 1 {
        return fail("--copies applies to the built-in simulators, not to --fixtures");
    }
    if args.batch == Some(0) || (args.fixtures && args.batch.is_some()) {
        return fail("--batch takes at least 1, and applies to the built-in simulators only");
    }
    if let Err(e) = super::relay::check_dial(&args.dial) {
        return fail(e);
    }
    // An empty token (`--token "$UNSET"`) would otherwise turn
    // authentication off while the banner asks for a token.
    let token =
        match super::shared::resolve_token(args.token.as_deref(), args.token_file.as_deref()) {
            Ok(token) => token,
            Err(e) => return fail(e),
        };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => match crate::transport::ServerTls::from_pem_files(cert, key) {
            Ok(tls) => Some(tls),
            Err(e) => return fail(format!("--tls-cert/--tls-key: {e}")),
        },
        _ => None,
    };
    if let Some(dir) = &args.record {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return fail(format!("--record {}: {e}", dir.display()));
        }
    }
    let config = ServerConfig {
        tls,
        record_dir: args.record.clone(),
        record_format: match args.record_format {
            RecordFormatArg::Npz => crate::record::RecordFormat::Npz,
            RecordFormatArg::Parquet => crate::record::RecordFormat::parquet(),
        },
        record_queue_bytes: args.record_queue_bytes,
        metrics_addr: args.metrics.clone(),
        cpus: args.cpus.clone(),
        max_message_size: args.max_message_size,
        reply_hold: (args.reply_hold_us > 0).then(|| Duration::from_micros(args.reply_hold_us)),
        idle_timeout: (args.idle_timeout > 0.0).then(|| Duration::from_secs_f64(args.idle_timeout)),
        max_connections: args.max_connections,
        token: token.clone(),
        allowed_origins: args.allow_origin.clone(),
        allowed_hosts: args.allow_host.clone(),
        // The fixtures reproduce the reference, which passes actions through.
        validate_actions: !args.fixtures && !args.no_validate_actions,
        ..ServerConfig::default()
    };
    let mut builder = Server::builder(config);
    let registered: Result<(), String> = if args.fixtures {
        crate::fixtures::register(&mut builder).map_err(|e| e.to_string())
    } else if let Some(n) = args.batch {
        register_batched(&mut builder, args.copies, n)
    } else {
        crate::sims::register_copies(&mut builder, args.copies).map_err(|e| e.to_string())
    };
    if let Err(e) = registered {
        return fail(e);
    }
    let server = match builder.start() {
        Ok(server) => server,
        Err(e) => return fail(format!("invalid server configuration: {e}")),
    };
    let runtime = match placement::runtime(args.cpus.as_deref()) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    runtime.block_on(async move {
        if args.dial.no_listen {
            return super::relay::serve_dial_only(server, &args.dial).await;
        }
        let listening = match &args.unix {
            Some(path) => server.listen_unix(path).await,
            None => server.listen(args.addr.as_str()).await,
        };
        let listener = match listening {
            Ok(l) => l,
            Err(e) if matches!(ListenError::of(&e), Some(ListenError::BindUnix { .. })) => {
                return fail(e)
            }
            // A bind error names the resolved addresses; an unresolvable
            // address is named here.
            Err(e) if matches!(ListenError::of(&e), Some(ListenError::Bind { .. })) => {
                return fail(e)
            }
            Err(e) => return fail(format!("cannot listen on {}: {e}", args.addr)),
        };
        // Install the signal handlers before announcing the URL, so that a
        // Ctrl-C right after the banner still shuts down cleanly.
        let stop = match interrupted() {
            Ok(stop) => stop,
            Err(e) => return fail(format!("cannot install the Ctrl-C handler: {e}")),
        };
        print_banner(&server, &listener, token.is_some(), args.fixtures).await;
        let _dial = match super::relay::start_dial(&server, &args.dial) {
            Ok(d) => d,
            Err(e) => return fail(e),
        };
        if let Some(dir) = &args.record {
            say!("Recording every env transition into {}", dir.display());
        }
        if let Some(url) = server.metrics_url() {
            say!("Metrics: {url}");
        }
        let _viewer = match &args.viewer {
            Some(addr) => {
                // In process: no token, certificate or connection slot
                // stands between the viewer and its own server (TLS with a
                // private CA included).
                let mut config = crate::viewer::ViewerConfig::new(listener.url());
                config.in_process = Some(server.clone());
                config.allowed_hosts = args.allow_host.clone();
                config.allowed_origins = args.allow_origin.clone();
                match crate::viewer::Viewer::start(addr, config).await {
                    Ok(v) => {
                        say!("Viewer: open {} in a browser", v.url());
                        let roots = server.roots();
                        let ids: Vec<&str> = roots.iter().take(3).map(String::as_str).collect();
                        if !ids.is_empty() {
                            say!("  panels directly: {}", v.watch_url(&ids));
                        }
                        view::warn_beyond_loopback(&v);
                        Some(v)
                    }
                    Err(e) => return fail(e),
                }
            }
            None => None,
        };
        stop.await;
        eprintln!("\nshutting down: closing simulators…");
        server.shutdown().await;
        eprintln!("stopped");
        ExitCode::SUCCESS
    })
}

/// The URLs clients can use for a listener bound to `addr`: itself, or for
/// an unspecified address (`0.0.0.0`, `::`) loopback and this machine's
/// outward address, each with who can use it. `scheme` is `ws` or `wss`.
pub fn client_urls(scheme: &str, addr: std::net::SocketAddr) -> Vec<(String, &'static str)> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
    let url = |ip: IpAddr| match ip {
        IpAddr::V6(ip) => format!("{scheme}://[{ip}]:{}", addr.port()),
        IpAddr::V4(ip) => format!("{scheme}://{ip}:{}", addr.port()),
    };
    if !addr.ip().is_unspecified() {
        return vec![(url(addr.ip()), "")];
    }
    let (loopback, probe): (IpAddr, SocketAddr) = if addr.is_ipv4() {
        (
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            SocketAddr::from(([192, 0, 2, 1], 9)),
        )
    } else {
        (
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            SocketAddr::from((Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 9)),
        )
    };
    let mut urls = vec![(url(loopback), "this machine")];
    // Connecting a UDP socket sends nothing: it only asks the kernel which
    // local address routes outwards (to a documentation-only address).
    let outward = UdpSocket::bind(SocketAddr::new(addr.ip(), 0))
        .and_then(|s| s.connect(probe).and_then(|_| s.local_addr()))
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    if let Some(ip) = outward {
        urls.push((url(ip), "other machines"));
    }
    urls
}

/// The first lines of the `serve` banner: where clients connect, and for an
/// unspecified address (`0.0.0.0`) every usable URL and, without a token, a
/// warning.
pub fn banner_head(
    what: &str,
    addr: std::net::SocketAddr,
    urls: &[(String, &str)],
    token: bool,
) -> Vec<String> {
    let version = env!("CARGO_PKG_VERSION");
    if !addr.ip().is_unspecified() {
        let url = urls.first().map_or("?", |(u, _)| u.as_str());
        return vec![format!("unienv-remote {version} serving {what} on {url}")];
    }
    let mut lines = vec![format!(
        "unienv-remote {version} serving {what} on all interfaces ({addr}); clients connect to:"
    )];
    for (u, who) in urls {
        lines.push(format!("  {u}  ({who})"));
    }
    if !token {
        lines.push(
            "warning: no --token: anyone who can reach this port can control the simulators; start with --token TOKEN"
                .into(),
        );
    }
    lines
}

/// For a non-loopback bind, the DNS names clients may use (besides IP
/// addresses) and the flag that accepts any other.
pub fn host_names_line(addr: std::net::SocketAddr, names: &[String]) -> Option<String> {
    if addr.ip().is_loopback() {
        return None;
    }
    Some(if names.is_empty() {
        "  (clients connect by IP address; a client using a DNS name needs --allow-host NAME)"
            .into()
    } else {
        format!(
            "  (clients may also use this machine's names: {}; any other DNS name needs --allow-host NAME)",
            names.join(", ")
        )
    })
}

async fn print_banner(
    server: &Server,
    listener: &crate::server::Listener,
    token: bool,
    fixtures: bool,
) {
    let addr = listener.local_addr();
    let tls = listener.is_tls();
    let what = if fixtures {
        "the conformance fixture registry"
    } else {
        "the built-in simulators"
    };
    let urls = match listener.unix_path() {
        Some(_) => vec![(listener.url(), "this machine")],
        None => client_urls(if tls { "wss" } else { "ws" }, addr),
    };
    let url = urls[0].0.clone();
    if listener.unix_path().is_some() {
        let version = env!("CARGO_PKG_VERSION");
        say!("unienv-remote {version} serving {what} on {url}");
    } else {
        for line in banner_head(what, addr, &urls, token) {
            say!("{line}");
        }
    }
    let host_names = listener.host_names();
    if let Some(line) = host_names_line(addr, host_names).filter(|_| listener.unix_path().is_none())
    {
        say!("{line}");
    }
    if addr.ip().is_unspecified() && !token && listener.unix_path().is_none() {
        tracing::warn!(%addr, "listening on all interfaces without a token");
    }
    tracing::info!(%url, "serving");
    let descriptors =
        tracing::Instrument::instrument(describe_eager(server), tracing::info_span!(STARTUP_SPAN))
            .await;
    for root in server.roots().iter().filter(|r| server.is_lazy(r)) {
        say!("  lazy  {root}  (built on first use, disposed when idle)");
    }
    for d in &descriptors {
        let id = d.get("id").and_then(crate::Value::as_str).unwrap_or("?");
        let kind = d.get("kind").and_then(crate::Value::as_str).unwrap_or("?");
        let space = |key: &str, label: &str| {
            d.get(key)
                .and_then(|s| crate::host::Space::from_value(s).ok())
                .map(|s| format!("  {label} {s}"))
                .unwrap_or_default()
        };
        let act = space("action_space", "action");
        let obs = space("observation_space", "observation");
        say!("  {kind:5} {id}{act}{obs}");
    }
    if server.config().validate_actions {
        say!("Actions are checked against the action spaces (--no-validate-actions to pass them unchecked).");
    }
    if tls {
        say!("TLS: clients verify the certificate against the system's roots; for a private CA or a self-signed certificate pass --ca-file FILE (Python reference: WebSocketTransport.connect(url, ssl=ssl.create_default_context(cafile=FILE))).");
    }
    let header = if token {
        ", additional_headers={\"Authorization\": \"Bearer <TOKEN>\"}"
    } else {
        ""
    };
    let first_env = descriptors
        .iter()
        .find(|d| d.get("kind").and_then(crate::Value::as_str) == Some("env"))
        .and_then(|d| d.get("id").and_then(crate::Value::as_str))
        .unwrap_or("cartpole")
        .to_string();
    let token_flag = if token { " --token <TOKEN>" } else { "" };
    say!();
    if listener.unix_path().is_some() {
        // The reference's client speaks TCP only: our package's client.
        let token_arg = if token { ", token=\"<TOKEN>\"" } else { "" };
        say!("Python (the unienv_remote package):");
        say!("  from unienv_remote import RemoteClient");
        say!("  client = RemoteClient(\"{url}\"{token_arg})");
    } else if token {
        say!("Python (pip install \"unienv[network]==0.0.1b14\"):");
        say!("  from unienv_interface.remote import RemoteClient, WebSocketTransport");
        say!("  client = RemoteClient(WebSocketTransport.connect(\"{url}\"{header}))");
    } else {
        say!("Python (pip install \"unienv[network]==0.0.1b14\"):");
        say!("  from unienv_interface.remote import RemoteClient");
        say!("  client = RemoteClient.connect(\"{url}\")");
    }
    say!("  env = client.env(\"{first_env}\"); context, obs, info = env.reset(seed=0)");
    say!();
    say!("Rust: unienv_remote::client::blocking::Client::connect(\"{url}\", Default::default())");
    say!("Try:  unienv-remote call {url} {first_env} reset{token_flag}");
    say!("Watch: unienv-remote watch {url} {first_env}{token_flag}");
    say!("Press Ctrl-C to stop.");
}

/// The descriptors of every eager registration, through an in-memory
/// session (factories stay pending).
async fn describe_eager(server: &Server) -> Vec<crate::Value> {
    use crate::codec::Value;
    let codec = Codec::default();
    let mut t = server.connect_memory();
    let request = |op: &str, session: &Value, resource: Option<&str>| {
        let d = crate::protocol::request_envelope(op, op, session, resource);
        codec.encode(&Value::Dict(d)).map(bytes::Bytes::from)
    };
    let mut result = Vec::new();
    let Ok(hello) = request("hello", &Value::Null, None) else {
        return result;
    };
    if t.send(hello).await.is_err() {
        return result;
    }
    let session = match t.recv().await.map(|f| codec.decode(f)) {
        Ok(Ok(v)) => v
            .get("result")
            .and_then(|r| r.get("session_id"))
            .cloned()
            .unwrap_or_default(),
        _ => return result,
    };
    for root in server.roots().iter().filter(|r| !server.is_lazy(r)) {
        let Ok(describe) = request("describe", &session, Some(root)) else {
            continue;
        };
        if t.send(describe).await.is_err() {
            break;
        }
        if let Ok(Ok(v)) = t.recv().await.map(|f| codec.decode(f)) {
            if let Some(list) = v.get("result").and_then(Value::as_seq) {
                result.extend(list.iter().cloned());
            }
        }
    }
    result
}

/// `serve --batch N`: each built-in env simulator (cartpole, pointmass) as a
/// [`BatchedEnv`](crate::host::BatchedEnv) of `n`, `copies` times (IDs as
/// [`copy_id`](crate::sims::copy_id)); the gripper as usual.
fn register_batched(
    builder: &mut crate::server::ServerBuilder,
    copies: usize,
    n: usize,
) -> Result<(), String> {
    use crate::host::BatchedEnv;
    use crate::sims::{copy_id, make_pointmass, CartPole, Gripper};
    let err = |e: &dyn std::fmt::Display| e.to_string();
    for i in 0..copies {
        let batch =
            BatchedEnv::new((0..n).map(|_| CartPole::new()).collect()).map_err(|e| err(&e))?;
        builder
            .register_env(&copy_id("cartpole", i, copies), batch)
            .map_err(|e| err(&e))?;
    }
    for i in 0..copies {
        // Built on its domain's thread (a world env is not Send).
        builder
            .register_with(&copy_id("pointmass", i, copies), move || {
                let sims = (0..n)
                    .map(|_| make_pointmass())
                    .collect::<Result<Vec<_>, _>>()?;
                BatchedEnv::new(sims).map(crate::server::Hosted::env)
            })
            .map_err(|e| err(&e))?;
    }
    for i in 0..copies {
        builder
            .register_node(&copy_id("gripper", i, copies), Gripper::new())
            .map_err(|e| err(&e))?;
    }
    Ok(())
}

#[cfg(test)]
mod batch_tests {
    use crate::cli::serve::register_batched;
    use crate::server::{Server, ServerConfig};

    /// `serve --batch 3 --copies 2`: the env simulators are batches of 3
    /// under the usual IDs, the gripper unchanged.
    #[tokio::test]
    async fn serve_batch_hosts_batches_of_the_env_simulators() {
        let mut builder = Server::builder(ServerConfig::default());
        register_batched(&mut builder, 2, 3).expect("register");
        let server = builder.start().expect("a valid server configuration");
        assert_eq!(
            server.roots(),
            [
                "cartpole-0",
                "cartpole-1",
                "pointmass-0",
                "pointmass-1",
                "gripper-0",
                "gripper-1"
            ]
        );
        let client = crate::client::Client::over_memory(
            server.connect_memory(),
            crate::client::ClientConfig::default(),
        )
        .await
        .expect("connect");
        let cartpole = client.env("cartpole-1").await.expect("cartpole");
        assert_eq!(cartpole.batch_size(), Some(3));
        let pointmass = client.env("pointmass-0").await.expect("pointmass");
        assert_eq!(pointmass.batch_size(), Some(3));
        let r = cartpole
            .reset(crate::host::ResetArgs::with_seed(1))
            .await
            .expect("reset");
        assert_eq!(
            r.observation.as_array().map(|a| a.shape().to_vec()),
            Some(vec![3, 4])
        );
        client.close().await;
        server.shutdown().await;
    }
}

#[cfg(test)]
mod banner_tests {
    use crate::cli::serve::{banner_head, client_urls, host_names_line};

    #[test]
    fn all_interfaces_name_usable_addresses_and_warn_without_a_token() {
        let any: std::net::SocketAddr = "0.0.0.0:8765".parse().expect("addr");
        let urls = client_urls("ws", any);
        assert_eq!(urls[0], ("ws://127.0.0.1:8765".to_string(), "this machine"));
        assert!(urls.iter().all(|(u, _)| !u.contains("0.0.0.0")), "{urls:?}");
        let lines = banner_head("the built-in simulators", any, &urls, false);
        assert!(
            lines[0].contains("on all interfaces (0.0.0.0:8765)"),
            "{lines:?}"
        );
        assert_eq!(lines[1], "  ws://127.0.0.1:8765  (this machine)");
        assert!(
            lines.iter().any(|l| l.starts_with("warning: no --token")),
            "{lines:?}"
        );
        let with_token = banner_head("the built-in simulators", any, &urls, true);
        assert!(
            !with_token.iter().any(|l| l.contains("warning")),
            "{with_token:?}"
        );

        let names = ["vm".to_string(), "vm.lab.example".to_string()];
        assert_eq!(
            host_names_line(any, &names).as_deref(),
            Some("  (clients may also use this machine's names: vm, vm.lab.example; any other DNS name needs --allow-host NAME)")
        );
        assert!(host_names_line(any, &[]).is_some_and(|l| l.contains("--allow-host NAME")));

        let local: std::net::SocketAddr = "127.0.0.1:9".parse().expect("addr");
        assert_eq!(host_names_line(local, &names), None);
        let urls = client_urls("ws", local);
        assert_eq!(client_urls("wss", local)[0].0, "wss://127.0.0.1:9");
        assert_eq!(urls, [("ws://127.0.0.1:9".to_string(), "")]);
        assert_eq!(
            banner_head("x", local, &urls, false),
            [format!(
                "unienv-remote {} serving x on ws://127.0.0.1:9",
                env!("CARGO_PKG_VERSION")
            )]
        );
    }
}
