//! The DNS names this machine answers to, which a listener bound to a
//! non-loopback address accepts in `Host` besides `--allow-host`'s.
//!
//! Found once when the listener starts, from local sources only: the host
//! name (`/proc/sys/kernel/hostname`, else the `hostname` command, else
//! `COMPUTERNAME`), its first label, the host name completed with the
//! resolver's `domain` / `search` domains (`/etc/resolv.conf`), and every
//! name that `/etc/hosts` gives the host name's line or one of this
//! machine's addresses (the bound address, or for an unspecified bind the
//! outward address and the host name's own addresses). No reverse DNS: it
//! can be slow, and only names the machine's administrator chose are
//! trusted — a name that merely resolves to this machine is what a
//! DNS-rebinding attack uses, so resolving the `Host` header is never the
//! test.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

/// How long the host name's own addresses may take to resolve at start.
const LOOKUP_LIMIT: Duration = Duration::from_secs(2);

/// This machine's names for a listener bound to `bind`; none for a
/// loopback bind (which accepts only loopback names and IP addresses).
pub(crate) async fn machine_names(bind: IpAddr) -> Vec<String> {
    if bind.is_loopback() {
        return Vec::new();
    }
    let local = tokio::task::spawn_blocking(|| {
        (
            host_name(),
            std::fs::read_to_string("/etc/hosts").unwrap_or_default(),
            std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default(),
        )
    })
    .await;
    let Ok((hostname, hosts, resolv)) = local else {
        return Vec::new();
    };
    let mut own = if bind.is_unspecified() {
        outward_addresses()
    } else {
        vec![bind]
    };
    if let Some(h) = &hostname {
        match tokio::time::timeout(LOOKUP_LIMIT, tokio::net::lookup_host((h.as_str(), 0))).await {
            Ok(Ok(addrs)) => own.extend(addrs.map(|a| a.ip())),
            Ok(Err(e)) => tracing::debug!(host = %h, error = %e, "the host name does not resolve"),
            Err(_) => tracing::debug!(host = %h, "the host name's addresses took too long"),
        }
    }
    let names = names_of(hostname.as_deref(), &own, &hosts, &resolv);
    tracing::debug!(?names, "Host names this machine answers to");
    names
}

/// The names of this machine (lowercase, sorted, without duplicates) given
/// its host name, its own addresses and the texts of `/etc/hosts` and
/// `/etc/resolv.conf`.
pub(crate) fn names_of(
    hostname: Option<&str>,
    own: &[IpAddr],
    hosts_file: &str,
    resolv_conf: &str,
) -> Vec<String> {
    let clean = |s: &str| s.trim().trim_end_matches('.').to_ascii_lowercase();
    let hostname = hostname.map(clean).filter(|h| !h.is_empty());
    let mut names = Vec::new();
    if let Some(h) = &hostname {
        names.push(h.clone());
        match h.split_once('.') {
            Some((first, _)) => names.push(first.to_string()),
            None => {
                for line in resolv_conf.lines() {
                    let mut words = line.split_whitespace();
                    if matches!(words.next(), Some("domain" | "search")) {
                        names.extend(words.map(|d| format!("{h}.{}", clean(d))));
                    }
                }
            }
        }
    }
    for line in hosts_file.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) else {
            continue;
        };
        let line_names: Vec<String> = words.map(clean).collect();
        let names_this_host = hostname.as_ref().is_some_and(|h| line_names.contains(h));
        if names_this_host || own.contains(&ip) {
            names.extend(line_names);
        }
    }
    names.retain(|n| !n.is_empty() && n.parse::<IpAddr>().is_err());
    names.sort();
    names.dedup();
    names
}

/// The kernel's host name.
fn host_name() -> Option<String> {
    if let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        return Some(name.trim().to_string());
    }
    if let Ok(out) = std::process::Command::new("hostname").output() {
        if out.status.success() {
            return Some(String::from_utf8_lossy(&out.stdout).trim().to_string());
        }
    }
    std::env::var("COMPUTERNAME").ok()
}

/// The local addresses that route outwards. Connecting a UDP socket sends
/// nothing: it only asks the kernel which local address it would use (to a
/// documentation-only address).
fn outward_addresses() -> Vec<IpAddr> {
    let probes = [
        (
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::from(([192, 0, 2, 1], 9)),
        ),
        (
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            SocketAddr::from((Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 9)),
        ),
    ];
    probes
        .iter()
        .filter_map(|(any, probe)| {
            UdpSocket::bind(SocketAddr::new(*any, 0))
                .and_then(|s| s.connect(probe).and_then(|_| s.local_addr()))
                .ok()
        })
        .map(|a| a.ip())
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTS: &str = "127.0.0.1 localhost\n\
        ::1 localhost ip6-localhost\n\
        127.0.1.1 sim7.lab.example sim7 # the Debian way\n\
        10.0.0.5 farm-a.lab.example farm-a\n\
        10.0.0.9 other.lab.example\n\
        # 10.0.0.5 commented.example\n";

    #[test]
    fn host_name_its_line_and_own_addresses() {
        let own: Vec<IpAddr> = vec!["10.0.0.5".parse().unwrap()];
        let names = names_of(Some("SIM7\n"), &own, HOSTS, "nameserver 10.0.0.1\n");
        assert_eq!(
            names,
            ["farm-a", "farm-a.lab.example", "sim7", "sim7.lab.example"]
        );
    }

    #[test]
    fn short_host_name_takes_the_resolver_domains() {
        let names = names_of(
            Some("node3"),
            &[],
            "",
            "domain lab.example\nsearch lab.example. corp.example\n",
        );
        assert_eq!(names, ["node3", "node3.corp.example", "node3.lab.example"]);
    }

    #[test]
    fn a_dotted_host_name_adds_its_first_label() {
        let names = names_of(Some("gpu1.lab.example."), &[], "", "search other.example");
        assert_eq!(names, ["gpu1", "gpu1.lab.example"]);
    }

    #[test]
    fn nothing_known_gives_no_names() {
        assert!(names_of(None, &[], "", "").is_empty());
        assert!(names_of(
            Some("  "),
            &["10.0.0.9".parse().unwrap()],
            "10.0.0.9 10.0.0.8",
            ""
        )
        .is_empty());
    }
}
