//! One `unienv_data` `ReplayBuffer` on disk, written as its own `dumps`
//! would leave it, with a `DictStorage` of one `NPZStorage` per leaf of the
//! transition space:
//!
//! ```text
//! <dir>/metadata.json                       ReplayBuffer: count, segments, space
//! <dir>/storage/dict_storage_metadata.json  DictStorage: key -> NPZStorage, path
//! <dir>/storage/<key>/npz_metadata.json     NPZStorage (one per leaf, e.g. obs, next_obs.pos)
//! <dir>/storage/<key>/<index>.npz           one element: an archive holding `data`
//! ```
//!
//! When the elements are stored flattened (every leaf converts to float64
//! exactly: `FlattenedStorage` over one `NPZStorage`), one file holds a
//! whole transition.
//!
//! Elements are encoded as they arrive and kept in memory (at most
//! [`PENDING_BYTES`] per buffer; beyond that they are written early) until
//! their episode ends; its files are then written in one pass (no `fsync`)
//! and the episode is committed by replacing `metadata.json` (written to a
//! temporary file, then swapped in or renamed, see `swap`: the one
//! commit point). Until then the buffer on disk, as
//! `ReplayBuffer.load_from` reads it, ends with the last committed episode,
//! so a crash loses at most the episodes still open. The sub-storages
//! declare a reserved length ([`RESERVED_LENGTH`]) that never changes, so
//! that no other file has to change with a commit; `ReplayBuffer` reads
//! only its first `count` elements.
//!
//! With an external format ([`RecordFormat::External`], e.g. Parquet) the
//! storages (`<key>/` or `inner_storage/`) are the external writer's; the
//! rows wait here (as NPZ files do). An episode that ends is *staged*
//! ([`Ended::Staged`]): the writer thread commits the staged episodes of
//! all its buffers in one [`ExternalFormat::commit_many`] call
//! ([`commit_staged`]) once it has handled the batch of events it took
//! from its queue (an episode's end wakes it), each buffer's rows committed by the
//! external writer (its files, then its storage metadata) before that
//! buffer's `metadata.json` is replaced. A crash before then loses the
//! staged episodes as it would lose the events still queued.

use super::format::{self, Column, ExternalBuffer, ExternalFormat, RecordFormat, Staged};
use super::json;
use super::npz;
use super::stats::RecordStats;
use super::swap::{tmp_path, Swapped};
use crate::codec::{DType, NdArray};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// The `length` every `NPZStorage` of a recording declares: elements at or
/// beyond the buffer's `count` are never read (a file that is missing reads
/// as zeros), so it only has to exceed any count a recording reaches.
pub const RESERVED_LENGTH: u64 = 1 << 40;

const DICT_STORAGE: &str = "unienv_data.storages.dict_storage.DictStorage";
const FLATTENED_STORAGE: &str = "unienv_data.storages.flattened.FlattenedStorage";
const NPZ_STORAGE: &str = "unienv_data.storages.npz_storage.NPZStorage";

/// A replay buffer directory being recorded.
pub(crate) struct BufferDir {
    path: PathBuf,
    /// Per leaf, in transition order: its storage directory (one, the
    /// inner storage, when flattened).
    leaf_dirs: Vec<PathBuf>,
    /// Whether elements are stored flattened (one float64 vector each).
    flat: bool,
    /// `single_instance_space` as JSON text.
    space_json: String,
    /// Committed elements (the buffer's `count`).
    count: u64,
    /// `count` when the committed transitions were last counted
    /// ([`BufferDir::newly_committed`]).
    counted: u64,
    /// The next element's index.
    next: u64,
    /// Committed segments, inclusive.
    segments: Vec<(u64, u64)>,
    /// The open segment's first index.
    open: Option<u64>,
    /// Per storage directory: the `.npy` header of its elements.
    headers: Vec<Option<npz::NpyHeader>>,
    /// Files encoded and not written yet, their bytes back to back.
    pending: Vec<u8>,
    /// Per pending file: its storage directory, element index and end
    /// offset in `pending`.
    pending_files: Vec<(usize, u64, usize)>,
    /// A flattened element being built.
    scratch: Vec<u8>,
    /// The external writer, when the format is not NPZ.
    external: Option<Box<dyn ExternalBuffer>>,
    /// External format: per column, the rows not handed over yet.
    rows: Vec<Vec<u8>>,
    /// External format: how many rows `rows` holds.
    row_count: usize,
    /// External format: per column, the rows of the episodes that ended
    /// and wait for [`commit_staged`].
    staged: Vec<Vec<u8>>,
    /// How many rows `staged` holds.
    staged_rows: usize,
    /// The segments of the staged episodes, inclusive.
    staged_segments: Vec<(u64, u64)>,
    /// `metadata.json`, replaced at each commit.
    metadata: Swapped,
}

/// Why [`BufferDir::append_flat`] appended nothing.
#[derive(Debug)]
pub(crate) enum Appended {
    /// The element did not fit its space (nothing written, the episode goes on).
    Element(String),
    /// Handing rows over failed (the caller aborts the episode).
    Io(io::Error),
}

/// What [`BufferDir::end_segment`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// No segment was open.
    Nothing,
    /// The episode is committed (`metadata.json` replaced).
    Committed,
    /// External format: the episode waits for [`commit_staged`].
    Staged,
}

/// Encoded elements wait in memory until their episode ends, or until this
/// many bytes wait, and are then written in one pass (nothing else reads
/// them before the episode's commit).
pub const PENDING_BYTES: usize = 4 << 20;

impl BufferDir {
    /// Creates the buffer at `path` (`keys`: the `DictStorage` keys of the
    /// leaves, `/`-separated; `leaves`: their dtypes and shapes), or resumes
    /// the one already there if it records the same space in the same
    /// format.
    pub(crate) fn open(
        path: &Path,
        keys: &[String],
        leaves: &[(DType, Vec<usize>)],
        space_json: String,
        flat: bool,
        format: &RecordFormat,
    ) -> io::Result<BufferDir> {
        let storage = path.join("storage");
        let columns: Vec<Column> = if flat {
            let width = leaves
                .iter()
                .map(|(_, s)| s.iter().product::<usize>())
                .sum();
            vec![Column {
                dir: format::column_dir(path, None),
                dtype: DType::F64,
                shape: vec![width],
            }]
        } else {
            keys.iter()
                .zip(leaves)
                .map(|(k, (dtype, shape))| Column {
                    dir: format::column_dir(path, Some(k)),
                    dtype: dtype.to_native(),
                    shape: shape.clone(),
                })
                .collect()
        };
        let leaf_dirs: Vec<PathBuf> = columns.iter().map(|c| c.dir.clone()).collect();
        let headers = leaf_dirs.iter().map(|_| None).collect();
        let class = match format {
            RecordFormat::Npz => NPZ_STORAGE,
            RecordFormat::External(e) => e.storage_class(),
        }
        .to_string();
        let mut buffer = BufferDir {
            metadata: Swapped::beside(path.join("metadata.json")),
            path: path.to_path_buf(),
            headers,
            pending: Vec::new(),
            pending_files: Vec::new(),
            scratch: Vec::new(),
            external: None,
            rows: columns.iter().map(|_| Vec::new()).collect(),
            row_count: 0,
            staged: columns.iter().map(|_| Vec::new()).collect(),
            staged_rows: 0,
            staged_segments: Vec::new(),
            leaf_dirs,
            flat,
            space_json,
            count: 0,
            counted: 0,
            next: 0,
            segments: Vec::new(),
            open: None,
        };
        let metadata = path.join("metadata.json");
        if metadata.exists() {
            buffer.resume(&std::fs::read_to_string(&metadata)?)?;
            let inner = storage.join(if flat {
                "flattened_metadata.json"
            } else {
                "dict_storage_metadata.json"
            });
            let mut quoted = String::new();
            json::string(&class, &mut quoted);
            if !std::fs::read_to_string(inner)?.contains(&quoted) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} holds a recording in another storage format than {class}",
                        path.display()
                    ),
                ));
            }
            if let RecordFormat::External(e) = format {
                buffer.external = Some(e.open(&columns, buffer.count).map_err(io::Error::other)?);
            }
            return Ok(buffer);
        }
        match format {
            RecordFormat::Npz => {
                for dir in &buffer.leaf_dirs {
                    std::fs::create_dir_all(dir)?;
                    let meta = format!(
                        "{{\"storage_type\": \"NPZStorage\", \"compressed\": false, \"capacity\": null, \"length\": {RESERVED_LENGTH}}}"
                    );
                    write_atomic(&dir.join("npz_metadata.json"), meta.as_bytes())?;
                }
            }
            RecordFormat::External(e) => {
                buffer.external = Some(e.open(&columns, 0).map_err(io::Error::other)?);
            }
        }
        let mut class_json = String::new();
        json::string(&class, &mut class_json);
        if flat {
            let meta = format!(
                "{{\"storage_type\": \"FlattenedStorage\", \"inner_storage_type\": {class_json}, \"inner_storage_path\": \"inner_storage\"}}"
            );
            write_atomic(&storage.join("flattened_metadata.json"), meta.as_bytes())?;
            buffer.commit()?;
            return Ok(buffer);
        }
        let mut map = String::from("{");
        for (i, key) in keys.iter().enumerate() {
            if i > 0 {
                map.push_str(", ");
            }
            json::string(key, &mut map);
            map.push_str(": {\"type\": ");
            map.push_str(&class_json);
            map.push_str(", \"path\": ");
            json::string(&key.replace('/', "."), &mut map);
            map.push('}');
        }
        map.push('}');
        let dict_meta = format!(
            "{{\"storage_type\": \"DictStorage\", \"storage_map\": {map}, \"nested_separator\": \"/\"}}"
        );
        write_atomic(
            &storage.join("dict_storage_metadata.json"),
            dict_meta.as_bytes(),
        )?;
        buffer.commit()?;
        Ok(buffer)
    }

    /// Continues a recording left by an earlier run: the same space, its
    /// committed count and segments (anything written after them, an
    /// episode that was open, is overwritten).
    fn resume(&mut self, text: &str) -> io::Result<()> {
        let space = format!("\"single_instance_space\": {}", self.space_json);
        if !text.contains(&space) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} holds a recording of another transition space",
                    self.path.display()
                ),
            ));
        }
        let number = |key: &str| -> Option<u64> {
            let at = text.find(&format!("\"{key}\": "))? + key.len() + 4;
            let digits: String = text[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        };
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "unreadable metadata.json");
        self.count = number("count").ok_or_else(bad)?;
        self.counted = self.count;
        self.next = self.count;
        let at = text.find("\"physical_segments\": [").ok_or_else(bad)? + 22;
        let end = text[at..].find("]]").map_or(at, |e| at + e + 1);
        for pair in text[at..end].split("], [") {
            let pair = pair.trim_matches(|c| c == '[' || c == ']');
            if let Some((s, e)) = pair.split_once(", ") {
                let (Ok(s), Ok(e)) = (s.trim().parse(), e.trim().parse()) else {
                    return Err(bad());
                };
                self.segments.push((s, e));
            }
        }
        Ok(())
    }

    /// Encodes one element (the leaves' arrays, in [`BufferDir::open`]'s
    /// key order), opening a segment if none is open; its files are written
    /// with the episode's others (see [`PENDING_BYTES`]).
    /// (`stats` counts an episode committed on the way, see
    /// [`BufferDir::append_row`].)
    pub(crate) fn append(&mut self, leaves: &[NdArray], stats: &RecordStats) -> io::Result<()> {
        if self.open.is_none() {
            self.open = Some(self.next);
        }
        if self.external.is_some() {
            return self.append_row(leaves, stats);
        }
        let total: usize = leaves.iter().map(|a| a.as_bytes().len()).sum();
        if !npz::fits(if self.flat { total * 8 } else { total }) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("an element of {total} bytes is beyond a plain ZIP archive"),
            ));
        }
        if self.flat {
            // As `sfu.flatten_data` flattens the transition dict: each leaf
            // in C order, in key order, as one float64 vector (the layout
            // checked that every leaf converts to float64 exactly).
            self.scratch.clear();
            for leaf in leaves {
                super::transition::push_f64(leaf, &mut self.scratch)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
            let n = self.scratch.len() / 8;
            let header = npz::header(&mut self.headers[0], DType::F64, &[n]);
            npz::push_npz(&mut self.pending, header, &self.scratch);
            self.pending_files.push((0, self.next, self.pending.len()));
        } else {
            for (d, array) in leaves.iter().enumerate() {
                let header = npz::header(&mut self.headers[d], array.dtype(), array.shape());
                npz::push_npz(&mut self.pending, header, array.as_bytes());
                self.pending_files.push((d, self.next, self.pending.len()));
            }
        }
        self.next += 1;
        if self.pending.len() >= PENDING_BYTES {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Whether [`BufferDir::append_flat`] takes this buffer's elements
    /// (flattened elements in an external format).
    pub(crate) fn takes_flat_rows(&self) -> bool {
        self.flat && self.external.is_some()
    }

    /// [`BufferDir::append`] of a flattened element that `fill` appends (its
    /// float64 bytes) straight to the rows waiting, for a buffer that
    /// [`BufferDir::takes_flat_rows`]. `fill` must leave the rows as they
    /// were when it fails: its error is then returned, nothing appended.
    pub(crate) fn append_flat(
        &mut self,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
        stats: &RecordStats,
    ) -> Result<(), Appended> {
        fill(&mut self.rows[0]).map_err(Appended::Element)?;
        if self.open.is_none() {
            self.open = Some(self.next);
        }
        self.row_added(stats).map_err(Appended::Io)
    }

    /// [`BufferDir::append`] for an external format: the row's bytes wait in
    /// `rows` (handed over early beyond [`PENDING_BYTES`], after the staged
    /// episodes are committed: the external writer takes rows in order).
    fn append_row(&mut self, leaves: &[NdArray], stats: &RecordStats) -> io::Result<()> {
        let bad = |e: String| io::Error::new(io::ErrorKind::InvalidData, e);
        if self.flat {
            // Straight into the episode's row bytes (no array per leaf).
            for leaf in leaves {
                super::transition::push_f64(leaf, &mut self.rows[0]).map_err(bad)?;
            }
        } else {
            for (d, leaf) in leaves.iter().enumerate() {
                if leaf.dtype().is_native() {
                    self.rows[d].extend_from_slice(leaf.as_bytes());
                } else {
                    let a = super::transition::cast(leaf, leaf.dtype().to_native()).map_err(bad)?;
                    self.rows[d].extend_from_slice(a.as_bytes());
                }
            }
        }
        self.row_added(stats)
    }

    /// A row was appended to `rows`: counted, and the rows handed over
    /// early beyond [`PENDING_BYTES`].
    fn row_added(&mut self, stats: &RecordStats) -> io::Result<()> {
        self.row_count += 1;
        self.next += 1;
        if self.rows.iter().map(Vec::len).sum::<usize>() >= PENDING_BYTES {
            if let Some(staged) = self.take_staged() {
                let outcome = staged.buffer.write(staged.columns, staged.rows, true);
                // On failure the open episode goes with the staged ones (the
                // caller aborts it).
                let episodes = self.staged_done(outcome)?;
                stats.episodes.fetch_add(episodes, Ordering::Relaxed);
                let committed = self.newly_committed();
                stats.transitions.fetch_add(committed, Ordering::Relaxed);
            }
            self.hand_over()?;
        }
        Ok(())
    }

    /// Hands the waiting rows to the external writer, uncommitted.
    fn hand_over(&mut self) -> io::Result<()> {
        let Some(external) = &mut self.external else {
            return Ok(());
        };
        // The next rows get as much room as these took (no regrowing).
        let columns = self
            .rows
            .iter_mut()
            .map(|r| std::mem::replace(r, Vec::with_capacity(r.len())))
            .collect();
        let rows = std::mem::take(&mut self.row_count);
        external.write(columns, rows, false)
    }

    /// Writes the files encoded so far (forgotten on failure: the caller
    /// aborts the segment).
    fn write_pending(&mut self) -> io::Result<()> {
        let mut start = 0;
        let mut outcome = Ok(());
        for &(d, index, end) in &self.pending_files {
            let path = self.leaf_dirs[d].join(format!("{index}.npz"));
            if let Err(e) = std::fs::write(path, &self.pending[start..end]) {
                outcome = Err(e);
                break;
            }
            start = end;
        }
        self.pending.clear();
        self.pending_files.clear();
        outcome
    }

    /// Ends the open segment (an episode) and commits it (NPZ), or stages
    /// it for [`commit_staged`] (external format).
    pub(crate) fn end_segment(&mut self) -> io::Result<Ended> {
        let Some(start) = self.open.take() else {
            return Ok(Ended::Nothing);
        };
        if self.external.is_some() {
            for (staged, rows) in self.staged.iter_mut().zip(&mut self.rows) {
                if staged.is_empty() {
                    // The next rows get as much room as these took.
                    *staged = std::mem::replace(rows, Vec::with_capacity(rows.len()));
                } else {
                    staged.extend_from_slice(rows);
                    rows.clear();
                }
            }
            self.staged_rows += std::mem::take(&mut self.row_count);
            self.staged_segments.push((start, self.next - 1));
            return Ok(Ended::Staged);
        }
        if let Err(e) = self.write_pending() {
            self.next = self.count;
            return Err(e);
        }
        self.segments.push((start, self.next - 1));
        self.count = self.next;
        self.commit()?;
        Ok(Ended::Committed)
    }

    /// Whether episodes wait for [`commit_staged`].
    pub(crate) fn has_staged(&self) -> bool {
        !self.staged_segments.is_empty() && self.external.is_some()
    }

    /// The staged episodes' rows, handed to the external writer's commit
    /// (`None` when none wait); [`BufferDir::staged_done`] takes the outcome.
    fn take_staged(&mut self) -> Option<Staged<'_>> {
        if self.staged_segments.is_empty() {
            return None;
        }
        let buffer = self.external.as_deref_mut()?;
        Some(Staged {
            buffer,
            columns: self.staged.iter_mut().map(std::mem::take).collect(),
            rows: std::mem::take(&mut self.staged_rows),
        })
    }

    /// Finishes the commit of the staged episodes: on success they join
    /// the committed segments and `metadata.json` is replaced (the commit
    /// point; returns how many episodes); on failure they are forgotten, and
    /// so is the open episode (its rows would have followed theirs).
    fn staged_done(&mut self, outcome: io::Result<()>) -> io::Result<u64> {
        let segments = std::mem::take(&mut self.staged_segments);
        if let Err(e) = outcome {
            self.abort_segment();
            self.next = self.count;
            return Err(e);
        }
        let episodes = segments.len() as u64;
        if let Some(&(_, end)) = segments.last() {
            self.count = end + 1;
        }
        self.segments.extend(segments);
        self.commit()?;
        Ok(episodes)
    }

    /// The first index after the committed and staged episodes.
    fn ended(&self) -> u64 {
        self.staged_segments
            .last()
            .map_or(self.count, |&(_, end)| end + 1)
    }

    /// Forgets the open segment (elements already written are overwritten
    /// later; staged episodes stay staged).
    pub(crate) fn abort_segment(&mut self) {
        self.pending.clear();
        self.pending_files.clear();
        self.rows.iter_mut().for_each(Vec::clear);
        self.row_count = 0;
        if let Some(external) = &mut self.external {
            if let Err(e) = external.abort() {
                tracing::warn!(buffer = %self.path.display(), error = %e, "recording: abort failed");
            }
        }
        self.open = None;
        self.next = self.ended();
    }

    /// Elements committed since the last call (counted in
    /// `RecordStats::transitions` by whoever commits).
    pub(crate) fn newly_committed(&mut self) -> u64 {
        let n = self.count.saturating_sub(self.counted);
        self.counted = self.count;
        n
    }

    /// Committed elements.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Committed segments (inclusive index ranges).
    #[cfg(test)]
    pub(crate) fn segments(&self) -> &[(u64, u64)] {
        &self.segments
    }

    fn commit(&mut self) -> io::Result<()> {
        let mut segments = String::from("[");
        for (i, (s, e)) in self.segments.iter().enumerate() {
            if i > 0 {
                segments.push_str(", ");
            }
            segments.push_str(&format!("[{s}, {e}]"));
        }
        segments.push(']');
        let text = format!(
            "{{\"type\": \"ReplayBuffer\", \"count\": {}, \"offset\": 0, \"capacity\": null, \
             \"storage_cls\": \"{}\", \"storage_path_relative\": \"storage\", \
             \"single_instance_space\": {}, \"physical_segments\": {segments}}}",
            self.count,
            if self.flat {
                FLATTENED_STORAGE
            } else {
                DICT_STORAGE
            },
            self.space_json
        );
        self.metadata.write(text.as_bytes())
    }
}

/// Commits the staged episodes of `buffers` (see [`Ended::Staged`]) in one
/// [`ExternalFormat::commit_many`] call, then each buffer's `metadata.json`.
/// Counts the episodes committed and the buffers that failed in `stats`
/// (each failure logged).
pub(crate) fn commit_staged<'a>(
    format: &dyn ExternalFormat,
    buffers: impl Iterator<Item = &'a mut BufferDir>,
    stats: &RecordStats,
) {
    let mut buffers: Vec<&mut BufferDir> = buffers.filter(|b| b.has_staged()).collect();
    if buffers.is_empty() {
        return;
    }
    let outcomes = {
        let batch: Vec<Staged<'_>> = buffers.iter_mut().filter_map(|b| b.take_staged()).collect();
        format.commit_many(batch)
    };
    let mut outcomes = outcomes.into_iter();
    for buffer in buffers {
        let outcome = outcomes
            .next()
            .unwrap_or_else(|| Err(io::Error::other("the external writer returned no outcome")));
        match buffer.staged_done(outcome) {
            Ok(episodes) => {
                stats.episodes.fetch_add(episodes, Ordering::Relaxed);
                let committed = buffer.newly_committed();
                stats.transitions.fetch_add(committed, Ordering::Relaxed);
            }
            Err(e) => {
                stats.fail(&format!("{}: commit failed: {e}", buffer.path.display()));
                tracing::error!(buffer = %buffer.path.display(), error = %e, "recording: commit failed");
            }
        }
    }
}

impl Drop for BufferDir {
    fn drop(&mut self) {
        if let Some(external) = &mut self.external {
            external.close();
        }
        // The previous metadata.json, kept by `Swapped`.
        let _ = std::fs::remove_file(tmp_path(&self.path.join("metadata.json")));
    }
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over
/// `path`: readers see the old file or the new one, never a part.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(path);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_episodes_and_resumes_after_them() {
        let dir = tempfile::tempdir().unwrap();
        let keys = vec!["obs".to_string(), "next_obs/x".to_string()];
        let space = "{\"type\": \"DictSpace\"}".to_string();
        let leaves = vec![(DType::F32, vec![1]), (DType::F32, vec![1])];
        let npz = RecordFormat::Npz;
        let stats = RecordStats::default();
        let mut b =
            BufferDir::open(dir.path(), &keys, &leaves, space.clone(), false, &npz).unwrap();
        let a = NdArray::from_vec(vec![1.0f32]);
        b.append(&[a.clone(), a.clone()], &stats).unwrap();
        b.append(&[a.clone(), a.clone()], &stats).unwrap();
        b.end_segment().unwrap();
        b.append(&[a.clone(), a.clone()], &stats).unwrap();
        assert_eq!(b.count(), 2);
        // The open episode's elements wait in memory until it ends.
        assert!(dir.path().join("storage/next_obs.x/1.npz").exists());
        assert!(!dir.path().join("storage/next_obs.x/2.npz").exists());
        drop(b);
        let mut r =
            BufferDir::open(dir.path(), &keys, &leaves, space.clone(), false, &npz).unwrap();
        assert_eq!((r.count(), r.segments()), (2, &[(0, 1)][..]));
        r.append(&[a.clone(), a.clone()], &stats).unwrap();
        r.end_segment().unwrap();
        let r = BufferDir::open(dir.path(), &keys, &leaves, space, false, &npz).unwrap();
        assert_eq!((r.count(), r.segments()), (3, &[(0, 1), (2, 2)][..]));
        let other = BufferDir::open(dir.path(), &keys, &leaves, "{}".into(), false, &npz);
        assert!(other.is_err());
    }

    /// An external writer that logs each `write` (rows, commit).
    #[derive(Clone, Default)]
    struct Logged(std::sync::Arc<parking_lot::Mutex<Vec<(usize, bool)>>>);

    impl ExternalBuffer for Logged {
        fn write(&mut self, _: Vec<Vec<u8>>, rows: usize, commit: bool) -> io::Result<()> {
            self.0.lock().push((rows, commit));
            Ok(())
        }
        fn abort(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    }

    impl ExternalFormat for Logged {
        fn storage_class(&self) -> &str {
            "test.Storage"
        }
        fn open(&self, _: &[Column], _: u64) -> Result<Box<dyn ExternalBuffer>, String> {
            Ok(Box::new(self.clone()))
        }
    }

    #[test]
    fn staged_episodes_are_committed_before_rows_handed_over_early() {
        let dir = tempfile::tempdir().unwrap();
        let log = Logged::default();
        let format = RecordFormat::External(std::sync::Arc::new(log.clone()));
        let stats = RecordStats::default();
        // 1 MiB rows: the fourth row waiting reaches PENDING_BYTES.
        let leaves = vec![(DType::F32, vec![PENDING_BYTES / 16])];
        let keys = vec!["obs".to_string()];
        // (the external writer makes the storage directories)
        std::fs::create_dir_all(dir.path().join("storage")).unwrap();
        let mut b =
            BufferDir::open(dir.path(), &keys, &leaves, "{}".into(), false, &format).unwrap();
        let row = NdArray::from_vec(vec![0.5f32; PENDING_BYTES / 16]);
        b.append(std::slice::from_ref(&row), &stats).unwrap();
        assert_eq!(b.end_segment().unwrap(), Ended::Staged);
        assert!(log.0.lock().is_empty() && b.count() == 0);
        for _ in 0..4 {
            b.append(std::slice::from_ref(&row), &stats).unwrap();
        }
        // The staged episode is committed alone, then the open one's rows
        // are handed over uncommitted, in that order.
        assert_eq!(*log.0.lock(), [(1, true), (4, false)]);
        assert_eq!((b.count(), b.segments()), (1, &[(0, 0)][..]));
        assert_eq!(stats.episodes.load(Ordering::Relaxed), 1);
        assert_eq!(b.end_segment().unwrap(), Ended::Staged);
        commit_staged(&log, std::iter::once(&mut b), &stats);
        assert_eq!(*log.0.lock(), [(1, true), (4, false), (0, true)]);
        assert_eq!((b.count(), b.segments()), (5, &[(0, 0), (1, 4)][..]));
        let meta = std::fs::read_to_string(dir.path().join("metadata.json")).unwrap();
        assert!(meta.contains("\"count\": 5,"), "{meta}");
    }
}
