#!/usr/bin/env bash
# Instructions per env step of a server process, counted by callgrind
# (exact, unlike timings on a loaded machine): the server runs under
# valgrind; callgrind's counters are zeroed, a client makes N1 steps, the
# counters are dumped; the same for N2 steps; per step = (B - A) / (N2 - N1),
# which cancels connecting, hello, discover and reset.
#
#   benches/profile/profile_step.sh rust     # target/profiling/unienv-remote serve --fixtures, env bench_state
#   benches/profile/profile_step.sh python   # unienv_remote.RemoteServer hosting Pendulum-v1 (FromGymnasiumEnv)
#   benches/profile/profile_step.sh batched  # the same hosting a BatchedEnv of 8 Pendulum-v1 (per request = 8 env steps)
#   benches/profile/profile_step.sh fleet    # 8 single Pendulum-v1 (8 domains) stepped lockstep by a
#                                            # RemoteVectorEnv over one connection (per step = 8 requests;
#                                            # the simulator's figure only with SIM_IR, per 8 env steps)
#
# For `python` and `batched`, the simulator's own instructions per step (the same steps in
# process, pendulum_local.py, also under callgrind) are printed too, and the
# difference: what the server adds. Needs valgrind, the venv (.venv-ref or
# UNIENV_REF_PYTHON) with unienv_remote installed (maturin develop --profile profiling),
# and for `rust` a profiling build of the CLI (cargo build --profile profiling). The client (step_n.py) runs
# outside valgrind. N1/N2 (default 200/1200) and ANNOTATE=1 (top functions
# of the second interval), PROFILE_OUT=FILE (keep that profile) and SIM_IR
# (the simulator's figure from an earlier run) are read from the environment;
# BIN overrides the CLI for `rust` (to compare two builds). BARE=1 (with
# `python`) also counts the Gymnasium env alone in process (pendulum_local.py
# bare: no FromGymnasiumEnv, which the host's fast path skips) and prints the
# server beyond it.
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-rust}
PY=${UNIENV_REF_PYTHON:-$PWD/.venv-ref/bin/python}
N1=${N1:-200}
N2=${N2:-1200}
dir=$(mktemp -d /tmp/ue-prof-XXXXXX)
sock=$dir/s.sock
trap 'kill -INT $pid 2>/dev/null || true; sleep 5; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT

case $what in
  rust)
    env_id=bench_state
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" \
      "${BIN:-target/profiling/unienv-remote}" serve --fixtures --unix "$sock" >/dev/null 2>"$dir/valgrind.log" &
    ;;
  python|batched|fleet)
    env_id=pendulum
    kind=single; [ "$what" = batched ] && kind=batched; [ "$what" = fleet ] && kind=fleet
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" \
      "$PY" benches/profile/pendulum_server.py "$sock" "$kind" >/dev/null 2>"$dir/valgrind.log" &
    ;;
  *) echo "usage: $0 rust|python|batched|fleet" >&2; exit 2 ;;
esac
pid=$!
for _ in $(seq 1200); do [ -S "$sock" ] && break; sleep 0.5; done
[ -S "$sock" ] || { echo "the server did not start"; cat "$dir/valgrind.log"; exit 1; }
url="ws+unix://$sock"
client() {
  if [ "$what" = fleet ]; then "$PY" benches/profile/step_fleet.py "$url" "$1"
  else "$PY" benches/profile/step_n.py "$url" "$env_id" "$1"; fi
}
client 50   # warm-up

totals() { grep -E '^summary:' "$1" | head -1 | awk '{print $2}'; }
interval() {
  callgrind_control -z "$pid" >/dev/null
  client "$1"
  callgrind_control -d "$pid" >/dev/null
  sleep 1
  local f
  f=$(ls -t "$dir"/cg."$pid".* | head -1)
  echo "$f"
}
fa=$(interval "$N1"); a=$(totals "$fa")
fb=$(interval "$N2"); b=$(totals "$fb")
per=$(( (b - a) / (N2 - N1) ))
echo "$what server: $a Ir for $N1 steps, $b Ir for $N2 steps: $per instructions per step"
if [ "${ANNOTATE:-0}" = 1 ]; then
  callgrind_annotate --inclusive=yes "$fb" 2>/dev/null | head -60 || true  # head closes the pipe early
fi
# PROFILE_OUT=FILE keeps the second interval's profile (callgrind_annotate FILE).
if [ -n "${PROFILE_OUT:-}" ]; then cp "$fb" "$PROFILE_OUT"; fi
if [ "$what" = fleet ] && [ -z "${SIM_IR:-}" ]; then
  :   # no in-process fleet to count: give SIM_IR (8 x the single env's figure)
elif [ "$what" != rust ]; then
  local_ir() {
    valgrind --tool=callgrind --callgrind-out-file="$dir/local.$1" "$PY" benches/profile/pendulum_local.py "$1" "${2:-$kind}" 2>/dev/null
    totals "$dir/local.$1"
  }
  if [ -n "${SIM_IR:-}" ]; then
    sim=$SIM_IR   # measured before: skip the two local runs
  else
    la=$(local_ir "$N1"); lb=$(local_ir "$N2")
    sim=$(( (lb - la) / (N2 - N1) ))
  fi
  echo "the simulator in process ($kind: pendulum_local.py): $sim instructions per step (request)"
  echo "the server beyond the simulator: $(( per - sim )) instructions per step"
  if [ "${BARE:-0}" = 1 ] && [ "$what" = python ]; then
    la=$(local_ir "$N1" bare); lb=$(local_ir "$N2" bare)
    bare=$(( (lb - la) / (N2 - N1) ))
    echo "the Gymnasium env alone in process (pendulum_local.py bare): $bare instructions per step"
    echo "the server beyond the Gymnasium env alone: $(( per - bare )) instructions per step"
  fi
fi
