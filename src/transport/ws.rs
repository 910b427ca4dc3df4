//! RFC 6455 WebSocket, written for this protocol's traffic: one binary
//! message per envelope, no extensions. Three parts:
//!
//! - [`frame`](super::frame): frame headers parsed and encoded without I/O,
//!   every framing rule (reserved bits, masking direction, opcodes, control
//!   frames, close payloads) with a unit test;
//! - [`handshake`](super::handshake): the HTTP upgrade (key, accept,
//!   refusals), URLs and the TLS handshake;
//! - [`connection`](super::connection): the reader and writer.
//!
//! Why not tungstenite's framing: it zero-fills its whole read buffer
//! (128 KiB by default) before every read and copies every payload into it,
//! which measured as nearly half of all instructions of a small step round
//! trip.
//!
//! - Client frames are masked with a fresh key per frame, server frames never.
//! - RSV bits, unknown opcodes, unmasked client frames, masked server frames,
//!   fragmented or oversized control frames are protocol errors (close 1002).
//! - A text message closes the connection (1003); a message over the limit,
//!   detected from the frame header before its payload is buffered, too (1009).
//! - Pings are answered with pongs by the reader; a close frame is answered
//!   and ends the stream.
//!
//! This module gathers the parts' names for the rest of the crate.

pub(crate) use super::connection::{Direct, WsDirect, WsReader, WsWriter};
pub use super::handshake::ConnectError;
pub(crate) use super::handshake::{
    accept, accept_buffered, accept_framed, accept_over, connect_framed, connect_with,
    write_refusal, Refusal, RequestHead, UNIX_SCHEME,
};
// Used by the command line's `load` (a loopback check) and the unit tests.
#[cfg(feature = "cli")]
pub(crate) use super::handshake::parse_url;
