"""unienv_remote: a fast client for UniEnv's remote environment protocol v1.

``unienv_remote.RemoteClient`` is a drop-in replacement for
``unienv_interface.remote.RemoteClient`` (unienv 0.0.1b14), built on the
unienv-remote Rust crate: change one import line and nothing else::

    from unienv_remote import RemoteClient   # was: from unienv_interface.remote import RemoteClient

The exceptions are the reference's own classes (``RemoteError``,
``UncertainOutcomeError``, ``CodecError``), so existing ``except`` clauses
keep working.
"""

import importlib
import importlib.util
from typing import TYPE_CHECKING, Dict, List, Tuple

from unienv_interface.remote.codec import Codec, CodecError, PROTOCOL_VERSION
from unienv_interface.remote.errors import RemoteError, UncertainOutcomeError

from . import _native
from .client import RemoteClient, Subscription
from .proxies import RemoteEnv, RemoteWorld, RemoteWorldNode, RemoteWorldEnv
from .restart import RestartError, RestartPolicy
from .server import RemoteServer
from ._hooks import HOOKS as _HOOKS

if TYPE_CHECKING:
    # The names of _LAZY below, for type checkers: at run time they are
    # imported on first use (``__getattr__``), so that the base install works
    # without their extra; a user's ``mypy --strict`` sees each as its class.
    from ._gym_spaces import from_gymnasium as from_gymnasium
    from .batched import BatchedEnv as BatchedEnv
    from .fleet import ProcessVectorEnv as ProcessVectorEnv
    from .vector import RemoteVectorEnv as RemoteVectorEnv
    from .vector import VectorEnvError as VectorEnvError
    from .relay import DialHandle as DialHandle
    from .relay import DialStatus as DialStatus
    from .relay import Relay as Relay
    from .relay import RelayHost as RelayHost

#: The package's version: ``python/Cargo.toml``'s, compiled into the
#: extension (``pyproject.toml`` takes it from there too).
__version__: str = _native.__version__

# What the extension's Python host calls back into (unienv_remote/_hooks.py).
_native.set_hooks(_HOOKS)

__all__: List[str] = [
    "RemoteClient", "RemoteServer", "RemoteEnv", "RemoteWorld", "RemoteWorldNode", "RemoteWorldEnv", "Subscription",
    "Codec", "CodecError", "PROTOCOL_VERSION", "RemoteError", "UncertainOutcomeError",
    "RestartPolicy", "RestartError",
]
# Names imported on first use, from modules that need an optional extra:
# {name: (module, the distribution it needs, the extra that installs it)}. They
# are in __all__ only when that distribution is installed, so
# ``from unienv_remote import *`` works on the base install
# (``pip install unienv-remote``) and gives them with the extra.
_LAZY: Dict[str, Tuple[str, str, str]] = {
    "RemoteVectorEnv": ("vector", "gymnasium", "vector"),
    "VectorEnvError": ("vector", "gymnasium", "vector"),
    "BatchedEnv": ("batched", "gymnasium", "vector"),
    "ProcessVectorEnv": ("fleet", "gymnasium", "vector"),
    "from_gymnasium": ("_gym_spaces", "gymnasium", "gymnasium"),
}

# Names imported on first use that need no extra: {name: module}.
_DEFERRED: Dict[str, str] = {
    "Relay": "relay",
    "RelayHost": "relay",
    "DialHandle": "relay",
    "DialStatus": "relay",
}
__all__ += list(_DEFERRED)


def _installed(distribution: str) -> bool:
    try:
        return importlib.util.find_spec(distribution) is not None
    except ValueError:  # in sys.modules as None (import blocked) or without a spec
        return False


__all__ += [name for name, (_, needs, _extra) in _LAZY.items() if _installed(needs)]


def __getattr__(name: str) -> object:
    deferred = _DEFERRED.get(name)
    if deferred is not None:
        return getattr(importlib.import_module(f".{deferred}", __name__), name)
    lazy = _LAZY.get(name)
    if lazy is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, needs, extra = lazy
    try:
        module = importlib.import_module(f".{module_name}", __name__)
    except ModuleNotFoundError as missing:
        if missing.name != needs and not str(missing.name).startswith(f"{needs}."):
            raise
        raise ModuleNotFoundError(
            f"unienv_remote.{name} needs {needs}, which is not installed: "
            f'pip install "unienv-remote[{extra}]" (or pip install {needs})', name=missing.name) from missing
    return getattr(module, name)


def __dir__() -> List[str]:
    # The lazily imported names are listed (for completion) before first use.
    return sorted(set(globals()) | set(_LAZY) | set(_DEFERRED))
