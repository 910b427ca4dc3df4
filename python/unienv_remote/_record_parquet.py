"""The Parquet format of recordings (``record_format="parquet"``): the storages
of a recorded ``ReplayBuffer`` as ``unienv_data.storages.parquet.ParquetStorage``
directories, written with unienv_data's own helpers (its Arrow tables,
``_numpy_arrays_to_arrow_table``, written as its ``_write_piece_to_disk`` does
but leaner, see :data:`FAST_WRITER`; ``_write_metadata``), so that
``ReplayBuffer.load_from(path, backend=NumpyComputeBackend)`` opens them with
unienv_data and pyarrow alone.

The Rust recorder (``unienv_remote::record``, ``RecordFormat::External``)
calls this module from its writer thread, never from a stepping thread: it
builds the buffer around the storages (``metadata.json``, the
``FlattenedStorage`` or ``DictStorage`` metadata) and hands each episode's
rows over when the episode ends (earlier, without committing them, beyond
4 MiB). The GIL is held only during these calls.

The recorder commits the episodes that ended while it drained its queue
in one :meth:`ParquetFormat.commit_many` call, one buffer after the other.
A commit (``write(..., commit=True)``) writes, per storage: the pieces that
changed (each to ``.tmp/`` inside the storage, then swapped with or renamed
over ``part-NNNNNN.parquet``, see :func:`_publish`), then ``_metadata.json``
(also via ``.tmp/``). The
recorder then replaces the buffer's ``metadata.json``, the one commit point:
until then the buffer loads with its previous ``count``, since every piece
still holds its earlier rows and ``ParquetStorage`` reads the first
``num_rows`` rows only.

Pieces: ``piece_size`` rows each (see :func:`piece_size`); the last piece,
partial, is kept in memory and rewritten at each commit.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys
from math import prod
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

try:
    from unienv_data.storages import parquet as _parquet
except ModuleNotFoundError as e:  # pragma: no cover - exercised in a subprocess
    if e.name is not None and e.name.split(".")[0] == "pyarrow":
        raise ImportError(
            "record_format='parquet' needs pyarrow (unienv_data's ParquetStorage uses it): "
            "pip install pyarrow (or unienv-remote[parquet])") from e
    raise

#: The storage class a Parquet recording's buffer metadata names.
STORAGE_CLASS = "unienv_data.storages.parquet.ParquetStorage"

#: unienv_data's default piece compression (``ParquetStorage.create``).
COMPRESSION = "snappy"

#: Bytes a piece is sized for (see :func:`piece_size`).
PIECE_BYTES = 64 * 1024

#: Whether pieces are written without dictionary encoding and column
#: statistics: unienv_data's table (``_numpy_arrays_to_arrow_table``: the same
#: schema and ``column_shapes``) and ``pq.write_table`` as in its
#: ``_write_piece_to_disk``, minus two features its reader never uses that
#: cost most of the write for float data (dictionary encoding is tried, then
#: abandoned, for every column chunk); and files (pieces, ``_metadata.json``
#: as :func:`metadata_bytes` makes it) overwritten in place, not truncated
#: (see :func:`_write_file`). False: ``_write_piece_to_disk`` and
#: ``_write_metadata`` themselves.
FAST_WRITER = True

ColumnSpec = Tuple[str, np.dtype[Any], Tuple[int, ...]]

# Linux's renameat2 (glibc 2.28+), for _publish.
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_renameat2: Optional[Callable[..., int]] = None
if sys.platform == "linux":
    try:
        _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # pragma: no cover - an old libc
        _renameat2 = None


def _write_file(path: str, data: Any) -> None:
    """Writes ``data`` (bytes-like) over the file at ``path`` in place
    (created if missing, then cut to its length). Unlike opening it with
    truncation, this frees and allocates no blocks: on the busy ext4 of the
    test machine a truncating open cost 2 ms (150 us of CPU), this 10 us."""
    view = memoryview(data).cast("B")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        done = 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], done)
        os.ftruncate(fd, len(view))
    finally:
        os.close(fd)


def metadata_bytes(piece_size: int, num_rows: int, column_shapes: Dict[str, Tuple[int, ...]],
                   compression: Any, column_dtypes: Dict[str, str]) -> bytes:
    """``_metadata.json`` as unienv_data's ``_write_metadata`` writes it
    (tests/test_record_parquet.py checks they agree), as bytes."""
    metadata: Dict[str, Any] = {
        "piece_size": piece_size,
        "num_rows": num_rows,
        "column_shapes": {k: list(v) for k, v in column_shapes.items()},
        "compression": compression,
        "column_dtypes": column_dtypes,
    }
    return json.dumps(metadata, indent=2).encode()


def _publish(tmp: str, dst: str) -> None:
    """Puts the file at ``tmp`` at ``dst`` atomically. Where the system can
    swap the two (Linux, ``renameat2(RENAME_EXCHANGE)``, ``dst`` existing),
    the file that was at ``dst`` is left at ``tmp``, to be overwritten by the
    next write: a commit then allocates no inode, which is most of what
    creating a file costs on a busy ext4 (BENCHMARKS.md, "h28p: Parquet
    recording"). Otherwise ``os.replace``."""
    if _renameat2 is not None and os.path.exists(dst):
        if _renameat2(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(dst), _RENAME_EXCHANGE) == 0:
            return
    os.replace(tmp, dst)


def piece_size(row_bytes: int) -> int:
    """Rows per piece for rows of ``row_bytes`` bytes: a power of two near
    :data:`PIECE_BYTES` (64 KiB) per piece, from 16 to 4096 rows.

    A commit (an episode's end) writes at least two files (the partial
    piece, ``_metadata.json``) whatever the piece size, each at a fixed cost
    (pyarrow's writer, the system calls). The partial piece holds half a
    piece on average: at 64 KiB, 32 KiB of rows, which pyarrow encodes in
    about that fixed cost. Larger pieces would make every commit dearer
    (a 2,048-row float64 piece took 1 ms, BENCHMARKS.md, "h28p: Parquet
    recording") and save files only on long episodes; smaller ones write a
    file per few dozen rows again. Pendulum's transitions (10 float64) get
    512-row pieces."""
    rows = max(1, PIECE_BYTES // max(1, row_bytes))
    size = 16
    while size * 2 <= rows and size < 4096:
        size *= 2
    return size


class ParquetColumns:
    """One recorded buffer's storages (one ``ParquetStorage`` per column:
    the flattened transition, or one per leaf), from ``committed`` rows on.

    ``columns``: per storage, its directory, NumPy dtype name and element
    shape. An existing storage is resumed with its ``piece_size`` and first
    ``committed`` rows; a new one is created empty (``_metadata.json``
    with no rows).

    What a commit costs is kept to what changes: per column, the Arrow
    schema (with its ``column_shapes`` metadata) and ``_metadata.json``
    around its ``num_rows`` are made once; the rows of the partial piece
    wait in one preallocated array per column, appended to in place."""

    def __init__(self, columns: Sequence[Tuple[str, str, Sequence[int]]], committed: int) -> None:
        self._dirs = [os.fspath(d) for d, _, _ in columns]
        self._specs: List[ColumnSpec] = [
            (_parquet.ParquetStorage.DEFAULT_KEY, np.dtype(dtype), tuple(int(n) for n in shape))
            for _, dtype, shape in columns]
        self._shapes: List[Dict[str, Tuple[int, ...]]] = [
            {name: shape} for name, _, shape in self._specs]
        row_bytes = sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for _, dtype, shape in self._specs)
        existing = os.path.join(self._dirs[0], "_metadata.json")
        if os.path.exists(existing):
            self._piece = int(_parquet._read_metadata(self._dirs[0])["piece_size"])
        else:
            self._piece = piece_size(row_bytes)
        for d in self._dirs:
            os.makedirs(os.path.join(d, ".tmp"), exist_ok=True)
        self._schemas = [_schema(spec, shapes) for spec, shapes in zip(self._specs, self._shapes)]
        self._metadata = [
            _MetadataTemplate(self._piece, shapes, COMPRESSION, _parquet._serialize_column_dtypes([spec]))
            for spec, shapes in zip(self._specs, self._shapes)]
        self._tmp_piece = [os.path.join(d, ".tmp", "piece.parquet") for d in self._dirs]
        self._tmp_metadata = [os.path.join(d, ".tmp", "_metadata.json") for d in self._dirs]
        self._metadata_path = [os.path.join(d, "_metadata.json") for d in self._dirs]
        # The piece holding row `_tail_start + _fill`: its first `_fill` rows.
        self._buf = [np.empty((self._piece, *shape), dtype) for _, dtype, shape in self._specs]
        self._count = committed
        self._written = committed
        self._tail_start, self._fill = self._load_tail(committed)
        if not os.path.exists(existing):
            self._commit_metadata()

    def _load_tail(self, count: int) -> Tuple[int, int]:
        """Reads the rows of the piece holding row ``count`` that come
        before it into the piece arrays; returns the piece's first row and
        how many."""
        start = count - count % self._piece
        if count == start:
            return start, 0
        for d, (name, dtype, shape), shapes, buf in zip(self._dirs, self._specs, self._shapes, self._buf):
            table = _parquet.pq.read_table(os.path.join(d, _parquet._piece_filename(start // self._piece)))
            rows = _parquet._arrow_table_to_numpy_arrays(table, shapes)[name]
            buf[:count - start] = rows[:count - start]
        return start, count - start

    def write(self, columns: Sequence[np.ndarray], rows: int, commit: bool) -> None:
        """Appends ``rows`` rows (per column, its bytes as a ``uint8`` array):
        full pieces are written as they fill; with ``commit``, the partial
        piece and every storage's ``_metadata.json`` too."""
        new = [np.asarray(raw).view(dtype).reshape(rows, *shape)
               for raw, (_, dtype, shape) in zip(columns, self._specs)]
        done = 0
        while done < rows:
            take = min(rows - done, self._piece - self._fill)
            for buf, data in zip(self._buf, new):
                buf[self._fill:self._fill + take] = data[done:done + take]
            self._fill += take
            done += take
            if self._fill == self._piece:
                self._write_piece(self._buf)
                self._tail_start += self._piece
                self._fill = 0
        self._written += rows
        if commit:
            if self._fill:
                self._write_piece([buf[:self._fill] for buf in self._buf])
            self._commit_metadata()
            self._count = self._written

    def abort(self) -> None:
        """Forgets the rows appended since the last commit."""
        self._written = self._count
        if self._tail_start <= self._count:
            self._fill = self._count - self._tail_start
        else:
            # Full pieces were written past the commit: the committed rows of
            # the piece holding row `count` are read back.
            self._tail_start, self._fill = self._load_tail(self._count)

    def close(self) -> None:
        """Removes the temporary directories (everything is committed)."""
        for d in self._dirs:
            shutil.rmtree(os.path.join(d, ".tmp"), ignore_errors=True)

    def _write_piece(self, rows: Sequence[np.ndarray]) -> None:
        index = self._tail_start // self._piece
        name = _parquet._piece_filename(index)
        for d, spec, shapes, schema, tmp, data in zip(self._dirs, self._specs, self._shapes, self._schemas,
                                                      self._tmp_piece, rows):
            if FAST_WRITER:
                # unienv_data's own table (schema, column_shapes metadata),
                # written without dictionary encoding and statistics (see
                # FAST_WRITER), into memory, then over the temporary file.
                table = _table(spec, schema, data)
                out = _parquet.pa.BufferOutputStream()
                _parquet.pq.write_table(table, out, compression=COMPRESSION, use_dictionary=False,
                                        write_statistics=False)
                _write_file(tmp, out.getvalue())
            else:
                tmp = os.path.join(d, ".tmp", name)
                _parquet._write_piece_to_disk(os.path.dirname(tmp), index, {spec[0]: data}, [spec], len(data),
                                              shapes, COMPRESSION)
            _publish(tmp, os.path.join(d, name))

    def _commit_metadata(self) -> None:
        for d, spec, shapes, template, tmp, path in zip(self._dirs, self._specs, self._shapes, self._metadata,
                                                         self._tmp_metadata, self._metadata_path):
            if FAST_WRITER:
                _write_file(tmp, template.bytes(self._written))
            else:
                dtypes = _parquet._serialize_column_dtypes([spec])
                _parquet._write_metadata(os.path.dirname(tmp), self._piece, self._written, shapes, COMPRESSION,
                                         column_dtypes=dtypes)
            _publish(tmp, path)


def _schema(spec: ColumnSpec, shapes: Dict[str, Tuple[int, ...]]) -> Any:
    """The Arrow schema ``_numpy_arrays_to_arrow_table`` gives a piece of
    column ``spec`` (its ``column_shapes`` metadata included)."""
    metadata = {b"column_shapes": json.dumps({k: list(v) for k, v in shapes.items()}).encode("utf-8")}
    return _parquet._build_arrow_schema([spec]).with_metadata(metadata)


def _table(spec: ColumnSpec, schema: Any, data: np.ndarray) -> Any:
    """The Arrow table ``_numpy_arrays_to_arrow_table({name: data}, [spec],
    len(data), shapes)`` makes, on the ready ``schema`` (a test checks the
    two write the same bytes)."""
    _, dtype, shape = spec
    arrow_type = _parquet._numpy_dtype_to_arrow_type(dtype)
    n_elements = prod(shape) if shape else 0
    if n_elements >= 1:
        flat = data.reshape(len(data) * n_elements)
        array = _parquet.pa.FixedSizeListArray.from_arrays(_parquet.pa.array(flat, type=arrow_type),
                                                           list_size=n_elements)
    else:
        array = _parquet.pa.array(data, type=arrow_type)
    return _parquet.pa.table([array], schema=schema)


class _MetadataTemplate:
    """:func:`metadata_bytes` of one storage, made once: only ``num_rows``
    changes from one commit to the next."""

    _MARK = 7_364_917_265_103_845_529

    def __init__(self, piece: int, shapes: Dict[str, Tuple[int, ...]], compression: Any,
                 dtypes: Dict[str, str]) -> None:
        whole = metadata_bytes(piece, self._MARK, shapes, compression, dtypes)
        self._head, self._tail = whole.split(str(self._MARK).encode())

    def bytes(self, num_rows: int) -> bytes:
        """``_metadata.json`` with ``num_rows`` rows."""
        return b"%s%d%s" % (self._head, num_rows, self._tail)


class ParquetFormat:
    """The factory the Rust recorder opens each buffer's storages with."""

    storage_class = STORAGE_CLASS

    def open(self, columns: Sequence[Tuple[str, str, Sequence[int]]], committed: int) -> ParquetColumns:
        """The storages of one buffer (see :class:`ParquetColumns`)."""
        return ParquetColumns(columns, committed)

    def commit_many(self, items: Sequence[Tuple[ParquetColumns, Sequence[np.ndarray], int]]) -> List[Optional[str]]:
        """Commits several buffers' rows (``(columns, arrays, rows)`` each,
        as :meth:`ParquetColumns.write` takes them) in one call from the
        recorder, one buffer after the other: per buffer, ``None`` or the
        error that stopped its commit (the others are committed all the
        same)."""
        errors: List[Optional[str]] = []
        for columns, arrays, rows in items:
            try:
                columns.write(arrays, rows, True)
            except Exception as e:  # reported to the recorder, which logs it
                errors.append(f"{type(e).__name__}: {e}")
            else:
                errors.append(None)
        return errors
