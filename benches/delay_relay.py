"""A TCP relay that delays every chunk by a fixed time in each direction.

    python delay_relay.py DELAY_MS LISTEN_HOST UPSTREAM_HOST:PORT [UPSTREAM_HOST:PORT ...]

For each upstream it listens on LISTEN_HOST with a port the OS picks and
prints one line ``LISTEN_HOST:PORT -> UPSTREAM``; every byte received from
either side is forwarded DELAY_MS later (order kept, chunks pipelined: many
can be in flight at once). With DELAY_MS = 0.5 a request/reply round trip
gains 1 ms.

Used by vector_pendulum.py as the latency injector, because this machine's
kernel has no netem qdisc (``tc qdisc add ... netem`` fails with "Specified
qdisc kind is unknown"). One thread, ``select`` (microsecond timeouts; epoll's
are whole milliseconds).
"""

import heapq
import itertools
import select
import socket
import sys
import time
from typing import Dict, List, Tuple


def main() -> None:
    delay = float(sys.argv[1]) / 1000.0
    host = sys.argv[2]
    upstreams = []
    for spec in sys.argv[3:]:
        h, p = spec.rsplit(":", 1)
        upstreams.append((h, int(p)))
    listeners: Dict[socket.socket, Tuple[str, int]] = {}
    for up in upstreams:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((host, 0))
        ls.listen(64)
        listeners[ls] = up
        print(f"{host}:{ls.getsockname()[1]} -> {up[0]}:{up[1]}", flush=True)
    peers: Dict[socket.socket, socket.socket] = {}
    due: List[Tuple[float, int, socket.socket, bytes]] = []
    seq = itertools.count()
    while True:
        timeout = None if not due else max(0.0, due[0][0] - time.perf_counter())
        readable, _, _ = select.select(list(listeners) + list(peers), [], [], timeout)
        now = time.perf_counter()
        for s in readable:
            if s in listeners:
                client, _ = s.accept()
                upstream = socket.create_connection(listeners[s])
                for c in (client, upstream):
                    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                peers[client], peers[upstream] = upstream, client
                continue
            if s not in peers:
                continue
            try:
                data = s.recv(1 << 20)
            except OSError:
                data = b""
            # An empty chunk closes the pair once the data before it is out.
            heapq.heappush(due, (now + delay, next(seq), peers[s], data))
            if not data:
                other = peers.pop(s)
                peers.pop(other, None)
                s.close()
        now = time.perf_counter()
        while due and due[0][0] <= now:
            _, _, dst, data = heapq.heappop(due)
            if dst.fileno() < 0:
                continue
            if not data:
                dst.close()
                continue
            try:
                dst.sendall(data)
            except OSError:
                dst.close()


if __name__ == "__main__":
    main()
