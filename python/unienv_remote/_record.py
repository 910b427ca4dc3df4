"""The ``record_format`` keyword of ``RemoteServer`` and ``RemoteVectorEnv``."""

from __future__ import annotations

import importlib.util
import warnings
from typing import Optional, Tuple, Union

from . import _native

#: The formats a recording can be written in.
RECORD_FORMATS = ("parquet", "npz")

#: The format ``record_dir`` writes unless ``record_format`` says otherwise (the
#: default of ``RemoteServer`` and ``RemoteVectorEnv``):
#: unienv_data's ``ParquetStorage`` (a few files per episode; loading needs
#: pyarrow). ``"npz"`` (one file per transition) loads with unienv alone.
DEFAULT_RECORD_FORMAT = "parquet"

#: Bytes of rows a Parquet piece is sized for: the Rust writer's
#: ``PIECE_BYTES``, read from the extension (``piece_size`` is a power of two
#: from 16 to 4096 rows near it; a resumed storage keeps its own). Tests
#: shrink it to get 16-row pieces.
PARQUET_PIECE_BYTES: int = _native.PARQUET_PIECE_BYTES

#: Whether the missing pyarrow was already warned about (once per process).
_warned = False


def native_format(record_format: str, recording: bool = True) -> Optional[Union[str, Tuple[str, int]]]:
    """The ``record_format`` argument of the native recorders: ``"npz"``
    for ``"npz"`` (``NPZStorage``, loadable with unienv alone),
    ``("parquet", PARQUET_PIECE_BYTES)`` for ``"parquet"`` (unienv_data's
    ``ParquetStorage``, written by the Rust recorder; loading it needs
    pyarrow, writing it does not), ``None`` when not ``recording`` (the name
    is checked all the same).

    Recording Parquet in a process without pyarrow warns once
    (``RuntimeWarning``): the recording is written all the same, but
    ``ReplayBuffer.load_from`` will need pyarrow wherever it is loaded."""
    global _warned
    if record_format not in RECORD_FORMATS:
        raise ValueError(f"record_format must be one of {RECORD_FORMATS}, not {record_format!r}")
    if not recording:
        return None
    if record_format == "npz":
        return "npz"
    if not _warned and importlib.util.find_spec("pyarrow") is None:
        _warned = True
        warnings.warn(
            "recording in the Parquet format (record_format='parquet', the default) without pyarrow "
            "installed here: the recording is written, but loading it with unienv_data's "
            "ReplayBuffer.load_from needs pyarrow (pip install pyarrow); record_format='npz' loads "
            "with unienv alone", RuntimeWarning, stacklevel=3)
    return ("parquet", PARQUET_PIECE_BYTES)
