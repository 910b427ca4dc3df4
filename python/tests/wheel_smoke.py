"""What ``pip install unienv-remote`` gives, checked in a clean virtual
environment holding only the built wheel and its declared dependencies (no
gymnasium, pytest or repository on ``sys.path``): run by scripts/test.sh as

    VENV/bin/python python/tests/wheel_smoke.py UNIENV_REMOTE_BIN

It imports the package (the star import included), checks its version, its
typing files and that the gymnasium extra is really optional, then connects
to our server (``unienv-remote serve --fixtures``) and steps an env.
"""

import importlib.metadata
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np


def main(binary: str) -> None:
    import unienv_remote

    root = Path(unienv_remote.__file__).parent
    assert "site-packages" in root.parts, f"not the installed wheel: {root}"
    assert unienv_remote.__version__ == importlib.metadata.version("unienv-remote"), unienv_remote.__version__
    for name in ("py.typed", "_native.pyi"):
        assert (root / name).is_file(), f"{name} is missing from the wheel"

    # The base install: no gymnasium, yet the star import works, and the
    # names that need the extra are listed by dir() and fail with a clear
    # ImportError when used.
    assert importlib.util.find_spec("gymnasium") is None, "gymnasium is not a base dependency"
    namespace: dict = {}
    exec("from unienv_remote import *", namespace)
    assert "RemoteClient" in namespace and "RemoteVectorEnv" not in namespace, sorted(namespace)
    assert "RemoteVectorEnv" in dir(unienv_remote)
    try:
        unienv_remote.RemoteVectorEnv
    except ImportError as e:
        assert "gymnasium" in str(e), e
    else:
        raise AssertionError("RemoteVectorEnv without gymnasium")

    server = subprocess.Popen([binary, "serve", "--fixtures", "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        url = None
        for line in server.stdout:
            match = re.search(r"(ws://127\.0\.0\.1:\d+)", line)
            if match:
                url = match.group(1)
                break
        assert url is not None, "the server printed no ws:// URL"
        with unienv_remote.RemoteClient.connect(url, timeout=10.0) as client:
            env = client.env("counter")
            env.reset(seed=1)
            obs = env.step(np.array([2.0, 3.0], dtype=np.float32))[0]
            assert obs["position"].tolist() == [3.0, 4.0], obs
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"wheel smoke test passed: unienv-remote {unienv_remote.__version__} from {root}")


if __name__ == "__main__":
    main(sys.argv[1])
