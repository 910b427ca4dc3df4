#!/usr/bin/env bash
# Where a server process's CPU goes, user space against the kernel and the
# kernel by hand-off (waking the domain thread, waiting for a job, the GIL,
# epoll, writing the response, ...): `perf record -e cpu-clock -g` of the
# server (not under valgrind) while a client makes N steps, summarised by
# kernel_share.py. Shares depend on the machine's load (printed): a wake-up
# costs most when the CPU it wakes is idle. Needs perf with kernel symbols
# (root, or perf_event_paranoid <= 1).
#
#   benches/profile/kernel_share.sh rust|python|batched|fleet
#
# Modes and servers as in wakeups.sh (fleet: 8 single Pendulum-v1 domains
# stepped lockstep by a RemoteVectorEnv, one step = 8 requests). N (default 12000
# steps, batched 6000, fleet 1500: enough to outlast perf's window), SECS (perf's window, default 4), TRANSPORT (tcp,
# the default here as in throughput.py, or unix), SERVER_PYTHONPATH,
# BIN and PERF_OUT=FILE (keep the profile) are read from the environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-python}
PY=${UNIENV_REF_PYTHON:-$PWD/.venv-ref/bin/python}
SECS=${SECS:-4}
TAG=kshare
. benches/profile/serve.sh
client 100   # warm-up
n=${N:-$(case $what in fleet) echo 1500;; batched) echo 6000;; *) echo 12000;; esac)}
client "$n" & cpid=$!
sleep 0.5
perf record -e cpu-clock -F 2999 -g -p "$pid" -o "$dir/perf.data" -- sleep "$SECS" >/dev/null 2>&1
wait $cpid
echo "load: $(uptime)"
echo "$what over $TRANSPORT: the server's samples while the client stepped"
"$PY" benches/profile/kernel_share.py "$dir/perf.data" ${US_PER_REQUEST:+--us-per-request "$US_PER_REQUEST"}
if [ -n "${PERF_OUT:-}" ]; then cp "$dir/perf.data" "$PERF_OUT"; fi
