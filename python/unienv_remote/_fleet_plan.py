"""How ``ProcessVectorEnv`` lays out its envs when not told: the number of
server processes, the batched resources per server and ``recv``'s batch,
from the number of envs and of usable CPUs (docs/vector.md, "One server
process per vCPU"; the evidence is BENCHMARKS.md, "Scaling" and "Vector envs
and throughput").

The rule:

* **one server process per CPU** (never more servers than envs): a server
  steps its envs on one CPU, pinned, so more servers than CPUs only queue
  behind each other, and fewer leave CPUs idle;
* **one batched resource per server**, holding that server's share of the
  envs: lockstep ``step`` (Gymnasium's API, and what ``benches/scaling.py``
  measures) pays a request's fixed cost once per server and step. Two
  resources per server, stepped alternately with ``send``/``recv``, were
  measured no faster for ``step`` (64 and 1,024 envs) and slower at 256
  (0.72x one resource per server), so they are for a caller who uses
  ``recv`` to pass (``resources_per_server=2, batch_size=n // 2``);
* **``recv`` waits for every env** (``batch_size = None``), as ``step`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

@dataclass(frozen=True)
class FleetPlan:
    """A layout of ``n_envs`` envs over server processes."""

    #: Server processes (one per CPU, at most one per env).
    servers: int
    #: Batched resources per server (one: the measured best for ``step``).
    resources_per_server: int
    #: ``RemoteVectorEnv``'s ``batch_size``: how many envs ``recv`` returns
    #: at least (``None``: all of them).
    batch_size: Optional[int]


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def plan_fleet(n_envs: int, cpus: int, servers: Optional[int] = None) -> FleetPlan:
    """The layout of ``n_envs`` envs on a machine with ``cpus`` usable CPUs,
    over ``servers`` processes when given (at most ``n_envs``), else one per
    CPU. Every argument given must be a positive int (``ValueError``)."""
    n_envs, cpus = _positive("n_envs", n_envs), _positive("cpus", cpus)
    if servers is None:
        servers = min(n_envs, cpus)
    elif _positive("servers", servers) > n_envs:
        raise ValueError(f"servers must be at most the number of envs ({n_envs}), got {servers}")
    return FleetPlan(servers=servers, resources_per_server=1, batch_size=None)
