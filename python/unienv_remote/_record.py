"""The ``record_format`` keyword of ``RemoteServer`` and ``RemoteVectorEnv``."""

from __future__ import annotations

from typing import Optional

#: The formats a recording can be written in.
RECORD_FORMATS = ("npz", "parquet")


def native_format(record_format: str, recording: bool = True) -> Optional[object]:
    """The ``record_format`` argument of the native recorders: ``None`` for
    ``"npz"`` (the Rust writer's own format, loadable with unienv alone) or
    when not ``recording`` (the name is checked all the same), a
    :class:`unienv_remote._record_parquet.ParquetFormat` for ``"parquet"``
    (raises ``ImportError`` naming pyarrow when it is missing)."""
    if record_format == "npz" or (record_format in RECORD_FORMATS and not recording):
        return None
    if record_format == "parquet":
        from ._record_parquet import ParquetFormat
        return ParquetFormat()
    raise ValueError(f"record_format must be one of {RECORD_FORMATS}, not {record_format!r}")
