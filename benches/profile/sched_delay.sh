#!/usr/bin/env bash
# Per server thread and CPU: how often it is switched in per request, its run
# time per request and how long it waited from its wake-up to running (the
# wake-up's latency: an idle vCPU of this KVM guest takes 10-30 us to start
# a woken thread, a busy one's run queue longer), from `perf sched record`
# (the scheduler's tracepoints, machine-wide) while a client makes N steps;
# `perf sched timehist` gives each switch-in with its wait and delay.
# Needs perf and root (or perf_event_paranoid <= 1). perf's tracing adds a
# little to every switch: use wakeups.sh for the threads' CPU.
#
#   benches/profile/sched_delay.sh rust|python|batched|fleet
#
# Modes and servers as in wakeups.sh. N (default 2000; fleet 500), TRANSPORT
# (tcp, the default, or unix), CPUS, SERVER_PYTHONPATH and BIN are read from
# the environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-python}
PY=${UNIENV_REF_PYTHON:-$PWD/.venv-ref/bin/python}
N=${N:-2000}; [ "$what" = fleet ] && N=${N_FLEET:-500}
TAG=sched
. benches/profile/serve.sh
client 100 >/dev/null   # warm-up
perf sched record -o "$dir/perf.data" -- sleep 600 >/dev/null 2>&1 &
sp=$!
sleep 1
client "$N" >/dev/null
kill -INT "$sp"; wait "$sp" || true; sp=
echo "load: $(uptime)"
echo "per step ($what over $TRANSPORT${CPUS:+, server on CPUs $CPUS}, $N steps): thread@cpu, switch-ins, run us, mean wait us (asleep), mean delay us (woken to running)"
# timehist rows: time, [cpu], task[tid/pid], wait time, sch delay, run time (ms)
perf sched timehist -i "$dir/perf.data" 2>/dev/null | awk -v n="$N" -v pid="$pid" '
  index($3, "/" pid "]") > 0 {
    split($3, a, "["); k = a[1] "@" $2; c[k]++; wait[k] += $4; delay[k] += $5; run[k] += $6 }
  END { for (k in c) if (c[k] / n >= 0.01)
          printf "  %-28s %6.2f %8.1f %9.1f %8.1f\n", k, c[k] / n, run[k] * 1000 / n, wait[k] * 1000 / c[k], delay[k] * 1000 / c[k] }' | sort
