"""Cold start of one query embedding: the ONNX light path against sentence-transformers.

Not part of the default test run. Usage:

    python bench/bench_embed_cold.py [--runs 5] [--warm 30]

Each run is a fresh Python process that imports kgr.embedders, gets the query embedder
for the default model and embeds one query; its wall time runs from the parent
launching the interpreter to the child holding the vector (wall clock). The two paths alternate run by run so that both see the
same machine state. Inside each process, after the first query, ``--warm`` more
queries are embedded one at a time: the median is the warm per-query time. Medians
are over the runs. The ONNX export is made once beforehand, in a temporary cache
(KGR_CACHE_DIR), and its time is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import kgr.embedders as E
t_import = time.perf_counter()
cfg = {"embed": {"onnx": sys.argv[1] == "onnx"}}
emb = E.get_embedder(cfg, purpose="query")
t_setup = time.perf_counter()
emb.embed_queries(["how do I rotate the signing keys of the gateway"])
t_first = time.perf_counter()
first_vector_at = time.time()
warm = []
for i in range(int(sys.argv[2])):
    q = f"query number {i}: where is the retention policy for audit logs defined?"
    t = time.perf_counter()
    emb.embed_queries([q])
    warm.append(time.perf_counter() - t)
print(json.dumps({
    "backend": type(emb).__name__,
    "torch_loaded": "torch" in sys.modules,
    "import": t_import - t0,
    "setup": t_setup - t_import,
    "first": t_first - t_setup,
    "warm": sorted(warm)[len(warm) // 2],
    "first_vector_at": first_vector_at,
}))
"""


def run_child(mode: str, warm: int, env: dict) -> dict:
    started = time.time()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(warm)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # From launching the interpreter to holding the first vector (the warm loop after it
    # is not part of a cold query).
    result["wall"] = result["first_vector_at"] - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warm", type=int, default=30)
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="kgr-bench-cache-") as cache:
        env = dict(os.environ, KGR_CACHE_DIR=cache, HF_HUB_OFFLINE="1")
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import kgr.embedders as E; E.export_onnx()"],
            env=env,
            cwd=REPO,
            check=True,
        )
        export_s = time.perf_counter() - started

        results: dict[str, list[dict]] = {"onnx": [], "sentence-transformers": []}
        for _ in range(args.runs):
            for mode in results:
                results[mode].append(run_child("onnx" if mode == "onnx" else "st", args.warm, env))

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores; medians over {args.runs} fresh processes each, "
        f"warm = median of {args.warm} single-query calls per process; "
        f"1-min load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    print(f"one-time ONNX export (fresh process, torch + export + check): {export_s:.2f} s")
    header = f"{'path':<24}{'backend':<30}{'cold':>9}{'import':>9}{'setup':>9}{'1st q':>9}{'warm q':>10}  torch"
    print(header)
    print("-" * len(header))
    for mode, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "import", "setup", "first", "warm")}
        print(
            f"{mode:<24}{runs[0]['backend']:<30}{med['wall']:>8.3f}s{med['import']:>8.3f}s{med['setup']:>8.3f}s"
            f"{med['first']:>8.3f}s{med['warm'] * 1000:>8.2f}ms  {'loaded' if runs[0]['torch_loaded'] else 'not loaded'}"
        )
    walls = {mode: statistics.median(r["wall"] for r in runs) for mode, runs in results.items()}
    print(
        f"cold query speed-up: {walls['sentence-transformers'] / walls['onnx']:.1f}x "
        f"(all runs, wall s: onnx {[round(r['wall'], 2) for r in results['onnx']]}, "
        f"st {[round(r['wall'], 2) for r in results['sentence-transformers']]})"
    )


if __name__ == "__main__":
    main()
