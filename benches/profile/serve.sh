# Sourced by wakeups.sh and kernel_share.sh (not run): starts the server of
# mode $what in the background and waits for the URL it prints.
#
#   rust                   target/release/unienv-remote serve --fixtures (BIN overrides), env bench_state
#   python|batched|fleet   pendulum_server.py single|batched|fleet, env pendulum (fleet: pendulum0..7)
#
# On $TRANSPORT: `unix` (a socket in $dir) or `tcp` (127.0.0.1, a port the
# system picks: port 0, read back from the printed URL, so two runs never
# collide). Reads PY, dir, what, TRANSPORT, BIN, SERVER_PYTHONPATH; sets pid
# (the server's), url and env_id; the server's stdout is $dir/out, its
# stderr $dir/log. CPUS (e.g. 0, or 0,1), when set, pins the server's threads
# with its own option: `serve --cpus`, `RemoteServer(cpus=...)`.
if [ "$TRANSPORT" = tcp ]; then
  listen=(--addr 127.0.0.1:0); where=tcp:0
else
  listen=(--unix "$dir/s.sock"); where=$dir/s.sock
fi
case $what in
  rust)
    env_id=bench_state
    "${BIN:-target/release/unienv-remote}" serve --fixtures "${listen[@]}" ${CPUS:+--cpus "$CPUS"} >"$dir/out" 2>"$dir/log" &
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
