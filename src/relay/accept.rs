//! The relay's connections: TLS, the request head (read once, then handed
//! whole to the WebSocket handshake), routing by path, the listing, host
//! control connections, tunnels and clients.

use super::forward::{self, Tunnel};
use super::wire::{self, Control};
use super::{HostEntry, Shared};
use crate::budget::Account;
use crate::transport::frame::Role;
use crate::transport::tls::Stream;
use crate::transport::ws::{self, Refusal, RequestHead, WsReader, WsWriter};
use crate::transport::{Reader, Writer};
use bytes::BytesMut;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

/// The first and the longest wait after a failed accept.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Accepts connections until the relay shuts down.
pub(super) async fn accept_loop(shared: Arc<Shared>, tcp: TcpListener) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let accepted = tokio::select! {
            _ = until(&mut shutdown) => break,
            a = tcp.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff = ACCEPT_BACKOFF_MIN;
                let task_shared = shared.clone();
                let live = shared.live();
                shared.tasks.spawn(async move {
                    let _live = live;
                    let peer = peer.to_string();
                    let span = tracing::info_span!("relay_connection", %peer);
                    serve_connection(task_shared, stream).instrument(span).await;
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64,
                    "relay: cannot accept a connection");
                tokio::select! {
                    _ = until(&mut shutdown) => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
    }
}

/// The refusal of an upgrade on any other path, the root included: a
/// client given a relay's URL instead of a host's is told what to do
/// (and `discover` recognises it by its start).
pub(crate) const RELAY_ROOT: &str = "this is a unienv-remote relay, not a server: connect to one of its hosts at /hosts/NAME (GET /hosts lists them; unienv-remote discover URL prints them)";

/// A request head, read and left in the buffer.
struct Head {
    method: String,
    /// The path, without the query.
    path: String,
    headers: RequestHead,
    upgrade: bool,
}

/// Where a request goes.
enum Route {
    Control,
    Tunnel(String),
    Client(String),
    List,
    Root,
    Other,
}

fn route(path: &str) -> Route {
    if path == wire::CONTROL_PATH {
        Route::Control
    } else if let Some(id) = path.strip_prefix(wire::TUNNEL_PREFIX) {
        Route::Tunnel(id.to_string())
    } else if let Some(name) = path.strip_prefix(wire::HOSTS_PREFIX) {
        Route::Client(name.to_string())
    } else if path == wire::LIST_PATH {
        Route::List
    } else if path == "/" {
        Route::Root
    } else {
        Route::Other
    }
}

async fn serve_connection(shared: Arc<Shared>, tcp: TcpStream) {
    let config = &shared.config.listen;
    // As the server's listener: a pending handshake holds a place (the
    // oldest dropped for a newcomer) and must finish within the handshake
    // timeout.
    let slot = shared.guards.handshakes.admit();
    let read = async {
        let _ = tcp.set_nodelay(true);
        let mut stream = open_stream(&shared, tcp).await?;
        let mut buf = BytesMut::with_capacity(2048);
        let head = read_head(&mut stream, &mut buf, config.max_handshake_bytes).await;
        Some((stream, buf, head))
    };
    let read = tokio::select! {
        r = tokio::time::timeout(config.handshake_timeout, read) => r,
        _ = slot.evicted.notified() => {
            tracing::info!("relay: connection dropped: too many pending handshakes");
            return;
        }
    };
    let (mut stream, buf, head) = match read {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(_) => {
            tracing::info!("relay: connection refused: handshake timed out");
            return;
        }
    };
    let Some(head) = head else {
        let _ = stream
            .write_all(&plain(
                400,
                "Bad Request",
                "malformed or oversized HTTP request",
            ))
            .await;
        return;
    };
    match (head.upgrade, route(&head.path)) {
        (false, Route::List | Route::Root) if head.method == "GET" || head.method == "HEAD" => {
            let response = match shared.client_policy.check(&head.headers) {
                Ok(()) => json_response(&shared.listing(), head.method == "HEAD"),
                Err(r) => plain(r.status, r.reason, &r.message),
            };
            let _ = stream.write_all(&response).await;
            let _ = stream.shutdown().await;
        }
        (false, _) => {
            let _ = stream
                .write_all(&plain(
                    404,
                    "Not Found",
                    "a unienv-remote relay: GET /hosts lists the connected hosts; clients connect with WebSocket to /hosts/NAME",
                ))
                .await;
        }
        (true, Route::Control) => {
            let accepted = upgrade(
                &shared,
                stream,
                buf,
                &head,
                true,
                wire::MAX_CONTROL_MESSAGE,
                Role::Server,
            );
            let accepted = tokio::select! {
                r = accepted => r,
                _ = slot.evicted.notified() => return,
            };
            drop(slot);
            if let Some((reader, writer, permit)) = accepted {
                control(
                    shared.clone(),
                    Reader::Ws(reader),
                    Writer::Ws(writer),
                    permit,
                )
                .await;
            }
        }
        (true, Route::Tunnel(id)) => {
            drop(slot);
            tunnel(&shared, stream, buf, &head, &id).await;
        }
        (true, Route::Client(name)) => {
            drop(slot);
            client(&shared, stream, buf, &head, &name).await;
        }
        (true, Route::List) => {
            drop(slot);
            list(&shared, stream, buf, &head).await;
        }
        (true, Route::Root | Route::Other) => {
            refuse(
                &shared,
                stream,
                buf,
                Refusal::new(404, "Not Found", RELAY_ROOT),
            )
            .await;
        }
    }
}

/// The byte stream: after the TLS handshake when the relay serves TLS.
async fn open_stream(shared: &Shared, tcp: TcpStream) -> Option<Stream> {
    let config = &shared.config.listen;
    let Some(tls) = config.tls.as_ref() else {
        return Some(Stream::Tcp(tcp));
    };
    match crate::transport::tls::starts_with_tls(&tcp).await {
        Ok(true) => match tls.acceptor().accept(tcp).await {
            Ok(s) => Some(Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(s)))),
            Err(e) => {
                tracing::info!(error = %e, "relay: TLS handshake failed");
                None
            }
        },
        Ok(false) => {
            // A ws:// client on a wss:// relay: told so in plain HTTP.
            let mut stream = Stream::Tcp(tcp);
            let mut buf = BytesMut::with_capacity(1024);
            let _ = read_head(&mut stream, &mut buf, config.max_handshake_bytes).await;
            let _ = stream
                .write_all(&plain(
                    400,
                    "Bad Request",
                    "this endpoint speaks TLS: connect with a wss:// URL",
                ))
                .await;
            None
        }
        Err(_) => None,
    }
}

/// Reads a request head into `buf` (at most `max` bytes), leaving it
/// there for the WebSocket handshake; `None` for a malformed or oversized
/// head (the caller answers 400), the stream's end included.
async fn read_head(stream: &mut Stream, buf: &mut BytesMut, max: usize) -> Option<Head> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(buf) {
            Ok(httparse::Status::Complete(_)) => {
                let target = req.path.unwrap_or("/");
                let path = target.split('?').next().unwrap_or("/").to_string();
                let headers = RequestHead {
                    method: req.method.unwrap_or_default().to_string(),
                    headers: req
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_string(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect(),
                };
                let upgrade = headers
                    .header("upgrade")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"));
                return Some(Head {
                    method: headers.method.clone(),
                    path,
                    headers,
                    upgrade,
                });
            }
            Ok(httparse::Status::Partial) => {}
            Err(_) => return None,
        }
        if buf.len() >= max {
            return None;
        }
        buf.reserve(1024);
        let room = (max - buf.len()) as u64;
        match (&mut *stream).take(room).read_buf(buf).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// A connection slot, or the 503 refusal.
fn connection_slot(shared: &Shared) -> Result<OwnedSemaphorePermit, Refusal> {
    shared
        .connections
        .clone()
        .try_acquire_owned()
        .map_err(|_| Refusal::new(503, "Service Unavailable", "too many connections"))
}

/// Answers the upgrade with `refusal` (the handshake's own refusal when
/// the request is not a valid upgrade).
async fn refuse(shared: &Shared, stream: Stream, buf: BytesMut, refusal: Refusal) {
    let config = &shared.config.listen;
    tracing::info!(status = refusal.status, reason = %refusal.message, "relay: connection refused");
    let answer = ws::accept_buffered(stream, buf, config.max_handshake_bytes, 0, move |_| {
        Err(refusal)
    });
    let _ = tokio::time::timeout(config.handshake_timeout, answer).await;
}

/// Checks the request (hosts' or clients' token), takes a connection slot
/// and completes the upgrade; after it the relay frames as `framing` (a
/// client on tunnels, whose hosts frame as servers).
async fn upgrade(
    shared: &Shared,
    stream: Stream,
    buf: BytesMut,
    head: &Head,
    host_side: bool,
    max_message: usize,
    framing: Role,
) -> Option<(WsReader, WsWriter, OwnedSemaphorePermit)> {
    let config = &shared.config.listen;
    let policy = if host_side {
        &shared.host_policy
    } else {
        &shared.client_policy
    };
    let mut permit = None;
    let check = |req: &RequestHead| {
        policy.check(req)?;
        permit = Some(connection_slot(shared)?);
        Ok(())
    };
    let accepted = tokio::time::timeout(
        config.handshake_timeout,
        ws::accept_framed(
            stream,
            buf,
            config.max_handshake_bytes,
            max_message,
            framing,
            check,
        ),
    )
    .await;
    match accepted {
        Ok(Ok((r, w))) => Some((r, w, permit?)),
        Ok(Err(e)) => {
            tracing::info!(path = %head.path, reason = %e, "relay: connection refused");
            None
        }
        Err(_) => None,
    }
}

/// A host's control connection: registration, then open requests out and
/// declines in, until either side ends.
async fn control(
    shared: Arc<Shared>,
    mut reader: Reader,
    mut writer: Writer,
    _permit: OwnedSemaphorePermit,
) {
    let config = &shared.config.listen;
    // Control messages are small: a budget of two of the largest.
    let account = Account::new(shared.guards.pool.clone(), 2 * wire::MAX_CONTROL_MESSAGE);
    reader.set_limits(account, config.message_timeout);
    let first = tokio::time::timeout(config.handshake_timeout, reader.recv()).await;
    let register = match first {
        Ok(Ok(bytes)) => Control::decode(&bytes),
        Ok(Err(e)) => {
            tracing::info!(reason = %e, "relay: host left before registering");
            return;
        }
        Err(_) => {
            let reason = Some((1008, "no registration within the handshake timeout"));
            bounded(config, writer.close(reason)).await;
            return;
        }
    };
    let outcome = match register {
        Ok(Control::Register { identity, instance }) => shared.register(identity, instance),
        Ok(_) => Err(Control::Refused {
            code: "bad_request".into(),
            message: "the first control message must be a registration".into(),
        }),
        Err(e) => Err(Control::Refused {
            code: "bad_request".into(),
            message: e.to_string(),
        }),
    };
    let (host, mut opens) = match outcome {
        Ok(r) => r,
        Err(refused) => {
            if let Control::Refused { message, .. } = &refused {
                tracing::info!(reason = %message, "relay: host refused");
            }
            let _ = send(&mut writer, refused.encode(), config.message_timeout).await;
            bounded(config, writer.close(Some((1008, "registration refused")))).await;
            return;
        }
    };
    let name = host.identity.name.clone();
    tracing::info!(host = %name, resources = host.identity.resources.len(), "relay: host registered");
    let registered = Control::Registered { name: name.clone() }.encode();
    let mut ended = send(&mut writer, registered, config.message_timeout)
        .await
        .err();
    let vanished = reader.watch_peer(config.heartbeat_interval, config.heartbeat_timeout);
    tokio::pin!(vanished);
    let mut gone = host.gone.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    let mut reason: Option<(u16, &str)> = None;
    while ended.is_none() {
        tokio::select! {
            _ = until(&mut gone) => {
                reason = Some((1000, "registration taken over by a re-dial"));
                break;
            }
            _ = until(&mut shutdown) => {
                reason = Some((1001, "relay shutting down"));
                break;
            }
            _ = &mut vanished => {
                tracing::info!(host = %name, "relay: host silent past the heartbeat timeout");
                break;
            }
            open = opens.recv() => {
                let Some(open) = open else { break };
                ended = send(&mut writer, open.encode(), config.message_timeout).await.err();
            }
            message = reader.recv() => match message.map(|m| Control::decode(&m)) {
                Ok(Ok(Control::Decline { tunnel, message })) => {
                    shared.decline(&host, &tunnel, message);
                }
                Ok(Ok(_)) => {
                    reason = Some((1008, "unexpected control message"));
                    break;
                }
                Ok(Err(_)) => {
                    reason = Some((1008, "invalid control message"));
                    break;
                }
                Err(e) => ended = Some(e.to_string()),
            },
        }
    }
    shared.unregister(&host);
    tracing::info!(host = %name, reason = ended.as_deref().unwrap_or("closed"), "relay: host disconnected");
    bounded(config, writer.close(reason)).await;
}

/// Sends one message now, within `within` (a peer that does not read
/// cannot hold the sender).
pub(crate) async fn send(
    writer: &mut Writer,
    message: bytes::Bytes,
    within: Duration,
) -> Result<(), String> {
    let sent = async {
        writer.feed(message).await?;
        writer.flush().await
    };
    match tokio::time::timeout(within, sent).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!(
            "the peer took nothing for {:.0} s",
            within.as_secs_f64()
        )),
    }
}

/// `f` (a close), given at most the handshake timeout.
async fn bounded(config: &crate::server::ServerConfig, f: impl std::future::Future<Output = ()>) {
    let _ = tokio::time::timeout(config.handshake_timeout, f).await;
}

/// A host's tunnel connection: handed to the client waiting for it.
async fn tunnel(shared: &Arc<Shared>, stream: Stream, buf: BytesMut, head: &Head, id: &str) {
    // The token first: an unauthenticated peer learns nothing of the IDs.
    if let Err(r) = shared.host_policy.check(&head.headers) {
        return refuse(shared, stream, buf, r).await;
    }
    let waiting = if wire::is_tunnel_id(id) {
        shared.claim(id)
    } else {
        None
    };
    let Some(reply) = waiting else {
        return refuse(
            shared,
            stream,
            buf,
            Refusal::new(404, "Not Found", "unknown or expired tunnel"),
        )
        .await;
    };
    let config = &shared.config.listen;
    // The host frames its tunnel as a server, so that the client's frames
    // (masked) and the host's (unmasked) are forwarded as they are.
    let accepted = upgrade(
        shared,
        stream,
        buf,
        head,
        true,
        config.max_message_size,
        Role::Client,
    );
    match accepted.await {
        Some((reader, mut writer, permit)) => {
            if let Err(Ok(t)) = reply.send(Ok(Tunnel {
                reader,
                writer,
                _permit: permit,
            })) {
                // The client stopped waiting meanwhile.
                writer = t.writer;
                bounded(config, writer.close(Some((1000, "the client left")))).await;
            }
        }
        None => {
            let _ = reply.send(Err(
                "the host's tunnel connection failed its handshake".into()
            ));
        }
    }
}

/// A client of `name`: waits (bounded) for the host's tunnel, then
/// completes its upgrade and forwards.
async fn client(shared: &Arc<Shared>, stream: Stream, buf: BytesMut, head: &Head, name: &str) {
    if let Err(r) = shared.client_policy.check(&head.headers) {
        return refuse(shared, stream, buf, r).await;
    }
    if let Err(e) = wire::validate_name(name) {
        return refuse(
            shared,
            stream,
            buf,
            Refusal::new(400, "Bad Request", e.to_string()),
        )
        .await;
    }
    let slot = match connection_slot(shared) {
        Ok(p) => p,
        Err(r) => return refuse(shared, stream, buf, r).await,
    };
    let host: Option<Arc<HostEntry>> = shared.hosts.lock().get(name).cloned();
    let Some(host) = host else {
        let known: Vec<String> = shared
            .host_infos()
            .into_iter()
            .take(20)
            .map(|h| h.identity.name)
            .collect();
        let message = format!(
            "no host named '{name}' is connected to this relay (connected: {}); GET /hosts lists them",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
        return refuse(shared, stream, buf, Refusal::new(404, "Not Found", message)).await;
    };
    let mut request = match shared.request_open(&host) {
        Ok(r) => r,
        Err(refusal) => return refuse(shared, stream, buf, refusal).await,
    };
    let timeout = shared.config.open_timeout;
    let mut gone = host.gone.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    let outcome = tokio::select! {
        r = &mut request.reply => r.unwrap_or_else(|_| Err("the request was dropped".into())),
        _ = tokio::time::sleep(timeout) => {
            drop(request);
            let message = format!(
                "host '{name}' did not open a tunnel within {:.1} s of the relay's request (is it overloaded, or unable to reach the relay?)",
                timeout.as_secs_f64()
            );
            return refuse(shared, stream, buf, Refusal::new(504, "Gateway Timeout", message)).await;
        }
        _ = until(&mut gone) => {
            drop(request);
            let message = format!("host '{name}' disconnected from the relay");
            return refuse(shared, stream, buf, Refusal::new(502, "Bad Gateway", message)).await;
        }
        _ = until(&mut shutdown) => return,
    };
    drop(request);
    let tunnel = match outcome {
        Ok(t) => t,
        Err(why) => {
            let message = format!("host '{name}' declined the connection: {why}");
            return refuse(
                shared,
                stream,
                buf,
                Refusal::new(503, "Service Unavailable", message),
            )
            .await;
        }
    };
    let config = &shared.config.listen;
    let accepted = tokio::time::timeout(
        config.handshake_timeout,
        ws::accept_buffered(
            stream,
            buf,
            config.max_handshake_bytes,
            config.max_message_size,
            |_| Ok(()),
        ),
    )
    .await;
    match accepted {
        Ok(Ok((r, w))) => {
            // A task of its own, outside this connection's span (see
            // `forward`): its events name the span instead.
            let live = shared.live();
            let span = tracing::Span::current();
            let session = forward::run(shared.clone(), host, (r, w, slot), tunnel, span);
            shared.tasks.spawn(async move {
                let _live = live;
                session.await;
            });
        }
        _ => {
            let mut writer = tunnel.writer;
            bounded(config, writer.close(Some((1000, "the client left")))).await;
        }
    }
}

/// The listing over WebSocket: one message, then a close.
async fn list(shared: &Arc<Shared>, stream: Stream, buf: BytesMut, head: &Head) {
    let upgraded = upgrade(shared, stream, buf, head, false, 1024, Role::Server);
    let Some((_, writer, _permit)) = upgraded.await else {
        return;
    };
    let mut writer = Writer::Ws(writer);
    let config = &shared.config.listen;
    let text = bytes::Bytes::from(shared.listing().to_string());
    if send(&mut writer, text, config.message_timeout)
        .await
        .is_ok()
    {
        bounded(config, writer.close(Some((1000, "listing sent")))).await;
    }
}

/// A plain HTTP response that closes the connection.
fn plain(status: u16, reason: &str, text: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}

fn json_response(value: &serde_json::Value, head_only: bool) -> Vec<u8> {
    let body = value.to_string();
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// Returns once the flag is set (or its sender is gone); holds no borrow
/// of the flag across its caller's awaits.
async fn until(flag: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}
