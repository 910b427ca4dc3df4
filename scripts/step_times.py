#!/usr/bin/env python3
"""Reads scripts/test.sh's output, passes it through, and times its steps:
each line starting with `==> ` begins a step. At the end it prints each
step's wall-clock seconds and share of the total (slowest first), so a CI log
shows where the time goes, and the CPU seconds (user + system) the commands
of each step used: on a loaded machine the wall clock says little, the CPU
time much more. (CPU time is counted when a command ends, from test.sh's
/proc entry: a background job's counts in the step during which it ends.)"""
import os
import sys
import time

# test.sh passes its own start (this interpreter may start a second later).
start = float(os.environ.get("STEP_TIMES_T0") or time.time())
TICKS = os.sysconf("SC_CLK_TCK")
SCRIPT = os.getppid()  # test.sh: this runs in its process substitution


def cpu() -> float:
    """CPU seconds of test.sh and of the commands it has waited for."""
    try:
        with open(f"/proc/{SCRIPT}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # utime, stime, cutime, cstime are fields 14 to 17 (1-based); the
        # split starts at field 3.
        return sum(int(v) for v in fields[11:15]) / TICKS
    except (OSError, ValueError, IndexError):
        return float("nan")


steps = []  # [name, seconds, cpu seconds]
cpu0 = cpu()
current, since, cpu_since = "(before the first step)", start, cpu0
last_cpu = cpu0
for line in iter(sys.stdin.readline, ""):
    sys.stdout.write(line)
    sys.stdout.flush()
    if line.startswith("==> "):
        t, c = time.time(), cpu()
        steps.append([current, t - since, c - cpu_since])
        current, since, cpu_since = line[4:].strip(), t, c
        last_cpu = c
end = time.time()
# At the end test.sh is exiting; its last commands have been waited for.
c = cpu()
c = last_cpu if c != c else c
steps.append([current, end - since, c - cpu_since])
total = end - start
total_cpu = c - cpu0
print(f"==> time per step (total {total:.0f} s wall clock, {total_cpu:.0f} s CPU):")
print("     wall   share    CPU  step")
for name, seconds, cpu_seconds in sorted(steps, key=lambda s: -s[1]):
    if seconds >= 0.5:
        print(f"  {seconds:7.1f} s {100 * seconds / total:5.1f} % {cpu_seconds:6.1f} s  {name[:90]}")
sys.stdout.flush()
