#!/usr/bin/env bash
# Syscalls per request of a server process, by syscall: `strace -c -f` is
# attached to the server (running natively, started by serve.sh) while a
# client makes N steps after a warm-up; counts / N. strace slows every
# syscall down, so only the counts mean anything (not the times); they do not
# depend on the machine's load except where a thread spins before it sleeps
# (the domain thread's job queue, the GIL).
#
#   benches/profile/syscalls.sh rust|python|batched|fleet
#
# Modes and servers as in wakeups.sh (fleet: 8 single Pendulum-v1 domains
# stepped lockstep by a RemoteVectorEnv, one step = 8 requests: counts are per
# step). N (default 2000; fleet 500), TRANSPORT (tcp, the default here as in
# throughput.py, or unix), CPUS, SERVER_PYTHONPATH and BIN are read from the
# environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-python}
PY=${UNIENV_REF_PYTHON:-$PWD/.venv-ref/bin/python}
N=${N:-2000}; [ "$what" = fleet ] && N=${N_FLEET:-500}
TAG=sys
. benches/profile/serve.sh
client 100 >/dev/null   # warm-up
strace -qq -c -f -p "$pid" -o "$dir/strace" &
sp=$!
sleep 1   # strace attaches to every thread
client "$N" >/dev/null
sleep 0.5
kill -INT "$sp"; wait "$sp" || true; sp=
echo "load: $(uptime)"
echo "syscalls per step ($what over $TRANSPORT${CPUS:+, server on CPUs $CPUS}, $N steps), by syscall:"
# strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall
awk -v n="$N" '$1 ~ /^[0-9.]+$/ && $NF != "total" && $4 / n >= 0.005 { printf "  %-16s %6.2f\n", $NF, $4 / n }' "$dir/strace" | sort -k2 -nr
awk -v n="$N" '$1 ~ /^[0-9.]+$/ && $NF != "total" { all += $4 } END { printf "  %-16s %6.2f\n", "total", all / n }' "$dir/strace"
