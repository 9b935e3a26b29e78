"""remember's warm latency in process (seed 003 promises under 200 ms), with the real default model.

    python bench/bench_remember.py [--memories 1000] [--remember 120] [--baseline /work/main]

A store of ``--memories`` memories is built once (in bulk, real model), then ``--remember`` new
memories are remembered one at a time on a copy of it, each timed from the call to its return
(chunked, loaded, extracted, linked, observed and embedded: its vector is stored when remember
returns). Prints median and p95, and the physical limit: the model's own inference time for one
text (the ONNX path, one memory's text at a time).

``--baseline DIR`` times the same remembers, on another copy of the same store, with the kgr
of another tree (a subprocess with PYTHONPATH=DIR), so that before and after come from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FIRST = ["Alice", "Bruno", "Chen", "Dara", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kenji", "Lena"]
LAST = ["Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Silva", "Tanaka", "Ulrich", "Varga", "Weber"]
PLACES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Quito", "Tallinn", "Perth", "Lyon"]
THINGS = ["the billing service", "the staging database", "the mobile app", "the quarterly report", "the VPN"]
PATTERNS = [
    "{a} moved to {p} in {y}.",
    "{a} owns {t} and reviews every change to it.",
    "{a} and {b} met at a conference in {p}.",
    "{a} prefers tea to coffee and runs before work.",
    "{a} asked {b} to look into {t} before Friday.",
    "The offsite with {a} is planned for {p} next spring.",
    "{a} is allergic to peanuts; remember it when ordering lunch.",
    "{b} took over {t} from {a} in {y}.",
]


def texts(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        a, b = (f"{rnd.choice(FIRST)} {rnd.choice(LAST)}" for _ in range(2))
        text = rnd.choice(PATTERNS).format(a=a, b=b, p=rnd.choice(PLACES), t=rnd.choice(THINGS), y=2000 + i % 25)
        out.append(f"{text} (note {seed}-{i})")
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def build(db: Path, n: int) -> None:
    """``n`` memories in bulk: stored, then one graph build and one embedding pass, then observed."""
    from kgr import config
    from kgr.ingest.graphbuild import build_pending
    from kgr.ingest.pipeline import embed_store
    from kgr.memory import recall
    from kgr.store import Store

    cfg = config.load(None)
    with Store(db) as store:
        for text in texts(n, 1):
            recall.remember(store, text, cfg, graph=False, embed=False)
        build_pending(store, cfg)
        embed_store(store, cfg)
        for (path,) in store.query("SELECT path FROM docs WHERE source='memory'"):
            recall._observe(store, path, {"importance": 0.5, "created_ms": 0})


def time_remembers(db: Path, n: int) -> dict:
    """Remember ``n`` new memories one at a time (after one warm-up); their times in seconds."""
    from kgr import config
    from kgr.memory import recall
    from kgr.store import Store, vectors

    cfg = config.load(None)
    out: dict = {"times": [], "missing_vectors": 0}
    with Store(db) as store:
        t0 = time.perf_counter()
        recall.remember(store, "Warm up: the models load on the first memory.", cfg)
        out["first"] = time.perf_counter() - t0
        for text in texts(n, 2):
            t0 = time.perf_counter()
            got = recall.remember(store, text, cfg)
            out["times"].append(time.perf_counter() - t0)
            cids = [c for (c,) in store.query("SELECT id FROM chunks WHERE doc_id=?", (got["doc_id"],))]
            if not cids or len(vectors.similarities(store, vectors.CHUNK, [1.0] * 384, cids)) != len(cids):
                out["missing_vectors"] += 1
    return out


def model_limit(n: int) -> list[float]:
    """The model's own time for one memory's text (light ONNX path, warm)."""
    from kgr import config
    from kgr.embedders import get_embedder

    embedder = get_embedder(config.load(None), purpose="query")
    embedder.embed_documents(["warm up"])
    out = []
    for text in texts(n, 2):
        t0 = time.perf_counter()
        embedder.embed_documents([text])
        out.append(time.perf_counter() - t0)
    return out


def line(name: str, times: list[float]) -> str:
    return (
        f"{name}: n={len(times)} p50 {statistics.median(times) * 1000:.1f} ms, "
        f"p95 {pct(times, 0.95) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=1000, help="memories already stored (default 1000)")
    ap.add_argument("--remember", type=int, default=120, help="memories remembered and timed (default 120)")
    ap.add_argument("--baseline", type=Path, help="another kgr tree to time on the same store (PYTHONPATH)")
    ap.add_argument("--store", type=Path, help="keep the built store in this file and reuse it when it exists")
    ap.add_argument("--time-only", type=Path, help=argparse.SUPPRESS)  # the baseline's subprocess
    args = ap.parse_args()
    if args.time_only:
        print(json.dumps(time_remembers(args.time_only, args.remember)))
        return
    with tempfile.TemporaryDirectory(prefix="kgr-bench-remember-") as tmp:
        base = args.store or Path(tmp) / "base.sqlite"
        if not base.exists():
            t0 = time.perf_counter()
            build(base, args.memories)
            print(f"built a store of {args.memories} memories in {time.perf_counter() - t0:.0f} s", flush=True)
        else:
            print(f"reusing {base}", flush=True)
        runs = []
        if args.baseline:
            runs.append(("baseline " + str(args.baseline), args.baseline))
        runs.append(("this tree", REPO))
        for name, tree in runs:
            db = Path(tmp) / f"run{len(name)}.sqlite"
            shutil.copyfile(base, db)
            env = {**os.environ, "PYTHONPATH": str(tree)}
            cmd = [sys.executable, __file__, "--time-only", str(db), "--remember", str(args.remember)]
            res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
            print(f"remember, {name}, first (models load): {res['first'] * 1000:.0f} ms", flush=True)
            print(line(f"remember, {name}, warm, store of {args.memories}+", res["times"]), flush=True)
            print(f"remember, {name}: {res['missing_vectors']} memories without their vector on return", flush=True)
        print(line("physical limit: the model alone, one text (ONNX)", model_limit(args.remember)))


if __name__ == "__main__":
    main()
