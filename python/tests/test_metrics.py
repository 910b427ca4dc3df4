"""The metrics endpoint (``serve --metrics ADDR``, ``RemoteServer(metrics=ADDR)``):
scraped over HTTP, parsed by the Prometheus project's own parser, its counters
equal to the requests a test made."""

import re
import urllib.request
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import pytest
import unienv_interface.remote as reference

from conftest import Server, our_binary
from transcript import connect

parser = pytest.importorskip("prometheus_client.openmetrics.parser")

METRICS = re.compile(r"Metrics: (http://\S+)")
Samples = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]


def scrape(url: str) -> Tuple[str, Samples]:
    with urllib.request.urlopen(url, timeout=10) as response:
        content_type = response.headers["Content-Type"]
        text = response.read().decode()
    samples: Samples = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return content_type, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def serve_with_metrics() -> Tuple[Server, str]:
    server = Server("ours", [str(our_binary()), "serve", "--fixtures", "--addr", "127.0.0.1:0",
                             "--metrics", "127.0.0.1:0"])
    assert server.process.stdout is not None
    for line in server.process.stdout:
        match = METRICS.search(line)
        if match:
            return server, match.group(1)
    server.stop()
    raise AssertionError("serve printed no metrics URL")


def total(samples: Samples) -> float:
    return sum(v for (name, _), v in samples.items() if name == "unienv_requests_total")


def test_counters_match_the_requests_made() -> None:
    server, url = serve_with_metrics()
    try:
        client = connect(reference, server.url)
        env = client.env("counter")
        content_type, before = scrape(url)
        assert content_type.startswith("application/openmetrics-text")
        # Requests whose count this test knows: 1 reset, 7 steps, a describe
        # of an unknown ID, a step that fails in the simulator.
        env.reset(seed=0)
        steps = 7
        for _ in range(steps):
            env.step(np.full(2, 0.1, np.float32))
        with pytest.raises(Exception):
            client.describe("no-such-env")
        with pytest.raises(Exception):
            env.step(np.zeros(3, np.float32))  # counter's step adds a (2,) array: an execution error
        _, samples = scrape(url)
        assert total(samples) - total(before) == 1 + steps + 1 + 1
        for labels, want in [
            (dict(op="call", code="ok"), 1 + steps),
            (dict(op="call", code="execution_error"), 1),
            (dict(op="describe", code="not_found"), 1),
        ]:
            got = value(samples, "unienv_requests_total", **labels) - value(before, "unienv_requests_total", **labels)
            assert got == want, (labels, got, want)
        assert value(samples, "unienv_requests_total", op="hello", code="ok") >= 1
        assert value(samples, "unienv_step_seconds_count", resource="counter") == steps + 1
        assert value(samples, "unienv_step_seconds_bucket", resource="counter", le="+Inf") == steps + 1
        assert value(samples, "unienv_step_seconds_sum", resource="counter") > 0
        assert value(samples, "unienv_sessions") == 1
        # The banner of `serve` lists the resources through a session of its own.
        assert value(samples, "unienv_sessions_opened_total") == value(before, "unienv_sessions_opened_total") >= 1
        assert value(samples, "unienv_faults_total") == 1
        assert value(samples, "unienv_received_bytes_total") > value(before, "unienv_received_bytes_total") > 0
        assert value(samples, "unienv_sent_bytes_total") > value(before, "unienv_sent_bytes_total") > 0
        client.close()
    finally:
        server.stop()


def test_the_endpoint_answers_only_get_metrics() -> None:
    server, url = serve_with_metrics()
    try:
        base = url.rsplit("/", 1)[0]
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base + "/nothing", timeout=10)
        assert missing.value.code == 404
        request = urllib.request.Request(url, data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as post:
            urllib.request.urlopen(request, timeout=10)
        assert post.value.code == 405 and post.value.headers["Allow"] == "GET"
    finally:
        server.stop()


def test_python_server_metrics_and_observers(tmp_path: Path) -> None:
    import sys

    import unienv_remote
    from conftest import REPO

    sys.path.insert(0, str(REPO / "tests" / "py"))
    from ref_fixture_server import CounterEnv

    server = unienv_remote.RemoteServer(idle_timeout=None, metrics="127.0.0.1:0", record_dir=tmp_path)
    server.register("counter", CounterEnv())
    try:
        client = unienv_remote.RemoteClient.connect(server.listen("127.0.0.1", 0))
        assert server.metrics_url is not None
        env = client.env("counter")
        env.reset(seed=1)
        env.step(np.ones(2, np.float32))
        _, samples = scrape(server.metrics_url)
        assert value(samples, "unienv_step_seconds_count", resource="counter") == 1
        # Counted once its episode is committed (none is yet).
        assert value(samples, "unienv_recorded_transitions_total") == 0
        assert value(samples, "unienv_record_errors_total") == 0
        text = server.metrics_text()
        assert "unienv_requests_total" in text and text.rstrip().endswith("# EOF")
        client.close()
    finally:
        server.close()


def test_every_listed_metric_is_exposed_and_counts() -> None:
    """The metrics listed in docs/metrics.md, each family in the scrape, each counted where a test
    can make it move: describe and discover answered from a domain's
    committed descriptors (another session's, never waiting on its thread)
    are counted as requests; observers; an eviction and the revival after
    it; a connection closed over its byte budget."""
    import sys
    import time

    import unienv_remote
    from conftest import REPO

    sys.path.insert(0, str(REPO / "tests" / "py"))
    from ref_fixture_server import CounterEnv

    server = unienv_remote.RemoteServer(idle_timeout=0.3, metrics="127.0.0.1:0",
                                        max_connection_bytes=256 * 1024)
    server.register("counter", CounterEnv)  # a factory: its domain is evicted when idle
    try:
        address = server.listen("127.0.0.1", 0)
        assert server.metrics_url is not None
        owner = unienv_remote.RemoteClient.connect(address)
        env = owner.env("counter")
        owner.acquire("counter")
        env.reset(seed=0)
        other = unienv_remote.RemoteClient.connect(address)
        _, before = scrape(server.metrics_url)
        for family in ("sessions", "sessions_opened_total", "requests_total", "faults_total", "evictions_total",
                       "revivals_total", "received_bytes_total", "sent_bytes_total", "budget_refusals_total",
                       "observers", "dropped_snapshots_total"):
            assert any(name == f"unienv_{family}" for name, _ in before), family
        assert value(before, "unienv_sessions") == 2

        # Answered from the committed copy: the domain is another session's.
        other.describe("counter")
        other.discover()
        _, after = scrape(server.metrics_url)
        for op in ("describe", "discover"):
            got = value(after, "unienv_requests_total", op=op, code="ok") - \
                value(before, "unienv_requests_total", op=op, code="ok")
            assert got == 1, (op, got)
        assert total(after) - total(before) == 2

        watcher = unienv_remote.RemoteClient.connect(address)
        watcher.subscribe("counter")
        _, live = scrape(server.metrics_url)
        assert value(live, "unienv_observers") == 1
        watcher.close()
        owner.close()

        # Idle, unowned, unobserved: evicted (polled, the eviction has no event to wait for).
        deadline = time.monotonic() + 30
        while value(scrape(server.metrics_url)[1], "unienv_evictions_total") < 1:
            assert time.monotonic() < deadline, "the idle domain was not evicted"
            time.sleep(0.05)
        other.describe("counter")  # instantiates the evicted domain again
        _, revived = scrape(server.metrics_url)
        assert value(revived, "unienv_revivals_total") >= 1
        assert value(revived, "unienv_observers") == 0

        # A message beyond the connection's byte budget closes it.
        greedy = unienv_remote.RemoteClient.connect(address)
        with pytest.raises(Exception):
            greedy.call("counter", "step", np.zeros(128 * 1024, np.float32))
        deadline = time.monotonic() + 30
        while value(scrape(server.metrics_url)[1], "unienv_budget_refusals_total") < 1:
            assert time.monotonic() < deadline, "the over-budget connection was not counted"
            time.sleep(0.05)
        other.close()
    finally:
        server.close()
