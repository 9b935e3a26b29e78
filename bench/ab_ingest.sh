#!/usr/bin/env bash
# `kgr ingest` of one corpus, this checkout against another revision, side by side.
#
#   bash bench/ab_ingest.sh REV CORPUS RUNS [kgr ingest flags...]
#   e.g. bash bench/ab_ingest.sh 5dba714 ../shared/golden/docs 3 --no-embed
#
# REV is exported with `git archive` into a temporary folder (the built bfsvtab copied beside
# it). Each run ingests CORPUS into a fresh database with each tree in turn, alternating which
# goes first, and prints the wall seconds; the medians and their ratio close the output.
set -euo pipefail
rev=$1 corpus=$(realpath "$2") runs=$3
shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
base=$(mktemp -d)
trap 'rm -rf "$base"' EXIT
git -C "$here" archive "$rev" | tar -x -C "$base"
cp "$here"/kgr/store/_bfsvtab*.so "$base/kgr/" 2>/dev/null || true
cp "$here"/kgr/store/_bfsvtab*.so "$base/kgr/store/" 2>/dev/null || true
out=$(mktemp)
for i in $(seq "$runs"); do
  trees=("$here" "$base")
  ((i % 2 == 0)) && trees=("$base" "$here")
  for tree in "${trees[@]}"; do
    db=$(mktemp -d)/kb.sqlite
    start=$(date +%s.%N)
    (cd "$tree" && PYTHONPATH="$tree" KGR_REDACT_KEY=bench python -m kgr ingest "$corpus" --db "$db" --no-progress "$@" >/dev/null)
    end=$(date +%s.%N)
    name=$([ "$tree" = "$here" ] && echo "this tree" || echo "$rev")
    echo "$name $(echo "$end - $start" | bc)" | tee -a "$out"
    rm -rf "$(dirname "$db")"
  done
done
python3 - "$out" "$rev" <<'PY'
import statistics, sys
rows = [line.rsplit(" ", 1) for line in open(sys.argv[1]).read().splitlines()]
med = {name: statistics.median(float(t) for n, t in rows if n == name) for name in ("this tree", sys.argv[2])}
for name, m in med.items():
    print(f"median {name}: {m:.2f} s")
print(f"ratio (this tree / {sys.argv[2]}): {med['this tree'] / med[sys.argv[2]]:.2f}")
PY
