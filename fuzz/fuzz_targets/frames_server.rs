//! WebSocket framing against a server (`frames_server`; the `frames` target fuzzes the pure parser): one in-process server (fixture registry, 1 MiB
//! messages) listening on 127.0.0.1:0; per input, a fresh TCP connection
//! that completes the handshake and then sends the input's frames: any
//! opcode (0x0–0xF), FIN and RSV bits, masked or not (with the input's
//! key), the length in its 7-, 16- or 64-bit form (minimal or not, or a
//! declared length that differs from the payload), fragmentation,
//! interleaved control frames, and raw bytes.
//!
//! What the server sends back must be well-formed: whole unmasked frames
//! with no RSV bit; binary messages that are valid envelopes within 1 MiB;
//! pongs that echo the pings, in order, until the connection fails; at most
//! one close frame, last, with an empty payload or a code RFC 6455 allows a
//! sender (1000–1003, 1007–1011, 1013, 3000–4999). The connection must end
//! (or stay open, idle) within 2 s of the input's end (which the harness
//! follows with a valid close frame), and the server must go on accepting.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{Codec, Value};

#[derive(Arbitrary, Debug)]
enum Length {
    /// The shortest form of the payload's length.
    Minimal,
    /// The 16-bit form, whatever the length.
    Wide16,
    /// The 64-bit form, whatever the length.
    Wide64,
    /// A declared length that is not the payload's (the frame is cut or
    /// runs into the next).
    Declared(u16),
}

#[derive(Arbitrary, Debug)]
enum Piece {
    Frame {
        fin: bool,
        rsv: u8,
        opcode: u8,
        mask: Option<[u8; 4]>,
        length: Length,
        payload: Vec<u8>,
    },
    /// A whole hello request, as a binary message.
    Hello,
    /// A ping, to check the pong.
    Ping(Vec<u8>),
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    pieces: Vec<Piece>,
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
    _server: Server,
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let (server, addr) = runtime.block_on(async {
            let config = ServerConfig {
                max_message_size: 1 << 20,
                idle_timeout: None,
                message_timeout: Duration::from_secs(1),
                hello_timeout: Duration::from_secs(1),
                ..ServerConfig::default()
            };
            let mut b = Server::builder(config);
            unienv_remote::fixtures::register(&mut b).expect("fixtures");
            let server = b.start().expect("a valid server configuration");
            let listener = server.listen("127.0.0.1:0").await.expect("listen");
            let addr = listener.local_addr();
            std::mem::forget(listener);
            (server, addr)
        });
        Harness {
            runtime,
            addr,
            _server: server,
        }
    })
}

fn frame(
    fin: bool,
    rsv: u8,
    opcode: u8,
    mask: Option<[u8; 4]>,
    length: &Length,
    payload: &[u8],
) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | ((rsv & 7) << 4) | (opcode & 0x0F)];
    let m = if mask.is_some() { 0x80 } else { 0 };
    let len = payload.len();
    match length {
        Length::Minimal if len < 126 => out.push(m | len as u8),
        Length::Minimal if len <= 0xFFFF => {
            out.push(m | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        Length::Minimal | Length::Wide64 => {
            out.push(m | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
        Length::Wide16 => {
            out.push(m | 126);
            out.extend_from_slice(&(len.min(0xFFFF) as u16).to_be_bytes());
        }
        Length::Declared(d) => {
            out.push(m | 126);
            out.extend_from_slice(&d.to_be_bytes());
        }
    }
    if let Some(key) = mask {
        out.extend_from_slice(&key);
    }
    let body = out.len();
    out.extend_from_slice(payload);
    if let Some(key) = mask {
        for (i, b) in out[body..].iter_mut().enumerate() {
            *b ^= key[i % 4];
        }
    }
    out
}

fn hello() -> Vec<u8> {
    let d = unienv_remote::protocol::request_envelope("hello", "h", &Value::Null, None);
    Codec::default().encode(&Value::Dict(d)).expect("hello")
}

const SENDER_CODES: fn(u16) -> bool =
    |c| matches!(c, 1000..=1003 | 1007..=1011 | 1013 | 3000..=4999);

async fn run(addr: std::net::SocketAddr, input: &Input) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .expect("handshake");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).await.expect("answer"),
            1,
            "handshake answer"
        );
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"));
    // Pings in the well-framed prefix of the input (before the first piece
    // that may break framing), which the server answers in order.
    let mut pings = Vec::new();
    let mut clean = true;
    let mut bytes = Vec::new();
    for piece in &input.pieces {
        match piece {
            Piece::Frame {
                fin,
                rsv,
                opcode,
                mask,
                length,
                payload,
            } => {
                let well_framed = *fin
                    && *rsv & 7 == 0
                    && mask.is_some()
                    && matches!(length, Length::Minimal)
                    && matches!(*opcode & 0x0F, 0x2 | 0x9 | 0xA)
                    && payload.len() <= 125;
                if clean && well_framed && *opcode & 0x0F == 0x9 {
                    pings.push(payload.clone());
                }
                clean &= well_framed;
                bytes.extend(frame(*fin, *rsv, *opcode, *mask, length, payload))
            }
            Piece::Hello => bytes.extend(frame(
                true,
                0,
                2,
                Some([1, 2, 3, 4]),
                &Length::Minimal,
                &hello(),
            )),
            Piece::Ping(p) => {
                let p = &p[..p.len().min(125)];
                if clean {
                    pings.push(p.to_vec());
                }
                bytes.extend(frame(true, 0, 9, Some([9, 8, 7, 6]), &Length::Minimal, p));
            }
            Piece::Raw(r) => {
                clean &= r.is_empty();
                bytes.extend_from_slice(r)
            }
        }
    }
    let (mut rd, mut wr) = s.into_split();
    // The input, then a valid close (1000): a server still in sync answers
    // it and ends the connection at once.
    bytes.extend(frame(
        true,
        0,
        8,
        Some([5, 5, 5, 5]),
        &Length::Minimal,
        &[0x03, 0xE8],
    ));
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&bytes).await;
        wr
    });
    // Read what the server sends until it closes, or 2 s pass with nothing
    // (an input that leaves a message unfinished).
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        match tokio::time::timeout(Duration::from_secs(2), rd.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    let _ = writer.await;
    // Parse the server's frames.
    let mut at = 0;
    let mut pongs = Vec::new();
    let mut closed = false;
    while at < got.len() {
        assert!(!closed, "a frame after the close frame");
        assert!(got.len() - at >= 2, "a torn frame header");
        let (b0, b1) = (got[at], got[at + 1]);
        assert_eq!(b0 & 0x70, 0, "RSV bits in a server frame");
        assert_eq!(b1 & 0x80, 0, "a masked server frame");
        assert!(b0 & 0x80 != 0, "a fragmented server frame");
        let (len, ext) = match b1 & 0x7F {
            126 => (u16::from_be_bytes([got[at + 2], got[at + 3]]) as usize, 2),
            127 => (
                u64::from_be_bytes(got[at + 2..at + 10].try_into().unwrap()) as usize,
                8,
            ),
            n => (n as usize, 0),
        };
        let start = at + 2 + ext;
        assert!(got.len() >= start + len, "a torn frame");
        let payload = &got[start..start + len];
        match b0 & 0x0F {
            0x2 => {
                assert!(len <= 1 << 20);
                let v = Codec::new(1 << 20)
                    .expect("codec")
                    .decode(bytes::Bytes::copy_from_slice(payload))
                    .expect("a valid envelope");
                assert!(matches!(v, Value::Dict(_)));
            }
            0xA => pongs.push(payload.to_vec()),
            0x8 => {
                closed = true;
                if len > 0 {
                    assert!(len >= 2, "a 1-byte close payload");
                    let code = u16::from_be_bytes([payload[0], payload[1]]);
                    assert!(SENDER_CODES(code), "close code {code}");
                    assert!(std::str::from_utf8(&payload[2..]).is_ok());
                }
            }
            op => panic!("server opcode {op:#x}"),
        }
        at = start + len;
    }
    // Pongs answer the well-framed prefix's pings, in order, with their
    // payloads (the connection may fail before all are answered).
    for (i, (pong, ping)) in pongs.iter().zip(&pings).enumerate() {
        assert_eq!(pong, ping, "pong {i}");
    }
}

fuzz_target!(|input: Input| {
    let h = harness();
    h.runtime.block_on(run(h.addr, &input));
});
