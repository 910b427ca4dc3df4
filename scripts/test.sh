#!/usr/bin/env bash
# Runs every test of unienv-remote, setting up what they need first:
# a local virtual environment (.venv-ref) with the Python reference
# implementation (unienv==0.0.1b14) for the interop tests.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-ref
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import unienv_interface.remote, websockets' 2>/dev/null; then
  echo "==> setting up $VENV with the reference implementation (unienv==0.0.1b14)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "unienv[network]==0.0.1b14"
fi
export UNIENV_REF_PYTHON="$PWD/$VENV/bin/python"

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
cargo clippy --all-targets --quiet -- -D warnings
echo "==> cargo test"
cargo test --all-targets --quiet "$@"
echo "==> doc tests"
cargo test --doc --quiet
echo "==> cargo doc (warnings are errors: broken links in the public API docs)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
echo "==> all tests passed"
