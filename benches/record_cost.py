"""What recording costs: 16 Pendulum-v1 envs over 2 server processes (our Python
``unienv_remote.RemoteServer``, 8 envs each), driven in lockstep by
``RemoteVectorEnv``, with and without recording: on the host
(``RemoteServer(record_dir=...)``, ``--side host``, the default) or on the
learner's side (``RemoteVectorEnv(..., record_dir=...)``, ``--side learner``).

    .venv-ref/bin/python benches/record_cost.py [--steps 1500] [--rounds 3] [--dir DIR] [--side host|learner]
        [--format npz|parquet|npz,parquet]

``--format``: the recording's storage (``record_format``), by default the
package's default format (``unienv_remote._record.DEFAULT_RECORD_FORMAT``:
``parquet``; printed); several, comma-separated, are measured in the same
rounds (plain, npz, parquet, plain, ...), each against the same plain runs.

Runs alternate (plain, recording, plain, recording, ...) so that both see the
same machine load; each run starts fresh servers, resets, takes 50 warm-up
steps, then times ``--steps`` vector steps of random actions drawn beforehand.
Pendulum truncates every 200 steps, so episodes end (and are committed) during
the run. Prints env steps per second of each run, the median of each mode, and
their ratio; and the CPU time per env step over the timed steps (the servers'
processes and the learner's, user + system: less sensitive to a loaded machine
than wall time), with its ratio; the recordings are checked to hold every
transition. The load average is printed before and after. The writer
threads' own CPU per env step (``unienv-recorder``: the servers' on the host
side, the learner's on its side) is printed too: what recording costs
directly, least sensitive to the load. With them, recording's CPU share:
(writer + hook) CPU / the recording run's total CPU, per env step, where
the hook is the learner thread's own recording calls (``--side learner``:
``Recorder.reset/sent/stepped``, timed with ``time.thread_time`` around each
call, which over-counts by two clock reads per call); on the host side the
hook runs on the domain threads, inside the Rust server, and is not timed
here (its instructions per step: BENCHMARKS.md, "Recording", callgrind), so the
host's share is the writer's alone. The share is what resolves 5 % on a
loaded machine: the throughput ratio of two runs swings by more than that.

Then a table of every thread's CPU per env step, summed by thread name over
the servers and the learner (``/proc/<pid>/task/*/schedstat``: nanoseconds,
kernel time included), plain and recording runs' medians and their
difference: where the rest of recording's cost lands (on the host side, the
hook runs on the ``unienv-domain-`` threads; the other rows show how much
two runs differ without any cause). Every run starts after ``os.sync()``, so
that no run's disk writeback (NPZ's 16,000 files) overlaps the next one, and
the recordings are removed at the end, not between runs (``--remove-each``:
right after each run, as before), so that no run's file creations follow the
removal of an NPZ run's 16,000 files (ext4's inode allocation steps over
recently deleted inodes; measured, this did not measurably
change the Parquet rounds that follow NPZ rounds).
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import os
import resource
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

N, SERVERS = 16, 2
URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")


def serve(count: int, record: Optional[str], fmt: Optional[str]) -> None:
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    from unienv_remote import RemoteServer

    server = RemoteServer(idle_timeout=None, record_dir=record, **({} if fmt is None else {"record_format": fmt}))
    for i in range(count):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    print(server.listen("127.0.0.1", 0), flush=True)
    try:
        sys.stdin.read()  # until the benchmark closes our stdin
    finally:
        server.close()


def start(record: Optional[Path], fmt: str) -> List[subprocess.Popen]:
    procs = []
    for s in range(SERVERS):
        cmd = [sys.executable, __file__, "--serve", str(N // SERVERS)]
        if record is not None:
            cmd += ["--record", str(record / f"server{s}"), "--format", fmt]
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    return procs


def url_of(proc: subprocess.Popen) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        m = URL.search(line)
        if m:
            return m.group(1)
    raise RuntimeError("a server printed no URL")


def cpu_seconds(procs: List[subprocess.Popen]) -> float:
    """User + system CPU of the server processes and of this one."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in procs:
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    own = resource.getrusage(resource.RUSAGE_SELF)
    return total + own.ru_utime + own.ru_stime


def thread_seconds(pids: List[int]) -> Dict[str, float]:
    """CPU time (user + system, from ``schedstat``: nanoseconds, not clock
    ticks) of the live threads of the processes ``pids``, summed by thread
    name (digits dropped: ``unienv-domain-3`` counts as ``unienv-domain-``)."""
    out: Dict[str, float] = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                name = re.sub(r"\d+$", "", (task / "comm").read_text().strip())
                ns = int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            out[name] = out.get(name, 0.0) + ns / 1e9
    return out


def recorder_seconds(pids: List[int]) -> float:
    """CPU of the recorders' writer threads (``unienv-recorder``) in the
    processes ``pids`` (``schedstat``: kernel time included)."""
    return thread_seconds(pids).get("unienv-recorder", 0.0)


class TimedRecorder:
    """The learner's ``_native.Recorder`` with the thread CPU time spent in
    its calls summed (the recording hook's cost on the learner thread)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.seconds = 0.0

    def _timed(self, name: str, *args: object) -> object:
        start = time.thread_time()
        try:
            return getattr(self.inner, name)(*args)
        finally:
            self.seconds += time.thread_time() - start

    def reset(self, *args: object) -> object:
        return self._timed("reset", *args)

    def sent(self, *args: object) -> object:
        return self._timed("sent", *args)

    def stepped(self, *args: object) -> object:
        return self._timed("stepped", *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def run(steps: int, record: Optional[Path], side: str, fmt: str = "parquet") -> Tuple[float, float, float, float, Dict[str, float]]:
    from unienv_remote import RemoteVectorEnv

    procs = start(record if side == "host" else None, fmt)
    try:
        urls = [url_of(p) for p in procs]
        addresses = [(urls[j % SERVERS], f"pendulum{j // SERVERS}") for j in range(N)]
        envs = RemoteVectorEnv(addresses, record_dir=record if side == "learner" else None, record_format=fmt)
        hook = None
        if envs._recorder is not None:
            hook = envs._recorder = TimedRecorder(envs._recorder)
        acts = np.random.default_rng(0).uniform(-2, 2, size=(steps + 50, N, 1)).astype(np.float32)
        envs.reset(seed=0)
        for a in acts[:50]:
            envs.step(a)
        pids = [p.pid for p in procs] if side == "host" else [os.getpid()]
        everyone = [p.pid for p in procs] + [os.getpid()]
        cpu, writer, threads = cpu_seconds(procs), recorder_seconds(pids), thread_seconds(everyone)
        hooked = hook.seconds if hook is not None else 0.0
        begin = time.perf_counter()
        for a in acts[50:]:
            envs.step(a)
        rate = steps * N / (time.perf_counter() - begin)
        cpu, writer = cpu_seconds(procs) - cpu, recorder_seconds(pids) - writer
        after = thread_seconds(everyone)
        threads = {k: (v - threads.get(k, 0.0)) * 1e6 / (steps * N) for k, v in after.items()}
        hooked = hook.seconds - hooked if hook is not None else 0.0
        envs.close()
    finally:
        for p in procs:
            assert p.stdin is not None
            p.stdin.close()  # a clean stop: close() commits the open episodes
            p.wait(timeout=60)
    return rate, cpu * 1e6 / (steps * N), writer * 1e6 / (steps * N), hooked * 1e6 / (steps * N), threads


def recorded_transitions(record: Path) -> int:
    total = 0
    for meta in list(record.glob("server*/*/metadata.json")) + list(record.glob("*/metadata.json")):
        total += json.loads(meta.read_text())["count"]
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", type=int)
    parser.add_argument("--record")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", help="where recordings go (default: the system's temporary directory)")
    parser.add_argument("--side", choices=["host", "learner"], default="host")
    parser.add_argument("--format", help="npz, parquet, or both comma-separated (interleaved); "
                        "default: the package's default format (parquet)")
    parser.add_argument("--remove-each", action="store_true",
                        help="remove each recording right after its run (by default: all at the end)")
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.record, args.format)
        return
    if args.format is None:
        from unienv_remote._record import DEFAULT_RECORD_FORMAT

        args.format = DEFAULT_RECORD_FORMAT
        print(f"format: {args.format} (the default)", flush=True)
    formats = args.format.split(",")
    assert formats and all(f in ("npz", "parquet") for f in formats), args.format
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    plain: List[float] = []
    plain_cpu: List[float] = []
    recording: Dict[str, List[float]] = {f: [] for f in formats}
    recording_cpu: Dict[str, List[float]] = {f: [] for f in formats}
    writer_cpu: Dict[str, List[float]] = {f: [] for f in formats}
    hook_cpu: Dict[str, List[float]] = {f: [] for f in formats}
    share: Dict[str, List[float]] = {f: [] for f in formats}
    plain_threads: List[Dict[str, float]] = []
    recording_threads: Dict[str, List[Dict[str, float]]] = {f: [] for f in formats}
    made: List[Path] = []
    for r in range(args.rounds):
        os.sync()
        rate, cpu, _, _, threads = run(args.steps, None, args.side)
        plain_threads.append(threads)
        plain.append(rate)
        plain_cpu.append(cpu)
        line = f"round {r + 1}: plain {plain[-1]:,.0f} steps/s {plain_cpu[-1]:.1f} us CPU/step"
        for fmt in formats:
            record = Path(tempfile.mkdtemp(prefix="uvr-record-bench-", dir=args.dir))
            try:
                rate, cpu, writer, hooked, threads = run(args.steps, record, args.side, fmt)
                recording_threads[fmt].append(threads)
                recording[fmt].append(rate)
                recording_cpu[fmt].append(cpu)
                writer_cpu[fmt].append(writer)
                hook_cpu[fmt].append(hooked)
                share[fmt].append((writer + hooked) / cpu)
                # Every step of every env (warm-up included), committed at close();
                # Pendulum truncates after 200 steps, and the vector env's next
                # step of that env is its autoreset (a reset, no transition).
                total = args.steps + 50
                expected = (total - total // 201) * N
                assert recorded_transitions(record) == expected, (recorded_transitions(record), expected)
            finally:
                # Removed at the end (or now, with --remove-each), not before
                # the next runs' file creations (see the docstring).
                made.append(record)
                if args.remove_each:
                    shutil.rmtree(record)
                # The next run starts with the disk idle: without this, the
                # kernel's writeback of an NPZ run overlaps the next runs and
                # is charged to whichever thread meets it.
                os.sync()
            line += (f", {fmt} {rate:,.0f} steps/s {cpu:.1f} us CPU/step (writer thread {writer:.1f}, hook {hooked:.1f},"
                     f" share {share[fmt][-1]:.3f})")
        print(line, flush=True)
    for record in made:
        shutil.rmtree(record, ignore_errors=True)
    print("load average after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    p, pc = float(np.median(plain)), float(np.median(plain_cpu))
    print(f"recording on the {args.side} side, medians of {args.rounds} runs")
    print("| mode | env steps/s | CPU us per env step | of which the writer thread | and the hook | recording's CPU share |")
    print("|---|---|---|---|---|---|")
    print(f"| plain | {p:,.0f} | {pc:.1f} | | | |")
    for fmt in formats:
        q, qc = float(np.median(recording[fmt])), float(np.median(recording_cpu[fmt]))
        w = float(np.median(writer_cpu[fmt]))
        h = float(np.median(hook_cpu[fmt]))
        sh = float(np.median(share[fmt]))
        hook_text = f"{h:.1f}" if args.side == "learner" else "(not timed: host)"
        print(f"| recording every transition, {fmt} | {q:,.0f} | {qc:.1f} | {w:.1f} | {hook_text} | **{sh:.3f}** |")
        print(f"| ratio {fmt} / plain | {q / p:.3f} | {qc / pc:.3f} | writer / plain CPU {w / pc:.3f} | | |")
        ratios = sorted(b / a for a, b in zip(plain, recording[fmt]))
        shares = " ".join(f"{x:.3f}" for x in sorted(share[fmt]))
        print(f"| per-round throughput ratios {fmt} | {' '.join(f'{x:.3f}' for x in ratios)} | | | | {shares} |")
    # Where the CPU went, thread by thread (servers' and the learner's
    # threads by name, schedstat): what recording adds beyond its writer.
    names = sorted({k for t in plain_threads + [t for f in formats for t in recording_threads[f]] for k in t})
    median = lambda runs, k: float(np.median([t.get(k, 0.0) for t in runs]))  # noqa: E731
    print()
    print("| thread (all processes) | plain us CPU / env step | " + " | ".join(f"{f} | {f} - plain" for f in formats) + " |")
    print("|---|---:|" + "---:|---:|" * len(formats))
    for k in names + ["(all threads)"]:
        if k == "(all threads)":
            pv = float(np.median([sum(t.values()) for t in plain_threads]))
            rv = [float(np.median([sum(t.values()) for t in recording_threads[f]])) for f in formats]
        else:
            pv = median(plain_threads, k)
            rv = [median(recording_threads[f], k) for f in formats]
        if max([pv] + rv) < 0.05:
            continue
        print(f"| {k} | {pv:.2f} | " + " | ".join(f"{r:.2f} | {r - pv:+.2f}" for r in rv) + " |")


if __name__ == "__main__":
    main()
