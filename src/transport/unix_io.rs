//! A Unix domain socket's halves without a standing write registration.
//!
//! tokio registers a `UnixStream` with the runtime's epoll for reading and
//! writing at once, edge-triggered. On a Unix socket the kernel signals
//! "writable" every time the peer reads something this end wrote (each
//! freed buffer wakes the socket's waiters), so every response the peer
//! consumed woke a runtime thread that had nothing to do: one wake-up (two
//! context switches) per request, measured with `benches/profile/wakeups.sh`.
//! TCP signals writability only to a writer that found the buffer full, so
//! it has no such wake-ups and keeps tokio's own halves.
//!
//! Here the two halves are two descriptors of the same socket (`dup`):
//! the read half is registered for readability only; the write half writes
//! without any registration and registers for writability only while a
//! write is blocked on a full buffer (from a `WouldBlock` until the next
//! flush). A registration made after `WouldBlock` reports readiness that
//! arrived meanwhile (epoll checks the socket when it is added), so no
//! wake-up is lost.

use std::io::{self, IoSlice, Write};
use std::mem::MaybeUninit;
use std::net::Shutdown;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The receiving half: readable-only interest.
pub(crate) struct UnixRead {
    fd: AsyncFd<socket2::Socket>,
}

/// The sending half: no interest while writes go through.
pub(crate) struct UnixWrite {
    state: WriteState,
}

enum WriteState {
    /// Writing without waiting (the usual case).
    Plain(StdUnixStream),
    /// Registered for writability: a write found the buffer full.
    Waiting(AsyncFd<StdUnixStream>),
    /// Only while the state is being replaced.
    Gone,
}

/// Splits a tokio Unix stream into halves without a write registration;
/// `Err` gives the stream back (no runtime, or no descriptor to spare),
/// to be split the usual way.
pub(crate) fn split(
    stream: tokio::net::UnixStream,
) -> Result<(UnixRead, UnixWrite), tokio::net::UnixStream> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(stream);
    }
    let dup = |s: &tokio::net::UnixStream| s.as_fd().try_clone_to_owned();
    let (read_fd, write_fd): (OwnedFd, OwnedFd) = match (dup(&stream), dup(&stream)) {
        (Ok(r), Ok(w)) => (r, w),
        _ => return Err(stream),
    };
    // Registered while tokio's registration of the original still stands
    // (epoll tells descriptors apart): on failure nothing is lost.
    let read = socket2::Socket::from(read_fd);
    // SAFETY: the socket owns its descriptor and returns that one for its
    // whole life (the `AsyncFd` owns the socket).
    let read = match unsafe { AsyncFd::register_with_interest(read, Interest::READABLE) } {
        Ok(fd) => fd,
        Err(e) => {
            tracing::debug!(error = %e.into_parts().1, "registering a Unix socket's read half");
            return Err(stream);
        }
    };
    // Dropping tokio's stream removes its registration (before closing its
    // descriptor); the socket stays open through the two copies, which
    // share its non-blocking flag.
    drop(stream);
    Ok((
        UnixRead { fd: read },
        UnixWrite {
            state: WriteState::Plain(StdUnixStream::from(write_fd)),
        },
    ))
}

impl AsyncRead for UnixRead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let mut guard = ready!(this.fd.poll_read_ready(cx))?;
            // SAFETY: `recv` only writes initialised bytes into the slice
            // (it never de-initialises any).
            let unfilled: &mut [MaybeUninit<u8>] = unsafe { buf.unfilled_mut() };
            let room = unfilled.len();
            match guard.try_io(|fd| fd.get_ref().recv(unfilled)) {
                Ok(Ok(n)) => {
                    // As tokio does: a short read emptied the socket, so the
                    // next read waits for readiness instead of failing a
                    // `recv` first (unless readiness arrived meanwhile).
                    if n > 0 && n < room {
                        guard.clear_ready();
                    }
                    // SAFETY: the kernel wrote the first `n` bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: readiness cleared, wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

impl UnixWrite {
    fn stream(&self) -> io::Result<&StdUnixStream> {
        match &self.state {
            WriteState::Plain(s) => Ok(s),
            WriteState::Waiting(fd) => Ok(fd.get_ref()),
            WriteState::Gone => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// Writes what the socket takes now, without waiting.
    pub(crate) fn try_write_vectored(&self, parts: &[IoSlice<'_>]) -> io::Result<usize> {
        self.stream()?.write_vectored(parts)
    }

    /// Ends any writability registration (the socket is written without
    /// one again).
    fn unregister(&mut self) {
        if let WriteState::Waiting(_) = self.state {
            if let WriteState::Waiting(fd) = std::mem::replace(&mut self.state, WriteState::Gone) {
                self.state = WriteState::Plain(fd.into_inner());
            }
        }
    }

    /// Writes with `write` (at most `want` bytes), waiting for writability
    /// only after a `WouldBlock`.
    fn poll_write_with(
        &mut self,
        cx: &mut Context<'_>,
        want: usize,
        mut write: impl FnMut(&StdUnixStream) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        loop {
            match &self.state {
                WriteState::Plain(s) => match write(s) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        let WriteState::Plain(s) =
                            std::mem::replace(&mut self.state, WriteState::Gone)
                        else {
                            unreachable!("matched Plain above");
                        };
                        // SAFETY: as for the read half in `split`.
                        match unsafe { AsyncFd::register_with_interest(s, Interest::WRITABLE) } {
                            Ok(fd) => self.state = WriteState::Waiting(fd),
                            Err(e) => {
                                let (s, e) = e.into_parts();
                                self.state = WriteState::Plain(s);
                                return Poll::Ready(Err(e));
                            }
                        }
                    }
                    other => return Poll::Ready(other),
                },
                WriteState::Waiting(fd) => {
                    let mut guard = ready!(fd.poll_write_ready(cx))?;
                    match guard.try_io(|fd| write(fd.get_ref())) {
                        Ok(r) => {
                            // A short write filled the buffer again.
                            if r.as_ref().is_ok_and(|&n| n < want) {
                                guard.clear_ready();
                            }
                            return Poll::Ready(r);
                        }
                        Err(_would_block) => continue,
                    }
                }
                WriteState::Gone => return Poll::Ready(Err(io::ErrorKind::NotConnected.into())),
            }
        }
    }
}

impl AsyncWrite for UnixWrite {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .poll_write_with(cx, buf.len(), |mut s: &StdUnixStream| s.write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let want = bufs.iter().map(|b| b.len()).sum();
        self.get_mut()
            .poll_write_with(cx, want, |mut s: &StdUnixStream| s.write_vectored(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered here; what was blocked has been written.
        self.get_mut().unregister();
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.unregister();
        Poll::Ready(this.stream().and_then(|s| s.shutdown(Shutdown::Write)))
    }
}

impl Drop for UnixWrite {
    /// As tokio's write half: dropping it shuts the write side, so the peer
    /// sees the end of the stream even while the read half lives on.
    fn drop(&mut self) {
        if let Ok(s) = self.stream() {
            let _ = s.shutdown(Shutdown::Write);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn halves() -> (UnixRead, UnixWrite, tokio::net::UnixStream) {
        let (ours, peer) = tokio::net::UnixStream::pair().unwrap();
        let Ok((r, w)) = split(ours) else {
            panic!("the halves were not made");
        };
        (r, w, peer)
    }

    /// A write larger than the socket buffers waits for a slow reader (a
    /// registration made on `WouldBlock`), arrives whole and in order, and
    /// the registration is gone after the flush.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_blocked_write_waits_for_the_reader_then_unregisters() {
        let (_r, mut w, mut peer) = halves();
        let message: Vec<u8> = (0..8usize << 20).map(|i| (i % 251) as u8).collect();
        let expected = message.clone();
        let reading = tokio::spawn(async move {
            let mut got = vec![0u8; expected.len() + 3];
            let mut at = 0;
            while at < got.len() {
                // A slow reader: small reads, with pauses.
                let end = (at + 256 * 1024).min(got.len());
                let n = peer.read(&mut got[at..end]).await.unwrap();
                assert!(n > 0, "the stream ended early");
                at += n;
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            assert!(got[..expected.len()] == expected[..], "corrupted");
            assert_eq!(&got[expected.len()..], b"end");
            peer
        });
        w.write_all(&message).await.unwrap();
        assert!(
            matches!(w.state, WriteState::Waiting(_)),
            "8 MiB fit the socket buffer without waiting"
        );
        w.write_all(b"end").await.unwrap();
        w.flush().await.unwrap();
        assert!(matches!(w.state, WriteState::Plain(_)));
        let mut peer = reading.await.unwrap();
        // Unregistered, the half still writes without waiting.
        let parts = [IoSlice::new(b"ab"), IoSlice::new(b"c")];
        assert_eq!(w.try_write_vectored(&parts).unwrap(), 3);
        let mut abc = [0u8; 3];
        peer.read_exact(&mut abc).await.unwrap();
        assert_eq!(&abc, b"abc");
    }

    /// Reads see what the peer wrote, then the end of the stream; dropping
    /// the write half ends the peer's stream although the read half lives.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_and_ends_of_stream() {
        let (mut r, w, mut peer) = halves();
        peer.write_all(b"hello").await.unwrap();
        let mut buf = bytes::BytesMut::with_capacity(64);
        while buf.len() < 5 {
            assert!(r.read_buf(&mut buf).await.unwrap() > 0);
        }
        assert_eq!(&buf[..], b"hello");
        drop(w);
        let mut rest = Vec::new();
        peer.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "the peer saw the end of the stream");
        peer.shutdown().await.unwrap();
        assert_eq!(r.read_buf(&mut buf).await.unwrap(), 0, "end of stream");
    }

    /// Outside a runtime the stream is given back, to be split as before.
    #[test]
    fn without_a_runtime_the_stream_is_given_back() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (ours, _peer) = rt.block_on(async { tokio::net::UnixStream::pair().unwrap() });
        assert!(split(ours).is_err());
    }
}
