"""Where a server process's CPU goes, by thread and by hand-off, from a
``perf record -e cpu-clock -g`` profile of it (``kernel_share.sh`` makes one):

* per thread kind (runtime worker ``unienv-server`` / ``tokio-rt-worker``,
  domain threads together), the share of samples in user space and in the
  kernel;
* the kernel's share by what the thread was doing, read from the sample's
  stack: waking a domain thread (``futex`` wake from the runtime worker),
  waiting for a job (``futex`` wait on the domain thread), the GIL (a
  ``pthread_cond`` wait or signal, or the GIL's mutex, on a domain thread),
  waiting for the socket (``epoll_wait``), writing a response (``writev``:
  on loopback TCP this runs the receiver's side too and wakes the client),
  reading a request, and the rest;
* the same per request, in microseconds, when the CPU time per request is
  given (``--us-per-request``, e.g. from ``wakeups.sh``'s total).

Shares depend on the load: a wake-up costs the waker most when the CPU it
wakes is idle (an interrupt to another CPU, on a virtual machine an exit to
the hypervisor), and little when every CPU is busy.

  python kernel_share.py PERF_DATA [--us-per-request US]
"""

from __future__ import annotations

import argparse
import collections
import subprocess
from typing import Dict, List, Tuple


def thread_kind(comm: str) -> str:
    if comm.startswith("unienv-domain"):
        return "domain"
    if comm in ("unienv-server", "tokio-rt-worker"):
        return "runtime"
    return "other"


def what(kind: str, frames: List[str]) -> str:
    """The hand-off a kernel sample belongs to, from its stack (innermost first)."""
    user = next((f for f in frames if not f.startswith("[k]")), "")
    kernel = " ".join(f for f in frames if f.startswith("[k]"))
    if "epoll_wait" in user or "epoll_wait" in kernel:
        return "waiting for the socket (epoll_wait)"
    if "writev" in user or "sendmsg" in kernel and "writev" in kernel:
        return "writing a response (writev; loopback delivery and the client's wake-up)"
    if "recv" in user or "tcp_recvmsg" in kernel or "unix_stream_read" in kernel:
        return "reading a request (recvfrom)"
    if "setaffinity" in user:
        return "sched_setaffinity"
    if "pthread_cond" in user or "__futex_abstimed_wait_common" in user or "lll_lock" in user:
        return "the GIL (condition variable and mutex)"
    if "futex_wake" in kernel or "futex_wake" in user:
        return "waking a thread (futex wake)" if kind == "runtime" else "waking a thread (futex wake, domain side)"
    if "futex" in kernel:
        return "waiting for a job (futex wait)" if kind == "domain" else "futex wait (runtime side)"
    if "exit_to_user_mode" in kernel or "schedule" in kernel:
        return "preempted / rescheduled"
    return "other kernel work"


def samples(path: str) -> List[Tuple[str, List[str]]]:
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,ip,sym"],
                         capture_output=True, text=True, check=True).stdout
    result = []
    for block in out.split("\n\n"):
        lines = [line.strip() for line in block.strip().split("\n") if line.strip()]
        if len(lines) < 2:
            continue
        comm = lines[0].split()[0]
        frames = []
        for line in lines[1:]:
            parts = line.split(None, 1)
            sym = parts[1] if len(parts) > 1 else "?"
            frames.append(("[k] " if parts[0].startswith("ffffffff") else "") + sym)
        result.append((comm, frames))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("perf_data")
    parser.add_argument("--us-per-request", type=float, default=None)
    args = parser.parse_args()
    data = samples(args.perf_data)
    total = len(data)
    if not total:
        raise SystemExit("no samples")
    space: Dict[Tuple[str, str], int] = collections.Counter()
    hand_offs: Dict[Tuple[str, str], int] = collections.Counter()
    for comm, frames in data:
        kind = thread_kind(comm)
        in_kernel = frames[0].startswith("[k]")
        space[(kind, "kernel" if in_kernel else "user")] += 1
        if in_kernel:
            hand_offs[(kind, what(kind, frames))] += 1
    scale = args.us_per_request

    def line(label: str, n: int) -> str:
        share = 100.0 * n / total
        per = f"  {scale * n / total:7.1f} us/request" if scale else ""
        return f"  {share:6.2f} %{per}  {label}"

    print(f"{total} samples")
    print("by thread and space:")
    for (kind, where), n in sorted(space.items(), key=lambda kv: -kv[1]):
        print(line(f"{kind:8s} {where}", n))
    print("kernel, by hand-off:")
    for (kind, label), n in sorted(hand_offs.items(), key=lambda kv: -kv[1]):
        print(line(f"{kind:8s} {label}", n))


if __name__ == "__main__":
    main()
