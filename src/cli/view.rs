//! `view`: the browser viewer of a UniEnv server.

use super::shared::{fail, interrupted, ClientArgs};
use crate::client::ClientConfig;
use crate::viewer::{Viewer, ViewerConfig, DEFAULT_LISTEN};
use clap::Args;
use std::process::ExitCode;

/// Options of `view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// Connection options (the viewer holds the token; the page never sees it).
    #[command(flatten)]
    pub client: ClientArgs,
    /// Address of the viewer's web app (loopback by default).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// Also accept this Host header name (repeatable), e.g. when serving on a LAN name.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Also accept WebSocket connections from this browser origin (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
}

/// The viewer configuration of `view`: the upstream server, how to reach it
/// (`client`, from the connection options), and whom the web app serves.
pub fn viewer_config(args: &ViewArgs, client: ClientConfig) -> ViewerConfig {
    let mut config = ViewerConfig::new(&args.client.url);
    config.client = client;
    config.allowed_hosts = args.allow_host.clone();
    config.allowed_origins = args.allow_origin.clone();
    config
}

/// `view`: serves the viewer until Ctrl-C.
pub fn view(args: ViewArgs) -> ExitCode {
    let client = match args.client.config(false) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let mut config = viewer_config(&args, client.clone());
    let client_config = client;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    runtime.block_on(async move {
        let stop = match interrupted() {
            Ok(stop) => stop,
            Err(e) => return fail(format!("cannot install the Ctrl-C handler: {e}")),
        };
        // Asked first: a relay's root makes the viewer list its hosts.
        let hosted = hosted_ids(&args.client.url, client_config).await;
        config.relay = matches!(hosted, Hosted::Relay);
        let viewer = match Viewer::start(&args.listen, config).await {
            Ok(v) => v,
            Err(e) => return fail(e),
        };
        println!(
            "unienv-remote viewer of {} on {}",
            args.client.url,
            viewer.url()
        );
        println!("Open {} in a browser. Press Ctrl-C to stop.", viewer.url());
        match hosted {
            Hosted::Relay => println!(
                "{} is a relay: the page lists its connected hosts, each watched through it at /hosts/NAME/",
                args.client.url
            ),
            Hosted::Ids(Some(ids)) if !ids.is_empty() => {
                let ids: Vec<&str> = ids.iter().take(3).map(String::as_str).collect();
                println!("Open panels directly: {}", viewer.watch_url(&ids));
            }
            _ => println!(
                "Open panels directly: {}ID[,ID…] (with the server's resource ids)",
                viewer.watch_url(&[])
            ),
        }
        if viewer.key().is_some() {
            println!(
                "The page needs the key in this URL (then kept in a cookie); keep it private."
            );
        }
        warn_beyond_loopback(&viewer);
        stop.await;
        viewer.stop();
        ExitCode::SUCCESS
    })
}

/// What the upstream URL serves.
enum Hosted {
    /// A relay's root (its refusal says so).
    Relay,
    /// A server: the ids of its top-level resources, `None` when it does
    /// not answer within a few seconds.
    Ids(Option<Vec<String>>),
}

/// Whether `url` is a relay's root, else the ids of the server's top-level
/// resources (none of another's children), for the banner's example link;
/// `None` when the server does not answer within a few seconds (the
/// viewer still starts: a page keeps trying).
async fn hosted_ids(url: &str, config: ClientConfig) -> Hosted {
    let config = config.with_discover(false);
    let mut relay = false;
    let listed = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let client = match crate::client::Client::connect(url, config).await {
            Ok(c) => c,
            Err(e) => {
                relay = super::shared::is_relay_root(&e);
                return None;
            }
        };
        let listed = client.discover().await.ok();
        client.close().await;
        listed
    })
    .await
    .ok()
    .flatten();
    if relay {
        return Hosted::Relay;
    }
    Hosted::Ids(listed.map(|listed| top_level(&listed)))
}

/// The ids of the resources that are no other's children.
fn top_level(listed: &[std::sync::Arc<crate::client::Descriptor>]) -> Vec<String> {
    let children: std::collections::HashSet<&str> = listed
        .iter()
        .flat_map(|d| d.children().iter().map(|(_, id)| id.as_str()))
        .collect();
    listed
        .iter()
        .map(|d| d.id())
        .filter(|id| !children.contains(id))
        .map(str::to_string)
        .collect()
}

/// Says loudly that a viewer listening beyond loopback serves plain HTTP to
/// the network (its key is then the only guard, and travels in clear).
pub(crate) fn warn_beyond_loopback(viewer: &Viewer) {
    if !viewer.local_addr().ip().is_loopback() {
        eprintln!(
            "WARNING: the viewer listens on {}, beyond this machine, over plain HTTP: anyone who sees its URL (with its key) on the network can watch the simulators. Prefer the default 127.0.0.1 and an SSH tunnel (ssh -L 8766:127.0.0.1:8766 HOST).",
            viewer.local_addr()
        );
    }
}
