"""The learner process of ``benches/throughput.py``'s remote configurations
over a fixed number of vector steps: what
one lockstep ``step`` (or one ``recv``) costs the process that drives
``RemoteVectorEnv``, in syscalls, context switches per thread, CPU, and
(under callgrind) user-space instructions.

    .venv-ref/bin/python benches/profile/learner_steps.py CONFIG [STEPS]
    STRACE=1 .venv-ref/bin/python benches/profile/learner_steps.py CONFIG [STEPS]   # + strace -c -f
    WAKES=1 .venv-ref/bin/python benches/profile/learner_steps.py CONFIG [STEPS]    # + replies per wake
    CG=1 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=OUT \\
        .venv-ref/bin/python benches/profile/learner_steps.py CONFIG [STEPS]

CONFIG is one of ``benches/profile/learner_side.py``'s: pendulum-batched (2 servers x
BatchedEnv(8)), pendulum-single (16 single envs), stragglers-step (64,
lockstep), stragglers-recv (64, send/recv with batch_size 16), and
cheetah-batched (2 servers x BatchedEnv(8) of HalfCheetah-v5, whose sub-envs
report four infos each), pendulum-recv (2 servers x BatchedEnv(8), send/recv with batch_size 8, as
``throughput.py``'s batched send/recv row: one vector call is one recv and
one send, 8 env steps). The servers are
``benches/throughput.py --serve`` processes (never traced). After 300 warm-up
steps the script counts STEPS (default 2000) vector calls and prints, per
vector call: voluntary / involuntary context switches of each of the
learner's threads, its CPU (user + system, µs), and with STRACE=1 the
syscalls of every learner thread (``strace -c -f -p``, attached after the
warm-up; the strace run's CPU and timing are inflated, its counts are not).
With CG=1 callgrind's instrumentation is switched on around the counted loop
only (``callgrind_control -i``). With WAKES=1 strace logs every ``epoll_wait``
and ``recvfrom`` of the learner (attached after the warm-up) and the script
prints, per vector call, the waits that slept (a timeout other than 0) and
returned events, the zero-timeout polls, the reads that returned data, and
the replies per sleeping wait (requests per vector call / those waits): how
many replies each wake of the learner finds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np  # noqa: E402
from throughput import N, STRAGGLERS, ServerProcess  # noqa: E402


def threads() -> Dict[str, Tuple[int, int]]:
    """Voluntary and involuntary switches of each thread, by 'name/tid'."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            status = (task / "status").read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status if ":\t" in line)
        out[f"{fields['Name'].strip()}/{task.name}"] = (
            int(fields["voluntary_ctxt_switches"]), int(fields["nonvoluntary_ctxt_switches"]))
    return out


def requests_per_call(config: str) -> int:
    """Replies the learner waits for per vector call."""
    counts = {"pendulum-batched": 2, "pendulum-single": int(N), "stragglers-step": int(STRAGGLERS),
              "stragglers-recv": 16, "pendulum-recv": 1, "cheetah-batched": 2}
    return counts[config]


def wakes(path: str, steps: int, replies: int) -> None:
    """Prints the sleeping waits, polls and reads per vector call from an
    ``strace -f -e trace=epoll_wait,recvfrom`` log."""
    slept = polled = reads = 0
    for line in Path(path).read_text().splitlines():
        if "epoll_wait(" in line and "resumed" not in line and "unfinished" not in line:
            args = line.split("epoll_wait(", 1)[1]
            timeout = args.split(")", 1)[0].rsplit(",", 1)[-1].strip()
            result = line.rsplit("=", 1)[-1].strip().split()[0]
            if timeout == "0":
                polled += 1
            elif result.isdigit() and int(result) > 0:
                slept += 1
        elif "epoll_wait resumed" in line:
            result = line.rsplit("=", 1)[-1].strip().split()[0]
            if result.isdigit() and int(result) > 0:
                slept += 1
        elif "recvfrom" in line:
            result = line.rsplit("=", 1)[-1].strip().split()[0]
            if result.isdigit() and int(result) > 0:
                reads += 1
    print(f"per vector call (strace -f, {path}): waits that slept and returned events {slept / steps:.2f}, "
          f"zero-timeout polls {polled / steps:.2f}, reads with data {reads / steps:.2f}; "
          f"replies per sleeping wait {replies * steps / max(slept, 1):.2f}")


def print_syscalls(summary: str, per: int) -> None:
    """Prints the calls of each syscall in ``strace -c``'s summary file
    ``summary``, and their errors, divided by ``per``."""
    for line in Path(summary).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[3].isdigit() and parts[-1] != "total":
            print(f"  {parts[-1]:20} {int(parts[3]) / per:7.3f}"
                  + (f"  (errors {int(parts[4]) / per:.3f})" if len(parts) == 6 else ""))
        elif parts and parts[-1] == "total" and len(parts) >= 4:
            print(f"  {'total':20} {int(parts[3]) / per:7.3f}")


def main() -> None:
    config = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    from unienv_remote import RemoteVectorEnv

    servers = [ServerProcess(0), ServerProcess(1)]
    urls = [s.url for s in servers]
    envs: Any = None
    try:
        recv = config in ("stragglers-recv", "pendulum-recv")
        if config == "pendulum-batched":
            envs = RemoteVectorEnv([(u, "pendulum_batch") for u in urls])
        elif config == "cheetah-batched":  # sub-envs that report infos (four each)
            envs = RemoteVectorEnv([(u, "cheetah_batch") for u in urls])
        elif config == "pendulum-single":
            envs = RemoteVectorEnv([(urls[j % 2], f"pendulum{j // 2}") for j in range(N)])
        elif config == "stragglers-step":
            envs = RemoteVectorEnv([(urls[j % 2], f"straggler{j // 2}") for j in range(STRAGGLERS)])
        elif config == "pendulum-recv":
            envs = RemoteVectorEnv([(u, "pendulum_batch_recv") for u in urls], batch_size=8)
        elif recv:
            envs = RemoteVectorEnv([(urls[j % 2], f"straggler{STRAGGLERS // 2 + j // 2}")
                                    for j in range(STRAGGLERS)], batch_size=16)
        else:
            raise SystemExit(f"unknown configuration {config}")
        single = envs.single_action_space.shape
        actions = np.random.default_rng(0).uniform(-1, 1, size=(64, envs.num_envs) + single).astype(np.float32)
        envs.reset(seed=0)
        env_steps = 0

        def run(n: int) -> None:
            nonlocal env_steps
            if recv:
                for _ in range(n):
                    *_, infos = envs.recv()
                    ids = infos["env_id"]
                    env_steps += len(ids)
                    envs.send(np.zeros((len(ids),) + single, np.float32), ids)
            else:
                for i in range(n):
                    envs.step(actions[i % 64])
                    env_steps += envs.num_envs

        if recv:
            envs.send(np.zeros((envs.num_envs,) + single, np.float32))
        run(300)
        tracer = None
        trace_out = os.path.join(tempfile.mkdtemp(), "strace.txt")
        if os.environ.get("STRACE"):
            tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(os.getpid()), "-o", trace_out],
                                      stderr=subprocess.DEVNULL)
            time.sleep(1.5)
        wakes_out = os.path.join(tempfile.mkdtemp(), "wakes.txt")
        if os.environ.get("WAKES"):
            tracer = subprocess.Popen(["strace", "-f", "-e", "trace=epoll_wait,recvfrom", "-p", str(os.getpid()),
                                       "-o", wakes_out], stderr=subprocess.DEVNULL)
            time.sleep(1.5)
        if os.environ.get("CG"):
            subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL)
        env_steps = 0
        before, cpu, start, times = threads(), time.process_time(), time.perf_counter(), os.times()
        run(steps)
        cpu, wall, after = time.process_time() - cpu, time.perf_counter() - start, threads()
        user, system = os.times()[0] - times[0], os.times()[1] - times[1]
        if os.environ.get("CG"):
            subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True,
                           stdout=subprocess.DEVNULL)
        if tracer is not None:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
        if recv:
            while envs._native.step_pending():
                envs.recv()
        print(f"{config}: {steps} vector calls, {env_steps} env steps, {wall:.2f} s, "
              f"load {os.getloadavg()[0]:.2f}")
        print(f"learner CPU {1e6 * cpu / steps:.1f} µs per vector call, {1e6 * cpu / env_steps:.2f} µs per env step "
              f"(user {1e6 * user / env_steps:.2f}, system {1e6 * system / env_steps:.2f}; clock ticks)")
        print("context switches per vector call (voluntary / involuntary), per thread:")
        for name, (v, i) in sorted(after.items()):
            v0, i0 = before.get(name, (0, 0))
            if v - v0 or i - i0:
                print(f"  {name:28} {(v - v0) / steps:7.3f} / {(i - i0) / steps:.3f}")
        if tracer is not None and os.environ.get("WAKES"):
            wakes(wakes_out, steps, requests_per_call(config))
        elif tracer is not None:
            print(f"syscalls per vector call (strace -c -f; {trace_out}):")
            print_syscalls(trace_out, steps)
    finally:
        if envs is not None:
            envs.close()
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
