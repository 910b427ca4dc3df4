#!/usr/bin/env bash
# Runs every test of unienv-remote, setting up what they need first:
# a local virtual environment (.venv-ref) with the Python reference
# implementation (unienv==0.0.1b14) for the interop tests, gymnasium (for the
# wrapper tests), pytest, maturin and ray (python/tests/test_ray.py); our Python package (python/) is built
# into it and its pytest suite (python/tests) runs last.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-ref
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import unienv_interface.remote, websockets, gymnasium, mujoco, pytest, ray' 2>/dev/null \
    || [ ! -x "$VENV/bin/maturin" ]; then
  echo "==> setting up $VENV with the reference implementation (unienv==0.0.1b14), gymnasium, pytest, maturin"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    "unienv[network]==0.0.1b14" "gymnasium[mujoco]" pytest maturin ray
fi
export UNIENV_REF_PYTHON="$PWD/$VENV/bin/python"

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
echo "==> building the Python package (python/) into $VENV"
# (pip's "Requirement already satisfied" lines are dropped; pipefail keeps maturin's status)
VIRTUAL_ENV="$PWD/$VENV" "$VENV/bin/maturin" develop --quiet -m python/Cargo.toml 2>&1 \
  | { grep -v '^Requirement already satisfied' || true; }
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
