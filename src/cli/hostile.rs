//! `load --hostile N`: attackers that run beside the well-behaved controllers
//! and observers of `load`, over loopback, each in a loop until the end of
//! the run (reconnecting whenever the server drops them). They are the
//! hostile-peer vectors of RELIABILITY.md ("Hostile peers"):
//!
//! - `v-first`: an envelope of `--hostile-mib` MiB whose tagged nodes put
//!   `"v"` before `"t"`, nested 60 deep around a list of zeros, without hello;
//! - `zeros`: a flat list of zeros of the same size;
//! - `silent-ws`: upgraded connections that never send hello;
//! - `silent-tcp`: sockets that send part of a handshake, then nothing;
//! - `stall`: a frame declaring 60 MiB that sends 1 MiB and stalls;
//! - `unread`: a session pipelining requests and never reading an answer;
//! - `lazy-observer`: a session holding 1,024 subscriptions on the
//!   bystanders' envs, never reading;
//! - `garbage`: reserved opcodes and invalid close codes.
//!
//! What the server does to each (the close codes it sends) is counted; the
//! bystanders' latency and the process RSS are reported by `load` itself.

use crate::codec::{Codec, Dict, Value};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The attacker kinds, in report order.
pub(crate) const KINDS: [&str; 8] = [
    "v-first",
    "zeros",
    "silent-ws",
    "silent-tcp",
    "stall",
    "unread",
    "lazy-observer",
    "garbage",
];

/// What the attackers saw, by kind: connections made, and how each ended.
#[derive(Default)]
pub(crate) struct Tally {
    by_kind: BTreeMap<&'static str, KindTally>,
}

#[derive(Default)]
struct KindTally {
    connections: u64,
    /// Large envelopes, or requests, sent.
    sent: u64,
    /// Close codes sent by the server (0: the connection ended without a
    /// close frame; 1: the attacker gave up at the end of the run).
    endings: BTreeMap<u16, u64>,
}

impl Tally {
    fn record(&mut self, kind: &'static str, ending: u16, sent: u64) {
        let k = self.by_kind.entry(kind).or_default();
        k.connections += 1;
        k.sent += sent;
        *k.endings.entry(ending).or_default() += 1;
    }

    /// One line per kind.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.by_kind
            .iter()
            .map(|(kind, t)| {
                let endings: Vec<String> = t
                    .endings
                    .iter()
                    .map(|(code, n)| match code {
                        0 => format!("{n} dropped"),
                        1 => format!("{n} open at the end"),
                        c => format!("{n}×{c}"),
                    })
                    .collect();
                format!(
                    "{kind:>13}: {} connections, {} messages sent; {}",
                    t.connections,
                    t.sent,
                    endings.join(", ")
                )
            })
            .collect()
    }
}

/// Where to attack and with what.
#[derive(Clone)]
pub(crate) struct Target {
    /// `host:port`.
    pub addr: String,
    pub token: Option<String>,
    /// The bystanders' env IDs (for `lazy-observer` and `unread`).
    pub envs: Vec<String>,
    /// Size of the large envelopes.
    pub mib: usize,
}

/// Runs `per_kind` attackers of every kind (or of `only` those) until
/// `end`.
pub(crate) fn spawn(
    target: Target,
    per_kind: usize,
    only: &[String],
    end: Instant,
    tally: Arc<Mutex<Tally>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let big = Arc::new(Envelopes::build(target.mib));
    let mut tasks = Vec::new();
    for kind in KINDS {
        if !only.is_empty() && !only.iter().any(|k| k == kind) {
            continue;
        }
        for i in 0..per_kind {
            let (target, big, tally) = (target.clone(), big.clone(), tally.clone());
            tasks.push(tokio::spawn(async move {
                while Instant::now() < end {
                    let mut sent = 0;
                    let ending = attack(kind, i, &target, &big, end, &mut sent).await;
                    tally.lock().record(kind, ending, sent);
                    if ending != 1 {
                        // Reconnect at once (a little later when refused).
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }));
        }
    }
    tasks
}

/// The large envelopes, built once.
struct Envelopes {
    v_first: Vec<u8>,
    zeros: Vec<u8>,
}

impl Envelopes {
    fn build(mib: usize) -> Envelopes {
        let zeros_for = |bytes: usize| vec!["0"; bytes / 2].join(",");
        let mut header = format!(r#"{{"v":[{}],"t":"list"}}"#, zeros_for(mib << 20));
        for _ in 0..60 {
            header = format!(r#"{{"v":[{header}],"t":"tuple"}}"#);
        }
        let flat = format!(r#"{{"t":"list","v":[{}]}}"#, zeros_for(mib << 20));
        let frame = |h: &str| {
            let mut f = (h.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(h.as_bytes());
            f
        };
        Envelopes {
            v_first: frame(&header),
            zeros: frame(&flat),
        }
    }
}

/// The header of a masked client frame with a zero key (the payload is
/// then sent as is).
fn frame_header(opcode: u8, len: usize) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= 0xFFFF {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&[0, 0, 0, 0]);
    out
}

fn request(op: &str, id: &str, session: &Value, resource: Option<&str>, extra: Dict) -> Vec<u8> {
    let mut d = crate::protocol::request_envelope(op, id, session, resource);
    for (k, v) in extra {
        d.insert(k, v);
    }
    Codec::default().encode(&Value::Dict(d)).unwrap_or_default()
}

struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(target: &Target, upgrade: bool) -> Option<Conn> {
        let mut s = TcpStream::connect(target.addr.as_str()).await.ok()?;
        if !upgrade {
            return Some(Conn { s, buf: Vec::new() });
        }
        let auth = target
            .token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "GET / HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{auth}\r\n",
            target.addr
        );
        s.write_all(head.as_bytes()).await.ok()?;
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            match tokio::time::timeout(Duration::from_secs(10), s.read(&mut byte)).await {
                Ok(Ok(1)) => got.push(byte[0]),
                _ => return None,
            }
        }
        got.starts_with(b"HTTP/1.1 101")
            .then_some(Conn { s, buf: Vec::new() })
    }

    async fn send(&mut self, opcode: u8, payload: &[u8]) -> bool {
        let header = frame_header(opcode, payload.len());
        self.s.write_all(&header).await.is_ok() && self.s.write_all(payload).await.is_ok()
    }

    /// The next data message, or how the connection ended: the close code
    /// (0 without a close frame, 1 when still open at `end`).
    async fn next(&mut self, end: Instant) -> Result<Vec<u8>, u16> {
        loop {
            while self.buf.len() >= 2 {
                let (len, ext) = match self.buf[1] & 0x7F {
                    126 if self.buf.len() >= 4 => {
                        (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 2)
                    }
                    127 if self.buf.len() >= 10 => {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(&self.buf[2..10]);
                        (u64::from_be_bytes(b) as usize, 8)
                    }
                    126 | 127 => break,
                    n => (n as usize, 0),
                };
                if self.buf.len() < 2 + ext + len {
                    break;
                }
                let opcode = self.buf[0] & 0x0F;
                let payload: Vec<u8> = self.buf[2 + ext..2 + ext + len].to_vec();
                self.buf.drain(..2 + ext + len);
                match opcode {
                    0x8 if payload.len() >= 2 => {
                        return Err(u16::from_be_bytes([payload[0], payload[1]]))
                    }
                    0x8 => return Err(1005),
                    0x2 => return Ok(payload),
                    _ => {}
                }
            }
            let mut chunk = vec![0u8; 64 * 1024];
            let left = end.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.s.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return Err(0),
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => return Err(1),
            }
        }
    }

    /// Reads until the connection ends (see [`Conn::next`]).
    async fn ending(&mut self, end: Instant) -> u16 {
        loop {
            if let Err(code) = self.next(end).await {
                return code;
            }
        }
    }

    /// Says hello; the session ID.
    async fn hello(&mut self, end: Instant) -> Option<Value> {
        if !self
            .send(0x2, &request("hello", "h", &Value::Null, None, Dict::new()))
            .await
        {
            return None;
        }
        let answer = self.next(end).await.ok()?;
        let v = Codec::default().decode(bytes::Bytes::from(answer)).ok()?;
        v.get("result")?.get("session_id").cloned()
    }
}

/// One connection of one attacker; how it ended (see [`Conn::ending`]).
async fn attack(
    kind: &'static str,
    i: usize,
    t: &Target,
    big: &Envelopes,
    end: Instant,
    sent: &mut u64,
) -> u16 {
    let Some(mut c) = Conn::open(t, kind != "silent-tcp").await else {
        return 0;
    };
    match kind {
        "v-first" | "zeros" => {
            let payload = if kind == "v-first" {
                &big.v_first
            } else {
                &big.zeros
            };
            // Again and again, as soon as each is answered.
            loop {
                if !c.send(0x2, payload).await {
                    return 0;
                }
                *sent += 1;
                if let Err(code) = c.next(end).await {
                    return code;
                }
            }
        }
        "silent-ws" => c.ending(end).await,
        "silent-tcp" => {
            let _ =
                c.s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    .await;
            c.ending(end).await
        }
        "stall" => {
            let mut f = frame_header(0x2, 60 << 20);
            f.extend(std::iter::repeat_n(0u8, 1 << 20));
            if c.s.write_all(&f).await.is_err() {
                return 0;
            }
            c.ending(end).await
        }
        "unread" => {
            let Some(session) = c.hello(end).await else {
                return 0;
            };
            // Describes, pipelined and never read, until the server drops
            // the session.
            let env = t.envs.get(i % t.envs.len().max(1)).cloned();
            let mut n = 0u64;
            while Instant::now() < end {
                let r = request(
                    "describe",
                    &format!("u{n}"),
                    &session,
                    env.as_deref(),
                    Dict::new(),
                );
                let written = tokio::time::timeout(Duration::from_secs(1), c.send(0x2, &r)).await;
                if !matches!(written, Ok(true)) {
                    break;
                }
                n += 1;
            }
            *sent = n;
            // Only now read, to learn how it ended.
            c.ending(end).await
        }
        "lazy-observer" => {
            let Some(session) = c.hello(end).await else {
                return 0;
            };
            for k in 0..1024 {
                let env = t.envs[k % t.envs.len().max(1)].as_str();
                let mut extra = Dict::new();
                extra.insert("subscription_id", format!("lazy{k}"));
                let r = request("subscribe", &format!("s{k}"), &session, Some(env), extra);
                if !c.send(0x2, &r).await {
                    return 0;
                }
                *sent += 1;
            }
            // Never read: keep the connection until the end.
            tokio::time::sleep(end.saturating_duration_since(Instant::now())).await;
            1
        }
        _ => {
            // garbage: a reserved opcode, or an invalid close code.
            let ok = if i.is_multiple_of(2) {
                c.send(0xB + (i % 5) as u8, b"xx").await
            } else {
                c.send(0x8, &[0x03, 0xED]).await
            };
            if !ok {
                return 0;
            }
            *sent = 1;
            c.ending(end).await
        }
    }
}
