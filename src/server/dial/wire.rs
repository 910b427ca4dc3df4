//! What a relay and a dialing host say to each other (SPEC.md, "Relay and
//! dial-out hosts"): the request paths, host names, and the control
//! messages, each one JSON object in one binary WebSocket message.
//!
//! It lives with the dialing host (`crate::server`), below the relay
//! (`crate::relay`, which re-exports it as `relay::wire`): the relay
//! depends on the server, never the reverse.

use serde_json::{json, Map, Value as Json};

/// The path a host's control connection upgrades on.
pub const CONTROL_PATH: &str = "/relay/control";

/// The path prefix of a tunnel connection: `/relay/tunnel/ID`.
pub const TUNNEL_PREFIX: &str = "/relay/tunnel/";

/// The path prefix of a client's connection to a host: `/hosts/NAME`.
pub const HOSTS_PREFIX: &str = "/hosts/";

/// The listing: `GET /hosts` (plain HTTP), or a WebSocket upgrade on
/// `/hosts` that is sent the same JSON as one message.
pub const LIST_PATH: &str = "/hosts";

/// The version of the control messages and of the tunnels' framing. 2: a
/// host frames its tunnels as a WebSocket server (masked frames in,
/// unmasked out), so that the relay forwards frames unchanged; a host and a
/// relay of different versions refuse each other at registration.
pub const RELAY_PROTOCOL: u64 = 2;

/// Longest host name, in bytes.
pub const MAX_NAME_BYTES: usize = 64;

/// Largest control message either side accepts (a registration's resource
/// list included).
pub const MAX_CONTROL_MESSAGE: usize = 64 * 1024;

/// Why a host name is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid host name {shown:?}: names are 1 to {MAX_NAME_BYTES} bytes of ASCII letters, digits, '-', '_' and '.', starting with a letter or digit")]
pub struct InvalidName {
    /// The name (its first 80 characters).
    pub shown: String,
}

/// Checks a host name: 1 to [`MAX_NAME_BYTES`] bytes of `[A-Za-z0-9._-]`,
/// starting with a letter or digit (so that it is one URL path segment as
/// it stands, and never `.` or `..`).
pub fn validate_name(name: &str) -> Result<(), InvalidName> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(InvalidName {
            shown: name.chars().take(80).collect(),
        })
    }
}

/// Who a host is, as it registers (and as the listing shows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    /// The name clients reach it by (`/hosts/NAME`).
    pub name: String,
    /// The server's software (`unienv-remote`).
    pub server: String,
    /// Its version.
    pub version: String,
    /// The resource IDs it hosts (root registrations).
    pub resources: Vec<String>,
}

/// A connected host, as the listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// Its name, software, version and resources.
    pub identity: HostIdentity,
    /// Client sessions forwarded to it now.
    pub clients: usize,
    /// How long it has been registered.
    pub connected_for: std::time::Duration,
}

/// A control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Host to relay, first: who it is, and the random ID of this dialing
    /// host (the same across its re-dials: it gets its name back).
    Register {
        /// Name, software, version, resources.
        identity: HostIdentity,
        /// The dialing host's instance ID.
        instance: String,
    },
    /// Relay to host: registered under this name.
    Registered {
        /// The name.
        name: String,
    },
    /// Relay to host: not registered (then the relay closes).
    Refused {
        /// `name_taken`, `invalid_name`, `too_many_hosts`, `bad_request`.
        code: String,
        /// Why, for people.
        message: String,
    },
    /// Relay to host: open a tunnel connection on `/relay/tunnel/ID`.
    Open {
        /// The tunnel's ID (128 random bits, hex).
        tunnel: String,
    },
    /// Host to relay: it will not open this tunnel.
    Decline {
        /// The tunnel's ID.
        tunnel: String,
        /// Why.
        message: String,
    },
}

/// Why a control message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid relay control message: {0}")]
pub struct ControlError(pub String);

impl Control {
    /// The message as sent.
    pub fn encode(&self) -> bytes::Bytes {
        let value = match self {
            Control::Register { identity, instance } => json!({
                "type": "register",
                "protocol": RELAY_PROTOCOL,
                "name": identity.name,
                "server": identity.server,
                "version": identity.version,
                "resources": identity.resources,
                "instance": instance,
            }),
            Control::Registered { name } => json!({"type": "registered", "name": name}),
            Control::Refused { code, message } => {
                json!({"type": "refused", "code": code, "message": message})
            }
            Control::Open { tunnel } => json!({"type": "open", "tunnel": tunnel}),
            Control::Decline { tunnel, message } => {
                json!({"type": "decline", "tunnel": tunnel, "message": message})
            }
        };
        bytes::Bytes::from(value.to_string())
    }

    /// Reads one message (at most [`MAX_CONTROL_MESSAGE`] bytes).
    pub fn decode(bytes: &[u8]) -> Result<Control, ControlError> {
        if bytes.len() > MAX_CONTROL_MESSAGE {
            return Err(ControlError(format!(
                "{} bytes, at most {MAX_CONTROL_MESSAGE}",
                bytes.len()
            )));
        }
        let value: Json =
            serde_json::from_slice(bytes).map_err(|e| ControlError(format!("not JSON: {e}")))?;
        let Json::Object(map) = value else {
            return Err(ControlError("not a JSON object".into()));
        };
        let text = |key: &str| -> Result<String, ControlError> {
            match map.get(key) {
                Some(Json::String(s)) => Ok(s.clone()),
                _ => Err(ControlError(format!("'{key}' is missing or not a string"))),
            }
        };
        match text("type")?.as_str() {
            "register" => {
                if map.get("protocol").and_then(Json::as_u64) != Some(RELAY_PROTOCOL) {
                    return Err(ControlError(format!(
                        "'protocol' must be {RELAY_PROTOCOL} (the host and the relay are of different unienv-remote versions)"
                    )));
                }
                Ok(Control::Register {
                    identity: HostIdentity {
                        name: text("name")?,
                        server: text("server")?,
                        version: text("version")?,
                        resources: strings(&map, "resources")?,
                    },
                    instance: text("instance")?,
                })
            }
            "registered" => Ok(Control::Registered {
                name: text("name")?,
            }),
            "refused" => Ok(Control::Refused {
                code: text("code")?,
                message: text("message")?,
            }),
            "open" => Ok(Control::Open {
                tunnel: text("tunnel")?,
            }),
            "decline" => Ok(Control::Decline {
                tunnel: text("tunnel")?,
                message: text("message")?,
            }),
            other => Err(ControlError(format!(
                "unknown type {:?}",
                other.chars().take(40).collect::<String>()
            ))),
        }
    }
}

fn strings(map: &Map<String, Json>, key: &str) -> Result<Vec<String>, ControlError> {
    let bad = || ControlError(format!("'{key}' must be a list of strings"));
    let Some(Json::Array(items)) = map.get(key) else {
        return Err(bad());
    };
    items
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

/// A tunnel ID: 128 bits from the system's secure random source, as 32
/// lowercase hex digits; only the host it is sent to learns it.
pub(crate) fn tunnel_id() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        // No system randomness (never seen on Linux): fall back to the
        // session-ID generator rather than refuse every client.
        return random_fallback();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_fallback() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(32);
    for half in 0..2u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(half);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

/// Whether `id` looks like a tunnel ID (32 lowercase hex digits).
pub(crate) fn is_tunnel_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `base` (a relay URL, with or without a trailing `/`) joined with `path`.
pub fn join(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "sim-1", "Render_node.3", &"x".repeat(64)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "-a",
            "a/b",
            "a b",
            "é",
            &"x".repeat(65),
            "a?b",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn control_messages_round_trip() {
        let all = [
            Control::Register {
                identity: HostIdentity {
                    name: "n".into(),
                    server: "unienv-remote".into(),
                    version: "0.1.0".into(),
                    resources: vec!["cartpole".into()],
                },
                instance: "i".into(),
            },
            Control::Registered { name: "n".into() },
            Control::Refused {
                code: "name_taken".into(),
                message: "m".into(),
            },
            Control::Open { tunnel: "t".into() },
            Control::Decline {
                tunnel: "t".into(),
                message: "m".into(),
            },
        ];
        for c in all {
            assert_eq!(Control::decode(&c.encode()).unwrap(), c);
        }
        for bad in [
            &b"[]"[..],
            b"{}",
            b"{\"type\":\"nope\"}",
            b"{\"type\":\"register\",\"protocol\":1}",
            b"{\"type\":\"open\"}",
            b"not json",
        ] {
            assert!(Control::decode(bad).is_err());
        }
        assert!(Control::decode(&vec![b' '; MAX_CONTROL_MESSAGE + 1]).is_err());
    }

    #[test]
    fn tunnel_ids() {
        let a = tunnel_id();
        assert!(is_tunnel_id(&a), "{a}");
        assert_ne!(a, tunnel_id());
        assert!(is_tunnel_id(&random_fallback()));
        assert!(!is_tunnel_id("../x"));
        assert_eq!(join("ws://r:1/", "/hosts"), "ws://r:1/hosts");
    }
}
