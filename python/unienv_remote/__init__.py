"""unienv_remote: a fast client for UniEnv's remote environment protocol v1.

``unienv_remote.RemoteClient`` is a drop-in replacement for
``unienv_interface.remote.RemoteClient`` (unienv 0.0.1b14), built on the
unienv-remote Rust crate: change one import line and nothing else::

    from unienv_remote import RemoteClient   # was: from unienv_interface.remote import RemoteClient

The exceptions are the reference's own classes (``RemoteError``,
``UncertainOutcomeError``, ``CodecError``), so existing ``except`` clauses
keep working.
"""

from typing import List

from unienv_interface.remote.codec import Codec, CodecError, PROTOCOL_VERSION
from unienv_interface.remote.errors import RemoteError, UncertainOutcomeError

from . import _native
from .client import RemoteClient, Subscription
from .proxies import RemoteEnv, RemoteWorld, RemoteWorldNode, RemoteWorldEnv
from .server import RemoteServer

__all__: List[str] = [
    "RemoteClient", "RemoteServer", "RemoteEnv", "RemoteWorld", "RemoteWorldNode", "RemoteWorldEnv", "Subscription",
    "Codec", "CodecError", "PROTOCOL_VERSION", "RemoteError", "UncertainOutcomeError",
]
__all__ += ["RemoteVectorEnv", "VectorEnvError"]


def __getattr__(name: str) -> object:
    # RemoteVectorEnv needs gymnasium: imported on first use only.
    if name in ("RemoteVectorEnv", "VectorEnvError"):
        try:
            from . import vector
        except ModuleNotFoundError as missing:
            if missing.name != "gymnasium" and not str(missing.name).startswith("gymnasium."):
                raise
            raise ModuleNotFoundError(
                f"unienv_remote.{name} is a gymnasium VectorEnv and needs gymnasium, which is not installed: "
                "pip install \"unienv-remote[vector]\" (or pip install gymnasium)", name=missing.name) from missing
        return getattr(vector, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
