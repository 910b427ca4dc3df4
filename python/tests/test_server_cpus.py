"""``RemoteServer(cpus=...)``: the server's threads (domain workers, runtime,
recorder) run on the CPUs given, the caller's thread is left as it was, and
an unusable list is refused."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402

# Run in a process of its own: the threads of this one's earlier servers
# (and of pytest's workers) would blur the picture.
PINNED = textwrap.dedent("""
    import json, os, sys, tempfile
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from ref_fixture_server import CounterEnv
    from unienv_remote import RemoteServer

    cpu = int(sys.argv[1])
    before = sorted(os.sched_getaffinity(0))
    server = RemoteServer(cpus=[cpu], record_dir=tempfile.mkdtemp())
    server.register("a", CounterEnv())
    server.register("b", lambda: CounterEnv())
    server.listen("127.0.0.1", 0)
    client = server.connect()
    client.env("b").reset()  # the lazy one built on its thread
    threads = {}
    for task in Path("/proc/self/task").iterdir():
        name = (task / "comm").read_text().strip()
        status = (task / "status").read_text().splitlines()
        allowed = next(line.split(":", 1)[1].strip() for line in status if line.startswith("Cpus_allowed_list"))
        threads.setdefault(name, []).append(allowed)
    main = sorted(os.sched_getaffinity(0))
    client.close()
    server.close()
    print(json.dumps({"threads": threads, "before": before, "main": main}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="placement is Linux only")
def test_the_servers_threads_run_on_the_cpus_given() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1]
    here = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py")
    out = subprocess.run([sys.executable, "-c", PINNED, str(cpu), here], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    threads = seen["threads"]
    ours = {name: cpus for name, cpus in threads.items() if name.startswith("unienv-")}
    assert any(n.startswith("unienv-domain") for n in ours), threads
    assert "unienv-server" in ours, threads
    assert "unienv-recorder" in ours, threads
    for name in ours:
        if name.startswith(("unienv-domain", "unienv-server", "unienv-recorder")):
            assert ours[name] == [str(cpu)] * len(ours[name]), (name, threads)
    # The caller's (main) thread is not the server's.
    assert seen["main"] == seen["before"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="placement is Linux only")
def test_an_unusable_cpu_list_is_refused() -> None:
    for bad in ([], [1023]):
        server = unienv_remote.RemoteServer(cpus=bad)
        server.register("counter", CounterEnv())
        with pytest.raises(ValueError, match="CPU list is empty" if not bad else "CPU 1023 does not exist"):
            server.listen("127.0.0.1", 0)
        server.close()
    for typo in ("0", [-1], [0.5]):
        with pytest.raises(ValueError, match="cpus must be a sequence of CPU numbers"):
            unienv_remote.RemoteServer(cpus=typo)  # type: ignore[arg-type]
