//! Handshake pieces: heads, keys, URLs.

use super::*;

#[test]
fn head_ends_and_keys() {
    assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nrest"), Some(27));
    assert_eq!(head_end(b"GET / HTTP/1.1\nHost: a\n\nrest"), Some(24));
    assert_eq!(head_end(b"GET / HTTP/1.1\nHost: a\n\r\n"), Some(25));
    assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n"), None);
    assert!(valid_key("dGhlIHNhbXBsZSBub25jZQ=="));
    assert!(valid_key(" dGhlIHNhbXBsZSBub25jZQ== "));
    for bad in [
        "",
        "x",
        "dGhlIHNhbXBsZSBub25jZQ",
        "dGhlIHNhbXBsZSBub25jZQ=",
        "dGhlIHNhbXBsZSBub25jZQ===",
        "dGhlIHNhbXBsZSBub25jZ!==",
        "dGhlIHNhbXBsZSBub25jZQxx",
    ] {
        assert!(!valid_key(bad), "{bad:?}");
    }
}

#[test]
fn rfc_accept_key() {
    // RFC 6455 section 1.3's example.
    assert_eq!(
        accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
}

#[test]
fn sha1_known_digest() {
    let hex: String = sha1(b"abc").iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
}

#[test]
fn urls() {
    assert_eq!(
        parse_url("ws://127.0.0.1:8765").unwrap(),
        ("127.0.0.1:8765".into(), "127.0.0.1:8765".into(), "/".into())
    );
    assert_eq!(
        parse_url("ws://localhost/x?y").unwrap(),
        ("localhost:80".into(), "localhost".into(), "/x?y".into())
    );
    assert_eq!(parse_url("ws://[::1]:9/").unwrap().0, "[::1]:9");
    assert_eq!(parse_url("wss://x/p").unwrap().0, "x:443");
    assert!(parse_target("wss://x").unwrap().secure);
    assert_eq!(parse_target("wss://[::1]:9").unwrap().host, "::1");
    assert!(parse_url("http://x").is_err());
    assert!(parse_url("ws://").is_err());
}

#[test]
fn unix_urls() {
    let t = parse_target("ws+unix:///run/sim.sock").unwrap();
    assert_eq!(
        t.unix.as_deref(),
        Some(std::path::Path::new("/run/sim.sock"))
    );
    assert_eq!((t.authority.as_str(), t.path.as_str()), ("localhost", "/"));
    assert!(!t.secure);
    assert_eq!(t.addr, "unix:/run/sim.sock");
    let relative = parse_target("ws+unix://sim.sock").unwrap();
    assert_eq!(
        relative.unix.as_deref(),
        Some(std::path::Path::new("sim.sock"))
    );
    assert!(parse_target("ws+unix://").is_err());
    assert!(parse_target("ws://x").unwrap().unix.is_none());
}
