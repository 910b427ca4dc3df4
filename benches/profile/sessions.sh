#!/usr/bin/env bash
# Many sessions on one Python server: the fleet server (pendulum_server.py
# fleet: 8 single Pendulum-v1 domains, pendulum0..7) with K clients at once,
# client i stepping pendulum<i> N times over its own connection (one
# session each). Prints requests/s (wall time, client start-up included:
# compare runs of one K only), the server process's CPU per request
# (/proc/PID/stat) and its runtime workers' (schedstat of the
# `unienv-server` threads), which decode and route every session's
# requests. With STRACE=1, the server's syscalls per request too (strace
# slows it: its CPU figures are then not comparable).
#
#   benches/profile/sessions.sh [K]      # K from 1 to 8, default 8
#
# N (default 1500), TRANSPORT (tcp, the default, or unix), CPUS and
# SERVER_PYTHONPATH are read from the environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
K=${1:-8}
N=${N:-1500}
what=fleet
PY=${UNIENV_REF_PYTHON:-$PWD/.venv-ref/bin/python}
TAG=sessions
. benches/profile/serve.sh
clients() {
  local pids=() i
  for i in $(seq 0 $((K - 1))); do
    "$PY" benches/profile/step_n.py "$url" "pendulum$i" "$1" &
    pids+=($!)
  done
  wait "${pids[@]}"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
runtime_ns() {
  local sum=0 t run
  for t in /proc/"$pid"/task/*; do
    if [ "$(cat "$t/comm")" = unienv-server ]; then read -r run _ < "$t/schedstat"; sum=$((sum + run)); fi
  done
  echo "$sum"
}
clients 50   # warm-up: every domain built, every session's requests kept
if [ "${STRACE:-0}" = 1 ]; then
  strace -qq -c -f -p "$pid" -o "$dir/strace" &
  sp=$!
  sleep 1
fi
c0=$(cpu_ticks); r0=$(runtime_ns); t0=$(date +%s.%N)
clients "$N"
t1=$(date +%s.%N); c1=$(cpu_ticks); r1=$(runtime_ns)
echo "load: $(uptime)"
awk -v k="$K" -v n="$N" -v w="$(echo "$t1 - $t0" | bc)" -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v r=$((r1 - r0)) 'BEGIN {
  req = k * n
  printf "%d sessions x %d requests: %.0f requests/s, server CPU %.1f us per request, runtime workers %.1f us per request\n",
    k, n, req / w, c / hz / req * 1e6, r / 1e3 / req }'
if [ -n "$sp" ]; then
  sleep 0.5; kill -INT "$sp"; wait "$sp" || true; sp=
  echo "syscalls per request:"
  awk -v n=$((K * N)) '$1 ~ /^[0-9.]+$/ && $NF != "total" && $4 / n >= 0.005 { printf "  %-16s %6.2f\n", $NF, $4 / n }' "$dir/strace" | sort -k2 -nr
fi
