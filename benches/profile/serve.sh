# Sourced by the profiling scripts (wakeups.sh, kernel_share.sh, syscalls.sh,
# sched_delay.sh, sessions.sh; not run): makes $dir (a temporary folder named
# after $TAG, removed at exit), sets an EXIT trap that stops $sp (a profiler
# the script started in the background, if any) and the server, starts the
# server of mode $what in the background, waits for the URL it prints, and
# defines `client N` (N steps: step_n.py on $env_id, or step_fleet.py in
# fleet mode).
#
#   rust                   target/profiling/unienv-remote serve --fixtures (BIN overrides), env bench_state
#   python|batched|fleet   pendulum_server.py single|batched|fleet, env pendulum (fleet: pendulum0..7)
#
# On $TRANSPORT: `unix` (a socket in $dir) or `tcp` (127.0.0.1, a port the
# system picks: port 0, read back from the printed URL, so two runs never
# collide). Reads PY, what, TAG, TRANSPORT (default tcp), BIN, SERVER_PYTHONPATH; sets dir, pid
# (the server's), url and env_id; the server's stdout is $dir/out, its
# stderr $dir/log. CPUS (e.g. 0, or 0,1), when set, pins the server's threads
# with its own option: `serve --cpus`, `RemoteServer(cpus=...)`.
dir=$(mktemp -d "/tmp/ue-${TAG:-profile}-XXXXXX")
TRANSPORT=${TRANSPORT:-tcp}
pid=
sp=
trap 'kill -INT $sp 2>/dev/null || true; kill -INT $pid 2>/dev/null || true; sleep 1; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
if [ "$TRANSPORT" = tcp ]; then
  listen=(--addr 127.0.0.1:0); where=tcp:0
else
  listen=(--unix "$dir/s.sock"); where=$dir/s.sock
fi
case $what in
  rust)
    env_id=bench_state
    "${BIN:-target/profiling/unienv-remote}" serve --fixtures "${listen[@]}" ${CPUS:+--cpus "$CPUS"} >"$dir/out" 2>"$dir/log" &
    ;;
  python|batched|fleet)
    env_id=pendulum
    kind=single; [ "$what" = batched ] && kind=batched; [ "$what" = fleet ] && kind=fleet
    PYTHONPATH=${SERVER_PYTHONPATH:-${PYTHONPATH:-}} CPUS=${CPUS:-} "$PY" benches/profile/pendulum_server.py "$where" "$kind" >"$dir/out" 2>"$dir/log" &
    ;;
  *) echo "usage: $0 rust|python|batched|fleet" >&2; exit 2 ;;
esac
pid=$!
url=
for _ in $(seq 600); do
  url=$(grep -oE 'ws(\+unix)?://[^ ]+' "$dir/out" 2>/dev/null | head -1 || true)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$url" ] || { echo "the server did not start"; cat "$dir/log"; exit 1; }
client() {
  if [ "$what" = fleet ]; then "$PY" benches/profile/step_fleet.py "$url" "$1"
  else "$PY" benches/profile/step_n.py "$url" "$env_id" "$1"; fi
}
