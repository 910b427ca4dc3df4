//! The viewer in front of a relay ([`ViewerConfig::relay`]; SPEC.md, "Relay
//! and dial-out hosts"): the page at `/` lists the hosts connected to the
//! relay, each a link to its own viewer at `/hosts/NAME/`, which reaches
//! that host through the relay (`ws://RELAY/hosts/NAME`) as any client
//! does, with the viewer's page, panels and limits unchanged.

use super::config::ViewerConfig;
use crate::server::relay_wire as wire;
use crate::transport::Reader;
use serde_json::Value as Json;
use std::time::Duration;

/// How long the relay may take to send its listing.
const LISTING_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest listing read (1,000 hosts with their resources fit).
const MAX_LISTING: usize = 16 << 20;

/// Where the host `name` is reached through the relay at `relay`.
pub(super) fn host_url(relay: &str, name: &str) -> String {
    wire::join(relay, &format!("{}{name}", wire::HOSTS_PREFIX))
}

/// What a request's path asks of a viewer in front of a relay.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Route<'a> {
    /// `/`: the hosts.
    Hosts,
    /// `/hosts/NAME`: redirected to `/hosts/NAME/`.
    Slash,
    /// `/hosts/NAME/REST`: the host's viewer (its page at `REST` = ``, its
    /// socket at `ws`), with `REST` as the path it sees (`/REST`).
    Host(&'a str, String),
    /// `/hosts/…` with an invalid name.
    Invalid,
    /// Anything else: the page's files, shared by every host's page.
    Other,
}

/// Routes `path` (without its query).
pub(super) fn route(path: &str) -> Route<'_> {
    if path == "/" {
        return Route::Hosts;
    }
    let Some(rest) = path.strip_prefix(wire::HOSTS_PREFIX) else {
        return Route::Other;
    };
    let (name, tail) = match rest.split_once('/') {
        Some((name, tail)) => (name, Some(tail)),
        None => (rest, None),
    };
    if wire::validate_name(name).is_err() {
        return Route::Invalid;
    }
    match tail {
        None => Route::Slash,
        Some(tail) => Route::Host(name, format!("/{tail}")),
    }
}

/// The relay's listing (its JSON), asked as `discover` does: a WebSocket
/// to `/hosts` with the client token.
async fn listing(config: &ViewerConfig) -> Result<Json, String> {
    let headers: Vec<(String, String)> = config
        .client
        .token
        .as_ref()
        .map(|t| vec![("Authorization".to_string(), format!("Bearer {t}"))])
        .unwrap_or_default();
    let tls = match (&config.client.tls, &config.client.ca_file) {
        (Some(tls), _) => Some(tls.clone()),
        (None, Some(file)) => {
            Some(crate::transport::tls::client_config(Some(file)).map_err(|e| e.to_string())?)
        }
        (None, None) => None,
    };
    let url = wire::join(&config.upstream, wire::LIST_PATH);
    let run = async {
        let (r, _w) = crate::transport::ws::connect_with(&url, &headers, MAX_LISTING, tls)
            .await
            .map_err(|e| e.to_string())?;
        let message = Reader::Ws(r).recv().await.map_err(|e| e.to_string())?;
        serde_json::from_slice::<Json>(&message).map_err(|e| e.to_string())
    };
    tokio::time::timeout(LISTING_TIMEOUT, run)
        .await
        .map_err(|_| {
            format!(
                "no listing within {} s",
                LISTING_TIMEOUT.as_secs_f64().round()
            )
        })?
}

/// `text` escaped for HTML.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The hosts' table (or why there is none).
fn hosts_table(listing: &Json) -> String {
    let hosts = listing
        .get("hosts")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    if hosts.is_empty() {
        return "<p id=\"no-hosts\">No host is connected to this relay.</p>".into();
    }
    let mut rows = String::new();
    for h in &hosts {
        let text = |k: &str| h.get(k).and_then(Json::as_str).unwrap_or("");
        let name = text("name");
        // Names are checked by the relay; one that is not valid here is
        // not linked.
        if wire::validate_name(name).is_err() {
            continue;
        }
        let resources: Vec<String> = h
            .get("resources")
            .and_then(Json::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Json::as_str)
                    .map(|id| {
                        format!(
                            "<a href=\"/hosts/{name}/?watch={}\">{}</a>",
                            escape(&super::query_quote(id)),
                            escape(id)
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let connected = h.get("connected_s").and_then(Json::as_f64).unwrap_or(0.0);
        rows.push_str(&format!(
            "<tr><td><a class=\"host\" href=\"/hosts/{name}/\">{name}</a></td><td>{} {}</td><td>{}</td><td>{:.0} s</td><td>{}</td></tr>\n",
            escape(text("server")),
            escape(text("version")),
            h.get("clients").and_then(Json::as_u64).unwrap_or(0),
            connected,
            resources.join(", ")
        ));
    }
    format!(
        "<table>\n<tr><th>host</th><th>software</th><th>clients</th><th>connected</th><th>resources (watch)</th></tr>\n{rows}</table>"
    )
}

/// The page at `/`: the relay's hosts, each linking to its viewer (and
/// its resources to panels), listed afresh at each load and every 5 s.
pub(super) async fn hosts_page(config: &ViewerConfig) -> String {
    let body = match listing(config).await {
        Ok(listing) => hosts_table(&listing),
        Err(e) => format!(
            "<p class=\"error\">cannot list the relay's hosts: {}</p>",
            escape(&e)
        ),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"5\">\n<title>unienv-remote viewer: relay</title>\n<link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">\n<link rel=\"stylesheet\" href=\"/viewer.css\">\n</head>\n<body>\n<header><h1>unienv-remote viewer</h1><span class=\"muted\">hosts connected to the relay {}</span></header>\n<main class=\"hosts\">\n{body}\n<p class=\"muted small\">Click a host to view its resources, or a resource to watch it. This list is read again every 5 s.</p>\n</main>\n</body>\n</html>\n",
        escape(&config.upstream)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_to_hosts() {
        assert_eq!(route("/"), Route::Hosts);
        assert_eq!(route("/hosts/sim1"), Route::Slash);
        assert_eq!(route("/hosts/sim1/"), Route::Host("sim1", "/".into()));
        assert_eq!(route("/hosts/sim1/ws"), Route::Host("sim1", "/ws".into()));
        assert_eq!(route("/hosts/../ws"), Route::Invalid);
        assert_eq!(route("/hosts//ws"), Route::Invalid);
        assert_eq!(route("/viewer.js"), Route::Other);
        assert_eq!(host_url("ws://r:1/", "a"), "ws://r:1/hosts/a");
    }

    #[test]
    fn the_table_escapes_what_hosts_say() {
        let listing = serde_json::json!({"hosts": [
            {"name": "a", "server": "<b>", "version": "1", "clients": 2,
             "connected_s": 3.0, "resources": ["x<y", "p,q"]},
            {"name": "bad/name", "server": "s", "version": "1", "resources": []},
        ]});
        let t = hosts_table(&listing);
        assert!(t.contains("&lt;b&gt;") && !t.contains("<b>"), "{t}");
        assert!(t.contains("href=\"/hosts/a/?watch=x%3Cy\""), "{t}");
        assert!(t.contains("?watch=p%2Cq"), "{t}");
        assert!(!t.contains("bad/name"), "{t}");
        assert!(hosts_table(&serde_json::json!({"hosts": []})).contains("No host"));
    }
}
