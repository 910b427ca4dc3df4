#!/usr/bin/env bash
# Runs the codec benchmark (benches/codec.rs, criterion) and the reference
# codec on the same messages (benches/ref_codec.py) in one go, then prints the
# figures and the ratios reported in BENCHMARKS.md ("Codec").
#
#   benches/codec_compare.sh            # UNIENV_REF_PYTHON or .venv-ref/bin/python
#
# Both sides are reported with the same two statistics of their per-operation
# time: the minimum (criterion's fastest sample, timeit's fastest repeat; the
# least disturbed by other processes on a shared machine) and the median.
# A target counts as met only when it holds for both.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${UNIENV_REF_PYTHON:-.venv-ref/bin/python}"
if [ ! -x "$PY" ]; then
  echo "reference Python not found at $PY: run ./scripts/test.sh once or set UNIENV_REF_PYTHON" >&2
  exit 2
fi
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"

echo "== machine"
echo "nproc: $(nproc)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rustc: $(rustc --version)"
echo "python: $("$PY" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)')"

echo "== cargo bench --bench codec"
cargo bench --bench codec 2>&1 | grep -E '^(encode|decode|memcpy|alloc_memcpy)/|^message |^ +time: +\[[0-9]' || true

echo "== reference codec (benches/ref_codec.py)"
REF_OUT="$TARGET_DIR/ref_codec.txt"
"$PY" benches/ref_codec.py "$TARGET_DIR/tmp/codec_bench" | tee "$REF_OUT"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== ratios"
python3 - "$TARGET_DIR/criterion" "$REF_OUT" <<'PYTHON'
import json, os, statistics, sys

criterion, ref_path = sys.argv[1], sys.argv[2]
names = ["state", "image", "batch"]
STATS = ("min", "median")


def ours(group, name):
    """(min, median) microseconds per operation over criterion's samples."""
    with open(os.path.join(criterion, group, name, "new", "sample.json")) as f:
        sample = json.load(f)
    per_op = sorted(t / n / 1000.0 for t, n in zip(sample["times"], sample["iters"]))
    return {"min": per_op[0], "median": statistics.median(per_op)}


ref, size = {}, {}
for line in open(ref_path):
    parts = line.split()
    if parts[0] == "message":
        size[parts[1]] = int(parts[2])
    else:
        ref[(parts[0], parts[1])] = {"min": float(parts[2]), "median": float(parts[3])}

for stat in STATS:
    print(f"-- {stat} us per operation")
    print(f"{'message':8} {'bytes':>9} {'encode':>9} {'decode':>9} {'memcpy':>9} {'alloc+cpy':>9} {'ref enc':>9} {'ref dec':>9}")
    for n in names:
        print(f"{n:8} {size[n]:9d} {ours('encode', n)[stat]:9.3f} {ours('decode', n)[stat]:9.3f} "
              f"{ours('memcpy', n)[stat]:9.3f} {ours('alloc_memcpy', n)[stat]:9.3f} "
              f"{ref[('encode', n)][stat]:9.2f} {ref[('decode', n)][stat]:9.2f}")

rows = []


def ratio(label, f, target=None, ok=None):
    values = [f(stat) for stat in STATS]
    verdict = "" if target is None else ("ok" if all(ok(v) for v in values) else "MISSED")
    rows.append((label, values, target or "", verdict))


ratio("decode(64 images) / decode(32 floats)", lambda s: ours("decode", "batch")[s] / ours("decode", "state")[s],
      "<= 2", lambda v: v <= 2)
for n in names:
    ratio(f"reference decode / our decode, {n}", lambda s, n=n: ref[("decode", n)][s] / ours("decode", n)[s],
          ">= 20", lambda v: v >= 20)
for n in ["image", "batch"]:
    # A bandwidth ratio is the inverse time ratio for the same byte count.
    ratio(f"encode bandwidth / memcpy bandwidth, {n}", lambda s, n=n: ours("memcpy", n)[s] / ours("encode", n)[s],
          ">= 0.5", lambda v: v >= 0.5)
    ratio(f"encode bw / alloc+memcpy bw, {n}", lambda s, n=n: ours("alloc_memcpy", n)[s] / ours("encode", n)[s])
for n in names:
    ratio(f"reference encode / our encode, {n}", lambda s, n=n: ref[("encode", n)][s] / ours("encode", n)[s])

print()
print(f"{'ratio':48} {'min':>8} {'median':>8}  target")
for label, (low, median), target, verdict in rows:
    print(f"{label:48} {low:8.2f} {median:8.2f}  {target:7} {verdict}")
PYTHON
