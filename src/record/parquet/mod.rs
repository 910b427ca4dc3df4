//! The Parquet format of recordings, the default ([`RecordFormat::parquet`],
//! `serve --record-format parquet`, the Python package's
//! `record_format="parquet"`): each storage of a recorded `ReplayBuffer` a
//! `unienv_data.storages.parquet.ParquetStorage` directory, written by the
//! recorder's thread (no Python, no GIL), so that
//! `ReplayBuffer.load_from(path, backend=NumpyComputeBackend)` opens it
//! with unienv_data and pyarrow alone:
//!
//! ```text
//! <storage>/_metadata.json        piece_size, num_rows, column_shapes, compression, column_dtypes
//! <storage>/part-NNNNNN.parquet   rows [N × piece_size, (N + 1) × piece_size): a column `data`
//! ```
//!
//! (see [`piece`] for a piece's bytes; `_metadata.json` is what unienv_data's
//! `_write_metadata` writes, `json.dumps(..., indent=2)`).
//!
//! The recorder builds the buffer around the storages (`metadata.json`,
//! the `FlattenedStorage` or `DictStorage` metadata) and hands each
//! episode's rows over when the episode ends (earlier, uncommitted, beyond
//! 4 MiB). A commit writes, per storage, the pieces that changed (each to
//! `.tmp/piece.parquet` inside the storage, then swapped with or renamed
//! over `part-NNNNNN.parquet`), then `_metadata.json` (via
//! `.tmp/_metadata.json`); the recorder then replaces the buffer's
//! `metadata.json`, the one commit point: until then the buffer loads with
//! its previous `count`, since every piece still holds its earlier rows
//! and `ParquetStorage` reads the first `num_rows` rows only.
//!
//! Pieces hold `piece_size` rows (see [`piece_size`]); the last one,
//! partial, is kept in memory and rewritten at each commit: its earlier
//! row groups copied as they were written, the commit's rows encoded as a
//! row group of their own (up to [`MAX_GROUPS`], then all again as one).

mod arrow_schema;
mod piece;

use super::format::{Column, ExternalBuffer, ExternalFormat, RecordFormat};
use super::swap::Swapped;
use piece::{Encoded, PieceCodec};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// The storage class a Parquet recording's buffer metadata names.
pub const STORAGE_CLASS: &str = "unienv_data.storages.parquet.ParquetStorage";

/// Bytes a piece is sized for by default (see [`piece_size`]).
pub const PIECE_BYTES: usize = 256 * 1024;

/// unienv_data's default piece compression (`ParquetStorage.create`).
const COMPRESSION: &str = "snappy";

/// Rows per piece for rows of `row_bytes` bytes and pieces of about
/// `piece_bytes`: a power of two from 16 to 4096 rows.
///
/// A commit (an episode's end) writes at least two files (the partial
/// piece, `_metadata.json`) whatever the piece size, and each piece is a
/// file created (an inode, which costs most of a piece's writing on a busy
/// ext4). The partial piece holds half a piece on average: at 256 KiB,
/// 128 KiB of rows (snappy-compressed), rewritten at each commit from the
/// row groups already encoded (only the commit's rows are encoded). At
/// 256 KiB instead of 64 KiB a recording creates a quarter of the files
/// for about the same instructions; at 1 MiB the rewrites cost more than
/// the files saved (BENCHMARKS.md, "Recording"). Pendulum's transitions (10
/// float64) get 2048-row pieces.
pub fn piece_size(row_bytes: usize, piece_bytes: usize) -> usize {
    let rows = (piece_bytes / row_bytes.max(1)).max(1);
    let mut size = 16;
    while size * 2 <= rows && size < 4096 {
        size *= 2;
    }
    size
}

/// The Parquet format: [`ExternalFormat`] for `ParquetStorage`s.
#[derive(Debug, Clone)]
pub struct ParquetFormat {
    piece_bytes: usize,
}

impl Default for ParquetFormat {
    fn default() -> Self {
        ParquetFormat {
            piece_bytes: PIECE_BYTES,
        }
    }
}

impl ParquetFormat {
    /// Pieces sized for about `piece_bytes` bytes of rows (see
    /// [`piece_size`]; a storage being resumed keeps its own size).
    pub fn new(piece_bytes: usize) -> ParquetFormat {
        ParquetFormat { piece_bytes }
    }
}

impl RecordFormat {
    /// The Parquet format with pieces of about [`PIECE_BYTES`].
    pub fn parquet() -> RecordFormat {
        RecordFormat::External(Arc::new(ParquetFormat::default()))
    }
}

impl ExternalFormat for ParquetFormat {
    fn storage_class(&self) -> &str {
        STORAGE_CLASS
    }

    fn open(&self, columns: &[Column], committed: u64) -> Result<Box<dyn ExternalBuffer>, String> {
        ParquetColumns::open(columns, committed, self.piece_bytes)
            .map(|c| Box::new(c) as Box<dyn ExternalBuffer>)
    }
}

/// Row groups a partial piece gathers (one per commit) before a commit
/// encodes its rows again as one: bounds what a piece's footer and the
/// copies of its earlier row groups cost when episodes are short.
const MAX_GROUPS: usize = 16;

/// One storage (one column of a buffer).
struct Storage {
    dir: PathBuf,
    codec: PieceCodec,
    /// The rows of the piece being filled (from `tail_start` on).
    rows: Vec<u8>,
    /// The piece being filled as last written (empty if not yet), and how
    /// many of its first rows that holds.
    written: Encoded,
    encoded: usize,
    /// `_metadata.json` before and after its `num_rows`.
    metadata: (String, String),
    /// The piece being filled (via `.tmp/piece.parquet`).
    piece_file: Swapped,
    /// `_metadata.json` (via `.tmp/_metadata.json`).
    metadata_file: Swapped,
}

/// One buffer's storages, from `committed` rows on.
struct ParquetColumns {
    storages: Vec<Storage>,
    /// Rows per piece.
    piece: usize,
    /// Rows committed.
    count: u64,
    /// Rows handed over (committed or not).
    written: u64,
    /// The first row of the piece being filled; `fill` of its rows are in
    /// each storage's `rows`.
    tail_start: u64,
    fill: usize,
    /// A piece's encoded bytes (reused).
    encoded: Vec<u8>,
}

/// `_metadata.json` as unienv_data's `_write_metadata` writes it
/// (`json.dumps(metadata, indent=2)`), split around `num_rows`.
fn metadata_template(piece: usize, shape: &[usize], dtype: &str) -> (String, String) {
    let shape = if shape.is_empty() {
        "[]".to_string()
    } else {
        let items: Vec<String> = shape.iter().map(|n| format!("\n      {n}")).collect();
        format!("[{}\n    ]", items.join(","))
    };
    let head = format!("{{\n  \"piece_size\": {piece},\n  \"num_rows\": ");
    let tail = format!(
        ",\n  \"column_shapes\": {{\n    \"data\": {shape}\n  }},\n  \"compression\": \"{COMPRESSION}\",\n  \"column_dtypes\": {{\n    \"data\": \"{dtype}\"\n  }}\n}}"
    );
    (head, tail)
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn piece_name(index: u64) -> String {
    format!("part-{index:06}.parquet")
}

impl ParquetColumns {
    fn open(
        columns: &[Column],
        committed: u64,
        piece_bytes: usize,
    ) -> Result<ParquetColumns, String> {
        let codecs = columns
            .iter()
            .map(|c| PieceCodec::new(c.dtype, &c.shape))
            .collect::<Result<Vec<_>, String>>()?;
        let first = columns.first().ok_or("a buffer without columns")?;
        let existing = first.dir.join("_metadata.json");
        let resumed = existing.exists();
        let piece = if resumed {
            let text = std::fs::read_to_string(&existing).map_err(|e| e.to_string())?;
            let meta: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            meta.get("piece_size")
                .and_then(serde_json::Value::as_u64)
                .and_then(|p| usize::try_from(p).ok())
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("{}: no piece_size", existing.display()))?
        } else {
            piece_size(codecs.iter().map(PieceCodec::row_bytes).sum(), piece_bytes)
        };
        let mut storages = Vec::with_capacity(columns.len());
        for (c, codec) in columns.iter().zip(codecs) {
            let tmp = c.dir.join(".tmp");
            std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
            storages.push(Storage {
                written: Encoded::default(),
                encoded: 0,
                dir: c.dir.clone(),
                // (a resumed storage's piece_size is read from its file)
                rows: Vec::with_capacity(piece.saturating_mul(codec.row_bytes()).min(1 << 24)),
                codec,
                metadata: metadata_template(piece, &c.shape, c.dtype.to_native().name()),
                piece_file: Swapped::new(c.dir.join(piece_name(0)), tmp.join("piece.parquet")),
                metadata_file: Swapped::new(
                    c.dir.join("_metadata.json"),
                    tmp.join("_metadata.json"),
                ),
            });
        }
        let mut columns = ParquetColumns {
            storages,
            piece,
            count: committed,
            written: committed,
            tail_start: 0,
            fill: 0,
            encoded: Vec::new(),
        };
        columns.load_tail(committed).map_err(|e| e.to_string())?;
        if !resumed {
            columns.commit_metadata().map_err(|e| e.to_string())?;
        }
        Ok(columns)
    }

    /// Reads the rows of the piece holding row `count` that come before
    /// it into the storages' `rows`.
    fn load_tail(&mut self, count: u64) -> io::Result<()> {
        let piece = self.piece as u64;
        let start = count - count % piece;
        self.tail_start = start;
        self.fill = (count - start) as usize;
        let name = piece_name(start / piece);
        for s in &mut self.storages {
            s.rows.clear();
            s.forget_written();
            if self.fill > 0 {
                s.codec
                    .decode(&s.dir.join(&name), self.fill, &mut s.rows)
                    .map_err(other)?;
            }
        }
        Ok(())
    }

    /// Writes the piece being filled (its `fill` rows): its rows not
    /// written yet as a row group after the ones written before (all of
    /// them as one when [`MAX_GROUPS`] are reached).
    fn write_piece(&mut self) -> io::Result<()> {
        let name = piece_name(self.tail_start / self.piece as u64);
        for s in &mut self.storages {
            if s.written.groups.len() >= MAX_GROUPS {
                s.forget_written();
            }
            let width = s.codec.row_bytes();
            let new = &s.rows[s.encoded * width..self.fill * width];
            let groups = s
                .codec
                .encode(&s.written, new, self.fill - s.encoded, &mut self.encoded)
                .map_err(other)?;
            s.piece_file.set_path(s.dir.join(&name));
            s.piece_file.write(&self.encoded)?;
            s.written = Encoded {
                file: bytes::Bytes::from(std::mem::take(&mut self.encoded)),
                groups,
            };
            s.encoded = self.fill;
        }
        Ok(())
    }

    /// Writes every storage's `_metadata.json` with `written` rows.
    fn commit_metadata(&mut self) -> io::Result<()> {
        for s in &mut self.storages {
            let (head, tail) = &s.metadata;
            let text = format!("{head}{}{tail}", self.written);
            s.metadata_file.write(text.as_bytes())?;
        }
        Ok(())
    }
}

impl Storage {
    /// The next write of the piece encodes all its rows again.
    fn forget_written(&mut self) {
        self.written = Encoded::default();
        self.encoded = 0;
    }
}

impl ExternalBuffer for ParquetColumns {
    /// Appends `rows` rows: full pieces are written as they fill; with
    /// `commit`, the partial piece and every storage's `_metadata.json` too.
    fn write(&mut self, columns: Vec<Vec<u8>>, rows: usize, commit: bool) -> io::Result<()> {
        if columns.len() != self.storages.len()
            || columns
                .iter()
                .zip(&self.storages)
                .any(|(c, s)| c.len() != rows * s.codec.row_bytes())
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "rows that do not match the storages",
            ));
        }
        let mut done = 0;
        while done < rows {
            let take = (rows - done).min(self.piece - self.fill);
            for (s, data) in self.storages.iter_mut().zip(&columns) {
                let width = s.codec.row_bytes();
                s.rows
                    .extend_from_slice(&data[done * width..(done + take) * width]);
            }
            self.fill += take;
            done += take;
            if self.fill == self.piece {
                self.write_piece()?;
                self.tail_start += self.piece as u64;
                self.fill = 0;
                for s in &mut self.storages {
                    s.rows.clear();
                    s.forget_written();
                }
            }
        }
        self.written += rows as u64;
        if commit {
            if self.fill > 0 {
                self.write_piece()?;
            }
            self.commit_metadata()?;
            self.count = self.written;
        }
        Ok(())
    }

    /// Forgets the rows appended since the last commit.
    fn abort(&mut self) -> io::Result<()> {
        self.written = self.count;
        if self.tail_start <= self.count {
            self.fill = (self.count - self.tail_start) as usize;
            for s in &mut self.storages {
                let keep = self.fill * s.codec.row_bytes();
                s.rows.truncate(keep);
                if s.encoded > self.fill {
                    // Its row groups hold rows beyond the commit.
                    s.forget_written();
                }
            }
            Ok(())
        } else {
            // Full pieces were written past the commit: the committed rows
            // of the piece holding row `count` are read back.
            self.load_tail(self.count)
        }
    }

    /// Removes the temporary directories (everything is committed).
    fn close(&mut self) {
        for s in &self.storages {
            let _ = std::fs::remove_dir_all(s.dir.join(".tmp"));
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The rows a storage directory written by this format holds, for tests:
/// `(rows' bytes, num_rows)` of a column of `dtype` and `shape`.
#[cfg(test)]
fn read_storage(
    dir: &std::path::Path,
    dtype: crate::codec::DType,
    shape: &[usize],
) -> Result<(Vec<u8>, u64), String> {
    let text = std::fs::read_to_string(dir.join("_metadata.json")).map_err(|e| e.to_string())?;
    let meta: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let piece = meta["piece_size"].as_u64().ok_or("piece_size")?;
    let rows = meta["num_rows"].as_u64().ok_or("num_rows")?;
    let codec = PieceCodec::new(dtype, shape)?;
    let mut out = Vec::new();
    let mut index = 0;
    while index * piece < rows {
        let take = (rows - index * piece).min(piece) as usize;
        codec
            .decode(&dir.join(piece_name(index)), take, &mut out)
            .map_err(|e| e.to_string())?;
        index += 1;
    }
    Ok((out, rows))
}

#[cfg(test)]
mod tests;
