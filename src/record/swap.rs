//! Files replaced atomically at each commit (`metadata.json`, a Parquet
//! storage's partial piece and `_metadata.json`): written whole to a
//! temporary file, then swapped in, so that a reader (and a crash) sees the
//! old file or the new one, never a part.
//!
//! On Linux the two names are exchanged (`renameat2(RENAME_EXCHANGE)`):
//! the file replaced becomes the temporary file, which the next commit
//! overwrites in place, so a commit allocates no inode (what creating a
//! file mostly costs on a busy ext4, BENCHMARKS.md, "Recording"). Both files are
//! kept open between commits ([`Swapped`]): a commit is then one
//! `pwrite` and one `renameat2` (an `ftruncate` too when the file
//! shrinks), not `openat`, `write`, `ftruncate`, `close` and `renameat2`
//! (BENCHMARKS.md, "Recording"). Elsewhere, or where the file system cannot
//! swap, a rename.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many [`Swapped`] of this process keep their files open (two each):
/// beyond, they open and close them at each write (a batched env of many
/// sub-envs with many leaves must not run out of descriptors).
const KEPT_OPEN: usize = 256;

/// [`Swapped`] keeping their files open now.
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// `path` with `.tmp` appended.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// An open file and its length (`None`: not known).
struct Open {
    file: File,
    len: Option<u64>,
}

/// A file replaced whole at each [`Swapped::write`] (see the module docs),
/// with its temporary file.
pub(crate) struct Swapped {
    path: PathBuf,
    tmp: PathBuf,
    /// The file at `path`, when open.
    current: Option<Open>,
    /// The file at `tmp`, when open.
    spare: Option<Open>,
    /// Whether the files stay open between writes (a share of
    /// [`KEPT_OPEN`]).
    keep: bool,
}

impl Swapped {
    /// The file at `path`, its temporary file at `tmp` (nothing is opened
    /// yet).
    pub(crate) fn new(path: PathBuf, tmp: PathBuf) -> Swapped {
        let keep = KEPT.fetch_add(1, Ordering::Relaxed) < KEPT_OPEN;
        if !keep {
            KEPT.fetch_sub(1, Ordering::Relaxed);
        }
        Swapped {
            path,
            tmp,
            current: None,
            spare: None,
            keep,
        }
    }

    /// The file at `path`, its temporary file beside it (`path` + `.tmp`).
    pub(crate) fn beside(path: PathBuf) -> Swapped {
        let tmp = tmp_path(&path);
        Swapped::new(path, tmp)
    }

    /// From now on the file replaced is at `path` (the file at the old path
    /// stays as it is; its temporary file is reused).
    pub(crate) fn set_path(&mut self, path: PathBuf) {
        if self.path != path {
            self.path = path;
            self.current = None;
        }
    }

    /// Replaces the file's contents with `bytes`, atomically.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let reused = self.spare.is_some();
        match self.write_once(bytes) {
            // The temporary file kept open is no longer at its path (its
            // directory was removed, say): forget both, open it again.
            Err(_) if reused => {
                self.current = None;
                self.spare = None;
                self.write_once(bytes)
            }
            outcome => outcome,
        }
    }

    fn write_once(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut spare = match self.spare.take() {
            Some(open) => open,
            None => Open {
                // Overwritten in place, then cut: opening it with truncation
                // frees and allocates its blocks again, 2 ms on the test
                // machine's busy ext4.
                file: std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&self.tmp)?,
                len: None,
            },
        };
        let len = bytes.len() as u64;
        write_at_start(&spare.file, bytes)?;
        if spare.len.is_none_or(|old| old > len) {
            spare.file.set_len(len)?;
        }
        spare.len = Some(len);
        if exchange(&self.tmp, &self.path) {
            // The file replaced is the temporary one now.
            let old = self.current.replace(spare);
            if self.keep {
                self.spare = old;
            } else {
                self.current = None;
            }
            return Ok(());
        }
        std::fs::rename(&self.tmp, &self.path)?;
        self.current = self.keep.then_some(spare);
        Ok(())
    }
}

impl Drop for Swapped {
    fn drop(&mut self) {
        if self.keep {
            KEPT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(unix)]
fn write_at_start(file: &File, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, 0)
}

#[cfg(not(unix))]
fn write_at_start(mut file: &File, bytes: &[u8]) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(0))?;
    file.write_all(bytes)
}

/// Exchanges the names `tmp` and `path` (Linux; `false` elsewhere, or when
/// it failed, e.g. `path` does not exist yet).
fn exchange(tmp: &Path, path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let (Ok(from), Ok(to)) = (
            std::ffi::CString::new(tmp.as_os_str().as_bytes()),
            std::ffi::CString::new(path.as_os_str().as_bytes()),
        ) else {
            return false;
        };
        // SAFETY: two NUL-terminated paths, valid for the call.
        let swapped = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        swapped == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tmp, path);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each write replaces the whole file (longer, shorter, after a path
    /// change), with the files kept open and with them reopened each time.
    #[test]
    fn every_write_replaces_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        let tmp = dir.path().join("a.json.tmp");
        for keep in [true, false] {
            let mut s = Swapped::new(path.clone(), tmp.clone());
            if !keep && s.keep {
                KEPT.fetch_sub(1, Ordering::Relaxed);
                s.keep = false;
            }
            assert_eq!(s.keep, keep, "the budget of open files is spent");
            for text in ["first", "a longer second", "short", "", "fifth!"] {
                s.write(text.as_bytes()).unwrap();
                assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
            }
            let other = dir.path().join("b.json");
            s.set_path(other.clone());
            s.write(b"to b").unwrap();
            s.write(b"b again, longer").unwrap();
            s.write(b"b3").unwrap();
            assert_eq!(std::fs::read(&other).unwrap(), b"b3");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "fifth!");
            // The temporary file removed behind its back: opened again.
            let _ = std::fs::remove_file(&tmp);
            s.write(b"b after its temporary file went").unwrap();
            assert_eq!(
                std::fs::read(&other).unwrap(),
                b"b after its temporary file went"
            );
            std::fs::remove_file(&other).unwrap();
            let _ = std::fs::remove_file(&tmp);
        }
    }
}
