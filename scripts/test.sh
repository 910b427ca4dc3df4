#!/usr/bin/env bash
# Runs every test of unienv-remote, setting up what they need first:
# a local virtual environment (.venv-ref) with the Python reference
# implementation (unienv==0.0.1b14) for the interop tests, gymnasium (for the
# wrapper tests), pytest, maturin and ray (python/tests/test_ray.py); our Python package (python/) is built
# into it and its pytest suite (python/tests) runs last.
set -euo pipefail
cd "$(dirname "$0")/.."

# Where the time goes: every "==> step" line starts a step, and a table of
# the steps' seconds and shares is printed at the end (scripts/step_times.py).
exec > >(STEP_TIMES_T0=$(date +%s.%N) python3 -u scripts/step_times.py)
STEP_TIMES=$!
trap 'exec >&-; wait "$STEP_TIMES" 2>/dev/null || true' EXIT

VENV=.venv-ref
# The versions are pinned by python/constraints-test.txt (CI resolves the same
# packages next month); a venv made with other pins is brought up to date.
CONSTRAINTS=python/constraints-test.txt
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import unienv_interface.remote, websockets, gymnasium, mujoco, pytest, ray, mypy' 2>/dev/null \
    || [ ! -x "$VENV/bin/maturin" ] || ! cmp -s "$CONSTRAINTS" "$VENV/constraints-test.txt"; then
  echo "==> setting up $VENV with the reference implementation (unienv==0.0.1b14), gymnasium, pytest, maturin, mypy"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -c "$CONSTRAINTS" \
    "unienv[network]==0.0.1b14" "gymnasium[mujoco]" pytest maturin ray mypy
  cp "$CONSTRAINTS" "$VENV/constraints-test.txt"
fi
export UNIENV_REF_PYTHON="$PWD/$VENV/bin/python"
# The metrics test (python/tests/test_metrics.py) parses the endpoint with the
# Prometheus project's own Python parser (pinned in the constraints too).
if ! "$VENV/bin/python" -c 'import prometheus_client' 2>/dev/null; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -c "$CONSTRAINTS" prometheus_client
fi

# The viewer's browser tests (tests/viewer/browser.rs) drive headless Chromium;
# as root (CI) Debian's package is installed here, quietly, once.
if [ -z "${UNIENV_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing chromium (Debian package) for the viewer's browser tests"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "warning: chromium is missing and this is not root: the viewer's browser tests will fail;" >&2
    echo "  install it (sudo apt-get install -y chromium), set UNIENV_CHROMIUM, or UNIENV_SKIP_BROWSER=1" >&2
  fi
fi

# ---- C ABI (issue 26): python/tests/test_capi.py builds the C and C++ examples
# (make, cc, c++) and runs them under valgrind; as root (CI) Debian's packages
# are installed here, quietly, once.
capi_tools=""
for tool in make cc c++ valgrind; do
  command -v "$tool" >/dev/null 2>&1 || capi_tools="$capi_tools $tool"
done
if [ -n "$capi_tools" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing make, gcc, g++, valgrind (Debian packages) for the C ABI tests (missing:$capi_tools)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make gcc g++ valgrind >/dev/null
  else
    echo "warning: missing$capi_tools and this is not root: python/tests/test_capi.py will fail;" >&2
    echo "  install them (sudo apt-get install -y make gcc g++ valgrind)" >&2
  fi
fi
# ---- end C ABI tools

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
cargo clippy --all-targets --quiet -- -D warnings
echo "==> cargo clippy (python crate)"
cargo clippy -p unienv-remote-py --all-targets --quiet -- -D warnings
echo "==> cargo check --no-default-features --lib (the library without the command line)"
cargo check --no-default-features --lib --quiet
echo "==> cargo test"
cargo test --all-targets --quiet "$@"
echo "==> doc tests"
cargo test --doc --quiet
echo "==> cargo doc (warnings are errors: broken links in the public API docs)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
# Our server binary for the Python tests, the one `cargo test` just built.
UNIENV_REMOTE_BIN="$(cargo build --quiet --bin unienv-remote --message-format=json \
  | "$VENV/bin/python" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "unienv-remote":
        print(m["executable"])')"
export UNIENV_REMOTE_BIN
echo "==> building the Python package (python/): the abi3 wheel and the sdist, into target/wheels"
# What a package index would serve. The wheel is installed into $VENV (for
# the tests) and into a clean venv (below); `maturin build --sdist` is not
# used, as it compiles the wheel again from the unpacked sdist.
WHEELS=target/wheels
rm -rf "$WHEELS"
"$VENV/bin/maturin" sdist -m python/Cargo.toml -o "$WHEELS" 2>&1 | { grep "Built source distribution" || true; }
VIRTUAL_ENV="$PWD/$VENV" "$VENV/bin/maturin" build --quiet -m python/Cargo.toml -o "$WHEELS"
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
echo "==> pytest python/tests"
"$VENV/bin/python" -m pytest -q python/tests
# ---- C ABI (issue 26): capi/ is a workspace member outside the default
# members, so the commands above do not build it. Its unit tests include
# `header_is_current` (include/unienv_remote.h equals what cbindgen generates);
# the examples were driven against Gymnasium by pytest (python/tests/test_capi.py).
echo "==> C ABI: cargo clippy -p unienv-remote-capi"
cargo clippy -p unienv-remote-capi --all-targets --quiet -- -D warnings
echo "==> C ABI: cargo test -p unienv-remote-capi (header current, values, spaces, both threading modes)"
cargo test -p unienv-remote-capi --quiet
# ---- end C ABI

echo "==> all tests passed"
