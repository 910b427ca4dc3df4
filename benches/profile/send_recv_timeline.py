"""Where the wall time of EnvPool-style ``send``/``recv`` goes:
16 Pendulum-v1 as 2 servers x ``BatchedEnv(8)``, ``RemoteVectorEnv(fleet,
batch_size=8)`` driven as ``benches/throughput.py``'s ``send_recv`` drives it
(or lockstep ``step`` with ``--lockstep``), traced with the kernel's
scheduler and syscall tracepoints.

    .venv-ref/bin/python benches/profile/send_recv_timeline.py [--steps 3000] [--lockstep] [--pin] [--keep DIR]
    .venv-ref/bin/python benches/profile/send_recv_timeline.py --no-trace [--server-nice 10]   # timed only
    .venv-ref/bin/python benches/profile/send_recv_timeline.py --fleet 2x8 --batch 8 [--pin]   # K resources per server

The servers are ``benches/throughput.py --serve`` processes. After a warm-up
the script starts ``perf record -a -k mono`` on ``sched:sched_switch``,
``sched:sched_wakeup`` and the ``sendto`` / ``writev`` / ``recvfrom`` /
``epoll_wait`` syscalls, and runs ``--steps`` vector calls, each ``recv`` and
``send`` (or ``step``) marked with ``time.monotonic_ns()`` (the clock perf
is told to use). It prints, over the traced calls:

* how many of the three processes' threads wanted a CPU (running or
  runnable), as shares of the window, and which thread it was when only one
  did (the other vCPU idle unless another process used it);
* per thread (the learner's Python thread, its vector env's idle thread,
  each server's runtime worker ``unienv-server`` and the resource's domain
  thread): time running, runnable but waiting for a CPU, and sleeping, as
  shares of the window; its wake-ups per vector call and their latency
  (wake-up to running);
* the CPUs' time: these processes, idle (per CPU, from the switches), and
  every other process, and the same per vector call;
* per ``recv`` (one resource's batch): the learner's ``sendto`` of that
  resource's request, the server's first ``recvfrom`` with data after it,
  the server's reply (its domain thread's ``writev``), the learner's
  ``recvfrom`` of it and ``recv``'s return, as medians (means); and what the
  resource about to be returned ("this") and the other one (the one sent just
  before this ``recv``) were doing when ``recv`` was called and when it
  returned: request still in the server's socket (sent, not read), being
  stepped (read, no reply yet), or replied and waiting for the learner.

``--server-nice N`` sets every server thread's nice value after the warm-up
(an experiment: the learner, a serial stage feeding both servers, then wins
a CPU on wake-up). ``--fleet KxW`` starts this script's own 2 servers, each
hosting K ``BatchedEnv(W)`` (resources alternating between the servers), and
times send/recv with ``--batch`` (no tracing): more than one resource per
server keeps a server stepping while its other resource's batch is with the
learner.

Everything runs on this machine as it is (other engineers' builds
included): say the load with the figures.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np  # noqa: E402
from throughput import ServerProcess, process_cpu, stop_process  # noqa: E402

EVENTS = ["sched:sched_switch", "sched:sched_wakeup", "syscalls:sys_enter_sendto", "syscalls:sys_enter_writev",
          "syscalls:sys_enter_sendmsg", "syscalls:sys_exit_recvfrom", "syscalls:sys_enter_recvfrom",
          "syscalls:sys_enter_epoll_wait", "syscalls:sys_exit_epoll_wait"]


def thread_names(pid: int) -> Dict[int, str]:
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = (task / "comm").read_text().strip()
        except OSError:
            continue
    return out


def field(text: str, key: str) -> str:
    """``key=value`` out of a tracepoint's text."""
    at = text.index(key + "=") + len(key) + 1
    end = text.find(" ", at)
    return text[at:] if end < 0 else text[at:end]


def parse(path: str) -> List[Tuple[int, str, int, int, str, int]]:
    """(time ns, event, tid, pid, text, cpu) of every event, in time order."""
    out = subprocess.run(["perf", "script", "-i", path, "--ns", "-F", "pid,tid,cpu,time,event,trace"],
                         check=True, capture_output=True, text=True).stdout
    events = []
    for line in out.splitlines():
        # "  1234/1235  [001] 50262.662491123: sched:sched_switch: prev_comm=..."
        line = line.strip()
        try:
            ids, cpu_s, rest = line.split(None, 2)
            pid_s, tid_s = ids.split("/")
            t_s, rest = rest.split(":", 1)
            event, text = rest.strip().split(": ", 1) if ": " in rest else (rest.strip().rstrip(":"), "")
            events.append((int(round(float(t_s) * 1e9)), event.rstrip(":"), int(tid_s), int(pid_s), text,
                           int(cpu_s.strip("[]"))))
        except ValueError:
            continue
    events.sort(key=lambda e: e[0])
    return events


def ret_of(text: str) -> int:
    """A syscall exit's return value."""
    value = text.rsplit("0x", 1)[-1] if "0x" in text else text.rsplit(":", 1)[-1].strip()
    try:
        n = int(value, 16) if "0x" in text else int(value)
    except ValueError:
        return -1
    return n - (1 << 64) if n >= 1 << 63 else n


def states(events: List[Tuple[int, str, int, int, str, int]], tids: Dict[int, str], start: int, end: int,
           ) -> Tuple[Dict[int, Dict[str, float]], Dict[int, List[int]]]:
    """Per thread: ns running, runnable (woken or preempted, not running),
    sleeping within [start, end); and each wake-up's latency (ns)."""
    state: Dict[int, Tuple[str, int]] = {}
    totals: Dict[int, Dict[str, float]] = defaultdict(lambda: defaultdict(float))
    latencies: Dict[int, List[int]] = defaultdict(list)
    woken_at: Dict[int, int] = {}
    histogram: Dict[int, int] = defaultdict(int)
    lone: Dict[int, int] = defaultdict(int)

    demand = {"n": 0, "since": start}

    def move(tid: int, new: str, t: int) -> None:
        old, since = state.get(tid, ("?", start))
        # Our threads wanting a CPU (running or runnable), time-weighted.
        a, b = max(demand["since"], start), min(t, end)
        if b > a:
            histogram[demand["n"]] += b - a
            if demand["n"] == 1:
                # Who alone wanted a CPU (the other CPU idle but for others).
                alone = next((x for x, (st, _) in state.items() if st in ("running", "runnable")), -1)
                lone[alone] += b - a
        demand["since"] = max(demand["since"], t)
        demand["n"] += (new in ("running", "runnable")) - (old in ("running", "runnable"))
        a, b = max(since, start), min(t, end)
        if b > a and old != "?":
            totals[tid][old] += b - a
        state[tid] = (new, t)

    for t, event, tid, _pid, text, _cpu in events:
        if t > end:
            break
        if event == "sched:sched_switch":
            prev = int(field(text, "prev_pid"))
            nxt = int(field(text.split("==>", 1)[1], "next_pid"))
            if prev in tids:
                prev_state = field(text, "prev_state")
                move(prev, "runnable" if prev_state.startswith("R") else "sleeping", t)
            if nxt in tids:
                if nxt in woken_at:
                    if t >= start:
                        latencies[nxt].append(t - woken_at.pop(nxt))
                    else:
                        woken_at.pop(nxt)
                move(nxt, "running", t)
        elif event == "sched:sched_wakeup":
            target = int(field(text, "pid"))
            if target in tids and state.get(target, ("?", 0))[0] != "running":
                woken_at[target] = t
                move(target, "runnable", t)
    for tid in tids:
        move(tid, "?", end)
    totals[-1] = {str(k): float(v) for k, v in histogram.items()}
    totals[-2] = {str(k): float(v) for k, v in lone.items()}
    return totals, latencies


def serve_fleet(fleet: str, cpu: Optional[int]) -> None:
    """A server of K BatchedEnv(W) (``--fleet KxW``; ``cpu``: its threads
    pinned there, ``RemoteServer(cpus=[cpu])``), until stdin closes."""
    import gymnasium
    from unienv_remote import BatchedEnv, RemoteServer

    k, w = (int(x) for x in fleet.split("x"))
    server = RemoteServer(idle_timeout=None, cpus=None if cpu is None else [cpu])
    for j in range(k):
        server.register(f"batch{j}", BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * w))
    print(server.listen("127.0.0.1", 0), flush=True)
    try:
        sys.stdin.read()
    finally:
        server.close()


def fleet_rate(fleet: str, batch: int, steps: int, pin: bool) -> None:
    """send/recv over 2 servers x K BatchedEnv(W), ``batch_size=batch``:
    env steps per second and CPU per env step (no tracing)."""
    from unienv_remote import RemoteVectorEnv

    k, _ = (int(x) for x in fleet.split("x"))
    allowed = sorted(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, __file__, "--serve-fleet", fleet]
                              + (["--serve-cpu", str(allowed[i % len(allowed)])] if pin else []),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for i in range(2)]
    envs: Any = None
    try:
        urls = []
        for p in procs:
            assert p.stdout is not None
            urls.append(p.stdout.readline().strip().split()[-1])
        # Resources alternate between the servers.
        envs = RemoteVectorEnv([(urls[i % 2], f"batch{i // 2}") for i in range(2 * k)], batch_size=batch)
        single = envs.single_action_space.shape
        envs.reset(seed=0)
        envs.send(np.zeros((envs.num_envs,) + single, np.float32))

        def run(n: int) -> int:
            count = 0
            for _ in range(n):
                *_, infos = envs.recv()
                ids = infos["env_id"]
                count += len(ids)
                envs.send(np.zeros((len(ids),) + single, np.float32), ids)
            return count

        run(300)
        pids = {"learner": os.getpid(), "server0": procs[0].pid, "server1": procs[1].pid}
        cpu0 = {who: sum(process_cpu(pid)) for who, pid in pids.items()}
        start = time.monotonic_ns()
        count = run(steps)
        window = (time.monotonic_ns() - start) / 1e9
        used = {who: sum(process_cpu(pid)) - cpu0[who] for who, pid in pids.items()}
        print(f"send/recv, 2 servers{' (pinned)' if pin else ''} x {fleet} (BatchedEnv), batch_size={batch}, "
              f"{envs.num_envs} envs: "
              f"{count / window:,.0f} env-steps/s; CPU µs per env step: "
              + ", ".join(f"{who} {1e6 * u / count:.1f}" for who, u in used.items())
              + f"; load {os.getloadavg()[0]:.2f}")
    finally:
        if envs is not None:
            envs.close()
        for p in procs:
            stop_process(p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--lockstep", action="store_true")
    parser.add_argument("--keep", default="")
    parser.add_argument("--server-nice", type=int, default=0,
                        help="after the warm-up, set every server thread's nice value to this (an experiment: "
                             "the learner, a serial stage feeding both servers, then wins the CPU on wake-up)")
    parser.add_argument("--no-trace", action="store_true", help="time the calls only (no perf)")
    parser.add_argument("--fleet", default="",
                        help="KxW: each of the 2 servers hosts K BatchedEnv(W) of Pendulum-v1 (this script's own "
                             "servers), RemoteVectorEnv over the 2K resources with --batch; timed only (no perf)")
    parser.add_argument("--batch", type=int, default=8, help="batch_size with --fleet")
    parser.add_argument("--pin", action="store_true",
                        help="server i's threads pinned to vCPU i (RemoteServer(cpus=[i]))")
    parser.add_argument("--serve-fleet", default="", help=argparse.SUPPRESS)
    parser.add_argument("--serve-cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fleet:
        serve_fleet(args.serve_fleet, args.serve_cpu)
        return
    if args.fleet:
        fleet_rate(args.fleet, args.batch, args.steps, args.pin)
        return
    from unienv_remote import RemoteVectorEnv

    allowed = sorted(os.sched_getaffinity(0))
    if args.pin:
        # throughput.py's pinned servers (RemoteServer(cpus=[i])) host no
        # separate send/recv resource: this script's vector env is their
        # resources' only controller either way.
        servers = [ServerProcess(i, cpu=allowed[i % len(allowed)]) for i in range(2)]
    else:
        servers = [ServerProcess(0), ServerProcess(1)]
    urls = [s.url for s in servers]
    workdir = args.keep or tempfile.mkdtemp(prefix="send-recv-timeline-")
    os.makedirs(workdir, exist_ok=True)
    data = os.path.join(workdir, "perf.data")
    envs: Any = None
    perf: Optional["subprocess.Popen[bytes]"] = None
    try:
        if args.lockstep:
            envs = RemoteVectorEnv([(u, "pendulum_batch") for u in urls])
        else:
            recv_id = "pendulum_batch" if args.pin else "pendulum_batch_recv"
            envs = RemoteVectorEnv([(u, recv_id) for u in urls], batch_size=8)
        single = envs.single_action_space.shape
        zeros = np.zeros((8,) + single, np.float32)
        all_zeros = np.zeros((16,) + single, np.float32)
        envs.reset(seed=0)
        marks: List[Tuple[str, int, int, int]] = []  # (what, called, returned, first env id)
        clock = time.monotonic_ns

        def run(n: int, mark: bool) -> None:
            for _ in range(n):
                if args.lockstep:
                    a = clock()
                    envs.step(all_zeros)
                    if mark:
                        marks.append(("step", a, clock(), 0))
                    continue
                a = clock()
                *_, infos = envs.recv()
                b = clock()
                ids = infos["env_id"]
                envs.send(zeros, ids)
                c = clock()
                if mark:
                    marks.append(("recv", a, b, int(ids[0])))
                    marks.append(("send", b, c, int(ids[0])))

        if not args.lockstep:
            envs.send(all_zeros)
        run(500, False)
        learner = os.getpid()
        pids = {learner: "learner"} | {s.process.pid: f"server{i}" for i, s in enumerate(servers)}
        tids: Dict[int, str] = {}
        for pid, who in pids.items():
            for tid, name in thread_names(pid).items():
                tids[tid] = f"{who}:{name}/{tid}"
        if args.server_nice:
            for tid, name in tids.items():
                if name.startswith("server"):
                    os.setpriority(os.PRIO_PROCESS, tid, args.server_nice)
        if args.no_trace:
            cpu0 = {who: sum(process_cpu(pid)) for pid, who in pids.items()}
            start = clock()
            run(args.steps, False)
            end = clock()
            used = {who: sum(process_cpu(pid)) - cpu0[who] for pid, who in pids.items()}
            calls, window = args.steps, end - start
            env_steps = calls * (16 if args.lockstep else 8)
            print(f"{'lockstep step' if args.lockstep else 'send/recv M=8'}, servers {'pinned, ' if args.pin else ''}"
                  f"at nice {args.server_nice}: "
                  f"{env_steps / (window / 1e9):,.0f} env-steps/s; CPU µs per env step: "
                  + ", ".join(f"{who} {1e6 * u / env_steps:.1f}" for who, u in used.items())
                  + f"; load {os.getloadavg()[0]:.2f}")
            return
        perf = subprocess.Popen(["perf", "record", "-q", "-a", "-k", "mono", "-o", data]
                                + [x for e in EVENTS for x in ("-e", e)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        start = clock()
        run(args.steps, True)
        end = clock()
        perf.send_signal(signal.SIGINT)
        perf.wait()
        perf = None
        if not args.lockstep:
            while envs._native.step_pending():
                envs.recv()
    finally:
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        if envs is not None:
            envs.close()
        for s in servers:
            s.stop()

    events = parse(data)
    window = end - start
    calls = args.steps
    env_steps = calls * (16 if args.lockstep else 8)
    print(f"{'lockstep step' if args.lockstep else 'send/recv M=8'}{', servers pinned' if args.pin else ''}: "
          f"{calls} vector calls, {env_steps} env steps in "
          f"{window / 1e9:.3f} s: {env_steps / (window / 1e9):,.0f} env-steps/s, "
          f"{window / calls / 1e3:.1f} µs per vector call; load {os.getloadavg()[0]:.2f}; perf data {data}")
    totals, latencies = states(events, tids, start, end)
    histogram = totals.pop(-1)
    lone = totals.pop(-2)
    print("our threads wanting a CPU (running or runnable), share of the window: "
          + ", ".join(f"{k}: {100 * v / window:.1f} %" for k, v in sorted(histogram.items()) if k != "-1"))
    print("  of which one alone: " + ", ".join(f"{tids.get(int(k), k)} {100 * v / window:.1f} %"
                                             for k, v in sorted(lone.items(), key=lambda x: -x[1])))
    print("\nper thread, share of the window (running / runnable, waiting for a CPU / sleeping), wake-ups per "
          "vector call, mean wake latency:")
    for tid, name in sorted(tids.items(), key=lambda x: x[1]):
        t = totals.get(tid, {})
        if not any(t.values()):
            continue
        lat = latencies.get(tid, [])
        print(f"  {name:38} {100 * t.get('running', 0) / window:5.1f} % / {100 * t.get('runnable', 0) / window:5.1f} %"
              f" / {100 * t.get('sleeping', 0) / window:5.1f} %   wakes {len(lat) / calls:5.2f}, "
              f"latency {statistics.mean(lat) / 1e3 if lat else 0:6.1f} µs (median "
              f"{statistics.median(lat) / 1e3 if lat else 0:.1f})")
    # Everything else that ran on the CPUs meanwhile (pid 0: idle).
    ncpu = len(os.sched_getaffinity(0))
    # Per CPU: who ran since its last switch (time before the first switch
    # seen on a CPU is not counted).
    others: Dict[str, int] = defaultdict(int)
    on_cpu: Dict[int, Tuple[int, int, str]] = {}  # cpu -> (since, pid, comm)
    for t, event, tid, _pid, text, cpu in events:
        if event != "sched:sched_switch" or t > end:
            continue
        nxt_text = text.split("==>", 1)[1]
        if cpu in on_cpu:
            since, prev, comm = on_cpu[cpu]
            if prev not in tids:
                others["swapper" if prev == 0 else comm] += max(0, min(t, end) - max(since, start))
        on_cpu[cpu] = (t, int(field(nxt_text, "next_pid")), field(nxt_text, "next_comm"))
    for cpu, (since, prev, comm) in on_cpu.items():
        if prev not in tids:
            others["swapper" if prev == 0 else comm] += max(0, end - max(since, start))
    idle = others.pop("swapper", 0)
    ours = sum(t.get("running", 0) for t in totals.values())
    other_total = sum(others.values())
    top = ", ".join(f"{c} {100 * v / window:.1f} %" for c, v in sorted(others.items(), key=lambda x: -x[1])[:5])
    print(f"\nof the {ncpu} CPUs' time over the window: these three processes {100 * ours / (ncpu * window):.1f} %, "
          f"idle {100 * idle / (ncpu * window):.1f} %, other processes {100 * other_total / (ncpu * window):.1f} % "
          f"({top}; perf itself included)")
    def ran(prefix: str) -> float:
        return sum(t.get("running", 0) for tid, t in totals.items() if tids[tid].startswith(prefix)) / calls / 1e3

    print(f"CPU per vector call: the learner's thread {ran('learner'):.1f} µs, the servers' threads "
          f"{ran('server'):.1f} µs, idle {idle / calls / 1e3:.1f} µs, others {other_total / calls / 1e3:.1f} µs "
          f"(wall {window / calls / 1e3:.1f} µs x {ncpu} CPUs)")
    if args.lockstep:
        return

    # The hand-offs of one cycle, per recv.
    proc_of = {tid: name.split(":", 1)[0] for tid, name in tids.items()}
    sends: List[Tuple[int, int]] = []  # learner sendto times (t, fd)
    per: Dict[str, List[Tuple[int, str]]] = defaultdict(list)  # server -> [(t, 'read'|'reply')]
    learner_reads: List[int] = []
    read_tids: Dict[str, Dict[int, int]] = defaultdict(lambda: defaultdict(int))  # the thread reading requests
    for t, event, tid, _pid, text, _cpu in events:
        who = proc_of.get(tid)
        if who is None:
            continue
        if event in ("syscalls:sys_enter_sendto", "syscalls:sys_enter_writev",
                     "syscalls:sys_enter_sendmsg"):
            fd = int(field(text.replace(": ", "="), "fd").rstrip(","), 16) if "fd" in text else -1
            if who == "learner":
                sends.append((t, fd))
            else:
                per[who].append((t, "reply"))
        elif event == "syscalls:sys_exit_recvfrom" and ret_of(text) > 0:
            if who == "learner":
                learner_reads.append(t)
            else:
                per[who].append((t, "read"))
                read_tids[who][tid] += 1
    # Which fd is which server: the sendto inside a send() of ids 0..7 goes to server0.
    fd_votes: Dict[int, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
    send_marks = [m for m in marks if m[0] == "send"]
    si = 0
    for _, a, b, first in send_marks:
        while si < len(sends) and sends[si][0] < a:
            si += 1
        j = si
        while j < len(sends) and sends[j][0] <= b:
            fd_votes[sends[j][1]]["server0" if first < 8 else "server1"] += 1
            j += 1
    server_of_fd = {fd: max(v.items(), key=lambda x: x[1])[0] for fd, v in fd_votes.items()}
    req: Dict[str, List[int]] = defaultdict(list)
    for t, fd in sends:
        if fd in server_of_fd:
            req[server_of_fd[fd]].append(t)

    import bisect
    server_events = {s: sorted(v) for s, v in per.items()}
    reads_idx = {s: [x for x, k in v if k == "read"] for s, v in server_events.items()}
    replies_idx = {s: [x for x, k in v if k == "reply"] for s, v in server_events.items()}

    def after(lst: List[int], t: int) -> Optional[int]:
        i = bisect.bisect_left(lst, t)
        return lst[i] if i < len(lst) else None

    rows: Dict[str, List[float]] = defaultdict(list)
    at_call: Dict[str, int] = defaultdict(int)
    at_return: Dict[str, int] = defaultdict(int)
    recv_marks = [m for m in marks if m[0] == "recv"]

    def where(server: str, t: int) -> str:
        """What server's request was doing at t: the last request sent
        before t, read by the server before t?, replied before t?"""
        r = req[server]
        i = bisect.bisect_right(r, t) - 1
        if i < 0:
            return "idle"
        sent = r[i]
        read = after(reads_idx.get(server, []), sent)
        reply = after(replies_idx.get(server, []), read) if read is not None else None
        if read is None or read > t:
            return "in the server's socket"
        if reply is None or reply > t:
            return "being stepped"
        return "replied, waiting for the learner"

    # The request's hand-off to the server's runtime worker: the learner's
    # sendto, the worker's sched_wakeup (from whom: the learner itself, or
    # the idle task of the worker's CPU, i.e. a wake-up queued to a remote
    # CPU and done there once it woke), its switch-in.
    reader = {who: max(counts.items(), key=lambda x: x[1])[0] for who, counts in read_tids.items()}
    wakes: Dict[int, List[Tuple[int, int, int]]] = defaultdict(list)  # tid -> (t, waker tid, cpu)
    ins: Dict[int, List[int]] = defaultdict(list)
    for t, event, tid, _pid, text, cpu in events:
        if event == "sched:sched_wakeup":
            wakes[int(field(text, "pid"))].append((t, tid, cpu))
        elif event == "sched:sched_switch":
            ins[int(field(text.split("==>", 1)[1], "next_pid"))].append(t)
    to_wake: List[float] = []
    to_run: List[float] = []
    wakers: Dict[str, int] = defaultdict(int)
    for server, sent_times in req.items():
        rtid = reader.get(server)
        if rtid is None:
            continue
        w_times = [x[0] for x in wakes[rtid]]
        for sent in sent_times:
            j = bisect.bisect_left(w_times, sent)
            if j >= len(w_times) or w_times[j] - sent > 10**6:
                continue
            t_wake, waker, _ = wakes[rtid][j]
            run_at = after(ins[rtid], t_wake)
            if run_at is None:
                continue
            to_wake.append(t_wake - sent)
            to_run.append(run_at - t_wake)
            wakers["the learner's thread" if proc_of.get(waker) == "learner" else
                   "an idle CPU's idle task (a queued remote wake-up)" if waker == 0 else "another thread"] += 1

    for _, a, b, first in recv_marks:
        server = "server0" if first < 8 else "server1"
        other = "server1" if server == "server0" else "server0"
        r = req[server]
        i = bisect.bisect_right(r, a) - 1
        if i < 0:
            continue
        sent = r[i]
        read = after(reads_idx.get(server, []), sent)
        reply = after(replies_idx.get(server, []), read) if read is not None else None
        got = after(learner_reads, reply) if reply is not None else None
        if read is None or reply is None or got is None or got > b + 10**6:
            continue
        rows["request sent -> server read it"].append(read - sent)
        rows["server read it -> server replied"].append(reply - read)
        rows["server replied -> learner read it"].append(got - reply)
        rows["learner read it -> recv returned"].append(b - got)
        rows["recv called -> recv returned"].append(b - a)
        rows["request sent -> recv called"].append(a - sent)
        at_call[f"this: {where(server, a)}"] += 1
        at_call[f"other: {where(other, a)}"] += 1
        at_return[f"other: {where(other, b)}"] += 1
    send_calls = [b - a for _, a, b, _ in send_marks]
    print(f"\none cycle, per recv ({len(rows['recv called -> recv returned'])} matched), medians (mean) in µs:")
    for k, v in rows.items():
        print(f"  {k:36} {statistics.median(v) / 1e3:7.1f} ({statistics.mean(v) / 1e3:.1f})")
    print(f"  {'send called -> send returned':36} {statistics.median(send_calls) / 1e3:7.1f} "
          f"({statistics.mean(send_calls) / 1e3:.1f})")
    if to_wake:
        print(f"  {'request sent -> worker woken':36} {statistics.median(to_wake) / 1e3:7.1f} "
              f"({statistics.mean(to_wake) / 1e3:.1f}); woken -> running {statistics.median(to_run) / 1e3:.1f} "
              f"({statistics.mean(to_run) / 1e3:.1f}); woken by: "
              + ", ".join(f"{k} {100 * v / len(to_wake):.0f} %" for k, v in sorted(wakers.items())))
    n = max(1, len(rows["recv called -> recv returned"]))
    print("\nwhen the learner calls recv, the resource it gets / the other one:")
    for k, v in sorted(at_call.items()):
        print(f"  {k:44} {100 * v / n:5.1f} %")
    print("when recv returns, the other resource:")
    for k, v in sorted(at_return.items()):
        print(f"  {k:44} {100 * v / n:5.1f} %")


if __name__ == "__main__":
    main()
