//! Which storage a recording's elements go to: rows handed to another
//! writer ([`RecordFormat::External`]; the Parquet format,
//! [`RecordFormat::parquet`], is one, writing `unienv_data`'s
//! `ParquetStorage` pieces, see [`ParquetFormat`](super::ParquetFormat): the
//! default), or `NPZStorage` files written here ([`RecordFormat::Npz`]: one
//! file per transition, loadable with `unienv` alone, without pyarrow).
//!
//! The replay buffer around the storage (`metadata.json`, the
//! `FlattenedStorage` or `DictStorage` metadata) is written here either
//! way, and `metadata.json` stays the one commit point: at an episode's
//! end the external writer makes its rows readable first
//! ([`ExternalBuffer::write`] with `commit`), then `metadata.json` is
//! replaced.

use crate::codec::DType;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The storage a recording writes: NPZ files, or rows handed to another
/// writer (see [`ExternalFormat`]; the replay buffer around the storage is
/// written by the recorder either way, its `metadata.json` the commit point).
///
/// The default is [`RecordFormat::parquet`]: `unienv_data`'s
/// `ParquetStorage`, a few files per episode. Loading it needs pyarrow
/// beside `unienv` (`unienv_data.storages.parquet` imports it; without it
/// `ReplayBuffer.load_from` raises `ModuleNotFoundError: No module named
/// 'pyarrow'`); [`RecordFormat::Npz`] loads with `unienv` alone but costs a
/// file per transition.
#[derive(Clone)]
pub enum RecordFormat {
    /// One `NPZStorage` file per element, written by the recorder's thread
    /// (loadable with `unienv` alone).
    Npz,
    /// Rows handed to an external writer, on the recorder's thread.
    External(Arc<dyn ExternalFormat>),
}

impl Default for RecordFormat {
    /// [`RecordFormat::parquet`].
    fn default() -> Self {
        RecordFormat::parquet()
    }
}

impl fmt::Debug for RecordFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordFormat::Npz => f.write_str("Npz"),
            RecordFormat::External(e) => write!(f, "External({})", e.storage_class()),
        }
    }
}

/// One storage column of a buffer: a leaf of the transition (or the whole
/// flattened transition), one row per element.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The storage's directory (`<buffer>/storage/<key>`, or
    /// `<buffer>/storage/inner_storage` when flattened).
    pub dir: PathBuf,
    /// The element's dtype (native byte order).
    pub dtype: DType,
    /// The element's shape.
    pub shape: Vec<usize>,
}

/// A writer of storages other than NPZ (called on the recorder's thread).
pub trait ExternalFormat: Send + Sync {
    /// The storage class the buffer's metadata names for each column, e.g.
    /// `unienv_data.storages.parquet.ParquetStorage`.
    fn storage_class(&self) -> &str;

    /// Creates the columns' storages, or resumes them with their first
    /// `committed` rows (rows beyond are overwritten), and makes them
    /// loadable with `committed` rows before it returns.
    fn open(&self, columns: &[Column], committed: u64) -> Result<Box<dyn ExternalBuffer>, String>;

    /// Commits several buffers' rows at once, as [`ExternalBuffer::write`]
    /// with `commit` would one by one (in order: a failure of one leaves
    /// the others committed), and returns each one's outcome. The writer
    /// thread gathers the episodes that ended while it drained its queue
    /// (a vector env's sub-envs often end on the same step) into one call,
    /// which an implementation may make cheaper than one call per buffer.
    fn commit_many(&self, batch: Vec<Staged<'_>>) -> Vec<io::Result<()>> {
        batch
            .into_iter()
            .map(|s| s.buffer.write(s.columns, s.rows, true))
            .collect()
    }
}

/// One buffer's share of [`ExternalFormat::commit_many`]: its rows (as
/// [`ExternalBuffer::write`] takes them), to be written and committed.
pub struct Staged<'a> {
    /// The buffer's writer (as [`ExternalFormat::open`] returned it).
    pub buffer: &'a mut dyn ExternalBuffer,
    /// Per column, the rows' bytes back to back.
    pub columns: Vec<Vec<u8>>,
    /// How many rows `columns` holds.
    pub rows: usize,
}

/// One buffer's columns in an external storage.
pub trait ExternalBuffer: Send {
    /// Appends `rows` rows: per column, the rows' bytes back to back (C
    /// order, the column's dtype). Without `commit` the rows may be kept or
    /// written, but the storages on disk still load as they did; with
    /// `commit` every row appended so far is readable when it returns.
    fn write(&mut self, columns: Vec<Vec<u8>>, rows: usize, commit: bool) -> io::Result<()>;

    /// Forgets the rows appended since the last commit.
    fn abort(&mut self) -> io::Result<()>;

    /// Releases what the writer holds (the recording is closed; every
    /// episode is committed).
    fn close(&mut self) {}

    /// The writer as [`Any`](std::any::Any), for an
    /// [`ExternalFormat::commit_many`] that reaches its own buffers' state.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

/// The directory of column `i` of a buffer at `path` (see [`Column::dir`]).
pub(crate) fn column_dir(path: &Path, key: Option<&str>) -> PathBuf {
    let storage = path.join("storage");
    match key {
        None => storage.join("inner_storage"),
        Some(k) => storage.join(k.replace('/', ".")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(format: &RecordFormat) -> Option<String> {
        match format {
            RecordFormat::Npz => None,
            RecordFormat::External(e) => Some(e.storage_class().to_string()),
        }
    }

    /// Parquet is the default, of the format and of a server's
    /// configuration (`serve --record` and the Python recorders too: their
    /// tests load what the default wrote).
    #[test]
    fn the_default_is_parquet() {
        let parquet = Some(super::super::STORAGE_CLASS.to_string());
        assert_eq!(class(&RecordFormat::default()), parquet);
        assert_eq!(
            class(&crate::server::ServerConfig::default().record_format),
            parquet
        );
        assert_eq!(class(&RecordFormat::Npz), None);
    }
}
