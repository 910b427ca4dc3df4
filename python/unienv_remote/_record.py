"""The ``record_format`` keyword of ``RemoteServer`` and ``RemoteVectorEnv``."""

from __future__ import annotations

from typing import Optional, Tuple

#: The formats a recording can be written in.
RECORD_FORMATS = ("npz", "parquet")

#: Bytes of rows a Parquet piece is sized for (the Rust writer's
#: ``PIECE_BYTES``: ``piece_size`` is a power of two from 16 to 4096 rows
#: near it; a resumed storage keeps its own). Tests shrink it to get
#: 16-row pieces.
PARQUET_PIECE_BYTES = 64 * 1024


def native_format(record_format: str, recording: bool = True) -> Optional[Tuple[str, int]]:
    """The ``record_format`` argument of the native recorders: ``None`` for
    ``"npz"`` (loadable with unienv alone) or when not ``recording`` (the
    name is checked all the same), ``("parquet", PARQUET_PIECE_BYTES)`` for
    ``"parquet"`` (unienv_data's ``ParquetStorage``, written by the Rust
    recorder; loading it needs pyarrow, writing it does not)."""
    if record_format == "npz" or (record_format in RECORD_FORMATS and not recording):
        return None
    if record_format == "parquet":
        return ("parquet", PARQUET_PIECE_BYTES)
    raise ValueError(f"record_format must be one of {RECORD_FORMATS}, not {record_format!r}")
