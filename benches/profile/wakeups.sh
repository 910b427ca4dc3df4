#!/usr/bin/env bash
# Wake-ups and CPU per request of a server process, per thread, from
# /proc/PID/task/*/{status,schedstat}: the server runs natively (no
# valgrind), a client (step_n.py) makes N1 steps, then N2 steps, and each
# thread's voluntary and involuntary context switches and run time are
# read before and after each interval; per step = (B - A) / (N2 - N1),
# which cancels connecting, hello, discover and reset. Timings depend on
# the machine's load (printed); the switch counts much less so.
#
#   benches/profile/wakeups.sh rust     # target/profiling/unienv-remote serve --fixtures, env bench_state
#   benches/profile/wakeups.sh python   # RemoteServer hosting Pendulum-v1
#   benches/profile/wakeups.sh batched  # a BatchedEnv of 8 Pendulum-v1
#   benches/profile/wakeups.sh fleet    # 8 single Pendulum-v1 (8 domains), stepped
#                                       # lockstep by a RemoteVectorEnv: per step = 8 requests
#
# SERVER_PYTHONPATH puts another build of the package first for the server
# only (the client keeps the venv's). N1/N2 (default 500/2500) and TRANSPORT (unix, the default, or tcp: a
# loopback port the system picks) are read from the environment; BIN overrides the CLI for
# `rust`; CPUS (e.g. CPUS=0) pins the server to those CPUs with its own option (`serve --cpus`,
# `RemoteServer(cpus=...)`). The server is started by serve.sh (shared with the other profiling scripts).
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-rust}
PY=${UNIENV_REF_PYTHON:-$PWD/.venv-ref/bin/python}
N1=${N1:-500}
N2=${N2:-2500}
TAG=wake
TRANSPORT=${TRANSPORT:-unix}
. benches/profile/serve.sh
client 100   # warm-up

# One line per thread: tid name voluntary involuntary run_ns wait_ns (runnable, waiting for a CPU)
sample() {
  for t in /proc/"$pid"/task/*; do
    local tid=${t##*/} name vol inv run wait
    name=$(tr ' ' '_' < "$t/comm")
    vol=$(awk '/^voluntary_ctxt_switches/{print $2}' "$t/status")
    inv=$(awk '/^nonvoluntary_ctxt_switches/{print $2}' "$t/status")
    read -r run wait _ < "$t/schedstat"
    echo "$tid $name $vol $inv $run $wait"
  done
}
interval() {
  sample > "$dir/before"
  client "$1"
  sample > "$dir/after"
  # tid name dvol dinv drun dwait
  join <(sort -k1,1 "$dir/before") <(sort -k1,1 "$dir/after") |
    awk '{print $1, $2, $8-$3, $9-$4, $10-$5, $11-$6}'
}
interval "$N1" > "$dir/a"
interval "$N2" > "$dir/b"
echo "load: $(uptime)"
echo "per step ($what over $TRANSPORT${CPUS:+, server on CPUs $CPUS}, (N2-N1) = $((N2 - N1)) steps): thread, voluntary, involuntary switches, CPU us, us runnable waiting for a CPU"
join <(sort -k1,1 "$dir/a") <(sort -k1,1 "$dir/b") | awk -v n=$((N2 - N1)) '
  { v=($8-$3)/n; i=($9-$4)/n; c=($10-$5)/n/1000; w=($11-$6)/n/1000;
    if (v > 0.005 || i > 0.005 || c > 0.05) printf "  %-8s %-18s %6.3f %6.3f %8.2f %8.2f\n", $1, $2, v, i, c, w;
    tv+=v; ti+=i; tc+=c; tw+=w }
  END { printf "  total                       %6.3f %6.3f %8.2f %8.2f\n", tv, ti, tc, tw }'
