"""What the server does, in Python's ``logging``: the Rust crate's events
(sessions, faults, refusals, slow calls, shutdown) go to the logger
``unienv_remote`` and its children (``unienv_remote.server.session``, ...);
exceptions raised by hosted objects go to ``unienv_remote.host`` with their
traceback.

When the application has configured no handler (none on the root logger nor
on ``unienv_remote``), :func:`start` adds a stderr handler to ``unienv_remote``
and, unless a level was set on it, sets it to ``INFO``, so a script hosting
envs shows what happens. That handler steps aside as soon
as the root logger gets a handler (``logging.basicConfig`` later), so records
are never printed twice. The level forwarded from Rust is the ``unienv_remote``
logger's effective level when the server starts: set it before (for example
``logging.getLogger("unienv_remote").setLevel(logging.DEBUG)``).
"""

from __future__ import annotations

import atexit
import logging
import sys
from typing import TextIO
from threading import Lock

from . import _native

LOGGER = "unienv_remote"

_lock = Lock()
_exit_hook = False


class _DefaultHandler(logging.StreamHandler[TextIO]):
    """stderr, while the application has configured no handler of its own."""

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return
        super().emit(record)


def start() -> bool:
    """Forwards the crate's events at the ``unienv_remote`` logger's level
    (adding the default handler first when nothing is configured); returns
    whether they are forwarded."""
    global _exit_hook
    with _lock:
        logger = logging.getLogger(LOGGER)
        if not logger.hasHandlers():
            handler = _DefaultHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
            if logger.level == logging.NOTSET:
                logger.setLevel(logging.INFO)
        if not _exit_hook:
            atexit.register(_native.stop_logs)
            _exit_hook = True
        return _native.set_log_level(logger.getEffectiveLevel())


def flush(timeout: float = 1.0) -> None:
    """Waits until the crate's events so far have reached ``logging``."""
    _native.flush_logs(timeout)
