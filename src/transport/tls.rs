//! TLS for WebSocket connections (`wss://`), with rustls (ring provider).
//!
//! - `Stream`: a connection's byte stream, plain TCP or TLS over TCP, with
//!   its read and write halves (`ReadHalf`, `WriteHalf`).
//! - [`ServerTls`]: a server's certificate chain and private key (PEM files).
//! - Client trust: the system's root certificates (rustls-native-certs),
//!   plus the certificates of an extra CA file (`--ca-file`).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
/// The rustls crate, for [`ServerTls::from_rustls`] and `ClientConfig::tls`.
pub use tokio_rustls::rustls;

/// Why a TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read the {what} file {}: {source}", path.display())]
    Read {
        /// Which file: `certificate`, `private key` or `CA`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O failure.
        source: io::Error,
    },
    /// A PEM file holds no item of the expected kind, or is not valid PEM.
    #[error("{}: {expected} ({source})", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the file should hold.
        expected: &'static str,
        /// The PEM parser's error.
        source: rustls::pki_types::pem::Error,
    },
    /// rustls refused the configuration (for example a key that does not
    /// match the certificate, or a CA certificate it cannot parse).
    #[error("invalid TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// No root certificate to verify servers with: the system has none and
    /// no CA file was given.
    #[error("no trusted root certificates: the system store is empty or unreadable; pass the server's CA with --ca-file FILE (ClientConfig::ca_file)")]
    NoRoots,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// The certificates of a PEM file (at least one).
fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(what, path)?;
    let pem_error = |source| TlsError::Pem {
        path: path.to_path_buf(),
        expected: "expected PEM certificates ('-----BEGIN CERTIFICATE-----')",
        source,
    };
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_error)?;
    if certs.is_empty() {
        return Err(pem_error(rustls::pki_types::pem::Error::NoItemsFound));
    }
    Ok(certs)
}

/// TLS 1.3 session tickets a server built by [`ServerTls::from_pem_files`]
/// sends after each handshake: none. A ticket reaches the client just as it
/// writes its upgrade request; clients that read and write one OpenSSL
/// connection from two threads at once (the `websockets` sync client that
/// the reference uses starts its reader thread before it writes the
/// request) then lose the request now and then, and the connection hangs
/// until the client's open timeout. Without tickets there is nothing to
/// read at that moment. The cost: no TLS session resumption, so a client
/// that reconnects does a full handshake (SPEC "TLS", BENCHMARKS "TLS
/// session tickets"). [`ServerTls::from_rustls`] keeps whatever its
/// configuration says.
pub const TLS13_TICKETS: usize = 0;

/// Whether a new connection's first byte is a TLS handshake record (waits
/// for it without consuming it); a plain HTTP request is not.
pub(crate) async fn starts_with_tls(tcp: &TcpStream) -> Result<bool, super::TransportError> {
    let mut first = [0u8; 1];
    match tcp.peek(&mut first).await {
        Ok(0) => Err(super::TransportError::Closed),
        Ok(_) => Ok(first[0] == TLS_HANDSHAKE_RECORD),
        Err(e) => Err(super::TransportError::io(e)),
    }
}

/// The first byte of a TLS handshake record (a client hello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A server's TLS settings: its certificate chain and private key. Cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
}

impl ServerTls {
    /// Reads a certificate chain (PEM, leaf first) and its private key (PEM:
    /// PKCS#8, PKCS#1 or SEC1), as `serve --tls-cert FILE --tls-key FILE`.
    pub fn from_pem_files(
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<ServerTls, TlsError> {
        let chain = certificates("certificate", cert.as_ref())?;
        let key_path = key.as_ref();
        let key_pem = read("private key", key_path)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|source| TlsError::Pem {
            path: key_path.to_path_buf(),
            expected: "expected a PEM private key ('-----BEGIN PRIVATE KEY-----' or an RSA/EC key)",
            source,
        })?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.send_tls13_tickets = TLS13_TICKETS;
        Ok(ServerTls::from_rustls(Arc::new(config)))
    }

    /// Uses a rustls configuration as it is (ALPN, client authentication,
    /// certificate resolvers: whatever it sets).
    pub fn from_rustls(config: Arc<rustls::ServerConfig>) -> ServerTls {
        ServerTls { config }
    }

    /// The rustls configuration.
    pub fn rustls_config(&self) -> &Arc<rustls::ServerConfig> {
        &self.config
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}

/// The system's root certificates, loaded once per process (an unreadable
/// store gives an empty list: a CA file can still be given).
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::debug!(error = %e, "reading the system's root certificates");
        }
        found.certs
    })
}

/// A client TLS configuration trusting the system's roots and, when given,
/// the certificates of `ca_file` (PEM).
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    // Unparseable system certificates are skipped, as browsers do.
    let _ = roots.add_parsable_certificates(system_roots().iter().cloned());
    if let Some(path) = ca_file {
        for cert in certificates("CA", path)? {
            roots.add(cert)?;
        }
    }
    if roots.is_empty() {
        return Err(TlsError::NoRoots);
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A connection's byte stream: plain TCP, or TLS over TCP.
pub(crate) enum Stream {
    /// `ws://`.
    Tcp(TcpStream),
    /// `wss://` (either end).
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
    /// `ws+unix://` (either end), a same-host Unix domain socket.
    Unix(tokio::net::UnixStream),
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Stream {
        Stream::Tcp(s)
    }
}

impl Stream {
    /// Splits into halves: a TCP socket's own halves (the write half can
    /// be written without waiting, see `WriteHalf::try_write_vectored`), or
    /// a TLS stream's lock-shared halves.
    pub(crate) fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Tls(s) => {
                let (r, w) = tokio::io::split(*s);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
            // Without a standing write registration when possible
            // (`unix_io`: no wake-up each time the peer reads).
            Stream::Unix(s) => match super::unix_io::split(s) {
                Ok((r, w)) => (ReadHalf::UnixFd(Box::new(r)), WriteHalf::UnixFd(w)),
                Err(s) => {
                    let (r, w) = s.into_split();
                    (ReadHalf::Unix(r), WriteHalf::Unix(w))
                }
            },
        }
    }
}

/// The receiving half of a [`Stream`].
pub(crate) enum ReadHalf {
    Tcp(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<tokio_rustls::TlsStream<TcpStream>>),
    Unix(tokio::net::unix::OwnedReadHalf),
    /// A Unix socket read without a write registration (`unix_io`; boxed:
    /// its registration is larger than the other halves).
    UnixFd(Box<super::unix_io::UnixRead>),
}

/// The sending half of a [`Stream`].
pub(crate) enum WriteHalf {
    Tcp(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<tokio_rustls::TlsStream<TcpStream>>),
    Unix(tokio::net::unix::OwnedWriteHalf),
    /// A Unix socket written without a standing registration (`unix_io`).
    UnixFd(super::unix_io::UnixWrite),
}

impl ReadHalf {
    /// Waits until the socket has something to read, without a buffer:
    /// `Some` for plain TCP and Unix sockets, `None` where readiness says
    /// nothing (TLS buffers what it decrypted; a Unix socket read without a
    /// standing registration).
    pub(crate) async fn readable(&self) -> Option<io::Result<()>> {
        match self {
            ReadHalf::Tcp(r) => Some(r.readable().await),
            ReadHalf::Unix(r) => Some(r.readable().await),
            ReadHalf::Tls(_) | ReadHalf::UnixFd(_) => None,
        }
    }
}

impl WriteHalf {
    /// Writes what the socket takes now, without waiting (plain TCP only:
    /// a TLS stream is written through its writer, `WouldBlock` here).
    pub(crate) fn try_write_vectored(&self, parts: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            WriteHalf::Tcp(w) => w.try_write_vectored(parts),
            WriteHalf::Unix(w) => w.try_write_vectored(parts),
            WriteHalf::UnixFd(w) => w.try_write_vectored(parts),
            WriteHalf::Tls(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

macro_rules! delegate_read {
    ($t:ty, $($v:ident),+) => {
        impl AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }
    };
}

macro_rules! delegate_write {
    ($t:ty, $($v:ident),+) => {
        impl AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_write(cx, buf),)+
                }
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_write_vectored(cx, bufs),)+
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    $(Self::$v(s) => s.is_write_vectored(),)+
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_flush(cx),)+
                }
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$v(s) => Pin::new(s).poll_shutdown(cx),)+
                }
            }
        }
    };
}

delegate_read!(Stream, Tcp, Tls, Unix);
delegate_read!(ReadHalf, Tcp, Tls, Unix, UnixFd);
delegate_write!(Stream, Tcp, Tls, Unix);
delegate_write!(WriteHalf, Tcp, Tls, Unix, UnixFd);

/// The rustls error inside an I/O error from a TLS handshake, if any.
pub(crate) fn rustls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>()
}
