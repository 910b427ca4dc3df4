"""unienv_remote: a fast client for UniEnv's remote environment protocol v1.

``unienv_remote.RemoteClient`` is a drop-in replacement for
``unienv_interface.remote.RemoteClient`` (unienv 0.0.1b14), built on the
unienv-remote Rust crate: change one import line and nothing else.
"""

from . import _native

__all__ = ["_native"]
