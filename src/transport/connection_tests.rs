//! The connection's reader and writer over real sockets.

use super::*;
use crate::transport::frame::Role;
use tokio::net::TcpStream;

/// A direct send larger than the socket buffers is written in part; a
/// pong due meanwhile is held back and follows the completed frame, so
/// the peer sees two whole frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_frames_wait_for_a_torn_frame() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server_side, _) = listener.accept().await.unwrap();
    torn_frame_then_pong(server_side.into(), peer).await;
}

/// The same over a Unix socket, whose halves register for writability only
/// while a write waits (`unix_io`): the direct send's rest, written by the
/// writer through a full buffer, and the held pong still arrive in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_frames_wait_for_a_torn_frame_over_unix() {
    let (server_side, peer) = tokio::net::UnixStream::pair().unwrap();
    torn_frame_then_pong(Stream::Unix(server_side), peer).await;
}

async fn torn_frame_then_pong<P>(server_side: Stream, mut peer: P)
where
    P: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tokio::io::AsyncReadExt;
    let (mut reader, mut writer) = pair(server_side, BytesMut::new(), Role::Server, 1 << 30);
    let message: Vec<u8> = (0..32usize << 20).map(|i| (i % 251) as u8).collect();
    let rest = match writer.direct().try_send(&message) {
        Direct::Partial(rest) => rest,
        Direct::Sent => panic!("32 MiB fit the socket buffers whole"),
        Direct::NotNow => panic!("nothing written"),
    };
    // A masked ping "hi" from the peer; the server's reader answers it.
    let mask = [1u8, 2, 3, 4];
    let mut ping = vec![0x80 | OP_PING, 0x80 | 2];
    ping.extend_from_slice(&mask);
    ping.extend_from_slice(&[b'h' ^ 1, b'i' ^ 2]);
    peer.write_all(&ping).await.unwrap();
    let shared = writer.shared.clone();
    let reading = tokio::spawn(async move { reader.recv().await });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while shared.write.lock().await.held.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the pong was not held"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let expected = message.clone();
    let receiving = tokio::spawn(async move {
        let mut head = [0u8; 10];
        peer.read_exact(&mut head).await.unwrap();
        assert_eq!(head[..2], [0x80 | OP_BINARY, 127]);
        let len = u64::from_be_bytes(head[2..10].try_into().unwrap()) as usize;
        assert_eq!(len, expected.len());
        let mut body = vec![0u8; len];
        peer.read_exact(&mut body).await.unwrap();
        assert!(body == expected, "the data frame arrived corrupted");
        let mut pong = [0u8; 4];
        peer.read_exact(&mut pong).await.unwrap();
        assert_eq!(pong, [0x80 | OP_PONG, 2, b'h', b'i']);
    });
    writer.write_raw(&rest).await.unwrap();
    receiving.await.unwrap();
    assert!(!shared.write.lock().await.torn);
    reading.abort();
}

/// After a large message the read buffer is small again, so an idle
/// connection does not keep its largest message's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_buffer_shrinks_after_a_large_message() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut peer = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server_side, _) = listener.accept().await.unwrap();
    let (mut reader, _writer) = pair(server_side.into(), BytesMut::new(), Role::Server, 1 << 30);
    let len = 4usize << 20;
    let mut frame = vec![0x80 | OP_BINARY, 0x80 | 127];
    frame.extend_from_slice(&(len as u64).to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 0]);
    frame.resize(frame.len() + len, 7);
    let sending = tokio::spawn(async move {
        peer.write_all(&frame).await.unwrap();
        peer
    });
    let big = reader.recv().await.unwrap();
    assert_eq!(big.len(), len);
    let mut peer = sending.await.unwrap();
    drop(big);
    // The next read reserves room: a buffer still sharing the large
    // allocation would take it all back now.
    peer.write_all(&[0x80 | OP_BINARY, 0x80 | 3, 0, 0, 0, 0, 1, 2, 3])
        .await
        .unwrap();
    assert_eq!(&reader.recv().await.unwrap()[..], &[1, 2, 3]);
    assert!(
        reader.buf.capacity() <= 64 * 1024,
        "the buffer kept {} bytes",
        reader.buf.capacity()
    );
}

/// Masked client frames: `n` pings, then (optionally) one binary message.
fn pings(n: usize, then_message: bool) -> Vec<u8> {
    let mask = [1u8, 2, 3, 4];
    let mut bytes = Vec::new();
    for _ in 0..n {
        bytes.extend_from_slice(&[0x80 | OP_PING, 0x80 | 2]);
        bytes.extend_from_slice(&mask);
        bytes.extend_from_slice(&[b'h' ^ 1, b'i' ^ 2]);
    }
    if then_message {
        bytes.extend_from_slice(&[0x80 | OP_BINARY, 0x80 | 2]);
        bytes.extend_from_slice(&mask);
        bytes.extend_from_slice(&[b'o' ^ 1, b'k' ^ 2]);
    }
    bytes
}

async fn server_pair() -> (TcpStream, WsReader, WsWriter) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server_side, _) = listener.accept().await.unwrap();
    let (reader, writer) = pair(server_side.into(), BytesMut::new(), Role::Server, 1 << 20);
    (peer, reader, writer)
}

/// Up to the limit, pings are answered and the connection carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_up_to_the_limit_are_answered() {
    let (mut peer, mut reader, _writer) = server_pair().await;
    let n = MAX_CONTROL_PER_SECOND as usize;
    let sending = tokio::spawn(async move {
        peer.write_all(&pings(n, true)).await.unwrap();
        let mut pongs = vec![0u8; 4 * n];
        tokio::io::AsyncReadExt::read_exact(&mut peer, &mut pongs)
            .await
            .unwrap();
        assert!(pongs
            .chunks(4)
            .all(|p| p == [0x80 | OP_PONG, 2, b'h', b'i']));
    });
    let message = reader.recv().await.expect("the message after the pings");
    assert_eq!(&message[..], b"ok");
    sending.await.unwrap();
}

/// A ping flood is throttled: past the limit, nothing more is read until
/// the second is over (the flood waits in the socket), and the connection
/// carries on: a message behind 2 × limit + 1 pings arrives no sooner than
/// two seconds after the connection began, every ping answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_flood_is_throttled_not_answered_at_its_rate() {
    let began = std::time::Instant::now();
    let (mut peer, mut reader, _writer) = server_pair().await;
    let n = 2 * MAX_CONTROL_PER_SECOND as usize + 1;
    peer.write_all(&pings(n, true)).await.unwrap();
    let message = tokio::time::timeout(std::time::Duration::from_secs(60), reader.recv())
        .await
        .expect("the reader went on")
        .expect("the message after the pings");
    assert_eq!(&message[..], b"ok");
    assert!(began.elapsed() >= std::time::Duration::from_secs(2));
    let mut pongs = vec![0u8; 4 * n];
    tokio::io::AsyncReadExt::read_exact(&mut peer, &mut pongs)
        .await
        .unwrap();
    assert!(pongs
        .chunks(4)
        .all(|p| p == [0x80 | OP_PONG, 2, b'h', b'i']));
}
