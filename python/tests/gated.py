"""A hung simulator for the tests: the fixtures' ``CounterEnv`` whose ``step``
waits at a gate."""

import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402


class Gated(CounterEnv):
    """Steps wait until ``gate`` is set (a hung simulator while it is not);
    ``entered`` is set as a step arrives."""

    def __init__(self):
        super().__init__()
        self.entered, self.gate = threading.Event(), threading.Event()

    def step(self, action):
        self.entered.set()
        self.gate.wait()
        return super().step(action)
