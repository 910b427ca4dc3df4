"""Runs the shared transcript (``python/tests/transcript.py``) against two
servers hosting the conformance fixture registry (ours and the reference)
with one client module, the reference's by default, and compares every
result with ``python/tests/compare.py``: values with their exact types
(numpy dtype and shape, tuple vs list, int vs float), descriptors, error
codes and uncertainty.

  python compare_fixtures.py OUR_URL REFERENCE_URL
"""
import os
import sys

import unienv_interface.remote

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tests"))

import transcript  # noqa: E402
from compare import transcript_differences  # noqa: E402

# The client module the scenario runs with; python/tests/test_server_fixtures.py
# sets it to ``unienv_remote`` to run the same comparison with our client.
remote = unienv_interface.remote


def scenario(url):
    """The transcript of the shared scenario against the server at `url`."""
    return transcript.scenario(remote, url)


def compare(ours_url, reference_url):
    """Both transcripts and their differences (an empty list when identical)."""
    got, want = scenario(ours_url), scenario(reference_url)
    return got, transcript_differences(got, want)


def main():
    got, failures = compare(sys.argv[1], sys.argv[2])
    print(f"{len(got)} results compared")
    if failures:
        print("MISMATCHES (ours vs reference):")
        for f in failures:
            print("  " + f[:2000])
        sys.exit(1)
    # The scenario must have exercised both outcomes.
    kinds = {r[1] for r in got}
    assert {"ok", "error", "uncertain_outcome"} <= kinds, kinds


if __name__ == "__main__":
    main()
