"""What the server does, in Python's ``logging``: the Rust crate's events
(sessions, faults, refusals, slow calls, shutdown, recording failures) go to
the logger ``unienv_remote`` and its children
(``unienv_remote.server.session``, ...); exceptions raised by hosted objects
go to ``unienv_remote.host`` with their traceback.

The forwarding is installed when the package is imported (:func:`follow`),
at the ``unienv_remote`` logger's effective level (``WARNING`` when
``logging`` is not configured: warnings and errors, such as a recording that
cannot be written, reach ``logging`` and, with no handler configured,
Python's last-resort handler on stderr), read again whenever a client, a
vector env or a server starts.

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


def _exit_hook_once() -> None:
    global _exit_hook
    if not _exit_hook:
        atexit.register(_native.stop_logs)
        _exit_hook = True


def follow() -> bool:
    """Forwards the crate's events at the ``unienv_remote`` logger's
    effective level (installing the forwarding on first use; nothing is
    added to ``logging``'s configuration); returns whether they are
    forwarded."""
    with _lock:
        _exit_hook_once()
        return _native.set_log_level(logging.getLogger(LOGGER).getEffectiveLevel())


def start() -> bool:
    """Forwards the crate's events at the ``unienv_remote`` logger's level
    (adding the default handler first when nothing is configured); returns
    whether they are forwarded."""
    with _lock:
        logger = logging.getLogger(LOGGER)
        if not logger.hasHandlers():
            handler = _DefaultHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
            if logger.level == logging.NOTSET:
                logger.setLevel(logging.INFO)
        _exit_hook_once()
        return _native.set_log_level(logger.getEffectiveLevel())


def flush(timeout: float = 1.0) -> None:
    """Waits until the crate's events so far have reached ``logging``."""
    _native.flush_logs(timeout)
