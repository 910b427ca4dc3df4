"""Many sessions on one server process (docs/network.md, "Many sessions").

    .venv-ref/bin/python benches/sessions.py [--host rust|python|both] [--sizes 0,1000,10000]
        [--seconds 3] [--clients 4] [--env cartpole]

One server process (the Rust host, ``unienv-remote serve``, or the Python
host, ``unienv_remote.RemoteServer`` in this script run as ``--serve-python``),
on 127.0.0.1 with the port picked by the OS. For each K of ``--sizes``, in
increasing order on the same server, idle sessions are added until K are
open: each is a WebSocket connection that said ``hello`` and ``discover`` and
then only pings every 20 s (as our Python client does; the server closes a
session silent for 300 s) and answers the server's pings. They come from ``--clients``
client processes (this script run as ``--idle``: a minimal asyncio WebSocket
client, a few KiB per connection, at most 32 handshakes at once each, under
the server's 256 pending handshakes). Meanwhile one controller steps an env:
``unienv-remote bench URL ENV --seconds S`` (a separate process, our Rust
client), run once per K.

Printed per K: the server's RSS (``/proc/PID/status``), its growth per idle
session against K = 0, the controller's steps per second and its ratio to K =
0 (alone). The soft ``RLIMIT_NOFILE`` of this script and of every process it
starts is raised to the hard limit first (the output says both); K needs
about K + 64 descriptors in the server and K / clients in each client
process. The run is bounded: a client process that does not report its
sessions within ``--open-timeout`` seconds fails the run, and every process
started here is stopped when it ends (on Ctrl-C and SIGTERM too).

The binary is ``$UNIENV_REMOTE_BIN``, else ``target/release/unienv-remote``,
else ``target/debug/unienv-remote``; the Python host needs the extension
(``maturin develop``). Only RSS figures are load-independent; step rates need
a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import os
import re
import resource
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import cli_binary  # noqa: E402

URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")
RATE = re.compile(r"steps/s\s+([0-9.]+)")
#: Handshakes a client process has in progress at once.
OPENING_AT_ONCE = 32
#: An idle session's keepalive ping interval (our Python client's).
KEEPALIVE_SECONDS = 20.0
#: Descriptors a server needs beside its sessions (listener, runtime, logs).
SPARE_FDS = 64


def raise_nofile() -> Tuple[int, int]:
    """Raises this process's soft RLIMIT_NOFILE to the hard limit (children
    inherit it); returns (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0



def stop(process: "subprocess.Popen[str]") -> None:
    """Closes its stdin (this script's children end at EOF), then SIGTERM,
    then SIGKILL, by its own pid."""
    if process.poll() is not None:
        return
    try:
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=5)
        return
    except (subprocess.TimeoutExpired, OSError):
        pass
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# -- the Python host (this script with --serve-python) ------------------------------

def serve_python(max_connections: int) -> None:
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv
    from unienv_remote import RemoteServer

    # Warnings only (an out-of-descriptors warning among them): not a line per session.
    logging.getLogger("unienv_remote").setLevel(logging.WARNING)
    server = RemoteServer(max_connections=max_connections, idle_timeout=None)
    server.register("cartpole", FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
    print(server.listen("127.0.0.1", 0), flush=True)
    try:
        sys.stdin.read()  # until the benchmark closes our stdin
    finally:
        server.close()


# -- idle sessions (this script with --idle) ----------------------------------------

def ws_frame(opcode: int, payload: bytes) -> bytes:
    """A masked client frame (RFC 6455)."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
    return head + mask + masked


async def read_frame(reader: asyncio.StreamReader) -> Tuple[int, bytes]:
    """One server frame (unmasked): (opcode, payload)."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack(">H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack(">Q", await reader.readexactly(8))
    return b0 & 0x0F, await reader.readexactly(n)


async def read_message(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    """The next binary message, answering pings on the way."""
    while True:
        opcode, payload = await read_frame(reader)
        if opcode == 0x2:
            return payload
        if opcode == 0x9:
            writer.write(ws_frame(0xA, payload))
        elif opcode == 0x8:
            raise ConnectionError("closed by the server")


class Opened:
    """Counts the sessions past their discover; ``all`` is set at ``count``."""

    def __init__(self, count: int) -> None:
        self.count, self.n = count, 0
        self.all = asyncio.Event()
        if count == 0:
            self.all.set()

    def one(self) -> None:
        self.n += 1
        if self.n >= self.count:
            self.all.set()


async def ping_every(writer: asyncio.StreamWriter, seconds: float) -> None:
    while True:
        await asyncio.sleep(seconds)
        writer.write(ws_frame(0x9, b""))


async def open_session(host: str, port: int, gate: asyncio.Semaphore, opened: Opened,
                       done: asyncio.Event) -> None:
    """Connects, says hello and discover, then answers pings until ``done``."""
    from unienv_remote._native import decode, encode

    async with gate:
        reader, writer = await asyncio.open_connection(host, port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
        hello = {"version": 1, "type": "request", "request_id": "h", "session_id": None,
                 "op": "hello", "resource_id": None}
        writer.write(ws_frame(0x2, encode(hello)))
        reply = decode(await read_message(reader, writer))
        session = reply["result"]["session_id"]
        discover = {"version": 1, "type": "request", "request_id": "d", "session_id": session,
                    "op": "discover", "resource_id": None}
        writer.write(ws_frame(0x2, encode(discover)))
        reply = decode(await read_message(reader, writer))
        if reply.get("type") != "response":
            raise ConnectionError(f"discover failed: {reply}")
    opened.one()
    # Idle: a keepalive ping every 20 s, as our Python client sends (the
    # server closes a session silent for 300 s); the server's pings answered.
    pings = asyncio.ensure_future(read_message(reader, writer))
    keepalive = asyncio.ensure_future(ping_every(writer, KEEPALIVE_SECONDS))
    ended = asyncio.ensure_future(done.wait())
    await asyncio.wait([pings, keepalive, ended], return_when=asyncio.FIRST_COMPLETED)
    for t in (pings, keepalive, ended):
        t.cancel()
    writer.write(ws_frame(0x8, struct.pack(">H", 1000)))  # a close frame: a normal end
    try:
        await asyncio.wait_for(writer.drain(), 2)
    except (OSError, asyncio.TimeoutError):
        pass
    writer.close()


async def idle_main(url: str, count: int) -> None:
    m = re.match(r"ws://([^:]+):(\d+)", url)
    assert m is not None
    host, port = m.group(1), int(m.group(2))
    gate = asyncio.Semaphore(OPENING_AT_ONCE)
    opened, done = Opened(count), asyncio.Event()
    tasks = [asyncio.ensure_future(open_session(host, port, gate, opened, done)) for _ in range(count)]
    all_open = asyncio.ensure_future(opened.all.wait())
    # Every session open, or the first one that failed (which fails the process).
    while not all_open.done():
        finished, _ = await asyncio.wait(tasks + [all_open], return_when=asyncio.FIRST_COMPLETED)
        for t in finished:
            if t is not all_open and t.exception() is not None:
                raise SystemExit(f"an idle session failed: {t.exception()!r}")
        tasks = [t for t in tasks if not t.done()]
    print(f"open {count}", flush=True)
    # Until the benchmark closes our stdin.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    done.set()
    if tasks:
        await asyncio.wait(tasks, timeout=5)


# -- the benchmark ------------------------------------------------------------------

class Idle:
    """A client process holding ``count`` idle sessions."""

    def __init__(self, url: str, count: int) -> None:
        self.count = count
        self.process = subprocess.Popen([sys.executable, __file__, "--idle", url, "--count", str(count)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def wait_open(self, deadline: float) -> None:
        assert self.process.stdout is not None
        # readline blocks: the deadline is enforced by the caller's alarm.
        line = self.process.stdout.readline()
        if not line.startswith("open"):
            raise RuntimeError(f"an idle client process ended before opening its sessions "
                               f"(exit {self.process.wait()})")
        if time.monotonic() > deadline:
            raise RuntimeError("idle sessions opened too late")


class Timeout(Exception):
    pass


def start_server(host: str, max_connections: int) -> Tuple["subprocess.Popen[str]", str]:
    if host == "rust":
        cmd = [cli_binary(), "serve", "--addr", "127.0.0.1:0", "--max-connections", str(max_connections),
               "--idle-timeout", "0"]
    else:
        cmd = [sys.executable, __file__, "--serve-python", "--max-connections", str(max_connections)]
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    for line in process.stdout:
        m = URL.search(line)
        if m:
            # Keep reading its output so that it never blocks on a full pipe.
            threading.Thread(target=drain, args=(process.stdout,), daemon=True).start()
            return process, m.group(1)
    raise RuntimeError(f"the server printed no URL (exit {process.wait()})")


def drain(pipe: Any) -> None:
    for _ in pipe:
        pass


def step_rate(url: str, env: str, seconds: float) -> float:
    out = subprocess.run([cli_binary(), "bench", url, env, "--seconds", str(seconds)],
                         capture_output=True, text=True, timeout=seconds + 60)
    m = RATE.search(out.stdout)
    if out.returncode != 0 or m is None:
        raise RuntimeError(f"bench failed (exit {out.returncode}): {out.stderr.strip()[-400:]}")
    return float(m.group(1))


def run_host(host: str, sizes: List[int], args: argparse.Namespace) -> None:
    server, url = start_server(host, max(sizes) + SPARE_FDS)
    idle: List[Idle] = []
    try:
        print(f"\n{host} host ({'unienv-remote serve' if host == 'rust' else 'RemoteServer'}), {url}, "
              f"env {args.env}, controller {args.seconds:g} s per K")
        print(f"{'K idle':>8} {'server RSS':>12} {'RSS / idle session':>19} {'steps/s':>9} {'vs alone':>9}")
        step_rate(url, args.env, min(1.0, args.seconds))  # warm-up: the env built, the controller's path hot
        base_rss = 0
        alone = 0.0
        have = 0
        for k in sorted(sizes):
            more = k - have
            if more > 0:
                share = [more // args.clients + (1 if i < more % args.clients else 0) for i in range(args.clients)]
                batch = [Idle(url, n) for n in share if n > 0]
                idle.extend(batch)
                deadline = time.monotonic() + args.open_timeout
                signal.alarm(int(args.open_timeout) + 1)
                try:
                    for c in batch:
                        c.wait_open(deadline)
                finally:
                    signal.alarm(0)
                have = k
            time.sleep(1.0)  # let freed memory settle
            rss = rss_bytes(server.pid)
            rate = step_rate(url, args.env, args.seconds)
            if k == 0:
                base_rss, alone = rss, rate
            per = f"{(rss - base_rss) / k / 1024:.1f} KiB" if k and base_rss else "–"
            ratio = f"{rate / alone:.2f}x" if alone else "–"
            print(f"{k:>8} {rss / (1 << 20):>9.1f} MiB {per:>19} {rate:>9.0f} {ratio:>9}", flush=True)
    finally:
        for c in idle:
            stop(c.process)
        stop(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", choices=["rust", "python", "both"], default="both")
    parser.add_argument("--sizes", default="0,1000,10000")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4, help="client processes holding the idle sessions")
    parser.add_argument("--env", default="cartpole")
    parser.add_argument("--open-timeout", type=float, default=300.0)
    parser.add_argument("--serve-python", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--idle", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--max-connections", type=int, default=1024, help=argparse.SUPPRESS)
    args = parser.parse_args()
    raise_nofile()
    if args.serve_python:
        return serve_python(args.max_connections)
    if args.idle:
        return asyncio.run(idle_main(args.idle, args.count))

    sizes = sorted({int(s) for s in args.sizes.split(",")} | {0})
    soft, hard = raise_nofile()
    print(f"RLIMIT_NOFILE: soft {soft}, hard {hard} (the soft limit raised to the hard one, "
          "for this script and every process it starts)")
    need = max(sizes) + SPARE_FDS
    if need > soft:
        raise SystemExit(f"K = {max(sizes)} needs about {need} descriptors in the server, more than the "
                         f"limit {soft}: raise the hard limit (ulimit -Hn, systemd LimitNOFILE)")

    def alarm(*_: Any) -> None:
        raise Timeout(f"idle sessions not open within --open-timeout {args.open_timeout:g} s")

    signal.signal(signal.SIGALRM, alarm)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    hosts = ["rust", "python"] if args.host == "both" else [args.host]
    for host in hosts:
        run_host(host, sizes, args)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
