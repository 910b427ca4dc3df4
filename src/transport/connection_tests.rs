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

/// A masked client frame (`fin`, `opcode`, `payload`), as it goes on the
/// wire.
fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [9u8, 8, 7, 6];
    let mut bytes = Vec::new();
    frame::encode_into(&mut bytes, opcode, payload, Some(mask));
    if !fin {
        bytes[0] &= 0x7f;
    }
    bytes
}

/// A forwarding reader over a socket whose `buffered` bytes were already
/// read (as a handshake's leftover is), a message limit of `max`, and a
/// session budget of `cap` bytes.
async fn forwarding_reader(buffered: &[u8], max: usize, cap: usize) -> (TcpStream, WsReader) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server_side, _) = listener.accept().await.unwrap();
    let (mut reader, _writer) = pair(
        server_side.into(),
        BytesMut::from(buffered),
        Role::Server,
        max,
    );
    // A pool of nothing: the account's allowance is all it may hold.
    let account = crate::budget::Account::new(crate::budget::Pool::new(0), cap);
    reader.set_limits(account, std::time::Duration::from_secs(60));
    (peer, reader)
}

/// The whole data frames a read brought come out as one run, as they lay
/// (a fragmented message's frames included); a frame over the message
/// limit ends the run and is refused by the next read, with 1009.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_whole_frames_comes_out_at_once_and_a_bad_one_next() {
    let one = client_frame(true, OP_BINARY, b"one");
    let two = client_frame(false, OP_BINARY, b"tw");
    let three = client_frame(true, OP_CONTINUATION, b"o");
    let huge = client_frame(true, OP_BINARY, &[5u8; 100]);
    let buffered = [&one[..], &two, &three, &huge].concat();
    let (mut peer, mut reader) = forwarding_reader(&buffered, 64, 1 << 20).await;
    let run = reader.recv_frames().await.expect("the run");
    assert_eq!(&run[..], &[&one[..], &two, &three].concat()[..]);
    assert_eq!(reader.take_charge().bytes(), 6, "each frame charged");
    let refused = reader.recv_frames().await.expect_err("over the limit");
    assert!(matches!(refused, TransportError::TooLarge), "{refused}");
    let mut close = [0u8; 4];
    tokio::io::AsyncReadExt::read_exact(&mut peer, &mut close)
        .await
        .unwrap();
    assert_eq!(close[..2], [0x80 | OP_CLOSE, close[1]]);
    assert_eq!(u16::from_be_bytes([close[2], close[3]]), 1009);
}

/// A frame the session's budget cannot hold while the run's frames are
/// held ends the run, and is read once they are written on (their charge
/// released); a continuation out of sequence ends a run too, and is
/// refused (1002).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_and_the_sequence_end_a_run() {
    let a = client_frame(true, OP_BINARY, &[1u8; 600]);
    let b = client_frame(true, OP_BINARY, &[2u8; 600]);
    let stray = client_frame(true, OP_CONTINUATION, b"x");
    let buffered = [&a[..], &b, &stray].concat();
    let (_peer, mut reader) = forwarding_reader(&buffered, 1 << 20, 1000).await;
    let first = reader.recv_frames().await.expect("the first frame");
    assert_eq!(&first[..], &a[..], "the second frame is over the budget");
    drop(reader.take_charge());
    let second = reader.recv_frames().await.expect("the second frame");
    assert_eq!(
        &second[..],
        &b[..],
        "the stray continuation is not gathered"
    );
    drop(reader.take_charge());
    let refused = reader.recv_frames().await.expect_err("out of sequence");
    assert_eq!(refused.close_code(), Some(1002), "{refused}");
}

/// A control frame ends a run: it is answered, and the frames behind it
/// come out next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_frame_ends_a_run_and_is_answered() {
    let a = client_frame(true, OP_BINARY, b"a");
    let ping = client_frame(true, OP_PING, b"hi");
    let b = client_frame(true, OP_BINARY, b"b");
    let c = client_frame(true, OP_BINARY, b"c");
    let buffered = [&a[..], &ping, &b, &c].concat();
    let (mut peer, mut reader) = forwarding_reader(&buffered, 1 << 20, 1 << 20).await;
    assert_eq!(&reader.recv_frames().await.unwrap()[..], &a[..]);
    assert_eq!(
        &reader.recv_frames().await.unwrap()[..],
        &[&b[..], &c].concat()[..]
    );
    let mut pong = [0u8; 4];
    tokio::io::AsyncReadExt::read_exact(&mut peer, &mut pong)
        .await
        .unwrap();
    assert_eq!(pong, [0x80 | OP_PONG, 2, b'h', b'i']);
}

/// A forwarded frame larger than the socket buffers is written whole:
/// what the socket takes at once, then the rest (the frame torn
/// meanwhile, whole again after).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_raw_writes_a_frame_larger_than_the_socket_buffers() {
    let (mut peer, _reader, mut writer) = server_pair().await;
    let len = 16usize << 20;
    let mut framed = Vec::new();
    let payload: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
    frame::encode_into(&mut framed, OP_BINARY, &payload, None);
    let expected = framed.clone();
    let receiving = tokio::spawn(async move {
        let mut got = vec![0u8; expected.len()];
        tokio::io::AsyncReadExt::read_exact(&mut peer, &mut got)
            .await
            .unwrap();
        assert!(got == expected, "the frame arrived corrupted");
    });
    writer.write_raw(&framed).await.expect("written");
    receiving.await.unwrap();
    assert!(!writer.shared.write.lock().await.torn);
}
