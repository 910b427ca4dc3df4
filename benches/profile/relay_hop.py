"""What one forwarded message costs the relay, in load-independent counts:
the setting of ``benches/relay_vector.py`` (a ``RemoteVectorEnv`` over two
``serve --batch 8`` cartpole hosts dialing ``unienv-remote relay``), with the
relay process alone traced around a counted window of vector steps.

    .venv-ref/bin/python benches/profile/relay_hop.py callgrind [--steps 300] [--top 30]
    .venv-ref/bin/python benches/profile/relay_hop.py strace [--steps 2000]

``callgrind``: the relay runs under ``valgrind --tool=callgrind
--instr-atstart=no``; after 50 warm-up vector steps its instrumentation is
switched on (``callgrind_control -i on``) for STEPS vector steps and off
again, and the dump's total is divided by the messages forwarded. The relay's
heaviest functions (their own instructions, per message) follow.

``strace``: ``strace -c -f`` is attached to the relay (every thread) around
the counted steps; syscalls per forwarded message, by syscall (strace's times
are inflated, its counts are not).

The messages forwarded in the window are counted by the hosts (their
``unienv_requests_total`` metrics, ``serve --metrics``: one request and one
response each; a vector step is one or two requests per host, two when an
episode ended and its env is reset). The actions are seeded, so every run
forwards the same messages. The hosts and the learner are never traced. The
binary is ``$UNIENV_REMOTE_BIN``, else ``target/profiling/unienv-remote``
(``cargo build --profile profiling --bin unienv-remote``: symbols for
callgrind), else ``target/release/unienv-remote``.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import List, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import relay_vector  # noqa: E402
from throughput import cli_binary  # noqa: E402

HOSTS = 2
#: Where the binary is looked for first (a profiling build has symbols).
PROFILES = ("profiling", "release")
METRICS = re.compile(r"(http://127\.0\.0\.1:\d+/metrics)")



def start_host(name: str, relay: str, drains: List[threading.Thread]) -> Tuple[subprocess.Popen, str]:
    """A ``serve --batch 8`` host dialing ``relay`` as ``name``, and its
    metrics URL."""
    process = subprocess.Popen([cli_binary(PROFILES), "serve", "--batch", str(relay_vector.BATCH), "--addr", "127.0.0.1:0", "--name", name,
                                "--dial", relay, "--metrics", "127.0.0.1:0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stdout = process.stdout
    assert stdout is not None
    for line in stdout:
        match = METRICS.search(line)
        if match:
            drainer = threading.Thread(target=relay_vector.drain, args=(stdout,), daemon=True)
            drainer.start()
            drains.append(drainer)
            return process, match.group(1)
    raise SystemExit(f"the host printed no metrics URL (exit code {process.wait()})")


def requests(metrics: List[str]) -> int:
    """The requests the hosts have answered."""
    total = 0
    for url in metrics:
        with urllib.request.urlopen(url, timeout=30) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith("unienv_requests_total"):
                    total += int(float(line.split()[-1]))
    return total


def control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tool", choices=["callgrind", "strace"])
    parser.add_argument("--steps", type=int, default=0, help="vector steps counted (default 300 / 2000)")
    parser.add_argument("--top", type=int, default=30, help="functions listed under callgrind")
    args = parser.parse_args()
    steps = args.steps or (300 if args.tool == "callgrind" else 2000)
    os.environ["UNIENV_REMOTE_BIN"] = cli_binary(PROFILES)
    from unienv_remote import RemoteVectorEnv

    work = tempfile.mkdtemp(prefix="ue-relayhop-")
    out = os.path.join(work, "cg.out")
    wrap: List[str] = []
    if args.tool == "callgrind":
        wrap = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--compress-strings=no",
                "--compress-pos=no", f"--callgrind-out-file={out}"]
    processes: List[subprocess.Popen] = []
    drains: List[threading.Thread] = []
    envs = None
    try:
        relay_process, relay = relay_vector.start(["relay", "--addr", "127.0.0.1:0"], drains, wrap=wrap)
        processes.append(relay_process)
        names = [f"batch{i}" for i in range(HOSTS)]
        metrics = []
        for name in names:
            p, url = start_host(name, relay, drains)
            processes.append(p)
            metrics.append(url)
        relay_vector.wait_listed(relay, names)
        envs = RemoteVectorEnv([(f"{relay}/hosts/{name}", "cartpole") for name in names])
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        actions = rng.integers(0, 2, size=(64, envs.num_envs))
        for i in range(50):
            envs.step(actions[i % 64])
        before = requests(metrics)
        pid = str(relay_process.pid)
        trace_out = os.path.join(work, "strace.txt")
        tracer = None
        if args.tool == "strace":
            tracer = subprocess.Popen(["strace", "-qq", "-c", "-f", "-p", pid, "-o", trace_out],
                                      stderr=subprocess.DEVNULL)
            time.sleep(1.5)
        else:
            control("-z", pid)
            control("-i", "on", pid)
        for i in range(steps):
            envs.step(actions[i % 64])
        if tracer is not None:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
        else:
            control("-i", "off", pid)
            control("-d", pid)
        messages = 2 * (requests(metrics) - before)
        print(f"relay process: {steps} vector steps of {HOSTS} hosts x BatchedEnv({relay_vector.BATCH}) cartpole, "
              f"{messages} forwarded messages")
        if tracer is not None:
            print("syscalls per forwarded message (strace -c -f), by syscall:")
            for line in Path(trace_out).read_text().splitlines():
                parts = line.split()
                if len(parts) >= 5 and parts[3].isdigit() and parts[-1] != "total":
                    print(f"  {parts[-1]:20} {int(parts[3]) / messages:7.3f}")
                elif parts and parts[-1] == "total" and len(parts) >= 4:
                    print(f"  {'total':20} {int(parts[3]) / messages:7.3f}")
        else:
            dumps = []
            for _ in range(100):
                dumps = sorted(f for f in glob.glob(out + ".*") if not f.endswith(".tmp"))
                if dumps:
                    break
                time.sleep(0.1)
            time.sleep(0.5)
            total = 0
            for line in Path(dumps[-1]).read_text().splitlines():
                # The dump's last "totals:" line (its "summary:" may be 0).
                if line.startswith("totals:"):
                    total = int(line.split()[1])
            print(f"instructions per forwarded message (callgrind): {total // messages}")
            annotated = subprocess.run(["callgrind_annotate", "--threshold=95", dumps[-1]], capture_output=True,
                                       text=True).stdout
            print("heaviest functions (own instructions per message, function):")
            shown = 0
            for line in annotated.splitlines():
                parts = line.split()
                if len(parts) >= 3 and parts[0].replace(",", "").isdigit() and parts[1].startswith("("):
                    own = int(parts[0].replace(",", ""))
                    print(f"  {own / messages:9.0f}  {' '.join(parts[3:] if parts[2] == '%)' else parts[2:])[:140]}")
                    shown += 1
                    if shown >= args.top:
                        break
    finally:
        if envs is not None:
            envs.close()
        relay_vector.stop(processes, drains)


if __name__ == "__main__":
    main()
