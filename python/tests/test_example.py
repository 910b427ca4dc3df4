"""examples/python/train_cartpole.py runs, unchanged but for a smaller budget,
against our server's built-in `cartpole`."""

import importlib.util

import pytest

from conftest import REPO, Server, our_binary


def test_train_cartpole_example(capsys):
    server = Server("ours", [str(our_binary()), "serve", "--addr", "127.0.0.1:0"])
    try:
        spec = importlib.util.spec_from_file_location("train_cartpole", REPO / "examples" / "python" / "train_cartpole.py")
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)
        example.URL = server.url
        example.CANDIDATES, example.CLIMB_STEPS, example.EVAL_EPISODES = 3, 2, 1
        example.EVAL_STEPS, example.FINAL_EPISODES = 50, 2
        example.main()
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert "random policy: mean return" in out and "trained policy: mean return" in out
    assert f"connected to {server.url}" in out
