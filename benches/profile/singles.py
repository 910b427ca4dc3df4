"""The learner of ``benches/scaling.py``'s single-env configuration over a
fixed number of vector steps: N single-env ``Pendulum-v1`` resources on 2
server processes (``scaling.py --serve``), one ``RemoteVectorEnv`` over the N
``(url, id)`` pairs, lockstep ``step`` with random actions. What one env step
costs the learner process in load-independent counts:

    .venv-ref/bin/python benches/profile/singles.py N [STEPS]
    STRACE=1 .venv-ref/bin/python benches/profile/singles.py N [STEPS]   # + strace -c -f: syscalls per env step
    CG=1 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=OUT \\
        .venv-ref/bin/python benches/profile/singles.py N [STEPS]        # instructions per env step
    HOLD=0 ...   # the servers write each reply at once (RemoteServer(reply_hold=None))

After 50 warm-up vector steps the script counts STEPS (default 200) vector
steps. With STRACE=1, ``strace -c -f`` is attached to this process (every
thread) around the counted steps and the syscalls per env step are printed by
syscall (strace's times are inflated, its counts are not). With CG=1
callgrind's instrumentation is on around the counted steps only
(``callgrind_control -i``); the script prints the env steps counted: divide
the ``totals:`` line of OUT by it. The servers are never traced.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np  # noqa: E402
from scaling import Server  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learner_steps import print_syscalls  # noqa: E402


def switches() -> int:
    """Voluntary context switches of this process so far, all threads (each
    is a wake-up: a thread that slept waiting for something)."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total


def main() -> None:
    n = int(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    from unienv_remote import RemoteVectorEnv

    hold = os.environ.get("HOLD", "1") != "0"
    servers = [Server(n // 2 + (1 if i < n % 2 else 0), reply_hold=hold) for i in range(2)]
    envs = None
    try:
        urls = [s.wait() for s in servers]
        envs = RemoteVectorEnv([(urls[j % 2], f"pendulum{j // 2}") for j in range(n)])
        pool = np.random.default_rng(0).uniform(-2, 2, size=(16,) + envs.action_space.shape).astype(np.float32)
        envs.reset(seed=0)
        for i in range(50):
            envs.step(pool[i % 16])
        tracer = None
        trace_out = os.path.join(tempfile.mkdtemp(), "strace.txt")
        # Read outside the traced and instrumented steps (it reads /proc).
        before = switches()
        if os.environ.get("STRACE"):
            tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(os.getpid()), "-o", trace_out],
                                      stderr=subprocess.DEVNULL)
            time.sleep(1.5)
        if os.environ.get("CG"):
            subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL)
        cpu = time.process_time()
        for i in range(steps):
            envs.step(pool[i % 16])
        cpu = time.process_time() - cpu
        if os.environ.get("CG"):
            subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL)
        if tracer is not None:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
        after = switches()
        env_steps = steps * n
        print(f"N={n}: {steps} vector steps, {env_steps} env steps "
              f"(CPU {1e6 * cpu / env_steps:.1f} µs per env step: not load-independent)")
        print(f"  voluntary context switches per env step: {(after - before) / env_steps:.3f}")
        if tracer is not None:
            print("syscalls per env step (strace -c -f):")
            print_syscalls(trace_out, env_steps)
    finally:
        if envs is not None:
            envs.close()
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
