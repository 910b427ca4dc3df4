use super::http::{host_allowed, origin_allowed};
use super::page::{parse_command, Command};
use super::ViewerConfig;

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
