//! Unix domain socket listeners: binding over a stale socket file, the
//! file's permissions, and its removal when the listener ends.
//!
//! - A path that holds a socket nobody accepts on (connecting is refused:
//!   its server is gone) is stale: it is removed and bound again.
//! - A path where a server accepts, or that holds anything but a socket, is
//!   never touched: `AddrInUse`.
//! - The socket file is set to mode 0600 right after binding (connecting to
//!   a Unix socket needs write permission on it): only its owner's processes
//!   (and root) may connect. A window between `bind` and `chmod` remains,
//!   governed by the umask; a socket in a directory only its owner can
//!   enter (such as `$XDG_RUNTIME_DIR`) has none.
//! - The file is removed when the listener ends, if it is still the one we
//!   bound (same device and inode): a newer server's socket at the same
//!   path is left alone.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::UnixListener;

/// How long a probe of an existing socket may take before the socket is
/// taken to be alive (a server whose backlog is full is not stale).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// A socket file this process made; removed on drop if it is still ours.
pub(super) struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino);
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::debug!(path = %self.path.display(), error = %e, "cannot remove the socket file");
            }
        }
    }
}

/// Why binding failed: the I/O error and a hint (which may be empty).
pub(super) type BindError = (io::Error, &'static str);

fn bind_error(_path: &Path, source: io::Error, hint: &'static str) -> BindError {
    (source, hint)
}

/// Binds `path`, replacing a stale socket file, and makes it owner-only.
pub(super) async fn bind(path: &Path) -> Result<(UnixListener, SocketFile), BindError> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(bind_error(
                path,
                io::ErrorKind::AddrInUse.into(),
                " (the path exists and is not a socket: it is left alone; choose another path)",
            ));
        }
        match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::UnixStream::connect(path)).await {
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                tracing::info!(path = %path.display(), "replacing a stale socket file");
                if let Err(e) = std::fs::remove_file(path) {
                    return Err(bind_error(
                        path,
                        e,
                        " (a stale socket file could not be removed)",
                    ));
                }
            }
            Ok(Err(_)) => {}
            Ok(Ok(_)) | Err(_) => {
                return Err(bind_error(
                    path,
                    io::ErrorKind::AddrInUse.into(),
                    " (a server is accepting on it: stop it, or choose another path)",
                ));
            }
        }
    }
    let listener = UnixListener::bind(path).map_err(|e| bind_error(path, e, ""))?;
    let owned = || -> io::Result<SocketFile> {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let meta = std::fs::symlink_metadata(path)?;
        Ok(SocketFile {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    };
    match owned() {
        Ok(file) => Ok((listener, file)),
        Err(e) => {
            drop(listener);
            let _ = std::fs::remove_file(path);
            Err(bind_error(
                path,
                e,
                " (cannot set the socket file's permissions)",
            ))
        }
    }
}
