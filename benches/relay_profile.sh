#!/usr/bin/env bash
# Load-independent counts of a step round trip through the relay
# (BENCHMARKS.md, "Relay"): a relay (`unienv-remote relay`) and a fixture
# host dialing it (`serve --fixtures --dial`, also listening, for the direct
# figures) run as processes of their own; a client (`unienv-remote bench`)
# steps ENV_ID through the relay (or direct) for S1, then S2 seconds, and the
# counts of the two runs are subtracted, so connecting, the tunnel's opening,
# hello, discovery and reset cancel out: per step = (B - A) / (steps B -
# steps A).
#
#   benches/relay_profile.sh callgrind relay    # instructions of the relay process per step
#   benches/relay_profile.sh callgrind host     # of the host process, through the relay
#   benches/relay_profile.sh callgrind direct   # of the host process, direct (no relay)
#   benches/relay_profile.sh strace relay|host|direct     # syscalls per step, by syscall
#
# BIN (default target/profiling/unienv-remote: `cargo build --profile
# profiling --bin unienv-remote`), TOP (functions listed under callgrind,
# default 25), ENV_ID (bench_state), S1/S2 (seconds of
# the two runs; defaults 1 and 4, or 2 and 8 under callgrind) are read from
# the environment. Instruction and syscall counts do not depend on the
# machine's load (wake-ups show as futex and epoll_wait calls; context switch
# counts do depend on it: a thread that finds work waiting does not sleep).
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${1:-callgrind}
who=${2:-relay}
BIN=${BIN:-target/profiling/unienv-remote}
ENV_ID=${ENV_ID:-bench_state}
if [ "$tool" = callgrind ]; then S1=${S1:-2}; S2=${S2:-8}; else S1=${S1:-1}; S2=${S2:-4}; fi
case "$tool/$who" in
  callgrind/relay|callgrind/host|callgrind/direct|strace/relay|strace/host|strace/direct) ;;
  *) echo "usage: $0 callgrind|strace relay|host|direct" >&2; exit 2 ;;
esac
dir=$(mktemp -d /tmp/ue-relayprof-XXXXXX)
pids=()
sp=
cleanup() {
  [ -n "$sp" ] && kill -INT "$sp" 2>/dev/null || true
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

# The URL a process says it serves on (its first " on ws://…").
url_of() {
  local u
  for _ in $(seq 1200); do
    u=$(cat "$1".out 2>/dev/null | grep -oE ' on ws://[0-9.]+:[0-9]+' | head -1 | cut -c5- || true)
    if [ -n "$u" ]; then echo "$u"; return 0; fi
    sleep 0.1
  done
  echo "no URL from $1:" >&2; cat "$1".err >&2; return 1
}

cg=(valgrind --tool=callgrind --compress-strings=no --compress-pos=no --callgrind-out-file="$dir/cg.%p")
relay_wrap=(); host_wrap=()
if [ "$tool" = callgrind ]; then
  if [ "$who" = relay ]; then relay_wrap=("${cg[@]}"); else host_wrap=("${cg[@]}"); fi
fi
"${relay_wrap[@]}" "$BIN" relay --addr 127.0.0.1:0 >"$dir/relay.out" 2>"$dir/relay.err" &
relay_pid=$!; pids+=("$relay_pid")
relay=$(url_of "$dir/relay")
"${host_wrap[@]}" "$BIN" serve --fixtures --addr 127.0.0.1:0 --dial "$relay" --name bench >"$dir/host.out" 2>"$dir/host.err" &
host_pid=$!; pids+=("$host_pid")
direct=$(url_of "$dir/host")
for _ in $(seq 1200); do
  grep -q '"bench"' <(curl -s "${relay/ws/http}/hosts" 2>/dev/null) && break
  sleep 0.1
done
if [ "$who" = direct ]; then url=$direct; else url=$relay/hosts/bench; fi
if [ "$who" = relay ]; then pid=$relay_pid; else pid=$host_pid; fi

# Steps a client run of $1 seconds made.
client() {
  "$BIN" bench "$url" "$ENV_ID" --seconds "$1" 2>/dev/null | sed -nE 's/.*: ([0-9]+) steps in.*/\1/p'
}
client 0.5 >/dev/null   # warm-up

# One measured run of $1 seconds: its steps, and the tool's count(s) in $dir/$2.*
measure() {
  local n
  case $tool in
    callgrind)
      callgrind_control -z "$pid" >/dev/null 2>&1
      n=$(client "$1")
      callgrind_control -d "$2" "$pid" >/dev/null 2>&1
      sleep 0.5
      grep -h '^summary:\|^totals:' "$dir"/cg."$pid".*[0-9] | head -1 | awk '{print $2}' > "$dir/$2.count"
      # The longer run's heaviest functions (their own instructions).
      [ "$2" = b ] && callgrind_annotate --threshold=90 "$dir"/cg."$pid".*[0-9] 2>/dev/null |
        grep -E '^ *[0-9,]+ \([ 0-9.]+%\)' | head -${TOP:-25} > "$dir/top"
      [ -n "${KEEP:-}" ] && cp "$dir"/cg."$pid".*[0-9] "$KEEP"/ 2>/dev/null; rm -f "$dir"/cg."$pid".*[0-9]
      ;;
    strace)
      strace -qq -c -f -p "$pid" -o "$dir/$2.strace" &
      sp=$!
      sleep 1
      n=$(client "$1")
      sleep 0.5
      kill -INT "$sp"; wait "$sp" || true; sp=
      ;;
  esac
  echo "$n" > "$dir/$2.steps"
}
measure "$S1" a
measure "$S2" b
na=$(cat "$dir/a.steps"); nb=$(cat "$dir/b.steps")
n=$((nb - na))
[ "$n" -gt 0 ] || { echo "the longer run made no more steps ($na, $nb)"; exit 1; }
label="$ENV_ID, $who ($([ "$who" = direct ] && echo "host process, direct" || { [ "$who" = relay ] && echo "relay process" || echo "host process, through the relay"; })), $n steps ($nb - $na)"
case $tool in
  callgrind)
    ia=$(cat "$dir/a.count"); ib=$(cat "$dir/b.count")
    echo "instructions per step, $label: $(( (ib - ia) / n ))"
    echo "heaviest functions of the longer run (instructions, share, function):"
    cut -c1-160 "$dir/top"
    ;;
  strace)
    echo "syscalls per step, $label, by syscall:"
    # strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall
    rows() { awk '$1 ~ /^[0-9.]+$/ && $NF != "total" { print $NF, $4 }' "$1" | sort; }
    join -a 2 -e 0 -o 0,1.2,2.2 <(rows "$dir/a.strace") <(rows "$dir/b.strace") |
      awk -v n="$n" '{ d = ($3 - $2) / n; t += d; if (d >= 0.005) printf "  %-16s %6.2f\n", $1, d } END { printf "  %-16s %6.2f\n", "total", t }'
    ;;
esac
