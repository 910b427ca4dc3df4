"""``ProcessVectorEnv``'s default layout (``unienv_remote/_fleet_plan.py``):
one server per CPU, one batched resource per server, ``recv`` waiting for
every env."""

import os

import gymnasium
import pytest

from unienv_remote import ProcessVectorEnv
from unienv_remote._fleet_plan import FleetPlan, plan_fleet


@pytest.mark.parametrize("n_envs, cpus, expected", [
    (1, 1, FleetPlan(1, 1, None)),
    (1, 8, FleetPlan(1, 1, None)),           # never more servers than envs
    (3, 2, FleetPlan(2, 1, None)),
    (16, 2, FleetPlan(2, 1, None)),
    (1024, 2, FleetPlan(2, 1, None)),
    (64, 8, FleetPlan(8, 1, None)),
    (5, 8, FleetPlan(5, 1, None)),
    (1024, 64, FleetPlan(64, 1, None)),
])
def test_the_rule(n_envs: int, cpus: int, expected: FleetPlan) -> None:
    assert plan_fleet(n_envs, cpus) == expected


def test_one_server_per_cpu_and_one_resource_each() -> None:
    for cpus in (1, 2, 3, 8, 16):
        for n in range(1, 300):
            assert plan_fleet(n, cpus) == FleetPlan(min(n, cpus), 1, None)


def test_given_servers_are_kept() -> None:
    assert plan_fleet(64, 2, servers=4) == FleetPlan(4, 1, None)
    assert plan_fleet(3, 2, servers=3) == FleetPlan(3, 1, None)


@pytest.mark.parametrize("args, what", [
    ((0, 2), "n_envs"), ((4, 0), "cpus"), ((True, 2), "n_envs"), ((4, 2.0), "cpus"),
    ((4, 2, 5), "servers must be at most"), ((4, 2, 0), "servers"),
])
def test_bad_arguments(args: tuple, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        plan_fleet(*args)


def cartpole() -> gymnasium.Env:
    return gymnasium.make("CartPole-v1")


def test_process_vector_env_follows_the_plan_unless_told() -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = 16 * min(cpus, 2)
    plan = plan_fleet(n, cpus)
    envs = ProcessVectorEnv([cartpole] * n, unix=False, pin=False)
    try:
        assert envs.batch_size == plan.batch_size
        assert len(envs.server_pids) == plan.servers
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
    finally:
        envs.close()
    # Told the resources: no batch is chosen for recv.
    envs = ProcessVectorEnv([cartpole] * n, servers=2 if n >= 2 else 1, resources_per_server=1,
                            unix=False, pin=False)
    try:
        assert envs.batch_size is None
    finally:
        envs.close()
