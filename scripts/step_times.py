#!/usr/bin/env python3
"""Reads scripts/test.sh's output, passes it through, and times its steps:
each line starting with `==> ` begins a step. At the end it prints each
step's wall-clock seconds and share of the total (slowest first), so a CI log
shows where the time goes."""
import os
import sys
import time

# test.sh passes its own start (this interpreter may start a second later).
start = float(os.environ.get("STEP_TIMES_T0") or time.time())
steps = []  # [name, seconds]
current, since = "(before the first step)", start
for line in iter(sys.stdin.readline, ""):
    sys.stdout.write(line)
    sys.stdout.flush()
    if line.startswith("==> "):
        t = time.time()
        steps.append([current, t - since])
        current, since = line[4:].strip(), t
end = time.time()
steps.append([current, end - since])
total = end - start
print(f"==> time per step (total {total:.0f} s, wall clock):")
for name, seconds in sorted(steps, key=lambda s: -s[1]):
    if seconds >= 0.5:
        print(f"  {seconds:7.1f} s  {100 * seconds / total:5.1f} %  {name[:90]}")
sys.stdout.flush()
