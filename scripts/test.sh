#!/usr/bin/env bash
# Runs every test of unienv-remote, setting up what they need first:
# a local virtual environment (.venv-ref) with the Python reference
# implementation (unienv==0.0.1b14) for the interop tests, gymnasium (for the
# wrapper tests), pytest (and pytest-xdist), maturin, mypy and ray
# (python/tests/test_ray.py), prometheus_client (test_metrics.py), and
# Debian's chromium, make, gcc, g++ and valgrind when missing (as root); our
# Python package (python/) is built into the venv and its pytest suite
# (python/tests) runs last.
#
# Where the time goes (BENCHMARKS.md, "Test command time"): compiling. The
# setup (pip, apt: downloads and unpacking) therefore runs in the background
# while cargo compiles, and is waited for just before the first test that
# needs it; every build shares what it can with the others (one dev profile
# for the tests, the C library and the test wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

# Where the time goes: every "==> step" line starts a step, and a table of
# the steps' seconds and shares is printed at the end (scripts/step_times.py).
exec > >(STEP_TIMES_T0=$(date +%s.%N) python3 -u scripts/step_times.py)
STEP_TIMES=$!
SETUP_PIDS=()
SETUP_LOGS=$(mktemp -d)
# A failing step stops the background jobs too (a half-made venv is rebuilt
# next time: its marker file is written last). kill_tree ends a job and what
# it started (pip, apt-get, cargo, the tests).
kill_tree() {
  local child
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
trap 'for p in "${SETUP_PIDS[@]}"; do kill_tree "$p"; done; rm -rf "$SETUP_LOGS"; exec >&-; wait "$STEP_TIMES" 2>/dev/null || true' EXIT

VENV=.venv-ref
# The versions are pinned by python/constraints-test.txt (CI resolves the same
# packages next month); a venv made with other pins is brought up to date.
CONSTRAINTS=python/constraints-test.txt
# The metrics test (python/tests/test_metrics.py) parses the endpoint with the
# Prometheus project's own Python parser (prometheus_client).
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import unienv_interface.remote, websockets, gymnasium, mujoco, pytest, xdist, ray, mypy, prometheus_client' 2>/dev/null \
    || [ ! -x "$VENV/bin/maturin" ] || ! cmp -s "$CONSTRAINTS" "$VENV/constraints-test.txt"; then
  echo "==> starting in the background: $VENV with the reference implementation (unienv==0.0.1b14), gymnasium, pytest, maturin, mypy, ray"
  (
    rm -f "$VENV/constraints-test.txt"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -c "$CONSTRAINTS" \
      "unienv[network]==0.0.1b14" "gymnasium[mujoco]" pytest pytest-xdist maturin ray mypy prometheus_client pyarrow
    cp "$CONSTRAINTS" "$VENV/constraints-test.txt"
  ) > "$SETUP_LOGS/venv.log" 2>&1 &
  SETUP_PIDS+=($!)
fi

# Debian packages, as root (CI), quietly, once, in one apt-get: chromium for
# the viewer's browser tests (tests/viewer/browser.rs); make, gcc, g++ and
# valgrind for the C ABI tests (python/tests/test_capi.py builds the C and C++
# examples and runs them under valgrind).
debian=""
if [ -z "${UNIENV_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  debian="chromium"
fi
for tool in make:make cc:gcc c++:g++ valgrind:valgrind; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || debian="$debian ${tool#*:}"
done
if [ -n "$debian" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> starting in the background: Debian packages$debian"
    (
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      # shellcheck disable=SC2086
      apt-get install -y -qq $debian
    ) > "$SETUP_LOGS/debian.log" 2>&1 &
    SETUP_PIDS+=($!)
  else
    echo "warning: missing Debian packages:$debian, and this is not root: the viewer's browser tests" >&2
    echo "  and python/tests/test_capi.py will fail; install them (sudo apt-get install -y$debian)," >&2
    echo "  or set UNIENV_CHROMIUM (or UNIENV_SKIP_BROWSER=1) for the browser" >&2
  fi
fi

# Waits for the background setup; a failed job prints its log and stops here.
wait_for_setup() {
  for p in "${SETUP_PIDS[@]}"; do
    if ! wait "$p"; then
      cat "$SETUP_LOGS"/*.log >&2
      echo "the background setup failed (its output is above)" >&2
      exit 1
    fi
  done
  SETUP_PIDS=()
}

# ---- Compiling (nothing here needs the venv or the Debian packages).
# A fresh CI machine compiles each crate once: incremental compilation's
# bookkeeping only costs there. (Not outside CI: switching it changes the
# profile, and a developer's own `cargo test` would then rebuild the crate.)
if [ "${CI:-}" = true ] && [ -z "${CARGO_INCREMENTAL:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
cargo clippy --all-targets --quiet -- -D warnings
# One invocation for both: they depend on the library without its default
# feature (`cli`), so this lints that build of it too.
echo "==> cargo clippy (python crate, C ABI crate)"
cargo clippy -p unienv-remote-py -p unienv-remote-capi --all-targets --quiet -- -D warnings
echo "==> cargo check --no-default-features --lib (the library without the command line)"
cargo check --locked --no-default-features --lib --quiet
# What `cargo install --locked --path .` (README) compiles: the binary with
# Cargo.lock's versions (--locked fails when the lock file is stale) and the
# features of a build without dev-dependencies; any warning fails the step
# (cargo replays a cached crate's warnings). A check, not the install's
# release build: the dependencies' metadata is the step above's, so it adds
# only the command line's crates (clap, tracing-subscriber, mimalloc) and
# ours: measured on a fresh target directory after the step above, 23 s of
# CPU (user + system; 6 s when only our crate changed), instead of minutes
# of optimised compiling. Warnings that only optimised code has (none in
# rustc) would slip through.
echo "==> cargo check --locked --bin unienv-remote (the locked install's build, warnings are errors)"
warnings=$(cargo check --locked --bin unienv-remote --quiet 2>&1) || { echo "$warnings" >&2; exit 1; }
if [ -n "$warnings" ]; then
  echo "$warnings" >&2
  echo "the locked install's build has warnings (above)" >&2
  exit 1
fi
# The test binaries are compiled while the setup may still run; they run once
# it is done (the interop tests need the reference).
# Our server binary for the Python tests is the one built here for the
# integration tests (`cargo build --bin` would build it again: without the
# dev-dependencies, some dependencies have other features).
echo "==> compiling the tests (cargo test --no-run; the C ABI crate's too)"
UNIENV_REMOTE_BIN="$(cargo test --all-targets --no-run --quiet --message-format=json-render-diagnostics \
  | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "unienv-remote" \
            and m["target"]["kind"] == ["bin"] and not m["profile"]["test"]:
        print(m["executable"])')"
[ -x "$UNIENV_REMOTE_BIN" ] || { echo "cargo test --no-run built no unienv-remote binary" >&2; exit 1; }
export UNIENV_REMOTE_BIN
# capi/ is a workspace member outside the default members: the commands at the
# root do not build it.
cargo test -p unienv-remote-capi --no-run --quiet
echo "==> cargo doc (warnings are errors: broken links in the public API docs)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet

echo "==> waiting for the background setup (venv, Debian packages)"
wait_for_setup
export UNIENV_REF_PYTHON="$PWD/$VENV/bin/python"

# The cargo tests run in the background while the wheel is built, checked and
# tested with pytest in three processes (pytest-xdist): both wait on
# processes and sockets much of the time (servers starting, the reference in
# Python, Chromium, timeouts), which two cores overlap (BENCHMARKS.md, "Test
# command time"). UNIENV_TEST_SERIAL=1: one after the other, pytest in one
# process.
# The benchmarks (benches/) run once each, as smoke tests: every part of them,
# with a few steps per measurement instead of seconds (`cargo bench` measures).
run_cargo_tests() {
  ROUNDTRIP_STEPS=20 ROUNDTRIP_SECONDS=0.02 REQUEST_PATH_SECONDS=0.02 REQUEST_PATH_ROUNDS=1 \
    REQUEST_PATH_CPU_STEPS=200 TLS_ROUNDS=1 TLS_CONNECTS=5 TLS_REF_CONNECTS=10 \
    cargo test --all-targets --quiet "$@" || return
  # Each doc test is compiled when it runs (every time, with rustdoc).
  echo "doc tests:"
  cargo test --doc --quiet || return
}
CARGO_TESTS=""
if [ "${UNIENV_TEST_SERIAL:-}" = 1 ]; then
  echo "==> cargo test, the doc tests"
  run_cargo_tests "$@"
else
  echo "==> cargo test and the doc tests: started in the background (their output comes at the end)"
  # Job control on for this job: a shell without it starts background jobs
  # with SIGINT ignored, and the tests that stop a command with Ctrl-C
  # (tests/cli/client.rs) would then wait for it in vain.
  set -m
  (
    t0=$(date +%s)
    status=0
    run_cargo_tests "$@" || status=$?
    echo "(cargo test and the doc tests took $(( $(date +%s) - t0 )) s in the background)"
    exit "$status"
  ) > "$SETUP_LOGS/cargo-test.log" 2>&1 &
  CARGO_TESTS=$!
  set +m
  SETUP_PIDS+=("$CARGO_TESTS")
fi
# Its unit tests include `header_is_current` (include/unienv_remote.h equals
# what cbindgen generates); the examples are driven against Gymnasium by
# pytest (python/tests/test_capi.py), which links the library built here.
echo "==> C ABI: cargo test -p unienv-remote-capi (header current, values, spaces, both threading modes)"
cargo test -p unienv-remote-capi --quiet

echo "==> building the Python package (python/): the abi3 wheel and the sdist, into target/wheels"
# What a package index would serve. The wheel is installed into $VENV (for
# the tests) and into a clean venv (below); `maturin build --sdist` is not
# used, as it compiles the wheel again from the unpacked sdist. The test
# wheel is built in the dev profile (maturin build's default, said here):
# a release build would compile everything again, with optimisations, for
# minutes, and prove the same packaging.
WHEELS=target/wheels
rm -rf "$WHEELS"
"$VENV/bin/maturin" sdist -m python/Cargo.toml -o "$WHEELS" 2>&1 | { grep "Built source distribution" || true; }
VIRTUAL_ENV="$PWD/$VENV" "$VENV/bin/maturin" build --quiet --profile dev -m python/Cargo.toml -o "$WHEELS"
WHEEL=$(ls "$WHEELS"/unienv_remote-*-cp39-abi3-*.whl)   # fails unless one abi3 wheel was built
tar tzf "$WHEELS"/unienv_remote-*.tar.gz > "$WHEELS/sdist-files.txt"
for f in pyproject.toml Cargo.lock python/src/lib.rs src/lib.rs; do
  grep -q "^unienv_remote-[^/]*/$f\$" "$WHEELS/sdist-files.txt" \
    || { echo "the sdist lacks $f" >&2; exit 1; }
done
"$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"
echo "==> stubtest: python/unienv_remote/_native.pyi matches the extension"
"$VENV/bin/python" -m mypy.stubtest unienv_remote._native
echo "==> mypy --strict: the Python package (python/unienv_remote, config in python/pyproject.toml)"
(cd python && "../$VENV/bin/python" -m mypy --strict -p unienv_remote)
echo "==> the wheel in a clean venv (its own dependencies only, no gymnasium): target/venv-wheel"
CLEAN=target/venv-wheel
if [ ! -x "$CLEAN/bin/python" ] || ! cmp -s "$CONSTRAINTS" "$CLEAN/constraints-test.txt"; then
  rm -rf "$CLEAN"
  python3 -m venv "$CLEAN"
  cp "$CONSTRAINTS" "$CLEAN/constraints-test.txt"
fi
"$CLEAN/bin/pip" uninstall --quiet --disable-pip-version-check -y unienv-remote 2>/dev/null || true
"$CLEAN/bin/pip" install --quiet --disable-pip-version-check -c "$CONSTRAINTS" "$WHEEL"
"$CLEAN/bin/python" python/tests/wheel_smoke.py "$UNIENV_REMOTE_BIN"
# Three processes, each test file in one of them (a file's module-scoped
# servers start once; test_capi.py builds the examples once).
echo "==> pytest python/tests"
if [ -n "$CARGO_TESTS" ]; then
  "$VENV/bin/python" -m pytest -q -n 3 --dist loadfile python/tests
else
  "$VENV/bin/python" -m pytest -q python/tests
fi
if [ -n "$CARGO_TESTS" ]; then
  echo "==> cargo test and the doc tests (waiting for them to finish)"
  status=0
  wait "$CARGO_TESTS" || status=$?
  SETUP_PIDS=()
  cat "$SETUP_LOGS/cargo-test.log"
  [ "$status" = 0 ] || { echo "cargo test failed (its output is above)" >&2; exit "$status"; }
fi

echo "==> all tests passed"
