"""A server process of ``unienv_remote.ProcessVectorEnv`` (see
``unienv_remote.fleet``): reads its envs from standard input (an 8-byte
little-endian length, then a pickled ``{"sys_path", "spec"}``: the vector
env's import path, and ``{"fns", "groups", "cpu", "unix"}`` pickled again, to
be read once that path is set),
hosts them as ``BatchedEnv`` resources ``batch0``, ``batch1``, ... (``groups``
gives their sizes, in ``fns`` order), prints ``URL_PREFIX`` and its URL, and
serves until its standard input closes."""

from __future__ import annotations

import os
import pickle
import struct
import sys
from typing import Any, Dict


def _read_exactly(n: int) -> bytes:
    data = sys.stdin.buffer.read(n)
    if len(data) != n:
        raise SystemExit(f"unienv_remote._fleet_server: standard input ended after {len(data)} of {n} bytes")
    return data


def main() -> None:
    # Standard output is a pipe that the vector env reads only until the URL:
    # everything else printed (by the envs, now or while they step) goes to
    # standard error, so that a chatty simulator never fills that pipe.
    url_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    (length,) = struct.unpack("<Q", _read_exactly(8))
    outer: Dict[str, Any] = pickle.loads(_read_exactly(length))
    # The vector env's import path, for factories pickled by reference.
    sys.path[:] = list(dict.fromkeys(list(outer["sys_path"]) + sys.path))
    spec: Dict[str, Any] = pickle.loads(outer["spec"])

    from unienv_remote.batched import BatchedEnv
    from unienv_remote.server import RemoteServer
    from unienv_remote.fleet import URL_PREFIX

    server = RemoteServer(idle_timeout=None, cpus=None if spec["cpu"] is None else [spec["cpu"]])
    try:
        fns, start = spec["fns"], 0
        for k, size in enumerate(spec["groups"]):
            server.register(f"batch{k}", BatchedEnv(fns[start:start + size]))
            start += size
        url = server.listen("127.0.0.1", 0) if spec["unix"] is None else server.listen_unix(spec["unix"])
        print(URL_PREFIX + url, file=url_out, flush=True)
        url_out.close()
        sys.stdin.buffer.read()  # until the vector env closes (or its process ends)
    finally:
        server.close()


if __name__ == "__main__":
    main()
