"""A user's ``mypy --strict`` types every public class of the package as
that class, the names ``unienv_remote`` imports lazily (``RemoteVectorEnv``,
``BatchedEnv``, ...) included: without the package's ``TYPE_CHECKING``
imports its module ``__getattr__`` made them ``object``."""
import inspect
import re
import subprocess
import sys
from pathlib import Path

import unienv_remote

PACKAGE = Path(unienv_remote.__file__).resolve().parent


def public_classes() -> list[str]:
    names = list(unienv_remote.__all__) + list(unienv_remote._LAZY)
    return sorted({n for n in names
                   if inspect.isclass(getattr(unienv_remote, n))
                   and getattr(unienv_remote, n).__module__.startswith("unienv_remote")})


def test_mypy_strict_sees_every_public_class(tmp_path: Path) -> None:
    names = public_classes()
    assert {"RemoteClient", "RemoteServer", "RemoteVectorEnv", "BatchedEnv", "ProcessVectorEnv"} <= set(names)
    user = tmp_path / "user.py"
    user.write_text(f"from unienv_remote import {', '.join(names)}\n"
                    + "".join(f"reveal_type({n})\n" for n in names))
    # The package's own cache (python/.mypy_cache) keeps a second run quick.
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
         "--cache-dir", str(PACKAGE.parent / ".mypy_cache"), str(user)],
        capture_output=True, text=True, timeout=300)
    revealed = re.findall(r'user\.py:(\d+): note: Revealed type is "(.*)"', done.stdout)
    assert len(revealed) == len(names), done.stdout + done.stderr
    for line, typ in revealed:
        name = names[int(line) - 2]
        # A class is revealed as its constructor: "def (...) -> unienv_remote.<module>.<Name>".
        assert re.search(rf"-> unienv_remote\.[\w.]*\b{name}\b\"?$", typ + '"'), (name, typ)
    assert " error: " not in done.stdout, done.stdout
