//! The viewer's own credential: a key in the URL the viewer prints, kept in
//! a cookie, required on every request (the page, its files and `/ws`)
//! whenever the viewer has one.
//!
//! When the upstream server has a token, or the viewer listens on a
//! non-loopback address, the viewer makes a random per-start key (128 bits
//! from the operating system) unless one is configured. The browser opens
//! `http://HOST:PORT/?key=KEY`; the viewer answers `303 See Other` to the
//! same URL without the key, setting the cookie
//! `unienv_viewer_key_PORT=KEY; Path=/; HttpOnly; SameSite=Strict`, so the
//! key leaves the address bar and the page's scripts never see it.
//!
//! A missing `Origin` on `/ws`: browsers always send one on a WebSocket
//! handshake, so a request without it is not from a browser. It is accepted
//! only with the key (a tool holding the key is as trusted as the page);
//! without a key configured, such a request is refused (403), since a local
//! tool can reach the upstream server itself and needs no viewer.

/// How a request proves it may use the viewer.
#[derive(Debug, Clone)]
pub(super) struct Access {
    /// The key, when one is required.
    key: Option<String>,
    /// The cookie's name (per port: browsers share cookies across ports).
    cookie: String,
}

impl Access {
    pub(super) fn new(key: Option<String>, port: u16) -> Access {
        Access {
            key,
            cookie: format!("unienv_viewer_key_{port}"),
        }
    }

    /// The key, when one is required.
    pub(super) fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Whether a request with this target (`path?query`) and `Cookie`
    /// header may be served: always without a key, else with the key in
    /// either.
    pub(super) fn allows(&self, target: &str, cookie: Option<&str>) -> bool {
        let Some(key) = &self.key else {
            return true;
        };
        query_key(target).is_some_and(|k| same(k, key))
            || cookie.is_some_and(|c| {
                c.split(';').any(|pair| {
                    pair.trim()
                        .split_once('=')
                        .is_some_and(|(n, v)| n.trim() == self.cookie && same(v.trim(), key))
                })
            })
    }

    /// Whether the target carries a valid key in its query (to be moved
    /// into the cookie).
    pub(super) fn key_in_query(&self, target: &str) -> bool {
        self.key
            .as_deref()
            .is_some_and(|key| query_key(target).is_some_and(|k| same(k, key)))
    }

    /// The `Set-Cookie` value keeping the key.
    pub(super) fn set_cookie(&self) -> Option<String> {
        self.key
            .as_ref()
            .map(|key| format!("{}={key}; Path=/; HttpOnly; SameSite=Strict", self.cookie))
    }
}

/// The value of `key=` in a target's query.
fn query_key(target: &str) -> Option<&str> {
    let (_, query) = target.split_once('?')?;
    query.split('&').find_map(|pair| pair.strip_prefix("key="))
}

/// `target` without its `key=` query parameter (where the cookie redirect
/// sends the browser).
pub(super) fn without_key(target: &str) -> String {
    let Some((path, query)) = target.split_once('?') else {
        return target.to_string();
    };
    let rest: Vec<&str> = query
        .split('&')
        .filter(|p| !p.starts_with("key=") && !p.is_empty())
        .collect();
    if rest.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", rest.join("&"))
    }
}

/// Compares secrets without an early exit on the first difference.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len().max(b.len());
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..n {
        diff |= (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0)) as u64;
    }
    std::hint::black_box(diff) == 0
}

/// A fresh random key: 128 bits from the operating system (`/dev/urandom`),
/// else from the standard library's randomly seeded hasher, as hex.
pub(super) fn new_key() -> String {
    let mut bytes = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_ok();
    if !from_os {
        let a = crate::transport::frame::random_u64();
        let b = crate::transport::frame::random_u64();
        bytes[..8].copy_from_slice(&a.to_le_bytes());
        bytes[8..].copy_from_slice(&b.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_in_the_query_or_the_cookie() {
        let open = Access::new(None, 8766);
        assert!(open.allows("/ws", None));
        let a = Access::new(Some("k123".into()), 8766);
        assert!(!a.allows("/ws", None));
        assert!(!a.allows("/?key=k12", None));
        assert!(!a.allows("/?key=k1234", None));
        assert!(a.allows("/?t=5&key=k123", None));
        assert!(a.allows("/ws", Some("a=b; unienv_viewer_key_8766=k123")));
        assert!(!a.allows("/ws", Some("unienv_viewer_key_8767=k123")));
        assert!(a.key_in_query("/?key=k123"));
        assert_eq!(without_key("/?key=k123&run=3"), "/?run=3");
        assert_eq!(without_key("/?key=k123"), "/");
        assert!(a.set_cookie().is_some_and(|c| c.contains("HttpOnly")));
        let k = new_key();
        assert_eq!(k.len(), 32);
        assert_ne!(k, new_key());
    }
}
